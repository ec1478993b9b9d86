// The page of `spatec replay --map`: composites drawn by deck.gl (WebGL) over a Leaflet map,
// one layer per phrase, from the compact columns spatec/sinks/maps.py writes into the page.
// Everything this needs is in the page: no request leaves it (no tiles unless asked for).
/* global L, deck, DeckGlLeaflet, SPATEC_META */
(function () {
  "use strict";
  const META = SPATEC_META;
  const T0 = META.t0;                        // epoch seconds: filter values are relative to it (float32)
  const PALETTE = [[228, 26, 28], [55, 126, 184], [77, 175, 74], [152, 78, 163], [255, 127, 0],
                   [166, 86, 40], [247, 129, 191], [23, 190, 207], [188, 189, 34], [120, 120, 120]];
  const OTHER = [160, 160, 160];
  // viridis, 9 stops
  const DETAIL_ZOOM = 14;                 // from this zoom on hulls are drawn, below it dots
  const RAMP = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
                [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];
  const state = {ready: false, error: null, layers: [], colour: META.colour || "", window: null,
                 visible: {}};

  function b64bytes(text) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(text);
    const s = atob(text), out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }

  async function gunzip(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).arrayBuffer();
  }

  const TYPES = {u8: Uint8Array, i32: Int32Array, u32: Uint32Array, f64: Float64Array};
  function column(buf, spec) {
    return new TYPES[spec.dtype](buf, spec.offset, spec.length);
  }

  // ------------------------------------------------------------------ times, values
  const fmt = new Intl.DateTimeFormat("en-GB", {timeZone: META.tz, year: "numeric", month: "2-digit",
    day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
    timeZoneName: "short"});
  function formatTime(sec) {
    if (sec === null || Number.isNaN(sec)) return "";
    const p = {};
    for (const part of fmt.formatToParts(new Date(Math.round(sec * 1000)))) p[part.type] = part.value;
    const frac = sec - Math.floor(sec);
    const ms = frac > 1e-7 ? "." + String(Math.round(frac * 1e6)).padStart(6, "0") : "";
    return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}${ms} ${p.timeZoneName}`;
  }
  function formatDuration(s) {
    if (Number.isNaN(s)) return "";
    const a = Math.abs(s), h = Math.floor(a / 3600), m = Math.floor((a % 3600) / 60), r = a % 60;
    const txt = (h ? `${h} h ` : "") + (h || m ? `${m} min ` : "") + `${+r.toFixed(3)} s`;
    return (s < 0 ? "-" : "") + txt;
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  }
  function valueText(layer, f, i) {
    const col = layer.cols[f.name];
    if (f.kind === "text") {
      const c = col[i];
      return c < 0 ? "" : f.values[c];
    }
    const v = col[i];
    if (Number.isNaN(v)) return "";
    if (f.kind === "time") return formatTime(v);
    if (f.kind === "duration") return formatDuration(v);
    if (f.kind === "bool") return v ? "true" : "false";
    return String(+v.toPrecision(10));
  }
  function idText(layer, i) {
    if (layer.idValues) return layer.idValues[layer.ids[i]];
    let s = "";
    for (let k = 0; k < 16; k++) s += layer.ids[16 * i + k].toString(16).padStart(2, "0");
    return s;
  }

  // ------------------------------------------------------------------ colours
  function scaleFor(name) {
    // the colour scale of a field over every layer that has it: categories or a numeric range
    if (!name) return {kind: "phrase"};
    const fields = state.layers.map(l => l.fields.find(f => f.name === name)).filter(Boolean);
    if (!fields.length) return {kind: "phrase"};
    if (fields.every(f => f.kind === "text" || f.kind === "bool")) {
      const counts = new Map();
      state.layers.forEach(l => {
        const f = l.fields.find(g => g.name === name);
        if (!f) return;
        const col = l.cols[name];
        for (let i = 0; i < l.n; i++) {
          const v = f.kind === "text" ? (col[i] < 0 ? null : f.values[col[i]]) : (Number.isNaN(col[i]) ? null : String(!!col[i]));
          if (v !== null) counts.set(v, (counts.get(v) || 0) + 1);
        }
      });
      const top = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
        .slice(0, PALETTE.length - 1).map(e => e[0]);
      return {kind: "categories", name, top, colours: new Map(top.map((v, k) => [v, PALETTE[k]])),
              more: counts.size > top.length};
    }
    let lo = Infinity, hi = -Infinity;
    state.layers.forEach(l => {
      const col = l.cols[name];
      if (!col || l.fields.find(f => f.name === name).kind === "text") return;
      for (let i = 0; i < l.n; i++) { const v = col[i]; if (v < lo) lo = v; if (v > hi) hi = v; }
    });
    const kind = fields[0].kind;
    return {kind: "range", name, lo, hi, fieldKind: kind};
  }
  function rampColour(t) {
    const x = Math.max(0, Math.min(1, t)) * (RAMP.length - 1), k = Math.min(RAMP.length - 2, Math.floor(x)), u = x - k;
    return RAMP[k].map((c, j) => Math.round(c + (RAMP[k + 1][j] - c) * u));
  }
  function paint(layer, scale) {
    const out = new Uint8Array(layer.n * 4);
    const f = scale.name ? layer.fields.find(g => g.name === scale.name) : null;
    const col = f ? layer.cols[f.name] : null;
    for (let i = 0; i < layer.n; i++) {
      let c = layer.colour;
      if (scale.kind === "categories") {
        if (!f) c = OTHER; else {
          const v = f.kind === "text" ? (col[i] < 0 ? null : f.values[col[i]]) : (Number.isNaN(col[i]) ? null : String(!!col[i]));
          c = (v !== null && scale.colours.get(v)) || OTHER;
        }
      } else if (scale.kind === "range") {
        c = (!f || Number.isNaN(col[i])) ? OTHER : rampColour(scale.hi > scale.lo ? (col[i] - scale.lo) / (scale.hi - scale.lo) : 0.5);
      }
      out[4 * i] = c[0]; out[4 * i + 1] = c[1]; out[4 * i + 2] = c[2]; out[4 * i + 3] = 150;
    }
    return out;
  }

  // ------------------------------------------------------------------ layers
  function backgroundLayer() {
    // the roads the buses drive: the input's own successive positions, under everything
    const bg = state.background;
    if (!bg || !bg.n) return [];
    return [new deck.LineLayer({
      id: "background",
      data: {length: bg.n, attributes: {getSourcePosition: {value: bg.from, size: 2},
                                        getTargetPosition: {value: bg.to, size: 2}}},
      getColor: [120, 120, 128, 150], getWidth: 1.6, widthUnits: "pixels", widthMinPixels: 1,
      positionFormat: "XY", pickable: false})];
  }

  function deckLayers() {
    const w = state.window;
    const range = w ? [[-1e9, w[1] - T0], [w[0] - T0, 1e9]] : [[-1e9, 1e9], [-1e9, 1e9]];
    const filter = () => [new deck.DataFilterExtension({filterSize: 2})];
    const near = state.map && state.map.getZoom() >= DETAIL_ZOOM;
    return backgroundLayer().concat(state.layers.map(l => {
      const visible = state.visible[l.phrase] !== false;
      const trigger = {getFillColor: state.colour};
      // the positions are binary; the rest is per composite, by accessor (deck.gl spreads
      // an accessor's value over a polygon's vertices itself)
      const fill = (_, {index}) => l.fill.subarray(4 * index, 4 * index + 4);
      const times = (_, {index}) => [l.times[2 * index], l.times[2 * index + 1]];
      if (!near) {
        // zoomed out a hull is a pixel or less: each composite a dot at its centre (cheap
        // enough for a bus-day without a GPU; its hull from DETAIL_ZOOM on)
        return new deck.ScatterplotLayer({
          id: "dots-" + l.phrase,
          data: {length: l.n, attributes: {getPosition: {value: l.centres, size: 2}}},
          getFillColor: fill, getFilterValue: times, getRadius: 1, radiusUnits: "pixels",
          radiusMinPixels: 1.5, positionFormat: "XY", pickable: true, visible, updateTriggers: trigger,
          extensions: filter(), filterRange: range});
      }
      return new deck.SolidPolygonLayer({
        id: "phrase-" + l.phrase,
        data: {length: l.n, startIndices: l.starts, attributes: {getPolygon: {value: l.positions, size: 2}}},
        getFillColor: fill, getFilterValue: times,
        _normalize: false, positionFormat: "XY", pickable: true, visible, updateTriggers: trigger,
        extensions: filter(), filterRange: range});
    }));
  }
  function redraw() {
    state.overlay.setProps({layers: deckLayers()});
  }

  function inWindow(l, i) {
    const w = state.window;
    return !w || (l.lo[i] <= w[1] && l.hi[i] >= w[0]);
  }
  function shownCount(l) {
    if (state.visible[l.phrase] === false) return 0;
    let n = 0;
    for (let i = 0; i < l.n; i++) if (inWindow(l, i)) n++;
    return n;
  }

  // ------------------------------------------------------------------ legend, controls
  function legendHtml() {
    const scale = state.scale;
    let h = `<div class="title">${esc(META.title)}</div>`;
    h += `<div class="sub">times in ${esc(META.tz)}</div>`;
    h += `<div class="section">Phrases</div>`;
    state.layers.forEach(l => {
      const sw = scale.kind === "phrase" ? `<span class="sw" style="background:rgb(${l.colour})"></span>` : "";
      h += `<label class="row"><input type="checkbox" data-phrase="${esc(l.phrase)}" ${state.visible[l.phrase] === false ? "" : "checked"}>` +
           `${sw}${esc(l.phrase)} <span class="n" data-count="${esc(l.phrase)}">${shownCount(l).toLocaleString("en")} / ${l.n.toLocaleString("en")}</span></label>`;
      if (l.undrawn) h += `<div class="note">${l.undrawn.toLocaleString("en")} without a place, not drawn</div>`;
    });
    const names = [...new Set(state.layers.flatMap(l => l.fields.map(f => f.name)))];
    h += `<div class="section">Colour by <select id="colour-by"><option value="">phrase</option>` +
         names.map(n => `<option value="${esc(n)}" ${n === state.colour ? "selected" : ""}>${esc(n)}</option>`).join("") + `</select></div>`;
    if (scale.kind === "categories") {
      scale.top.forEach(v => { h += `<div class="row entry"><span class="sw" style="background:rgb(${scale.colours.get(v)})"></span>${esc(v)}</div>`; });
      h += `<div class="row entry"><span class="sw" style="background:rgb(${OTHER})"></span>${scale.more ? "other / none" : "none"}</div>`;
    } else if (scale.kind === "range") {
      const f = x => scale.fieldKind === "time" ? formatTime(x) : scale.fieldKind === "duration" ? formatDuration(x) : String(+x.toPrecision(6));
      const stops = RAMP.map((c, k) => `rgb(${c}) ${(100 * k / (RAMP.length - 1)).toFixed(0)}%`).join(",");
      h += `<div class="ramp" style="background:linear-gradient(to right,${stops})"></div>` +
           `<div class="row entry ends"><span>${esc(f(scale.lo))}</span><span>${esc(f(scale.hi))}</span></div>` +
           `<div class="row entry"><span class="sw" style="background:rgb(${OTHER})"></span>none</div>`;
    }
    if (META.places.features.length || (META.sets || []).length) h += `<div class="section"><span class="sw place"></span>places of the program</div>`;
    (META.sets || []).forEach(set => {
      h += `<div class="row entry">${esc(set.name)}: ${set.n.toLocaleString("en")} places` +
           `${set.points.length >= CLUSTER_MIN ? " (clustered when zoomed out)" : ""}</div>`;
    });
    if (state.background) h += `<div class="row entry"><span class="sw" style="background:rgb(120,120,128)"></span>the input's positions (roads driven)</div>`;
    return h;
  }

  function timeControl(map) {
    const c = L.control({position: "bottomleft"});
    c.onAdd = () => {
      const d = L.DomUtil.create("div", "spatec-panel spatec-time");
      const span = META.t1 - META.t0;
      const widths = [[0, "all times"], [600, "10 min"], [1800, "30 min"], [3600, "1 h"], [3 * 3600, "3 h"], [6 * 3600, "6 h"]]
        .filter(([w]) => w < span || w === 0);
      d.innerHTML = `<div class="section">Time</div><select id="time-width">` +
        widths.map(([w, t]) => `<option value="${w}">${t}</option>`).join("") + `</select>` +
        `<input id="time-slider" type="range" min="${Math.floor(META.t0)}" max="${Math.ceil(META.t1)}" step="1" value="${Math.floor(META.t0)}" disabled>` +
        `<div id="time-label">${esc(formatTime(META.t0))} – ${esc(formatTime(META.t1))}</div>`;
      L.DomEvent.disableClickPropagation(d);
      L.DomEvent.disableScrollPropagation(d);
      return d;
    };
    c.addTo(map);
    const width = document.getElementById("time-width"), slider = document.getElementById("time-slider");
    const update = () => {
      const w = +width.value;
      slider.disabled = !w;
      setWindow(w ? [+slider.value, +slider.value + w] : null);
    };
    width.addEventListener("change", update);
    slider.addEventListener("input", update);
  }

  function setWindow(w) {
    state.window = w;
    document.getElementById("time-label").textContent = w ? `${formatTime(w[0])} – ${formatTime(w[1])}`
      : `${formatTime(META.t0)} – ${formatTime(META.t1)}`;
    redraw();
    state.layers.forEach(l => {
      const el = document.querySelector(`[data-count="${CSS.escape(l.phrase)}"]`);
      if (el) el.textContent = `${shownCount(l).toLocaleString("en")} / ${l.n.toLocaleString("en")}`;
    });
  }

  function setColour(name) {
    state.colour = name;
    state.scale = scaleFor(name);
    state.layers.forEach(l => { l.fill = paint(l, state.scale); });
    redraw();
    renderLegend();
  }

  function renderLegend() {
    const d = document.getElementById("legend");
    d.innerHTML = legendHtml();
    d.querySelector("#colour-by").addEventListener("change", e => setColour(e.target.value));
    d.querySelectorAll("input[data-phrase]").forEach(box => box.addEventListener("change", () => {
      state.visible[box.dataset.phrase] = box.checked;
      redraw();
      renderLegend();
    }));
  }

  // ------------------------------------------------------------------ places: sets and labels
  const CLUSTER_PX = 56;           // places of a set nearer than this on screen are one cluster
  const CLUSTER_MIN = 40;          // a set of fewer places is always drawn place by place
  const SINGLE_ZOOM = 16;          // from this zoom on every place of a set is drawn
  const measure = document.createElement("canvas").getContext("2d");
  const LABEL_FONT = "600 12px system-ui, sans-serif";

  function setPlaces(set) {
    // every place of a set as {lon, lat, i, radius?, feature?}
    if (!set._places) {
      set._places = set.points.map(p => ({lon: p[0], lat: p[1], radius: p[2], i: p[3]}))
        .concat(set.shapes.features.map(f => ({lon: f.properties.at[0], lat: f.properties.at[1],
                                               i: f.properties.index, feature: f})));
    }
    return set._places;
  }

  function drawPlace(p, group) {
    const style = {color: "#333", weight: 1.5, dashArray: "3 3", fillOpacity: 0.06, interactive: false};
    if (p.feature) L.geoJSON(p.feature, {style}).addTo(group);
    else L.circle([p.lat, p.lon], Object.assign({radius: p.radius || 1}, style)).addTo(group);
  }

  function drawPlaceSets() {
    const map = state.map;
    state.setLayer.clearLayers();
    const view = map.getBounds().pad(0.25), zoom = map.getZoom();
    const labels = [];              // candidates: {text, lon, lat, priority}
    state.clusters = [];
    (META.sets || []).forEach(set => {
      // corridors and polygons are drawn whole wherever they meet the view (a cluster of lines
      // kilometres long would say nothing); points are clustered when many
      setPlaces(set).filter(p => p.feature && view.intersects(featureBounds(p))).forEach(p => {
        drawPlace(p, state.setLayer);
        labels.push({text: set.labels[p.i], lon: p.lon, lat: p.lat, priority: 1});
      });
      const inView = setPlaces(set).filter(p => !p.feature && view.contains([p.lat, p.lon]));
      if (set.points.length < CLUSTER_MIN || zoom >= SINGLE_ZOOM) {
        inView.forEach(p => { drawPlace(p, state.setLayer); labels.push({text: set.labels[p.i], lon: p.lon, lat: p.lat, priority: 1}); });
        return;
      }
      const cells = new Map();
      inView.forEach(p => {
        const pt = map.latLngToContainerPoint([p.lat, p.lon]);
        const key = Math.floor(pt.x / CLUSTER_PX) + ":" + Math.floor(pt.y / CLUSTER_PX);
        if (!cells.has(key)) cells.set(key, []);
        cells.get(key).push(p);
      });
      cells.forEach(ps => {
        if (ps.length === 1) {
          drawPlace(ps[0], state.setLayer);
          labels.push({text: set.labels[ps[0].i], lon: ps[0].lon, lat: ps[0].lat, priority: 1});
          return;
        }
        const lat = ps.reduce((a, p) => a + p.lat, 0) / ps.length, lon = ps.reduce((a, p) => a + p.lon, 0) / ps.length;
        const r = 9 + 3 * Math.log10(ps.length);
        L.circleMarker([lat, lon], {radius: r, color: "#fff", weight: 1.5, fillColor: "#455a64", fillOpacity: 0.85,
                                    interactive: false}).addTo(state.setLayer);
        L.marker([lat, lon], {interactive: false, keyboard: false, icon: L.divIcon({className: "cluster-count",
          html: String(ps.length), iconSize: [2 * r, 2 * r], iconAnchor: [r, r]})}).addTo(state.setLayer);
        const at = map.latLngToContainerPoint([lat, lon]);
        state.clusters.push({set: set.name, n: ps.length, lon, lat, r, x: at.x, y: at.y});
      });
    });
    META.places.features.forEach(f => {
      const c = f.geometry.type === "Point" ? f.geometry.coordinates : featureCentre(f);
      labels.unshift({text: f.properties.name, lon: c[0], lat: c[1], priority: 0});
    });
    placeLabels(labels);
  }

  function featureBounds(p) {
    if (!p._bounds) p._bounds = L.geoJSON(p.feature).getBounds();
    return p._bounds;
  }

  function featureCentre(f) {
    const b = L.geoJSON(f).getBounds().getCenter();
    return [b.lng, b.lat];
  }

  function placeLabels(cands) {
    // greedy: the program's places first, then the sets' (nearest to the view's centre first);
    // each label tries four sides of its place and is left out where every side meets one placed
    const map = state.map, size = map.getSize();
    measure.font = LABEL_FONT;
    const clusters = state.clusters.map(c => {
      const p = map.latLngToContainerPoint([c.lat, c.lon]);
      return [p.x - c.r, p.y - c.r, p.x + c.r, p.y + c.r];
    });
    // the panels (legend, time, zoom, scale) are taken: a label is never hidden under one
    const m = document.getElementById("map").getBoundingClientRect();
    const taken = [...document.querySelectorAll(".leaflet-control")].map(el => {
      const r = el.getBoundingClientRect();
      return [r.left - m.left, r.top - m.top, r.right - m.left, r.bottom - m.top];
    });
    const centre = L.point(size.x / 2, size.y / 2);
    const items = cands.map(c => Object.assign({pt: map.latLngToContainerPoint([c.lat, c.lon])}, c))
      .filter(c => c.pt.x >= -50 && c.pt.y >= -50 && c.pt.x <= size.x + 50 && c.pt.y <= size.y + 50)
      .sort((a, b) => a.priority - b.priority || a.pt.distanceTo(centre) - b.pt.distanceTo(centre));
    state.labelLayer.clearLayers();
    state.labels = [];
    const meets = (a, b) => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
    let clustersTaken = false;
    for (const c of items) {
      // the program's own places are labelled first; then the clusters' discs are taken, and
      // the places of sets are labelled where neither a label nor a cluster is
      if (c.priority && !clustersTaken) { taken.push(...clusters); clustersTaken = true; }
      const w = Math.ceil(measure.measureText(c.text).width) + 8, h = 18, gap = 6;
      const sides = [[-w / 2, -h - gap], [gap, -h / 2], [-w / 2, gap], [-w - gap, -h / 2]];
      for (const [dx, dy] of sides) {
        const box = [c.pt.x + dx, c.pt.y + dy, c.pt.x + dx + w, c.pt.y + dy + h];
        if (box[0] < 0 || box[1] < 0 || box[2] > size.x || box[3] > size.y) continue;
        if (taken.some(t => meets(t, box))) continue;
        taken.push(box);
        L.marker([c.lat, c.lon], {pane: "spatec-labels", interactive: false, keyboard: false,
          icon: L.divIcon({className: "place-label" + (c.priority ? " set" : ""), html: esc(c.text),
                           iconSize: [w, h], iconAnchor: [-dx, -dy]})}).addTo(state.labelLayer);
        state.labels.push({text: c.text, box});
        break;
      }
    }
  }

  // ------------------------------------------------------------------ popups
  function popupHtml(l, i) {
    let h = `<b>${esc(l.phrase)}</b><br>${esc(formatTime(l.lo[i]))} – ${esc(formatTime(l.hi[i]))}`;
    h += `<table>`;
    l.fields.forEach(f => { h += `<tr><th>${esc(f.name)}</th><td>${esc(valueText(l, f, i))}</td></tr>`; });
    h += `<tr><th>id</th><td class="id">${esc(idText(l, i))}</td></tr></table>`;
    return h;
  }
  function pick(x, y) {
    const info = state.overlay.pickObject({x, y, radius: 3});
    if (!info || info.index < 0 || !info.layer) return null;
    const l = state.layers.find(k => "phrase-" + k.phrase === info.layer.id || "dots-" + k.phrase === info.layer.id);
    return l ? {layer: l, index: info.index} : null;
  }

  // ------------------------------------------------------------------ start
  async function start() {
    const t = performance.now();
    state.timings = {};
    const buf = await gunzip(b64bytes(document.getElementById("spatec-data").textContent.trim()));
    state.layers = META.layers.map(m => {
      const deltas = column(buf, m.coords);
      const positions = new Float64Array(deltas.length);
      let x = 0, y = 0;
      for (let k = 0; k < deltas.length; k += 2) {
        x += deltas[k]; y += deltas[k + 1];
        positions[k] = (META.origin[0] + x) / 1e6;
        positions[k + 1] = (META.origin[1] + y) / 1e6;
      }
      const starts = column(buf, m.starts), centres = new Float64Array(2 * m.n);
      for (let i = 0; i < m.n; i++) {       // a ring's vertices' mean (its closing vertex left out)
        const a = starts[i], b = Math.max(a + 1, starts[i + 1] - 1);
        let sx = 0, sy = 0;
        for (let k = a; k < b; k++) { sx += positions[2 * k]; sy += positions[2 * k + 1]; }
        centres[2 * i] = sx / (b - a); centres[2 * i + 1] = sy / (b - a);
      }
      const lo = column(buf, m.lo), hi = column(buf, m.hi);
      const times = new Float32Array(2 * m.n);
      for (let i = 0; i < m.n; i++) { times[2 * i] = lo[i] - T0; times[2 * i + 1] = hi[i] - T0; }
      const cols = {};
      m.fields.forEach(f => { cols[f.name] = column(buf, f.column); });
      return {phrase: m.phrase, n: m.n, undrawn: m.undrawn, colour: m.colour, fields: m.fields, cols,
              starts, positions, centres, lo, hi, times,
              ids: column(buf, m.ids), idValues: m.id_values || null};
    });
    const bgm = META.background;
    if (bgm && bgm.n) {
      const q = column(buf, bgm.segments), from = new Float64Array(2 * bgm.n), to = new Float64Array(2 * bgm.n);
      for (let i = 0; i < bgm.n; i++) {       // a segment: x0 y0 x1 y1 in grid units from the origin
        from[2 * i] = (bgm.origin[0] + q[4 * i]) * bgm.quantum;
        from[2 * i + 1] = (bgm.origin[1] + q[4 * i + 1]) * bgm.quantum;
        to[2 * i] = (bgm.origin[0] + q[4 * i + 2]) * bgm.quantum;
        to[2 * i + 1] = (bgm.origin[1] + q[4 * i + 3]) * bgm.quantum;
      }
      state.background = {n: bgm.n, from, to};
    }
    state.timings.decode = (performance.now() - t) / 1000;
    const map = L.map("map", {preferCanvas: true, zoomSnap: 0.25});
    state.map = map;
    if (META.tiles) L.tileLayer(META.tiles, {attribution: META.attribution || "", maxZoom: 19}).addTo(map);
    L.control.scale({imperial: false}).addTo(map);
    const b = META.bounds;
    if (b) map.fitBounds([[b[1], b[0]], [b[3], b[2]]], {padding: [20, 20]});
    else map.setView([0, 0], 2);
    state.places = L.geoJSON(META.places, {
      style: {color: "#222", weight: 2, dashArray: "5 4", fill: true, fillOpacity: 0.04, interactive: false},
      pointToLayer: (f, ll) => L.circle(ll, {radius: f.properties.radius, color: "#222", weight: 2, dashArray: "5 4",
                                             fillOpacity: 0.04, interactive: false})}).addTo(map);
    state.setLayer = L.layerGroup().addTo(map);
    state.labelLayer = L.layerGroup().addTo(map);
    map.createPane("spatec-labels").style.zIndex = 650;      // labels above the composites
    map.on("zoomend moveend", drawPlaceSets);
    state.scale = scaleFor(state.colour);
    state.layers.forEach(l => { l.fill = paint(l, state.scale); });
    state.overlay = new DeckGlLeaflet.LeafletLayer({layers: deckLayers(),
      onAfterRender: () => {
      state.frames = (state.frames || 0) + 1;
      if (state.frames === 1) state.timings.first_frame = (performance.now() - t) / 1000;
    }});
    map.addLayer(state.overlay);
    const legend = L.control({position: "topright"});
    legend.onAdd = () => {
      const d = L.DomUtil.create("div", "spatec-panel");
      d.id = "legend";
      L.DomEvent.disableClickPropagation(d);
      L.DomEvent.disableScrollPropagation(d);
      return d;
    };
    legend.addTo(map);
    renderLegend();
    timeControl(map);
    drawPlaceSets();                          // (after the panels: labels keep clear of them)
    let near = map.getZoom() >= DETAIL_ZOOM;
    map.on("zoomend", () => {               // dots or hulls
      if ((map.getZoom() >= DETAIL_ZOOM) !== near) { near = !near; redraw(); }
    });
    map.on("click", e => {
      const p = map.latLngToContainerPoint(e.latlng);
      const got = pick(p.x, p.y);
      if (got) L.popup({maxWidth: 420}).setLatLng(e.latlng).setContent(popupHtml(got.layer, got.index)).openOn(map);
    });
    state.timings.ready = (performance.now() - t) / 1000;
    state.ready = true;
  }

  // what the page tests (and a curious analyst, from the console) can ask the page
  window.spatecMap = {
    state,
    layers: () => state.layers.map(l => ({phrase: l.phrase, n: l.n, shown: shownCount(l), undrawn: l.undrawn,
                                         fields: l.fields.map(f => f.name)})),
    pickAt: (lon, lat) => {
      const p = state.map.latLngToContainerPoint([lat, lon]);
      const got = pick(p.x, p.y);
      return got ? {phrase: got.layer.phrase, id: idText(got.layer, got.index), popup: popupHtml(got.layer, got.index)} : null;
    },
    setWindow, setColour, formatTime,
    legend: () => document.getElementById("legend").innerText,
    // the labels drawn (text, box in the map's pixels: what was placed) and the boxes the page
    // shows them in (measured), the clusters, the background's segments
    labels: () => [...document.querySelectorAll(".place-label")].map(el => {
      const r = el.getBoundingClientRect(), m = document.getElementById("map").getBoundingClientRect();
      return {text: el.textContent, box: [r.left - m.left, r.top - m.top, r.right - m.left, r.bottom - m.top]};
    }),
    clusters: () => state.clusters || [],
    background: () => (state.background ? state.background.n : 0),
    project: (lon, lat) => { const p = state.map.latLngToContainerPoint([lat, lon]); return [p.x, p.y]; },
  };
  start().catch(e => { state.error = String(e && e.stack || e); console.error(e); });
})();

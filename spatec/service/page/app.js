// The operations page: positions, alert hulls and the program's places (labelled) on a map;
// alerts grouped per vehicle in the program's time zone, their numbers rounded to their unit.
// It subscribes with its viewport as the area and moves the subscription (renewing its lease)
// as the map is panned. Everything comes from this service; the page's key is a cookie.
//
// Text from the feed or the program (vehicle ids, place names, emit fields) is only ever set
// as text (textContent, text nodes), never as HTML: a vehicle id `<img onerror=...>` is shown
// as those characters.
//
// `?snapshot=1`: the page as it is now, for a headless browser's screenshot: the latest alerts
// (the last 500 of the log in the viewport) and positions read once, no stream left open;
// `document.body.dataset.ready` is "1" when it is drawn.
"use strict";
(async function () {
  const LEASE = 120;                  // s; renewed every LEASE / 4 and on every pan
  const SNAPSHOT = new URLSearchParams(location.search).has("snapshot");
  const state = { sub: null, area: null, alerts: new Map(), acked: new Set(), hulls: 0, vehicles: 0, source: null,
                  snapshot: SNAPSHOT };
  window.spatec = state;              // for people poking around, and the page's tests
  const statusLine = (t) => { document.getElementById("status").textContent = t; };
  const text = (t) => { const s = document.createElement("span"); s.textContent = String(t); return s; };

  const answer = await fetch("/program");
  if (answer.status === 401) {
    statusLine("not signed in: open the page's link that spatec serve printed (…/?key=…)");
    document.body.dataset.ready = "1";
    return;
  }
  const program = await answer.json();
  const map = L.map("map", { zoomControl: !SNAPSHOT, attributionControl: false, fadeAnimation: !SNAPSHOT,
                             zoomAnimation: !SNAPSHOT });
  document.getElementById("tz").textContent = "(" + program.timezone + ")";
  const fmt = new Intl.DateTimeFormat("en-GB", { timeZone: program.timezone, dateStyle: "short",
                                                   timeStyle: "medium" });
  const places = L.geoJSON(program.places, {
    style: { color: "#1d6f42", weight: 1, fillOpacity: 0.08 },
    onEachFeature: (f, layer) => layer.bindTooltip(text(f.properties.name),
      { permanent: true, direction: "center", className: "place-label", opacity: 0.9 }),
  }).addTo(map);
  if (places.getLayers().length) map.fitBounds(places.getBounds().pad(0.3));
  else map.setView([52.205, 0.12], 13);

  // ---------------------------------------------------------------- numbers in their units
  // phrase → field → its unit: the schema's x-unit (s, m, m/s, m2: durations, distances, ...),
  // "time", or what the program says of a plain number (`metres = distance(A, B) / 1 m`: m;
  // an event's lon/lat: deg)
  const units = {};
  for (const [phrase, schema] of Object.entries(program.phrases || {})) {
    units[phrase] = { ...((program.units || {})[phrase] || {}) };
    for (const [field, s] of Object.entries(schema.properties || {})) {
      if (s["x-unit"]) units[phrase][field] = s["x-unit"];
      else if (s.format === "date-time") units[phrase][field] = "time";
    }
  }
  const PER_UNIT = { m: [0, " m"], km: [2, " km"], s: [0, " s"], min: [1, " min"], h: [2, " h"], d: [2, " d"],
                     deg: [5, "°"], "km/h": [0, " km/h"] };
  const num = (v, digits) => Number(v).toLocaleString("en-GB", { maximumFractionDigits: digits });
  function shown(phrase, field, v) {
    if (v === null || v === undefined) return "–";
    const unit = (units[phrase] || {})[field];
    if (typeof v === "string" && (unit === "time" || /^\d{4}-\d\d-\d\dT/.test(v))) return fmt.format(new Date(v));
    if (typeof v !== "number") return String(v);
    if (unit === "s") {
      const s = Math.round(v);
      return s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
    }
    if (unit === "m") return v >= 1000 ? `${num(v / 1000, 2)} km` : `${num(v, v < 10 ? 1 : 0)} m`;
    if (unit === "m/s") return `${num(v * 3.6, 0)} km/h`;
    if (unit === "m2") return `${num(v, 0)} m²`;
    if (PER_UNIT[unit]) return num(v, PER_UNIT[unit][0]) + PER_UNIT[unit][1];
    return num(v, Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 1 ? 1 : 3);      // a number of no known unit
  }

  try {
    for (const a of await (await fetch("/alerts/acks")).json()) state.acked.add(a.id);
  } catch (e) { /* no acks yet */ }

  // ---------------------------------------------------------------- positions
  const markers = new Map();
  function positions(data) {
    for (const [vehicle, [lon, lat]] of Object.entries(data)) {
      let m = markers.get(vehicle);
      if (!m) {
        m = L.circleMarker([lat, lon], { radius: 3, color: "#1d3557", weight: 1, fillOpacity: 0.7 })
          .bindTooltip(text(vehicle)).addTo(map);
        markers.set(vehicle, m);
      } else m.setLatLng([lat, lon]);
    }
    state.vehicles = markers.size;
  }

  // ---------------------------------------------------------------- the subscription
  function viewport() {
    const b = map.getBounds();
    const [w, s, e, n] = [b.getWest(), b.getSouth(), b.getEast(), b.getNorth()];
    return { type: "Polygon", coordinates: [[[w, s], [e, s], [e, n], [w, n], [w, s]]] };
  }

  async function subscribe() {
    state.area = viewport();
    const r = await fetch("/subscriptions", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ area: state.area, lease: LEASE + " s", recent: 500 }) });
    const body = await r.json();
    if (!r.ok) { statusLine("subscription refused: " + body.error); return false; }
    state.sub = body.id;
    return true;
  }

  function listen() {
    if (state.source) state.source.close();
    // EventSource resends the last id it saw by itself when it reconnects
    const src = new EventSource(`/subscriptions/${state.sub}/events?annotate=places`);
    state.source = src;
    src.onopen = () => statusLine(`subscribed (${state.sub})`);
    src.onerror = () => statusLine("reconnecting…");
    src.addEventListener("alert", (ev) => show(JSON.parse(ev.data)));
    src.addEventListener("error", (ev) => { if (ev.data) statusLine("suspended: " + JSON.parse(ev.data).reason); });
    src.addEventListener("end", async () => { src.close(); if (await subscribe()) listen(); });  // lapsed
  }

  async function renew() {
    if (!state.sub) return;
    state.area = viewport();
    const r = await fetch(`/subscriptions/${state.sub}`, { method: "PUT",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ area: state.area, lease: LEASE + " s" }) });
    if (r.status === 404 && await subscribe()) listen();
  }

  // ---------------------------------------------------------------- alerts
  function wktRings(wkt) {
    // POLYGON ((x y, ...)), POINT (x y), LINESTRING (x y, ...): the outer ring or points, as [lat, lon]
    const body = wkt.slice(wkt.indexOf("(")).replace(/[()]/g, " ");
    const first = body.split(/\)\s*,\s*\(/)[0];
    return first.split(",").map((p) => p.trim().split(/\s+/).map(Number)).filter((p) => p.length === 2)
      .map(([x, y]) => [y, x]);
  }

  function vehicleOf(a) {
    if (a.vehicle) return String(a.vehicle);
    for (const id of Object.values(a.events || {})) {
      const parts = String(id).split(":");
      if (parts.length >= 3 && parts[1] !== "#") return parts[1];
    }
    return "(no vehicle)";
  }

  const STANDARD = new Set(["phrase", "id", "lo", "hi", "hull", "events", "places"]);

  function show({ alert: a, places: names }) {
    if (state.alerts.has(a.id)) return;
    state.alerts.set(a.id, a);
    if (a.hull) {
      const pts = wktRings(a.hull);
      const layer = pts.length > 2
        ? L.polygon(pts, { color: "#c1121f", weight: 1, fillOpacity: 0.25, className: "hull" })
        : L.circleMarker(pts[0], { radius: 5, color: "#c1121f", className: "hull" });
      layer.bindTooltip(text(`${a.phrase} ${fmt.format(new Date(a.hi))}`)).addTo(map);
      state.hulls += 1;
      a._layer = layer;
    }
    const vehicle = vehicleOf(a);
    const list = document.getElementById("alerts");
    let group = [...list.children].find((g) => g.dataset.vehicle === vehicle);
    if (!group) {
      group = document.createElement("section");
      group.className = "vehicle";
      group.dataset.vehicle = vehicle;
      const h = document.createElement("h3");
      h.textContent = vehicle;
      group.append(h, document.createElement("ul"));
      list.prepend(group);
    }
    const li = document.createElement("li");
    li.className = "alert" + (state.acked.has(a.id) ? " acked" : "");
    li.dataset.id = a.id;
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "ack";
    const phrase = document.createElement("span");
    phrase.className = "phrase";
    phrase.textContent = a.phrase;
    const when = document.createElement("span");
    when.className = "when";
    when.textContent = `${fmt.format(new Date(a.lo))} – ${fmt.format(new Date(a.hi))}`;
    const where = document.createElement("span");
    where.className = "places";
    where.textContent = names && names.length ? "at " + names.join(", ") : "";
    const fields = document.createElement("div");
    fields.className = "fields";
    for (const [k, v] of Object.entries(a)) {
      if (STANDARD.has(k) || k.startsWith("_")) continue;
      const f = document.createElement("span");
      f.className = "field";
      f.dataset.field = k;
      f.textContent = `${k} ${shown(a.phrase, k, v)}`;
      fields.append(f);
    }
    li.append(button, phrase, " ", when, " ", where, fields);
    button.onclick = async (ev) => {
      ev.stopPropagation();
      const r = await fetch(`/alerts/${encodeURIComponent(a.id)}/ack`, { method: "POST" });
      if (r.ok) { state.acked.add(a.id); li.classList.add("acked"); }
    };
    li.onclick = () => { if (a._layer) map.fitBounds(a._layer.getBounds ? a._layer.getBounds().pad(2) :
                                                         L.latLngBounds([a._layer.getLatLng()]).pad(2)); };
    group.querySelector("ul").prepend(li);
  }

  document.getElementById("hide-acked").onchange = (ev) =>
    document.body.classList.toggle("hide-acked", ev.target.checked);

  if (!(await subscribe())) { document.body.dataset.ready = "1"; return; }
  if (SNAPSHOT) {
    // read once, draw, and leave nothing open: the headless browser's page is then idle
    const [got, pos] = await Promise.all([
      fetch(`/subscriptions/${state.sub}/alerts?annotate=places`).then((r) => r.json()),
      fetch("/positions").then((r) => r.json())]);
    positions(pos);
    for (const item of got) show(item);
    statusLine(`snapshot at ${fmt.format(new Date())}: ${got.length} alert(s), ${markers.size} vehicle(s)`);
    await fetch(`/subscriptions/${state.sub}`, { method: "DELETE" });
    document.body.dataset.ready = "1";
    return;
  }
  map.on("moveend", renew);
  setInterval(renew, LEASE * 250);
  // the streams are opened once the page has loaded: an open EventSource never holds up `load`
  const start = () => {
    const positionsSource = new EventSource("/positions/events");
    positionsSource.addEventListener("positions", (ev) => positions(JSON.parse(ev.data)));
    listen();
    document.body.dataset.ready = "1";
  };
  if (document.readyState === "complete") start();
  else window.addEventListener("load", start, { once: true });
})();

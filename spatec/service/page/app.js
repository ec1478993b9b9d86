// The operations page: positions, alert hulls and the program's places on a map; alerts grouped per
// vehicle in the program's time zone. It subscribes with its viewport as the area and moves the
// subscription (renewing its lease) as the map is panned. Everything comes from this service.
"use strict";
(async function () {
  const LEASE = 120;                  // s; renewed every LEASE / 4 and on every pan
  const state = { sub: null, area: null, alerts: new Map(), acked: new Set(), hulls: 0, vehicles: 0, source: null };
  window.spatec = state;              // for people poking around, and the page's tests
  const map = L.map("map", { zoomControl: true, attributionControl: false });
  const status = (t) => { document.getElementById("status").textContent = t; };

  const program = await (await fetch("/program")).json();
  document.getElementById("tz").textContent = "(" + program.timezone + ")";
  const fmt = new Intl.DateTimeFormat("en-GB", { timeZone: program.timezone, dateStyle: "short",
                                                   timeStyle: "medium" });
  const places = L.geoJSON(program.places, {
    style: { color: "#1d6f42", weight: 1, fillOpacity: 0.08 },
    onEachFeature: (f, layer) => layer.bindTooltip(f.properties.name),
  }).addTo(map);
  if (places.getLayers().length) map.fitBounds(places.getBounds().pad(0.3));
  else map.setView([52.205, 0.12], 13);

  for (const a of await (await fetch("/alerts/acks")).json()) state.acked.add(a.id);

  // ---------------------------------------------------------------- positions
  const markers = new Map();
  const positions = new EventSource("/positions/events");
  positions.addEventListener("positions", (ev) => {
    for (const [vehicle, [lon, lat]] of Object.entries(JSON.parse(ev.data))) {
      let m = markers.get(vehicle);
      if (!m) {
        m = L.circleMarker([lat, lon], { radius: 3, color: "#1d3557", weight: 1, fillOpacity: 0.7 })
          .bindTooltip(vehicle).addTo(map);
        markers.set(vehicle, m);
      } else m.setLatLng([lat, lon]);
    }
    state.vehicles = markers.size;
  });

  // ---------------------------------------------------------------- the subscription
  function viewport() {
    const b = map.getBounds();
    const [w, s, e, n] = [b.getWest(), b.getSouth(), b.getEast(), b.getNorth()];
    return { type: "Polygon", coordinates: [[[w, s], [e, s], [e, n], [w, n], [w, s]]] };
  }

  async function subscribe() {
    state.area = viewport();
    const r = await fetch("/subscriptions", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ area: state.area, lease: LEASE + " s" }) });
    const body = await r.json();
    if (!r.ok) { status("subscription refused: " + body.error); return; }
    state.sub = body.id;
    listen();
  }

  function listen() {
    if (state.source) state.source.close();
    // EventSource resends the last id it saw by itself when it reconnects
    const src = new EventSource(`/subscriptions/${state.sub}/events?annotate=places`);
    state.source = src;
    src.onopen = () => status(`subscribed (${state.sub})`);
    src.onerror = () => status("reconnecting…");
    src.addEventListener("alert", (ev) => show(JSON.parse(ev.data)));
    src.addEventListener("end", () => { src.close(); subscribe(); });   // the lease lapsed: start again
  }

  async function renew() {
    if (!state.sub) return;
    state.area = viewport();
    const r = await fetch(`/subscriptions/${state.sub}`, { method: "PUT",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ area: state.area, lease: LEASE + " s" }) });
    if (r.status === 404) subscribe();
  }
  map.on("moveend", renew);
  setInterval(renew, LEASE * 250);

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

  const STANDARD = new Set(["phrase", "id", "lo", "hi", "hull", "events"]);

  function show({ alert: a, places: names }) {
    if (state.alerts.has(a.id)) return;
    state.alerts.set(a.id, a);
    if (a.hull) {
      const pts = wktRings(a.hull);
      const layer = pts.length > 2
        ? L.polygon(pts, { color: "#c1121f", weight: 1, fillOpacity: 0.25, className: "hull" })
        : L.circleMarker(pts[0], { radius: 5, color: "#c1121f", className: "hull" });
      layer.bindTooltip(`${a.phrase} ${fmt.format(new Date(a.hi))}`).addTo(map);
      state.hulls += 1;
      a._layer = layer;
    }
    const vehicle = vehicleOf(a);
    const list = document.getElementById("alerts");
    let group = list.querySelector(`.vehicle[data-vehicle="${CSS.escape(vehicle)}"]`);
    if (!group) {
      group = document.createElement("section");
      group.className = "vehicle";
      group.dataset.vehicle = vehicle;
      group.innerHTML = `<h3></h3><ul></ul>`;
      group.querySelector("h3").textContent = vehicle;
      list.prepend(group);
    }
    const li = document.createElement("li");
    li.className = "alert" + (state.acked.has(a.id) ? " acked" : "");
    li.dataset.id = a.id;
    const fields = Object.entries(a).filter(([k]) => !STANDARD.has(k) && !k.startsWith("_"))
      .map(([k, v]) => `${k}=${typeof v === "string" && /^\d{4}-\d\d-\d\dT/.test(v) ? fmt.format(new Date(v)) : v}`);
    li.innerHTML = `<button type="button">ack</button><span class="phrase"></span>
      <span class="when"></span> <span class="places"></span><div class="fields"></div>`;
    li.querySelector(".phrase").textContent = a.phrase;
    li.querySelector(".when").textContent = `${fmt.format(new Date(a.lo))} – ${fmt.format(new Date(a.hi))}`;
    li.querySelector(".places").textContent = names && names.length ? "at " + names.join(", ") : "";
    li.querySelector(".fields").textContent = fields.join("  ");
    li.querySelector("button").onclick = async (ev) => {
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

  await subscribe();
})();

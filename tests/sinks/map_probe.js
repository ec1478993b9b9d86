// Opens a map page of `spatec replay --map` in headless Chromium (Playwright) and prints, as JSON,
// what it drew: its layers, what a click at given places picks (and the popup), the legend,
// the counts a time window leaves, and every request the page tried (all of them refused).
// usage: node map_probe.js PAGE.html PROBES.json   (PROBES: {points: [[lon, lat], ...],
//        colour: "field", window: [startSec, endSec], view: [lon, lat, zoom], screenshot: "out.png",
//        project: [[lon, lat], ...] (their pixels in the view)})
const path = require("path");
const fs = require("fs");
const { chromium } = require(path.join(process.env.SPATEC_WEB_MODULES || path.join(__dirname, "../../web/node_modules"),
                                       "playwright-core"));

// what a click at (lon, lat) picks, the map first centred there at zoom 17 (and drawn again)
async function zoomedPick(page, lon, lat) {
  await page.evaluate(([x, y]) => { window.spatecMap.state.map.setView([y, x], 17, { animate: false }); }, [lon, lat]);
  await page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))));
  return page.evaluate(([x, y]) => window.spatecMap.pickAt(x, y), [lon, lat]);
}

(async () => {
  const [page_, probesFile] = process.argv.slice(2);
  const probes = JSON.parse(fs.readFileSync(probesFile, "utf8"));
  const pageUrl = "file://" + path.resolve(page_);
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
                                          args: ["--enable-unsafe-swiftshader"] });
  const out = { requests: [], refused: [], console: [] };
  try {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    // every request but the page itself is refused, and named
    await context.route("**/*", route => {
      const url = route.request().url();
      if (url === pageUrl) return route.continue();
      out.refused.push(url);
      return route.abort();
    });
    const page = await context.newPage();
    page.on("request", r => out.requests.push(r.url()));
    page.on("console", m => { if (m.type() === "error" || m.type() === "warning") out.console.push(m.text()); });
    page.on("pageerror", e => out.console.push("pageerror: " + e.message));
    const t0 = Date.now();
    await page.goto(pageUrl, { waitUntil: "load", timeout: 300000 });
    await page.waitForFunction(() => window.spatecMap && (window.spatecMap.state.ready || window.spatecMap.state.error),
                               null, { timeout: 300000 });
    out.error = await page.evaluate(() => window.spatecMap.state.error);
    // a drawn frame (deck.gl renders on the next animation frame)
    await page.waitForFunction(() => (window.spatecMap.state.frames || 0) > 0, null, { timeout: 300000 });
    out.load_seconds = (Date.now() - t0) / 1000;
    out.layers = await page.evaluate(() => window.spatecMap.layers());
    out.legend = await page.evaluate(() => window.spatecMap.legend());
    out.timings = await page.evaluate(() => window.spatecMap.state.timings);
    out.picks = [];
    for (const [lon, lat] of probes.points || []) {
      out.picks.push(await zoomedPick(page, lon, lat));
    }
    if (probes.click) {   // a real click, through Leaflet, opens the popup
      const [lon, lat] = probes.click;
      const xy = await page.evaluate(([x, y]) => { const p = window.spatecMap.state.map.latLngToContainerPoint([y, x]);
                                                   return [p.x, p.y]; }, [lon, lat]);
      const box = await page.locator("#map").boundingBox();
      await page.mouse.click(box.x + xy[0], box.y + xy[1]);
      await page.waitForSelector(".leaflet-popup-content", { timeout: 10000 }).catch(() => null);
      out.popup = await page.evaluate(() => { const p = document.querySelector(".leaflet-popup-content");
                                              return p ? p.innerText : null; });
    }
    if (probes.view) {    // a view of its own: [lon, lat, zoom], drawn (places, clusters, labels) before the shot
      const [lon, lat, zoom] = probes.view;
      await page.evaluate(([x, y, z]) => { window.spatecMap.state.map.setView([y, x], z, { animate: false }); },
                          [lon, lat, zoom]);
      await page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))));
      await page.waitForTimeout(300);
    }
    if (probes.screenshot) await page.screenshot({ path: probes.screenshot });
    out.labels = await page.evaluate(() => window.spatecMap.labels());
    out.clusters = await page.evaluate(() => window.spatecMap.clusters());
    out.background = await page.evaluate(() => window.spatecMap.background());
    out.panels = await page.evaluate(() => { const m = document.getElementById("map").getBoundingClientRect();
      return [...document.querySelectorAll(".leaflet-control")].map(el => { const r = el.getBoundingClientRect();
        return [r.left - m.left, r.top - m.top, r.right - m.left, r.bottom - m.top]; }); });
    out.size = await page.evaluate(() => { const s = window.spatecMap.state.map.getSize(); return [s.x, s.y]; });
    out.projected = [];
    for (const [lon, lat] of probes.project || []) {
      out.projected.push(await page.evaluate(([x, y]) => window.spatecMap.project(x, y), [lon, lat]));
    }
    if (probes.colour !== undefined) {
      await page.selectOption("#colour-by", probes.colour);
      out.legend_coloured = await page.evaluate(() => window.spatecMap.legend());
    }
    if (probes.window) {
      await page.selectOption("#time-width", String(probes.window[1] - probes.window[0]));
      await page.evaluate(([a]) => { const s = document.getElementById("time-slider");
                                     s.value = String(a); s.dispatchEvent(new Event("input")); }, probes.window);
      out.window_label = await page.evaluate(() => document.getElementById("time-label").textContent);
      out.window_layers = await page.evaluate(() => window.spatecMap.layers());
      out.window_picks = [];
      for (const [lon, lat] of probes.points || []) {
        out.window_picks.push(await zoomedPick(page, lon, lat));
      }
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out));
})().catch(e => { process.stderr.write(String(e && e.stack || e)); process.exit(1); });

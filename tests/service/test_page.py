"""The operations page in headless Chromium (Playwright, Debian's /usr/bin/chromium): it loads
with no request leaving 127.0.0.1, lists the feed's alerts and draws their hulls, labels the
program's places, rounds numbers to their unit, shows a vehicle id that is HTML as text (it
never runs), moves the page's subscription as the map is panned, and has a snapshot mode a
headless browser screenshots without an open stream holding it up."""
from __future__ import annotations

import json
import re
import shutil
import struct
from urllib.parse import urlparse

import pytest

from spatec.feeds.recording import Poll, poll_records
from spatec.feeds.server import FeedServer
from tests.live.conftest import minutes, program_of
from tests.service.conftest import Serve, call, free_port, wait_for

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
XSS = '<img src=x onerror="window.__xss=1">'


def with_script_vehicle(polls):
    """The polls with a second copy of one bus whose id is HTML (the issue's injection)."""
    def near(r):        # within the page's first view (the places: the city centre and the station)
        return abs(float(r["Longitude"]) - 0.13) < 0.01 and abs(float(r["Latitude"]) - 52.199) < 0.006
    counts: dict = {}
    for p in polls:
        for r in poll_records(p.data):
            if near(r):
                counts[r["VehicleRef"]] = counts.get(r["VehicleRef"], 0) + 1
    copy = max(sorted(counts), key=counts.get)
    out = []
    for p in polls:
        doc = json.loads(p.data)
        recs = doc["request_data"]
        doc["request_data"] = recs + [{**r, "VehicleRef": XSS} for r in recs if r.get("VehicleRef") == copy]
        out.append(Poll(p.received, p.name, json.dumps(doc).encode()))
    return out


def png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_operations_page(tmp_path, recording):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which(CHROMIUM):
        pytest.skip("Chromium is not installed (scripts/setup_system.sh installs Debian's chromium)")
    from spatec.service.api import leaflet_dir

    assert leaflet_dir() is not None, "web/node_modules/leaflet missing: run bash scripts/setup.sh"
    polls = with_script_vehicle(minutes(recording, 6))
    prog = program_of(tmp_path, "bunching", "stuck")
    port = free_port()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], tmp_path / "state").start()
    feed = None
    hosts = []
    key = (srv.state / "page-token").read_text().strip()
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
            # without the page's key: told how to sign in, nothing else
            anon = browser.new_page()
            anon.goto(f"http://{srv.base}/")
            anon.wait_for_selector("body[data-ready='1']", timeout=30_000)
            assert "not signed in" in anon.inner_text("#status")
            anon.close()
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.on("request", lambda r: hosts.append(urlparse(r.url).hostname))
            page.goto(f"http://{srv.base}/?key={key}")
            assert page.url == f"http://{srv.base}/"                      # the key is gone from the address
            page.wait_for_function("window.spatec && window.spatec.sub", timeout=30_000)
            sid = page.evaluate("window.spatec.sub")
            # the places are labelled with their names
            labels = page.eval_on_selector_all(".place-label", "els => els.map(e => e.textContent)")
            assert sorted(labels) == ["centre", "hospital", "station"]
            feed = FeedServer(polls, speed=0, port=port).start()
            page.wait_for_selector("li.alert", timeout=120_000)
            page.wait_for_function("window.spatec.vehicles > 10", timeout=60_000)     # positions drawn
            page.wait_for_selector("path.hull", state="attached", timeout=30_000)
            page.wait_for_function(f"[...document.querySelectorAll('.vehicle h3')].some(h => h.textContent === "
                                   f"{json.dumps(XSS)})", timeout=120_000)
            # the script in the vehicle id is text, never HTML: no <img>, nothing ran
            assert page.evaluate("window.__xss") is None
            assert page.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0
            page.hover("#map")
            first = page.query_selector("li.alert")
            assert "Stuck" in first.inner_text() or "Bunching" in first.inner_text()
            assert page.evaluate("window.spatec.hulls") >= 1
            # numbers rounded to their unit: no 73.50285795533013
            fields = page.eval_on_selector_all(".alert .field", "els => els.map(e => e.textContent)")
            assert fields and not [f for f in fields if re.search(r"\d\.\d{4,}", f) and "°" not in f], fields[:20]
            metres = [f for f in fields if f.startswith("metres ")]
            assert all(re.fullmatch(r"metres \d+(\.\d)? m", f) for f in metres), metres[:5]
            # acknowledging an alert
            aid = first.get_attribute("data-id")
            first.query_selector("button").click()
            wait_for(lambda: aid in {a["id"] for a in call(srv, "GET", "/alerts/acks")[1]}, 10,
                     what="the acknowledgement")
            assert {a["by"] for a in call(srv, "GET", "/alerts/acks")[1]} == {"page"}
            # the page's subscription follows the map (it is the page's own: the API token does not see it)
            assert call(srv, "GET", f"/subscriptions/{sid}")[0] == 404
            cookie = {"Cookie": f"spatec_page={key}"}
            before = call(srv, "GET", f"/subscriptions/{sid}", token=None, headers=cookie)[1]["area"]
            box = page.query_selector("#map").bounding_box()
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            page.mouse.move(x, y)
            page.mouse.down()
            page.mouse.move(x - 300, y - 150, steps=10)
            page.mouse.up()
            wait_for(lambda: call(srv, "GET", f"/subscriptions/{sid}", token=None, headers=cookie)[1]["area"] != before,
                     10, what="the subscription's area to follow the map")
            after = call(srv, "GET", f"/subscriptions/{sid}", token=None, headers=cookie)[1]["area"]
            assert after["coordinates"][0][0][0] > before["coordinates"][0][0][0]    # moved east
            page.screenshot(path=str(tmp_path / "page.png"))
            # the snapshot mode: read once, nothing left open, so "network idle" comes
            snap = browser.new_page(viewport={"width": 1200, "height": 800})
            snap.on("request", lambda r: hosts.append(urlparse(r.url).hostname))
            snap.goto(f"http://{srv.base}/?key={key}&snapshot=1", wait_until="networkidle", timeout=60_000)
            snap.wait_for_selector("body[data-ready='1']", timeout=30_000)
            assert snap.evaluate("window.spatec.source") is None
            assert snap.evaluate("window.spatec.alerts.size") > 0 and snap.evaluate("window.spatec.vehicles") > 10
            assert "snapshot at" in snap.inner_text("#status")
            snap.screenshot(path=str(tmp_path / "snapshot.png"))
            browser.close()
        assert hosts and set(hosts) == {"127.0.0.1"}, f"requests left 127.0.0.1: {set(hosts)}"
        for name in ("page.png", "snapshot.png"):
            w, h = png_size(tmp_path / name)
            assert (w, h) == (1200, 800) and (tmp_path / name).stat().st_size > 20_000
    finally:
        srv.stop()
        if feed is not None:
            feed.stop()

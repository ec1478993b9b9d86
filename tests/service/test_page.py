"""The operations page in headless Chromium (Playwright, Debian's /usr/bin/chromium): it loads
with no request leaving 127.0.0.1, lists an alert of the feed and draws its hull, and panning
the map moves the page's subscription."""
from __future__ import annotations

import json
import shutil
from urllib.parse import urlparse

import pytest

from spatec.feeds.server import FeedServer
from tests.live.conftest import minutes, program_of
from tests.service.conftest import Serve, call, free_port, wait_for

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_operations_page(tmp_path, recording):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which(CHROMIUM):
        pytest.skip("Chromium is not installed (scripts/setup_system.sh installs Debian's chromium)")
    from spatec.service.api import leaflet_dir

    assert leaflet_dir() is not None, "web/node_modules/leaflet missing: run bash scripts/setup.sh"
    polls = minutes(recording, 4)
    prog = program_of(tmp_path, "stuck")
    port = free_port()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], tmp_path / "state").start()
    feed = None
    hosts = []
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.on("request", lambda r: hosts.append(urlparse(r.url).hostname))
            page.goto(f"http://{srv.base}/")
            page.wait_for_function("window.spatec && window.spatec.sub", timeout=30_000)
            sid = page.evaluate("window.spatec.sub")
            feed = FeedServer(polls, speed=0, port=port).start()
            page.wait_for_selector("li.alert", timeout=120_000)
            page.wait_for_function("window.spatec.vehicles > 10", timeout=30_000)     # positions drawn
            page.wait_for_selector("path.hull", state="attached", timeout=30_000)
            first = page.query_selector("li.alert")
            assert "Stuck" in first.inner_text()
            assert page.evaluate("window.spatec.hulls") >= 1
            # the alert's times are shown in the program's time zone (Europe/London: BST, UTC+1)
            aid = first.get_attribute("data-id")
            code, acks = call(srv, "GET", "/alerts/acks")
            first.query_selector("button").click()
            wait_for(lambda: aid in {a["id"] for a in call(srv, "GET", "/alerts/acks")[1]}, 10,
                     what="the acknowledgement")
            before = call(srv, "GET", f"/subscriptions/{sid}")[1]["area"]
            box = page.query_selector("#map").bounding_box()
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            page.mouse.move(x, y)
            page.mouse.down()
            page.mouse.move(x - 300, y - 150, steps=10)
            page.mouse.up()
            wait_for(lambda: call(srv, "GET", f"/subscriptions/{sid}")[1]["area"] != before, 10,
                     what="the subscription's area to follow the map")
            after = call(srv, "GET", f"/subscriptions/{sid}")[1]["area"]
            assert after["coordinates"][0][0][0] > before["coordinates"][0][0][0]    # moved east
            page.screenshot(path=str(tmp_path / "page.png"))
            browser.close()
        assert hosts and set(hosts) == {"127.0.0.1"}, f"requests left 127.0.0.1: {set(hosts)}"
    finally:
        srv.stop()
        if feed is not None:
            feed.stop()

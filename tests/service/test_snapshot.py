"""The subscriptions' snapshot (`spatec/service/snapshot.py`): a start reads it and the bucket's
messages since, so what changed while the service was down, or since the snapshot was written,
is right; a snapshot of another bucket is not used."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from spatec.feeds.server import FeedServer
from tests.live.conftest import minutes
from tests.service.conftest import Serve, call, free_port, sse, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# decides at once (a bus standing still): alerts within seconds of a feed
STANDING = '''include "{bus}"
phrase Standing per vehicle = BusGPS -> A ;= BusGPS -> B within 1 min
  emit vehicle = A.vehicle, line = A.line
'''


def make(srv, body) -> str:
    code, got = call(srv, "POST", "/subscriptions", body)
    assert code == 201, got
    return got["id"]


def test_restart_from_the_snapshot(tmp_path, recording):
    from spatec.service.broker import EmbeddedNats

    prog = tmp_path / "standing.spatec"
    prog.write_text(STANDING.format(bus=ROOT / "examples" / "bus.spatec"))
    port = free_port()
    sources = [f"BusGPS=sirivm+http://127.0.0.1:{port}/"]
    nats = EmbeddedNats(tmp_path / "nats").start()
    a = Serve(prog, sources, tmp_path / "a", broker=nats.url).start()
    snap = tmp_path / "a" / "subscriptions.snapshot"
    b = feed = None
    try:
        keep = make(a, {"phrase": "Standing"})
        gone = make(a, {"phrase": "Standing", "where": 'line == "1"'})
        renewed = make(a, {"phrase": "Standing", "lease": "5 min"})
        wait_for(lambda: a.status()["snapshot"]["current"], 30, what="the snapshot")
        a.stop()
        assert snap.exists()

        # while a is down, another process on the broker ends one, makes one and renews one
        b = Serve(prog, sources, tmp_path / "b", broker=nats.url).start()
        assert call(b, "DELETE", f"/subscriptions/{gone}")[0] == 204
        new = make(b, {"phrase": "Standing"})
        code, got = call(b, "PUT", f"/subscriptions/{renewed}", {"lease": "2 h"})
        assert code == 200, got
        expires = got["expires"]
        b.stop()
        b = None

        a = Serve(prog, sources, tmp_path / "a", broker=nats.url).start()
        read = a.status()["snapshot"]["read"]
        assert read is not None and read["subscriptions"] == 3 and read["since"] >= 3, read
        assert call(a, "GET", f"/subscriptions/{gone}")[0] == 404
        assert call(a, "GET", f"/subscriptions/{keep}")[0] == 200
        assert call(a, "GET", f"/subscriptions/{renewed}")[1]["expires_iso"] == expires
        assert sorted(s["id"] for s in call(a, "GET", "/subscriptions")[1]) == sorted([keep, new, renewed])
        wait_for(lambda: not a.status()["matcher"]["pending"], 30, what="the matcher")
        # the one made while a was down is served
        feed = FeedServer(minutes(recording, 4), speed=20, port=port).start()
        code, got = sse(a, f"/subscriptions/{new}/events", max_events=5, timeout=120, idle=60)
        assert code == 200 and [e[0] for e in got] == ["alert"] * 5, got

        # a snapshot older than the bucket (killed before the next one was written): what
        # changed since it is read from the bucket
        wait_for(lambda: a.status()["snapshot"]["current"], 30, what="the snapshot")
        shutil.copy(snap, tmp_path / "older")
        late = make(a, {"phrase": "Standing", "where": 'line == "4"'})
        assert call(a, "DELETE", f"/subscriptions/{keep}")[0] == 204
        a.kill()
        shutil.copy(tmp_path / "older", snap)
        a = Serve(prog, sources, tmp_path / "a", broker=nats.url).start()
        read = a.status()["snapshot"]["read"]
        assert read is not None and read["subscriptions"] == 3 and read["since"] >= 2, read
        assert sorted(s["id"] for s in call(a, "GET", "/subscriptions")[1]) == sorted([late, new, renewed])
        a.stop()

        # the same state on another broker (a bucket made again): the snapshot is not used
        other = EmbeddedNats(tmp_path / "nats2").start()
        try:
            a = Serve(prog, sources, tmp_path / "a", broker=other.url).start()
            st = a.status()
            assert st["snapshot"]["read"] is None and st["subscriptions"] == 0, st["snapshot"]
            assert call(a, "GET", f"/subscriptions/{late}")[0] == 404
            a.stop()
        finally:
            other.stop()
    finally:
        for s in (a, b):
            if s is not None:
                s.stop()
        if feed is not None:
            feed.stop()
        nats.stop()

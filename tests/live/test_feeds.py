"""The feed server, the HTTP and GTFS-realtime adapters, source URLs."""
from __future__ import annotations

import json
import urllib.request

import pytest

from spatec.errors import DataError
from spatec.feeds.gtfsrt import encode_gtfsrt, gtfsrt_batch
from spatec.feeds.recording import Poll, poll_records
from spatec.feeds.server import FeedServer
from spatec.feeds.sources import HttpFeedSource, parse_source
from spatec.plan.program import compile_program
from tests.live.conftest import PROGRAMS

REC = {"VehicleRef": "WP-101", "LineRef": "401", "OperatorRef": "WP", "DirectionRef": "OUTBOUND",
       "DatedVehicleJourneyRef": "2", "Longitude": "-0.1845219", "Latitude": "52.3288345", "Bearing": "90",
       "RecordedAtTime": "2019-10-01T08:59:38+01:00"}


def polls(n=3):
    return [Poll(1000.0 + 10 * i, f"{1000 + 10 * i}_x.json",
                 json.dumps({"request_data": [dict(REC, RecordedAtTime=f"2019-10-01T08:59:{10 + i:02d}+01:00")]}
                            ).encode()) for i in range(n)]


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, dict(r.headers), r.read()


def test_server_one_poll_per_request_then_204_and_health():
    ps = polls()
    with FeedServer(ps, speed=0) as srv:
        assert get(srv.url + "health")[2] == b"ok\n"
        got = [get(srv.url) for _ in range(3)]
        assert [g[2] for g in got] == [p.data for p in ps]
        assert [g[1]["X-Poll-Seq"] for g in got] == ["0", "1", "2"]
        status, headers, _ = get(srv.url)
        assert status == 204 and headers["X-Feed-End"] == "1"
        assert get(srv.url + "?after=0")[2] == ps[1].data   # a client resuming after poll 0


def test_server_loop_and_speed():
    ps = polls(2)
    with FeedServer(ps, speed=0, loop=True) as srv:
        assert [get(srv.url)[2] for _ in range(3)] == [ps[0].data, ps[1].data, ps[0].data]
    with FeedServer(ps, speed=1000.0) as srv:   # 10 s of recording in 10 ms
        first = get(srv.url)[2]
        assert first in (ps[0].data, ps[1].data)


def test_gtfsrt_round_trip_gives_the_same_events():
    compiled = compile_program(PROGRAMS["silent"])
    decl = compiled.program.events["BusGPS"]
    from spatec.events.canonical import to_events
    from spatec.events.sirivm import poll_batch

    data = json.dumps({"request_data": [REC]}).encode()
    a = to_events([poll_batch("a", data, 1000.0)], decl, "Europe/London").events
    b = to_events([gtfsrt_batch("b", encode_gtfsrt(poll_records(data), 1000.0), 1000.0)], decl,
                  "Europe/London").events
    assert list(a["_id"]) == list(b["_id"]) == ["BusGPS:WP-101:2019-10-01T07:59:38Z"]
    for col in ("vehicle", "line", "operator", "ts", "_lo", "_hi"):
        assert a[col].iloc[0] == b[col].iloc[0], col
    assert abs(a["lon"].iloc[0] - b["lon"].iloc[0]) < 1e-5 and abs(a["lat"].iloc[0] - b["lat"].iloc[0]) < 1e-5


def test_gtfsrt_garbage_is_one_reject():
    compiled = compile_program(PROGRAMS["silent"])
    from spatec.events.canonical import to_events

    res = to_events([gtfsrt_batch("x", b"\xff\x00garbage" * 3)], compiled.program.events["BusGPS"])
    assert res.read == res.rejected == 1 and "GTFS-realtime" in res.rejects["reason"].iloc[0]


def test_source_urls():
    s = parse_source("BusGPS=sirivm+http://127.0.0.1:8080/feed")
    assert (s.type, s.kind, s.location) == ("BusGPS", "sirivm", "http://127.0.0.1:8080/feed")
    assert parse_source("BusGPS=gtfsrt+http://127.0.0.1:1/").kind == "gtfs-rt"
    assert parse_source("BusGPS=dir:///data/in").location == "/data/in"
    for bad in ("BusGPS", "BusGPS=ftp://x/", "BusGPS=dir://"):
        with pytest.raises(DataError):
            parse_source(bad)


def test_http_source_spools_then_releases(tmp_path):
    ps = polls()
    with FeedServer(ps, speed=0) as srv:
        src = HttpFeedSource(parse_source("BusGPS=" + srv.source_url()), tmp_path)
        src.restore(None)
        a = src.poll()
        assert len(a) == 1 and len(list(src.spool.glob("*.poll"))) == 1
        # a restart before the commit gets the spooled poll back, then asks for the next one
        again = HttpFeedSource(parse_source("BusGPS=" + srv.source_url()), tmp_path)
        again.restore(src.offset())
        pend = again.pending()
        assert [p.offset for p in pend] == [0]
        b = again.poll()
        assert b[0].server == 1 and b[0].batches[0].table.num_rows == 1
        again.commit(pend + b)
        again.release()
        assert not list(again.spool.glob("*.poll")) and again.offset() == {"seq": 1, "server": 1}


def test_http_source_survives_a_dead_feed(tmp_path):
    src = HttpFeedSource(parse_source("BusGPS=sirivm+http://127.0.0.1:9/"), tmp_path, timeout=1)
    src.restore(None)
    assert src.poll() == [] and src.errors == 1


def test_feed_serve_command_stops_cleanly_on_sigterm(tmp_path):
    import os
    import re
    import signal
    import subprocess
    import sys

    from tests.live.conftest import REPO

    d = tmp_path / "polls"
    d.mkdir()
    for p in polls():
        (d / p.name).write_bytes(p.data)
    proc = subprocess.Popen([sys.executable, "-m", "spatec.cli.main", "feed", "serve", str(d), "--port", "0",
                             "--speed", "0", "--format", "gtfs-rt"], cwd=REPO, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        line = proc.stderr.readline().decode()
        url = re.search(r"on (http://127\.0\.0\.1:\d+/)", line).group(1)
        assert get(url + "health")[2] == b"ok\n"
        status, headers, body = get(url)
        assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
        assert gtfsrt_batch("x", body).table.num_rows == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


def test_directory_source_lists_new_files_in_name_order(tmp_path):
    """Files done, hidden (. or _) and partial (.tmp, .part) are passed over; the rest are read
    once each, in name order, whenever they land."""
    from spatec.feeds.sources import DirSource, parse_source

    d = tmp_path / "in"
    d.mkdir()
    header = "vehicle,line,operator,lon,lat,ts\n"
    for name in ("b.csv", "a.csv", ".c.csv", "_d.csv", "e.csv.tmp", "f.csv.part"):
        (d / name).write_text(header + "V1,1,OP,0.1,52.1,1569916778\n")
    src = DirSource(parse_source(f"BusGPS=dir://{d}"), settle=0.0)
    got = src.poll()
    assert [it.offset for it in got] == ["a.csv", "b.csv"]
    assert all(it.batches[0].table.num_rows == 1 for it in got)
    src.commit(got)
    assert src.poll() == []
    (d / "0.csv").write_text(header)
    (d / "c.csv").write_text(header)
    assert [it.offset for it in src.poll()] == ["0.csv", "c.csv"]
    assert DirSource(parse_source(f"BusGPS=dir://{tmp_path / 'nowhere'}")).poll() == []


def test_directory_source_takes_new_names_from_inotify(tmp_path, monkeypatch, caplog):
    """A watched directory is not listed at every poll: names come from inotify (a file
    renamed in, and one written in place once it is complete), each read once; a listing
    (every LIST_EVERY s) forgets done files that were deleted, and if it finds a file the
    events did not report, the source lists at every poll from then on."""
    import os
    import time

    from spatec.feeds import sources as feeds
    from spatec.feeds.sources import DirSource, parse_source

    d = tmp_path / "in"
    d.mkdir()
    header = "vehicle,line,operator,lon,lat,ts\n"
    row = "V1,1,OP,0.1,52.1,1569916778\n"
    (d / "a.csv").write_text(header + row)
    # names a poll passes over, there from the start: not taken for files inotify missed
    (d / "_SUCCESS").write_text("")
    (d / ".hidden.csv").write_text(header + row)
    (d / "sub").mkdir()
    old_time = time.time() - 5
    for n in ("_SUCCESS", ".hidden.csv", "sub"):
        os.utime(d / n, (old_time, old_time))
    src = DirSource(parse_source(f"BusGPS=dir://{d}"), settle=0.0)
    got = src.poll()
    if src._watch is None:
        pytest.skip("no inotify here")
    assert [it.offset for it in got] == ["a.csv"]
    src.commit(got)
    listed = []
    real = os.listdir
    monkeypatch.setattr(feeds.os, "listdir", lambda p: listed.append(p) or real(p))
    (d / ".b.csv").write_text(header + row)
    (d / ".b.csv").rename(d / "b.csv")
    (d / "c.csv").write_text(header + row + row)
    got = src.poll()
    assert [(it.offset, it.batches[0].table.num_rows) for it in got] == [("b.csv", 1), ("c.csv", 2)]
    assert listed == []                  # from the events alone
    src.commit(got)
    assert src.poll() == [] and listed == []
    # a listing: deleted done files are forgotten
    (d / "a.csv").unlink()
    monkeypatch.setattr(DirSource, "LIST_EVERY", 0.0)
    assert src.poll() == [] and listed
    assert src.done == {"b.csv", "c.csv"}
    assert src._watch is not None           # the passed-over names did not count as missed
    # a file the events missed (here: the watch is blinded), written over a second ago
    monkeypatch.setattr(src._watch, "names", lambda: (set(), set(), False))
    (d / "e.csv").write_text(header + row)
    past = time.time() - 5
    os.utime(d / "e.csv", (past, past))
    with caplog.at_level("WARNING"):
        assert [it.offset for it in src.poll()] == ["e.csv"]
    assert "inotify did not report 1 file" in caplog.text
    assert src._watch is None and not src._watching
    src.commit([it for it in src.poll()])
    (d / "f.csv").write_text(header + row)
    assert [it.offset for it in src.poll()] == ["f.csv"]     # listed at every poll now


def test_directory_watch_wakes_when_a_file_lands(tmp_path):
    """A waiter on a directory returns as soon as a file is renamed into it (inotify), and
    after its timeout when nothing happens; no watch of a missing directory."""
    import threading
    import time

    from spatec.storage.watch import DirWatch

    d = tmp_path / "in"
    d.mkdir()
    w = DirWatch.of([d])
    if w is None:
        pytest.skip("no inotify here")
    try:
        assert w.wait(0.01) is False

        def land():
            time.sleep(0.05)
            (d / ".a.csv").write_text("x\n")
            (d / ".a.csv").rename(d / "a.csv")

        t = threading.Thread(target=land)
        t.start()
        assert w.wait(30.0) is True      # long before the timeout
        t.join()
    finally:
        w.close()
    assert DirWatch.of([tmp_path / "nowhere"]) is None


def test_directory_source_pickles_without_its_watch(tmp_path):
    """A copy of a watched source (a Spark reader sent to a task) carries no inotify
    descriptor of this process: it lists the directory and watches afresh."""
    import pickle

    from spatec.feeds.sources import DirSource, parse_source

    d = tmp_path / "in"
    d.mkdir()
    src = DirSource(parse_source(f"BusGPS=dir://{d}"), settle=0.0)
    src.poll()
    copy = pickle.loads(pickle.dumps(src))
    assert copy._watch is None
    (d / "a.csv").write_text("vehicle,line,operator,lon,lat,ts\nV1,1,OP,0.1,52.1,1569916778\n")
    assert [it.offset for it in copy.poll()] == ["a.csv"]
    src.close()
    copy.close()


def test_watched_directory_waits_for_a_writer_to_close_its_file(tmp_path):
    """A file written in place is not read while its writer has it open, however long it
    stays unchanged between polls (a pause in the writing), and is read as soon as the
    writer closes it, without waiting for ``settle``."""
    import time

    from spatec.feeds.sources import DirSource, parse_source

    d = tmp_path / "in"
    d.mkdir()
    src = DirSource(parse_source(f"BusGPS=dir://{d}"), settle=60.0)
    assert src.poll() == []
    if src._watch is None:
        pytest.skip("no inotify here")
    f = open(d / "a.csv", "w")
    try:
        f.write("vehicle,line,operator,lon,lat,ts\nV1,1,OP,0.1,52.1,1569916778\n")
        f.flush()
        for _ in range(3):                  # unchanged between looks, still open
            assert src.poll() == []
            time.sleep(0.01)
        f.write("V2,1,OP,0.1,52.1,1569916779\n")
    finally:
        f.close()
    got = src.poll()
    assert [(it.offset, it.batches[0].table.num_rows) for it in got] == [("a.csv", 2)]
    src.close()

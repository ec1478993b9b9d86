"""Live input that once stalled or crashed a run (issue 16): empty polls, JSON nested too
deeply, a directory that is not there."""
from __future__ import annotations

import json
import logging

from spatec.cli.main import main
from spatec.feeds.recording import Poll
from spatec.feeds.server import FeedServer
from spatec.feeds.sources import DirSource, HttpFeedSource, parse_source
from spatec.plan.program import compile_program
from spatec.runners.live_local import open_local
from tests.live.conftest import CRS, MIN, PROGRAMS

REC = {"VehicleRef": "WP-101", "LineRef": "401", "OperatorRef": "WP", "Longitude": "0.1245",
       "Latitude": "52.2052"}


def poll(i: int, body: bytes | None = None) -> Poll:
    if body is None:
        recs = [dict(REC, VehicleRef=f"V{k}", RecordedAtTime=1569916778 + 20 * i) for k in range(3)]
        body = json.dumps({"request_data": recs}).encode()
    return Poll(1569916800.0 + 20 * i, f"{1569916800 + 20 * i}_x.json", body)


def test_an_empty_poll_is_passed_not_asked_for_again(tmp_path):
    ps = [poll(0), poll(1, b""), poll(2, b""), poll(3)]
    with FeedServer(ps, speed=0) as srv:
        src = HttpFeedSource(parse_source("BusGPS=" + srv.source_url()), tmp_path)
        src.restore(None)
        got = [src.poll() for _ in range(5)]
    assert [[it.server for it in g] for g in got] == [[0], [1], [2], [3], []]
    assert [sum(b.table.num_rows for it in g for b in it.batches) for g in got] == [3, 0, 0, 3, 0]
    assert srv.requests == 5 and src.ended


def test_until_idle_reads_every_poll_past_empty_ones(tmp_path):
    # a run of empty polls longer than --until-idle: they are input, not idleness
    ps = [poll(0)] + [poll(i, b"") for i in range(1, 30)] + [poll(30)]
    compiled = compile_program(PROGRAMS["stuck"])
    with FeedServer(ps, speed=0) as srv:
        runner = open_local(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{tmp_path / 'alerts'}"],
                            tmp_path / "ck", lateness=2 * MIN, crs=CRS)
        runner.run(trigger=0.05, until_idle=1.0)
    c = runner.state.counts
    assert c["used"] + c["rejected"] + c["late"] == 6 and c["used"] == 6


def test_json_nested_too_deeply_is_a_reject_and_restarts(tmp_path):
    deep = b'{"request_data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with FeedServer([poll(0), poll(1, deep), poll(2)], speed=0) as srv:
        src = HttpFeedSource(parse_source("BusGPS=" + srv.source_url()), tmp_path)
        src.restore(None)
        items = [it for _ in range(3) for it in src.poll()]
    [bad] = items[1].batches
    assert bad.unreadable == [(0, "not a SIRI-VM poll: invalid JSON (nested too deeply)", bad.unreadable[0][2])]
    # not committed: a restart reads the spooled polls again, the deep one included
    again = HttpFeedSource(parse_source("BusGPS=" + srv.source_url()), tmp_path)
    again.restore(src.offset())
    assert [len(it.batches[0].unreadable) for it in again.pending()] == [0, 1, 0]


def test_a_directory_that_is_not_there_is_an_error(tmp_path, capsys):
    missing = tmp_path / "nonexistent"
    rc = main(["live", str(PROGRAMS["stuck"]), "--source", f"BusGPS=dir://{missing}",
               "--checkpoint", str(tmp_path / "ck"), "--until-idle", "1", "--quiet"])
    assert rc == 1
    assert f"no such directory {missing}" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    rc = main(["live", str(PROGRAMS["stuck"]), "--source", f"BusGPS=dir://{tmp_path / 'afile'}",
               "--checkpoint", str(tmp_path / "ck"), "--until-idle", "1", "--quiet"])
    assert rc == 1 and "is a file, not a directory" in capsys.readouterr().err


def test_a_directory_that_goes_away_is_warned_about_once(tmp_path, caplog):
    d = tmp_path / "in"
    d.mkdir()
    src = DirSource(parse_source(f"BusGPS=dir://{d}"))
    assert src.poll() == []
    d.rmdir()
    with caplog.at_level(logging.WARNING, logger="spatec.feeds"):
        assert src.poll() == [] and src.poll() == []
    assert [r.message for r in caplog.records].count(f"{d}: no such directory (any more); "
                                                     "waiting for it to come back") == 1

"""The local live runner against a batch replay of the same events (SPEC §4: batch replay
and live detection over the same events report the same set).

Live runs here read a :class:`FeedServer` one poll per request and stop with
``until_idle``: the input is then over and the runner decides what the end of
input decides, as a replay does at its end; so every composite is compared,
decided by the watermark or by the end. Events the live run found late (behind
the watermark) are in its late output; the replay is run without them.
"""
from __future__ import annotations

import json
import random

import pytest

from spatec.feeds.recording import Poll
from spatec.feeds.server import FeedServer
from spatec.plan.program import compile_program
from spatec.runners.live_local import open_local
from tests.live.conftest import (
    CRS,
    MIN,
    assert_same_alerts,
    batch_alerts,
    feed_events,
    late_ids,
    program_of,
    sink_alerts,
)


def live(compiled, polls, tmp_path, lateness=2 * MIN, fmt="sirivm", name="run", max_polls=1):
    ck, sink = tmp_path / f"{name}-ck", tmp_path / f"{name}-alerts"
    with FeedServer(polls, fmt=fmt, speed=0) as srv:
        runner = open_local(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], ck,
                            lateness=lateness, crs=CRS, max_polls=max_polls)
        runner.run(trigger=0, until_idle=1.5)
    return runner, ck, sink


@pytest.mark.slow
def test_parity_sirivm_all_examples(tmp_path, polls10):
    compiled = compile_program(program_of(tmp_path, "silent", "bunching", "stuck", "hospital"))
    runner, ck, sink = live(compiled, polls10, tmp_path)
    late = late_ids(ck)
    assert runner.state.counts["late"] == len(late) > 0   # 2 min lateness: some fixes come later
    want = batch_alerts(compiled, feed_events(compiled, polls10), exclude=late)
    assert sum(map(len, want.values())) > 1000
    assert_same_alerts(sink_alerts(sink, compiled), want)


@pytest.mark.slow
def test_parity_gtfsrt(tmp_path, polls5):
    compiled = compile_program(program_of(tmp_path, "silent", "stuck", "hospital"))
    runner, ck, sink = live(compiled, polls5, tmp_path, fmt="gtfs-rt")
    want = batch_alerts(compiled, feed_events(compiled, polls5, "gtfs-rt"), exclude=late_ids(ck))
    assert sum(map(len, want.values())) > 100
    assert_same_alerts(sink_alerts(sink, compiled), want)


@pytest.mark.slow
def test_parity_full_hour_nothing_late(tmp_path, recording):
    """The whole hour, 20 polls a batch; with 10 min of lateness no fix of the recording is late
    (the worst is 568 s)."""
    compiled = compile_program(program_of(tmp_path, "silent", "hospital"))
    runner, ck, sink = live(compiled, recording, tmp_path, lateness=10 * MIN, max_polls=20)
    assert runner.state.batches < 100
    assert runner.state.counts["late"] == 0 and not late_ids(ck)
    want = batch_alerts(compiled, feed_events(compiled, recording))
    assert len(want["Silent"]) > 50 and len(want["HospitalToStation"]) > 5
    assert_same_alerts(sink_alerts(sink, compiled), want)


# ------------------------------------------------------------------ late and bad input

def _reshuffle(polls, window: int, seed: int = 1):
    """Records moved between the polls of each window of ``window`` polls, at random."""
    rng = random.Random(seed)
    out = []
    for i in range(0, len(polls), window):
        group = polls[i:i + window]
        recs = [r for p in group for r in json.loads(p.data)["request_data"]]
        rng.shuffle(recs)
        cuts = sorted(rng.randint(0, len(recs)) for _ in range(len(group) - 1))
        parts = [recs[a:b] for a, b in zip([0, *cuts], [*cuts, len(recs)])]
        out += [Poll(p.received, p.name, json.dumps({"request_data": part}).encode()) for p, part in zip(group, parts)]
    return out


@pytest.mark.slow
def test_shuffled_within_lateness_changes_nothing(tmp_path, polls5):
    compiled = compile_program(program_of(tmp_path, "silent", "stuck"))
    lateness = 10 * MIN      # the recording's own lag (< 568 s) plus 30 s of shuffling stays inside it
    shuffled = _reshuffle(polls5, 10)
    assert [p.data for p in shuffled] != [p.data for p in polls5]
    runner, ck, sink = live(compiled, shuffled, tmp_path, lateness=lateness)
    assert runner.state.counts["late"] == 0
    assert_same_alerts(sink_alerts(sink, compiled), batch_alerts(compiled, feed_events(compiled, polls5)))


def test_beyond_lateness_goes_to_late_output(tmp_path, polls5):
    compiled = compile_program(program_of(tmp_path, "silent"))
    polls = [Poll(p.received, p.name, p.data) for p in polls5]
    # hold back a few fixes of the first poll until the last one: 5 min behind, lateness 1 min
    first = json.loads(polls[0].data)["request_data"]
    held, kept = first[:5], first[5:]
    polls[0] = Poll(polls[0].received, polls[0].name, json.dumps({"request_data": kept}).encode())
    last = json.loads(polls[-1].data)["request_data"] + held
    polls[-1] = Poll(polls[-1].received, polls[-1].name, json.dumps({"request_data": last}).encode())
    runner, ck, sink = live(compiled, polls, tmp_path, lateness=1 * MIN)
    late = late_ids(ck)
    held_ids = {f"BusGPS:{r['VehicleRef']}:" for r in held}
    assert {i.rsplit(":", 3)[0] + ":" for i in late} >= held_ids
    assert runner.state.counts["late"] == len(late)
    want = batch_alerts(compiled, feed_events(compiled, polls), exclude=late)
    assert_same_alerts(sink_alerts(sink, compiled), want)


def test_malformed_feed_input_is_counted_never_fatal(tmp_path, polls5):
    compiled = compile_program(program_of(tmp_path, "silent"))
    good = polls5[:40]
    bad_records = [{"VehicleRef": "BAD-1", "Longitude": "east", "Latitude": "52.2",
                    "RecordedAtTime": "2019-10-01T09:01:00+01:00", "LineRef": "1", "OperatorRef": "X"},
                   {"VehicleRef": "", "Longitude": "0.1", "Latitude": "52.2",
                    "RecordedAtTime": "2019-10-01T09:01:00+01:00"},
                   {"VehicleRef": "BAD-2", "Longitude": "0.1", "Latitude": "52.2", "RecordedAtTime": "yesterday"},
                   "not an object"]
    t = good[10].received
    polls = (good[:10] + [Poll(t, "garbage.json", b"{this is not json"),
                          Poll(t, "nolist.json", b'{"foo": 1}'),
                          Poll(t, "badrecords.json", json.dumps({"request_data": bad_records}).encode())]
             + good[10:])
    runner, ck, sink = live(compiled, polls, tmp_path)
    c = runner.state.counts
    assert c["rejected"] - c["duplicates"] == 2 + len(bad_records)
    rejects = [json.loads(x) for x in (ck / "_rejects" / "BusGPS.jsonl").read_text().splitlines()]
    reasons = " | ".join(r["reason"] for r in rejects)
    assert "invalid JSON" in reasons and "no request_data" in reasons and "lon" in reasons
    assert c["duplicates"] > 0 and "duplicate of" not in reasons     # repeats counted, not listed
    want = batch_alerts(compiled, feed_events(compiled, good), exclude=late_ids(ck))
    assert_same_alerts(sink_alerts(sink, compiled), want)


def test_directory_source_reads_each_complete_file_once(tmp_path, polls5):
    compiled = compile_program(program_of(tmp_path, "silent"))
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    runner = open_local(compiled, [f"BusGPS=dir://{incoming}"], [f"jsonl://{sink}"], ck, lateness=2 * MIN, crs=CRS)
    runner.sources[0].settle = 0.0
    half = len(polls5) // 2
    for p in polls5[:half]:
        (incoming / p.name.rsplit("/", 1)[-1]).write_bytes(p.data)
    (incoming / "half-written.json.part").write_bytes(b'{"request_data": [')
    runner.process(runner.poll())
    assert runner.process(runner.poll()) == [] and runner.state.counts["read"] > 0
    read = runner.state.counts["read"]
    # a restart on the same checkpoint reads only the new files
    runner = open_local(compiled, [f"BusGPS=dir://{incoming}"], [f"jsonl://{sink}"], ck, lateness=2 * MIN, crs=CRS)
    runner.sources[0].settle = 0.0
    for p in polls5[half:]:
        (incoming / p.name.rsplit("/", 1)[-1]).write_bytes(p.data)
    runner.process(runner.poll())
    assert runner.state.counts["read"] > read
    runner.finish()
    assert runner.state.counts["read"] == sum(len(json.loads(p.data)["request_data"]) for p in polls5)
    want = batch_alerts(compiled, feed_events(compiled, polls5), exclude=late_ids(ck))
    assert_same_alerts(sink_alerts(sink, compiled), want)

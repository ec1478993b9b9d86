"""The shared ingest of live input (``spatec live`` and ``spatec serve``'s detectors): event
time that cannot be hijacked by one fix far ahead, and ``--lateness auto``."""
from __future__ import annotations

import json
import time

import pytest

from spatec.feeds.ingest import AHEAD, MAX_AHEAD, live_events
from spatec.feeds.lateness import AutoLateness, parse_lateness
from spatec.feeds.recording import Poll, poll_records
from spatec.feeds.sources import Item, feed_batch
from spatec.plan.program import compile_program
from spatec.runners.live_local import LocalLive
from spatec.sinks.alerts import DeliveredLog, SinkSet
from tests.live.conftest import PROGRAMS, minutes


class Polls:
    """A live source over recorded polls, one per :meth:`poll` (as an HTTP feed gives them)."""

    def __init__(self, polls, type_name="BusGPS"):
        self.polls, self.i = list(polls), 0
        self.id = "test@polls"
        self.spec = type("Spec", (), {"type": type_name})()

    def restore(self, offset):
        self.i = int((offset or {}).get("i", 0))

    def offset(self):
        return {"i": self.i}

    def pending(self):
        return []

    def logged(self, offsets):
        return []

    def poll(self):
        if self.i >= len(self.polls):
            return []
        p = self.polls[self.i]
        self.i += 1
        # arrived: now (the wall clock); the poll's own time is in its `ts`
        return [Item(self.id, self.i, p.name, time.time(), [feed_batch("sirivm", p.name, p.data, p.received)])]

    def commit(self, items):
        pass

    def release(self, upto=None):
        pass


def ahead_poll(p: Poll, years: int = 1) -> tuple[Poll, str]:
    doc = json.loads(p.data)
    bad = dict(doc["request_data"][0])
    bad["RecordedAtTime"] = bad["RecordedAtTime"].replace("2019-", f"{2019 + years}-", 1)
    doc["request_data"].append(bad)
    return Poll(p.received, p.name, json.dumps(doc).encode()), bad["VehicleRef"]


def test_a_fix_ahead_of_the_feeds_clock_is_a_reject(recording):
    compiled = compile_program(PROGRAMS["stuck"])
    decl = compiled.program.events["BusGPS"]
    p, vehicle = ahead_poll(minutes(recording, 1)[3])
    item = Item("s", 1, p.name, time.time(), [feed_batch("sirivm", p.name, p.data, p.received)])
    seen: set = set()
    res = live_events(item, decl, compiled.program.timezone, seen)
    n = len(poll_records(p.data))
    assert res.read == n and res.used + res.rejected == n
    ahead = res.rejects[res.rejects["reason"].str.startswith(AHEAD)]
    assert len(ahead) == 1 and vehicle in ahead["record"].iloc[0]
    assert "the feed's own time (2019-10-01T08:" in ahead["reason"].iloc[0]
    assert int(res.events["_hi"].max()) < 1_600_000_000_000_000
    assert not any(i.startswith(f"BusGPS:{vehicle}:2020") for i in seen)       # not remembered as seen
    # without a feed clock (a file), the wall clock is the reference: next year is not ahead, 2060 is
    item.batches[0].clock = None
    assert live_events(item, decl, compiled.program.timezone, set()).rejected == res.rejected - 1
    far, _ = ahead_poll(minutes(recording, 1)[3], years=41)
    item = Item("s", 1, far.name, time.time(), [feed_batch("sirivm", far.name, far.data, None)])
    item.batches[0].clock = None
    got = live_events(item, decl, compiled.program.timezone, set())
    assert "the wall clock when it arrived" in " ".join(got.rejects["reason"])
    assert live_events(item, decl, compiled.program.timezone, set(), max_ahead=None).rejected == 0     # off


def test_live_is_not_hijacked_by_a_fix_from_next_year(tmp_path, recording):
    """The issue's run: with the fix a year ahead, `live` dropped every later fix as late and
    reported every bus silent. Now that fix is a reject and the alerts are those of the run
    without it."""
    compiled = compile_program(PROGRAMS["silent"])
    polls = minutes(recording, 12)
    bad, _ = ahead_poll(polls[40])
    hijacked = polls[:40] + [bad] + polls[41:]

    def run(ps, name):
        sinks = SinkSet([], DeliveredLog(None))
        got = []
        live = LocalLive(compiled, [Polls(ps)], sinks, None, tmp_path / name, lateness=120_000_000,
                         on_batch=lambda items, delivered, trig, t0: got.extend(delivered))
        for _ in range(len(ps)):
            live.process(live.poll())
        return live, {a["id"] for a in got}

    clean, want = run(polls, "clean")
    live, got = run(hijacked, "hijacked")
    assert got == want and len(want) > 0
    assert live.state.counts["late"] == clean.state.counts["late"]
    assert live.state.watermark == clean.state.watermark
    assert live.state.counts["rejected"] == clean.state.counts["rejected"] + 1
    lines = (tmp_path / "hijacked" / "_rejects" / "BusGPS.jsonl").read_text().splitlines()
    assert sum(AHEAD in json.loads(x)["reason"] for x in lines) == 1


@pytest.mark.slow
def test_lateness_auto_grows_to_the_feeds_delays(tmp_path, recording):
    """The recorded hour has fixes that arrive minutes behind the rest (a modem out of reach):
    with 2 minutes of lateness 104 of its fixes are late; `auto` grows to the delays and keeps
    all but the few that were later than every one before them."""
    a = AutoLateness()
    assert a.value == 120_000_000
    assert a.observe(1_000_000_000 - 30_000_000, 1_000_000_000) == 120_000_000        # a 30 s delay
    assert a.observe(1_000_000_000 - 300_000_000, 1_000_000_000) == 330_000_000       # 5 min: +10 %, to 10 s
    assert a.observe(1_000_000_000 - 100_000_000, 1_000_000_000) == 330_000_000       # it never shrinks
    assert AutoLateness(cap=600_000_000).observe(0, 3_600_000_000) == 600_000_000     # at most the cap
    assert parse_lateness("auto") == (120_000_000, True) and parse_lateness("90 s") == (90_000_000, False)
    compiled = compile_program(PROGRAMS["stuck"])
    polls = minutes(recording, 20)

    def late(auto: bool) -> tuple[int, int]:
        live = LocalLive(compiled, [Polls(polls)], SinkSet([], DeliveredLog(None)), tmp_path / f"ck{auto}",
                         tmp_path / f"out{auto}", lateness=120_000_000, auto_lateness=auto, checkpoint_every=3600,
                         background=False)
        for _ in range(len(polls)):
            live.process(live.poll())
        live.checkpoint()
        return live.state.counts["late"], live.lateness

    fixed, _ = late(False)
    auto, grown = late(True)
    assert fixed > 20 and auto < fixed / 3, (fixed, auto)
    assert grown > 120_000_000
    # the lateness reached is kept in the checkpoint: a restart starts from it
    again = LocalLive(compiled, [Polls(polls)], SinkSet([], DeliveredLog(None)), tmp_path / "ckTrue",
                      tmp_path / "outTrue", lateness=120_000_000, auto_lateness=True, background=False)
    assert again.lateness == grown and MAX_AHEAD == 300_000_000


@pytest.fixture(scope="module")
def recording():
    from spatec.feeds.recording import load_recording
    from tests.live.conftest import POLLS

    if not POLLS.exists():
        pytest.skip(f"the Cambridge polls are not at {POLLS}")
    return load_recording(POLLS)

"""Phrases over phrases (SPEC §8) in the local live runner, on the recorded Cambridge feed:
examples/stuck_together (three levels: episodes, pairs, blockages), examples/headway and the
spec's headway_at_stop (calls as events with a source and a time, `successive` between them)
and dwell_nearest_stop live, the polls shuffled within the lateness and read in
batches of 1-3 polls, report the replay's composites, each once; the phrases over phrases
report while the feed plays, not only at its end; a run killed (SIGKILL) and restarted on its
checkpoint delivers each of them once."""
from __future__ import annotations

import pytest

from spatec.feeds.server import FeedServer
from spatec.plan.program import compile_program
from spatec.runners.live_local import open_local
from tests.live.conftest import (
    CRS,
    EXAMPLES,
    MIN,
    assert_same_alerts,
    batch_alerts,
    feed_events,
    late_ids,
    minutes,
    sink_alerts,
)
from tests.live.test_live_local import _reshuffle
from tests.live.test_recovery import kill_after, live_cmd, start

STUCK_TOGETHER = EXAMPLES / "stuck_together" / "stuck_together.spatec"
HEADWAY = EXAMPLES / "headway" / "headway.spatec"


def live(compiled, polls, tmp_path, lateness=2 * MIN, max_polls=3):
    """A live run over ``polls`` to the end of the feed; phrase → alerts delivered before the
    end of input (by the watermark, not by the end)."""
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    early: dict = {}

    def on_batch(items, delivered, _trig, _t):
        if items:
            for a in delivered:
                early[a["phrase"]] = early.get(a["phrase"], 0) + 1

    with FeedServer(polls, speed=0) as srv:
        runner = open_local(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], ck,
                            lateness=lateness, crs=CRS, max_polls=max_polls, on_batch=on_batch)
        runner.run(trigger=0, until_idle=1.5)
    return runner, sink, early


@pytest.mark.slow
def test_stuck_together_live_equals_batch(tmp_path, polls10):
    compiled = compile_program(STUCK_TOGETHER)
    runner, sink, early = live(compiled, _reshuffle(polls10, 6, seed=11), tmp_path)
    late = late_ids(tmp_path / "ck")
    assert runner.state.counts["late"] == len(late)      # 2 min: some fixes come later (the replay has none)
    want = batch_alerts(compiled, feed_events(compiled, polls10), exclude=late)
    assert len(want["StuckEpisode"]) > 100 and len(want["StuckTogether"]) > 50 and len(want["Blockage"]) > 20
    assert_same_alerts(sink_alerts(sink, compiled), want)
    # the derived streams move while the feed plays (each phrase with its producers' frontier)
    assert early.get("StuckTogether", 0) > 10 and early.get("Blockage", 0) > 5


@pytest.mark.slow
def test_headway_live_equals_batch(tmp_path, recording):
    polls = minutes(recording, 25)
    compiled = compile_program(HEADWAY)
    runner, sink, early = live(compiled, _reshuffle(polls, 8, seed=5), tmp_path)
    late = late_ids(tmp_path / "ck")
    assert runner.state.counts["late"] == len(late)
    want = batch_alerts(compiled, feed_events(compiled, polls), exclude=late)
    assert len(want["StationCall"]) > 20 and len(want["Headway"]) > 5
    assert_same_alerts(sink_alerts(sink, compiled), want)
    assert early.get("Headway", 0) > 0


SPEC_EXAMPLES = EXAMPLES.parent.parent / "shared" / "spec" / "examples"


@pytest.mark.slow
@pytest.mark.parametrize("name, phrase", [("headway_at_stop", "Headway"), ("dwell_nearest_stop", "Dwell")])
def test_spec_as_event_and_nearest_live_equal_batch(tmp_path, recording, name, phrase):
    """The spec's examples of SPEC §8's `as event` and §9's `at nearest` live, the polls
    shuffled within the lateness and read in random batches of 1-3: the replay's composites,
    each once, reported while the feed plays."""
    path = SPEC_EXAMPLES / f"{name}.spatec"
    if not path.exists():
        pytest.skip(f"{path} is not there")
    polls = minutes(recording, 15)
    compiled = compile_program(path)
    runner, sink, early = live(compiled, _reshuffle(polls, 8, seed=7), tmp_path)
    late = late_ids(tmp_path / "ck")
    assert runner.state.counts["late"] == len(late)
    want = batch_alerts(compiled, feed_events(compiled, polls), exclude=late)
    assert len(want[phrase]) >= 3
    assert_same_alerts(sink_alerts(sink, compiled), want)
    assert early.get(phrase, 0) > 0


@pytest.mark.slow
def test_phrase_of_a_phrase_alone_runs_its_producers(tmp_path, polls5):
    """``--phrase Blockage``: StuckEpisode and StuckTogether run (Blockage reads them) but only
    Blockage is reported."""
    compiled = compile_program(STUCK_TOGETHER)
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    with FeedServer(polls5, speed=0) as srv:
        runner = open_local(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], ck,
                            lateness=10 * MIN, crs=CRS, phrases=["Blockage"])
        runner.run(trigger=0, until_idle=1.5)
    want = batch_alerts(compiled, feed_events(compiled, polls5))
    assert len(want["Blockage"]) > 5
    got = sink_alerts(sink, compiled)
    assert not got["StuckEpisode"] and not got["StuckTogether"]
    assert_same_alerts({"Blockage": got["Blockage"]}, {"Blockage": want["Blockage"]})


@pytest.mark.slow
def test_killed_and_restarted_delivers_each_derived_alert_once(tmp_path, polls10):
    """SIGKILL at three points while the feed plays, restarted on the same checkpoint: the
    producers' and the consumers' state (derived events in partial matches) come back from
    the checkpoint, and every composite of the replay is delivered exactly once."""
    compiled = compile_program(STUCK_TOGETHER)
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    n = len(polls10)
    with FeedServer(polls10, speed=0) as srv, open(tmp_path / "live.log", "wb") as log:
        for at in (n // 4, n // 2, 3 * n // 4):
            kill_after(start(live_cmd(STUCK_TOGETHER, srv.source_url(), sink, ck), log), srv, at)
        final = start(live_cmd(STUCK_TOGETHER, srv.source_url(), sink, ck, until_idle=1), log)
        assert final.wait(timeout=300) == 0, (tmp_path / "live.log").read_text()
    want = batch_alerts(compiled, feed_events(compiled, polls10), exclude=late_ids(ck))
    assert len(want["StuckTogether"]) > 50
    assert_same_alerts(sink_alerts(sink, compiled), want)

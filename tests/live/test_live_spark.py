"""The Spark live runner (Structured Streaming, transformWithStateInPandas) against a batch
replay of the same events, and across a crash."""
from __future__ import annotations

import pytest

from spatec.feeds.server import FeedServer
from spatec.plan.program import compile_program
from tests.live.conftest import (
    CRS,
    EXAMPLES,
    MIN,
    assert_same_alerts,
    batch_alerts,
    feed_events,
    late_ids,
    program_of,
    sink_alerts,
)
from tests.live.test_live_local import _reshuffle
from tests.live.test_recovery import kill_after, live_cmd, start

STUCK_TOGETHER = EXAMPLES / "stuck_together" / "stuck_together.spatec"
HEADWAY = EXAMPLES / "headway" / "headway.spatec"


@pytest.mark.slow
def test_spark_parity_all_examples(tmp_path, polls10, spark):
    from spatec.runners.spark.live import run_live_spark

    compiled = compile_program(program_of(tmp_path, "silent", "bunching", "stuck", "hospital"))
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    with FeedServer(polls10, speed=0) as srv:
        counts = run_live_spark(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], ck, ck,
                                lateness=2 * MIN, trigger=0.5, until_idle=3, crs=CRS, spark=spark, max_polls=100)
    assert counts["read"] == counts["used"] + counts["rejected"] > 0
    # HospitalToStation's fixes away from the hospital and the station were dropped by a
    # Sedona broadcast index join of each micro-batch against the two places
    assert counts["prefiltered"] == 1
    want = batch_alerts(compiled, feed_events(compiled, polls10), exclude=late_ids(ck))
    assert sum(map(len, want.values())) > 1000
    assert_same_alerts(sink_alerts(sink, compiled), want)


@pytest.mark.slow
def test_spark_runs_and_place_sets_equal_batch(tmp_path, polls5, spark):
    """Runs and a bound place set through the keyed state of the Spark live runner (the
    state codec between micro-batches): the replay's composites, each once."""
    from spatec.runners.spark.live import run_live_spark

    compiled = compile_program(program_of(tmp_path, "episodes", "dwell"))
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    with FeedServer(polls5, speed=0) as srv:
        run_live_spark(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], ck, ck,
                       lateness=2 * MIN, trigger=0.5, until_idle=3, crs=CRS, spark=spark, max_polls=40)
    want = batch_alerts(compiled, feed_events(compiled, polls5), exclude=late_ids(ck))
    assert len(want["StuckEpisode"]) > 50 and len(want["DwellAtStop"]) > 0
    assert_same_alerts(sink_alerts(sink, compiled), want)


@pytest.mark.slow
def test_spark_killed_and_restarted_delivers_each_alert_once(tmp_path, polls5):
    compiled = compile_program(program_of(tmp_path, "silent", "stuck"))
    prog = tmp_path / "silent_stuck.spatec"
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    with FeedServer(polls5, speed=0) as srv, open(tmp_path / "live.log", "wb") as log:
        kill_after(start(live_cmd(prog, srv.source_url(), sink, ck, runner="spark"), log), srv,
                   len(polls5) // 2, timeout=240)
        final = start(live_cmd(prog, srv.source_url(), sink, ck, runner="spark", until_idle=3), log)
        assert final.wait(timeout=400) == 0, (tmp_path / "live.log").read_text()[-5000:]
    want = batch_alerts(compiled, feed_events(compiled, polls5), exclude=late_ids(ck))
    assert sum(map(len, want.values())) > 100
    assert_same_alerts(sink_alerts(sink, compiled), want)


@pytest.mark.slow
def test_spark_phrases_over_phrases_equal_batch(tmp_path, polls10, spark):
    """Phrases over phrases (SPEC §8) on Spark live: examples/stuck_together's three levels
    and examples/headway (an absence between derived events) in one query, the polls shuffled
    within the lateness and read a few at a time; the producers in the query, the phrases over
    phrases on the driver (REFERENCE decision 38): the replay's composites, each once, and the
    derived streams report while the feed plays, not only at its end."""
    from spatec.runners.spark.live import run_live_spark

    prog = tmp_path / "both.spatec"
    prog.write_text(f'include "{STUCK_TOGETHER}"\ninclude "{HEADWAY}"\n')
    compiled = compile_program(prog)
    assert {p.name for p in compiled.plans} >= {"StuckEpisode", "StuckTogether", "Blockage", "StationCall",
                                                 "Headway"}
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    early: dict = {}

    def on_batch(batch_id, delivered, _trig):
        if batch_id is not None:
            for a in delivered:
                early[a["phrase"]] = early.get(a["phrase"], 0) + 1

    with FeedServer(_reshuffle(polls10, 6, seed=11), speed=0) as srv:
        counts = run_live_spark(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], ck, ck,
                                lateness=2 * MIN, trigger=0.5, until_idle=3, crs=CRS, spark=spark, max_polls=10,
                                on_batch=on_batch)
    assert counts["read"] == counts["used"] + counts["rejected"] > 0
    want = batch_alerts(compiled, feed_events(compiled, polls10), exclude=late_ids(ck))
    assert len(want["StuckEpisode"]) > 100 and len(want["StuckTogether"]) > 50 and len(want["Blockage"]) > 20
    assert len(want["StationCall"]) > 5
    assert_same_alerts(sink_alerts(sink, compiled), want)
    assert early.get("StuckTogether", 0) > 10 and early.get("Blockage", 0) > 5

"""The Spark live runner (Structured Streaming, transformWithStateInPandas) against a batch
replay of the same events, and across a crash."""
from __future__ import annotations

import pytest

from spatec.feeds.server import FeedServer
from spatec.plan.program import compile_program
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
from tests.live.test_recovery import kill_after, live_cmd, start


@pytest.mark.slow
def test_spark_parity_all_examples(tmp_path, polls10, spark):
    from spatec.runners.spark.live import run_live_spark

    compiled = compile_program(program_of(tmp_path, "silent", "bunching", "stuck", "hospital"))
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    with FeedServer(polls10, speed=0) as srv:
        counts = run_live_spark(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], ck, ck,
                                lateness=2 * MIN, trigger=0.5, until_idle=3, crs=CRS, spark=spark, max_polls=100)
    assert counts["read"] == counts["used"] + counts["rejected"] > 0
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

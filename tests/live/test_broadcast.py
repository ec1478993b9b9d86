"""Phrases that read a broadcast type (an event type without the phrase's key: rain gauge
readings for a phrase per vehicle), live on both runners, against a batch replay of the same
events (so the two runners report the same)."""
from __future__ import annotations

import csv

import pandas as pd
import pytest

from spatec.feeds.server import FeedServer
from spatec.plan.program import compile_program
from tests.live.conftest import (
    CRS,
    EXAMPLES,
    MIN,
    assert_same_alerts,
    feed_events,
    late_ids,
    sink_alerts,
)

RAIN = EXAMPLES / "wet_weather" / "rain_2019-10-01.csv"
LATENESS = 10 * MIN


def _program(tmp_path):
    p = tmp_path / "wet.spatec"
    p.write_text(f'include "{EXAMPLES / "wet_weather" / "wet_weather.spatec"}"\n\n'
                 "phrase WetBus per vehicle =\n"
                 "    BusGPS -> A and Rain -> R\n"
                 "  where concurrent(A, R) and overlap(A, R)\n"
                 "  within 1 h\n"
                 "  emit vehicle = A.vehicle, gauge = R.gauge, rain = R.mm_h\n")
    return compile_program(p)


def _rain_dir(tmp_path):
    """The gauge readings up to 09:00 (the feed's first minutes are 08:54 on), in a directory."""
    d = tmp_path / "rain"
    d.mkdir()
    with open(RAIN) as f:
        rows = list(csv.reader(f))
    keep = [rows[0]] + [r for r in rows[1:] if r[2] <= "2019-10-01T09:00:00+01:00"]
    with open(d / "rain.csv", "w", newline="") as f:
        csv.writer(f).writerows(keep)
    return d


def _batch(compiled, bus: pd.DataFrame, rain_dir, exclude=()) -> dict:
    from spatec.events.canonical import to_events
    from spatec.events.read import READERS
    from spatec.runners.local import replay_frames
    from spatec.runtime.rows import time_fields
    from spatec.sinks.alerts import alert_json

    decl = compiled.program.events["Rain"]
    rain = to_events(list(READERS["csv"](str(rain_dir / "rain.csv"), [a.name for a in decl.attrs])), decl,
                     compiled.program.timezone).events
    bus = bus[~bus["_id"].isin(set(exclude))].reset_index(drop=True)
    res = replay_frames(compiled, {"BusGPS": bus, "Rain": rain}, crs=CRS)
    return {p.name: alert_json(res.frames[p.name].to_dict("records"), time_fields(p)) for p in compiled.plans}


@pytest.fixture(scope="module")
def wet_polls(recording):
    from tests.live.conftest import minutes

    return minutes(recording, 6)


def test_local_live_broadcast_matches_batch(tmp_path, wet_polls):
    from spatec.runners.live_local import open_local

    compiled = _program(tmp_path)
    rain = _rain_dir(tmp_path)
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    with FeedServer(wet_polls, speed=0) as srv:
        runner = open_local(compiled, [f"BusGPS={srv.source_url()}", f"Rain=dir://{rain}"], [f"jsonl://{sink}"],
                            ck, lateness=LATENESS, crs=CRS)
        runner.sources[1].settle = 0.0
        runner.run(trigger=0, until_idle=1.5)
    want = _batch(compiled, feed_events(compiled, wet_polls), rain, exclude=late_ids(ck))
    assert len(want["WetBus"]) > 50
    assert_same_alerts(sink_alerts(sink, compiled), want)


@pytest.mark.slow
def test_spark_live_broadcast_matches_batch(tmp_path, wet_polls, spark):
    from spatec.runners.spark.live import run_live_spark

    compiled = _program(tmp_path)
    rain = _rain_dir(tmp_path)
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    with FeedServer(wet_polls, speed=0) as srv:
        run_live_spark(compiled, [f"BusGPS={srv.source_url()}", f"Rain=dir://{rain}"], [f"jsonl://{sink}"], ck, ck,
                       lateness=LATENESS, trigger=0.5, until_idle=3, crs=CRS, spark=spark, max_polls=20)
    got = sink_alerts(sink, compiled)
    want = _batch(compiled, feed_events(compiled, wet_polls), rain, exclude=late_ids(ck))
    assert len(want["WetBus"]) > 50
    assert_same_alerts(got, want)

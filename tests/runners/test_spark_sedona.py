"""Apache Sedona on Spark, run for real: leaf space patterns as a broadcast index join
of the events against the places, and two nearby buses of any line as a distance
join with a time bucket as a second key; the rows are the local runner's."""
from __future__ import annotations

import pandas as pd
import pytest
from tests.runners.conftest import BUS, FILTERABLE

from spatec.plan.program import compile_program
from spatec.runners.local import replay_frames
from spatec.runners.replay import ingest
from spatec.runners.spark.batch import replay_frames_spark
from spatec.runners.spark.exchange import EXCHANGE_KEY, phrase_groups, spark_events
from spatec.runners.spark.prefilter import prefilter_regions
from spatec.runners.spark.sedona import executed_plan, sedona_prefilter
from spatec.runners.spark.session import ENGINE_KEY, sedona_missing
from spatec.spatial.crs import choose_crs


#: any two buses, whatever their line, within 50 m at the same time: no key
CLOSE = f'''
include "{BUS}"
phrase CloseBuses =
    BusGPS -> A || BusGPS -> B
  where A.vehicle < B.vehicle and distance(A, B) < 50 m
  emit first = A.vehicle, second = B.vehicle, metres = distance(A, B) / 1 m
phrase SamePlace =
    BusGPS -> A ||= BusGPS -> B
  where A.vehicle < B.vehicle and A.line != B.line
  emit first = A.vehicle, second = B.vehicle
'''

SPATIAL_JOINS = ("RangeJoin", "DistanceJoin", "BroadcastIndexJoin")


@pytest.fixture
def sedona(spark):
    reason = sedona_missing()
    if reason is not None:
        pytest.skip(reason)
    spark.conf.set(EXCHANGE_KEY, "shuffle")
    spark.conf.set(ENGINE_KEY, "sedona-spark")
    yield spark
    spark.conf.unset(EXCHANGE_KEY)
    spark.conf.unset(ENGINE_KEY)


def _compiled(tmp_path, text):
    p = tmp_path / "p.spatec"
    p.write_text(text)
    return compile_program(p)


@pytest.mark.slow
def test_leaf_patterns_as_broadcast_index_join(sedona, slice20, tmp_path):
    c = _compiled(tmp_path, FILTERABLE)
    frames, _ = ingest(c, [("BusGPS", str(slice20))], tmp_path)
    crs = choose_crs(c.program, frames)
    plan = c.plan("CentreThenHospital")
    regions = prefilter_regions(plan, c.program, crs)["BusGPS"]
    df = spark_events(sedona, c.program, "BusGPS", frames["BusGPS"])
    kept = sedona_prefilter(df, regions, crs)
    n = kept.count()
    assert 0 < n < len(frames["BusGPS"])
    assert any(j in executed_plan(kept) for j in SPATIAL_JOINS), executed_plan(kept)
    local = replay_frames(c, frames).frames["CentreThenHospital"]
    got = replay_frames_spark(sedona, c, frames).frames["CentreThenHospital"]
    assert len(local) > 0
    pd.testing.assert_frame_equal(got, local)


@pytest.mark.slow
def test_nearby_buses_of_any_line_as_distance_join(sedona, slice10, tmp_path):
    c = _compiled(tmp_path, CLOSE)
    frames, _ = ingest(c, [("BusGPS", str(slice10))], tmp_path)
    crs = choose_crs(c.program, frames)
    events = {"BusGPS": spark_events(sedona, c.program, "BusGPS", frames["BusGPS"])}
    grouped = phrase_groups(c.plan("CloseBuses"), c.program, events, crs, "sedona-spark", 8)
    assert c.plan("CloseBuses").physical.proximity == 50.0     # the planner's choice (tests/plan)
    groups = grouped.groupBy("_b").count().toPandas()
    assert len(groups) > 1                                  # not one partition
    assert groups["count"].max() < len(frames["BusGPS"])
    text = executed_plan(grouped)
    assert any(j in text for j in SPATIAL_JOINS), text
    local = replay_frames(c, frames)
    got = replay_frames_spark(sedona, c, frames)
    for name in ("CloseBuses", "SamePlace"):
        assert len(local.frames[name]) > 0, name
        pd.testing.assert_frame_equal(got.frames[name], local.frames[name], obj=name)

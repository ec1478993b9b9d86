"""Apache Sedona on Spark, run for real where it pays: a leaf pre-filter against a place
set as a broadcast index join of the events against the places, and two nearby buses of
any line as a distance join with a time bucket as a second key, instead of one group of
every event; the files are the local runner's."""
from __future__ import annotations

import pytest
from tests.runners.conftest import BUS, SHARED, outputs

from spatec.plan.program import compile_program
from spatec.runners.replay import replay_local
from spatec.runners.spark.batch import context
from spatec.runners.spark.session import ENGINE_KEY, sedona_missing

#: any two buses, whatever their line, within 50 m at the same time: no key
CLOSE = f'''
include "{BUS}"
phrase CloseBuses =
    BusGPS -> A || BusGPS -> B
  where A.vehicle < B.vehicle and distance(A, B) < 50 m
  emit first = A.vehicle, second = B.vehicle, metres = distance(A, B) / 1 m
'''


#: a bus at a stop, then at the hospital: each fix must be at one of 1,388 stops or the hospital
AT_STOPS = f'''
include "{BUS}"
places stops = "{SHARED / "datasets" / "cambridge" / "stops.csv"}"
    place point(lon, lat) ± 40 m
phrase StopThenStop per vehicle =
    (BusGPS -> A and at stops -> S) ; (BusGPS -> B and at stops -> T)
  where S.stop_id != T.stop_id
  within 2 min
  emit vehicle = A.vehicle, first = S.name, second = T.name
'''


@pytest.fixture
def sedona(spark):
    reason = sedona_missing()
    if reason is not None:
        pytest.skip(reason)
    spark.conf.set(ENGINE_KEY, "sedona-spark")
    yield spark
    spark.conf.unset(ENGINE_KEY)


def _run(spark, c, inputs, out):
    from spatec.exec.executor import replay
    from spatec.runners.spark.executor import SparkExecutor

    ex = SparkExecutor(spark)
    got = replay(context(spark, c, inputs, out), ex)
    return got, ex.joins


@pytest.mark.slow
def test_place_set_pre_filter_as_broadcast_index_join(sedona, slice10, tmp_path):
    p = tmp_path / "stops.spatec"
    p.write_text(AT_STOPS)
    c = compile_program(p)
    assert len(dict(c.plan("StopThenStop").physical.prefilter)["BusGPS"]) >= 1
    inputs = [("BusGPS", str(slice10))]
    got, joins = _run(sedona, c, inputs, tmp_path / "spark")
    assert "BroadcastIndexJoin" in joins, joins
    want = replay_local(c, inputs, tmp_path / "local")
    assert sum(want.counts.values()) > 0
    assert outputs(got) == outputs(want)


@pytest.mark.slow
def test_nearby_buses_of_any_line_as_distance_join(sedona, slice10, tmp_path):
    p = tmp_path / "close.spatec"
    p.write_text(CLOSE)
    c = compile_program(p)
    assert c.plan("CloseBuses").physical.proximity == 50.0     # the planner's choice (tests/plan)
    inputs = [("BusGPS", str(slice10))]
    got, joins = _run(sedona, c, inputs, tmp_path / "spark")
    assert {"DistanceJoin", "RangeJoin", "BroadcastIndexJoin"} & set(joins), joins     # (small: broadcast)
    want = replay_local(c, inputs, tmp_path / "local")
    assert want.counts["CloseBuses"] > 0
    assert outputs(got) == outputs(want)

"""The Spark batch runner gives the local runner's rows, byte for byte, on every example."""
from __future__ import annotations

from pathlib import Path

import pytest

from spatec.errors import SpatecError, UnsupportedError
from spatec.plan.program import compile_program
from spatec.runners.replay import replay_local
from spatec.runners.spark.batch import replay_spark
from tests.runners.conftest import REPO, SHARED

RAIN = REPO / "examples" / "wet_weather" / "rain_2019-10-01.csv"
ROADWORKS = REPO / "examples" / "roadworks" / "roadworks_2019-10-01.csv"

PROGRAMS = sorted((SHARED / "spec" / "examples").glob("*.spatec")) + sorted((REPO / "examples").glob("*/*.spatec"))
#: declared types → the extra inputs the examples ship
EXTRA = {"Rain": RAIN, "RoadWorks": ROADWORKS}


def _compile(path: Path):
    try:
        return compile_program(path)
    except UnsupportedError as e:
        # a construct checked by the front end with no back end yet
        pytest.skip(f"{path.name}: {e}")
    except SpatecError as e:
        pytest.skip(f"{path.name} does not check: {str(e).splitlines()[0]}")


def _inputs(compiled, bus: Path):
    inputs = [("BusGPS", str(bus))]
    for t, p in EXTRA.items():
        if t in compiled.program.events:
            inputs.append((t, str(p)))
    return inputs


def _files(out: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))}


def assert_same_outputs(spark, program: Path, bus: Path, tmp_path: Path):
    compiled = _compile(program)
    inputs = _inputs(compiled, bus)
    local = replay_local(compiled, inputs, tmp_path / "local")
    # (phrases over phrases too: producers in Spark tasks, the phrases over them on the driver)
    on_spark = replay_spark(compiled, inputs, tmp_path / "spark", spark=spark)
    assert set(on_spark.frames) == set(local.frames)
    for name, df in local.frames.items():
        assert list(on_spark.frames[name].columns) == list(df.columns), name
        assert len(on_spark.frames[name]) == len(df), name
    a, b = _files(tmp_path / "local"), _files(tmp_path / "spark")
    assert a.keys() == b.keys()
    for name in a:
        # sinks write rows sorted by (lo, hi, id): equal bytes is equal sorted rows
        assert a[name] == b[name], name
    return local


@pytest.mark.slow
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_spark_matches_local_on_the_cambridge_hour(spark, hour_path, program, tmp_path):
    if program.parent.name == "off_route":      # (its GTFS feed built from the data set, as its README says)
        from tests.datasets.test_examples import built_off_route

        (tmp_path / "feed").mkdir()
        program = built_off_route(tmp_path / "feed")
    local = assert_same_outputs(spark, program, hour_path, tmp_path)
    if program.stem == "hospital_to_station":
        assert local.counts["HospitalToStation"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_phrases_over_phrases_on_spark_match_local(spark, slice20, tmp_path, fmt):
    """examples/stuck_together (three levels) and examples/headway (an absence between derived
    events, decided by the producer's frontier) on 20 minutes: Spark's files are the local
    runner's, byte for byte (JSON lines: the tasks' parts and the driver's merged; GeoParquet:
    the same rows); a phrase over phrases asked for alone runs its producers and writes itself."""
    import pandas as pd

    for name in ("stuck_together", "headway"):
        compiled = compile_program(REPO / "examples" / name / f"{name}.spatec")
        inputs = [("BusGPS", str(slice20))]
        out_l, out_s = tmp_path / f"{name}-local-{fmt}", tmp_path / f"{name}-spark-{fmt}"
        local = replay_local(compiled, inputs, out_l, fmt=fmt)
        replay_spark(compiled, inputs, out_s, spark=spark, fmt=fmt)
        consumer = [p.name for p in compiled.plans if p.physical.derived][0]
        assert local.counts[consumer] > 0, name
        for p in compiled.plans:
            a, b = out_l / f"{p.name}.{fmt}", out_s / f"{p.name}.{fmt}"
            if fmt == "jsonl":
                assert a.read_bytes() == b.read_bytes(), (name, p.name)
            else:
                pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))
    if fmt != "jsonl":
        return
    alone = replay_spark(compiled, inputs, tmp_path / "alone", spark=spark, phrases=["Headway"])
    assert sorted(alone.frames) == ["Headway"]
    assert (tmp_path / "alone" / "Headway.jsonl").read_bytes() == (tmp_path / "headway-local-jsonl" /
                                                                     "Headway.jsonl").read_bytes()

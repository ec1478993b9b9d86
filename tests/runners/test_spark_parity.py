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
        # runs, phrases over phrases, place sets: checked by the front end, no back end yet
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
    local = assert_same_outputs(spark, program, hour_path, tmp_path)
    if program.stem == "hospital_to_station":
        assert local.counts["HospitalToStation"] > 0

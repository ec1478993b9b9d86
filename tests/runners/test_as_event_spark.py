"""SPEC §8's `as event` and §9's `at nearest` on Spark batch, through the public interface
(`prog.replay_spark`, `spatec replay --runner spark`), whatever the Spark batch execution
becomes: the spec's headway_at_stop and dwell_nearest_stop, and examples/headway and
examples/dwell_at_stops, on 20 minutes of the Cambridge hour give the local runner's
composites (ids, stamps, bound stop, emit fields), and the headways are consecutive calls by
arrival."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from spatec.api import compile as compile_program
from spatec.cli.main import main
from tests.runners.conftest import REPO, SHARED

PROGRAMS = [SHARED / "spec" / "examples" / "headway_at_stop.spatec",
            SHARED / "spec" / "examples" / "dwell_nearest_stop.spatec",
            REPO / "examples" / "headway" / "headway.spatec",
            REPO / "examples" / "dwell_at_stops" / "dwell_at_stops.spatec"]


def _rows(frame: pd.DataFrame) -> list:
    """A result frame as comparable records (geometry and times as text)."""
    out = []
    for r in frame.to_dict("records"):
        out.append({k: (str(v) if not isinstance(v, (int, float, str, type(None))) else v) for k, v in r.items()})
    return sorted(out, key=lambda r: r["id"])


@pytest.mark.slow
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_replay_spark_gives_the_local_composites(spark, slice20, path):
    if not path.exists():
        pytest.skip(f"{path} is not there")
    prog = compile_program(path)
    local = prog.replay_local({"BusGPS": str(slice20)})
    on_spark = prog.replay_spark({"BusGPS": str(slice20)}, spark=spark)
    assert sorted(on_spark) == sorted(local)
    for name in local:
        assert len(local[name]) > 0, name
        assert _rows(on_spark[name]) == _rows(local[name]), name
    for name, frame in local.items():
        if "first_arrived" in frame:
            # the calls of a line and direction, each followed by one call at most
            assert not frame.duplicated(["line", "direction", "first_arrived"]).any()
        if "stop" in frame:
            # one row per dwell (a run is bound to one stop: the nearest)
            assert not frame["events"].map(lambda e: e["R"]).duplicated().any()


@pytest.mark.slow
def test_cli_runner_spark_writes_the_local_files(slice20, tmp_path, spark):
    path = SHARED / "spec" / "examples" / "headway_at_stop.spatec"
    if not path.exists():
        pytest.skip(f"{path} is not there")
    for runner in ("local", "spark"):
        assert main(["replay", str(path), "--runner", runner, "--events", f"BusGPS={slice20}",
                     "--out", str(tmp_path / runner), "--quiet"]) == 0
    for name in ("StopCall.jsonl", "Headway.jsonl"):
        a, b = (tmp_path / "local" / name).read_bytes(), (tmp_path / "spark" / name).read_bytes()
        assert a == b, name
    rows = [json.loads(x) for x in (tmp_path / "spark" / "Headway.jsonl").read_text().splitlines()]
    assert rows and all(r["minutes"] >= 0 for r in rows)

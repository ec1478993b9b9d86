"""The Python API: GeoDataFrames (hull geometry, tz-aware times) from every runner, the same
as the GeoParquet output; rejects counted, never dropped; its docstring examples run."""
from __future__ import annotations

import doctest
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest

import spatec
import spatec.api
from spatec.datasets import synth

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "examples" / "stuck" / "stuck.spatec"


def test_docstring_examples(monkeypatch):
    monkeypatch.chdir(REPO)          # the examples name examples/ as a user in the repo would
    result = doctest.testmod(spatec.api)
    assert result.attempted > 5 and result.failed == 0


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    df = synth.synthetic_trace(6, 3600, seed=11, bad_fraction=0.02)
    path = tmp_path_factory.mktemp("api") / "trace.csv"
    df.to_csv(path, index=False)
    return path, df


def check_frame(gdf, plan_fields):
    assert isinstance(gdf, gpd.GeoDataFrame)
    assert gdf.geometry.name == "hull" and gdf.crs.to_epsg() == 4326
    assert set(gdf.geom_type) <= {"Polygon"}
    for c in ("lo", "hi", *plan_fields):
        assert isinstance(gdf[c].dtype, pd.DatetimeTZDtype), c
    assert (gdf["lo"] <= gdf["hi"]).all()


def test_local_results_are_geodataframes_with_rejects(trace):
    path, df = trace
    prog = spatec.compile(PROGRAM)
    out = prog.replay_local({"BusGPS": str(path)})
    assert list(out) == ["Stuck", "StuckOnRoad"]
    for name in out:
        check_frame(out[name], ("since", "until"))
        assert str(out[name]["lo"].dt.tz) == "Europe/London"
    bad = sum(len(v) for v in df.attrs["bad_rows"].values())
    assert bad > 0 and out.rejected == bad == len(out.rejects)
    assert out.read == len(df) == out.used + out.rejected
    assert set(out.rejects.columns) >= {"type", "file", "row", "reason", "record"}
    assert out.rejects["reason"].str.len().gt(0).all()
    # a pandas frame of the same rows: the same composites, the same rejects
    again = prog.replay_local({"BusGPS": pd.read_csv(path, dtype=str)}, tz="UTC")
    assert str(again["Stuck"]["lo"].dt.tz) == "UTC"
    assert again["Stuck"]["id"].tolist() == out["Stuck"]["id"].tolist()
    assert (again["Stuck"]["lo"] == out["Stuck"]["lo"]).all()       # the same instants
    assert again.rejected == out.rejected


def test_the_same_as_the_geoparquet_output(trace, tmp_path):
    from spatec.cli.main import main

    path, _ = trace
    assert main(["replay", str(PROGRAM), "--runner", "local", "--events", f"BusGPS={path}",
                 "--out", str(tmp_path), "--format", "parquet", "--quiet"]) == 0
    api = spatec.compile(PROGRAM).replay_local({"BusGPS": str(path)}, tz="UTC")["Stuck"]
    pq = gpd.read_parquet(tmp_path / "Stuck.parquet")
    assert pq.geometry.name == "hull"
    assert pq["id"].tolist() == api["id"].tolist()
    for c in ("lo", "hi", "since", "until"):
        assert (pq[c] == api[c]).all(), c
    # (the file says OGC:CRS84, lon/lat: the coordinates EPSG:4326 has in GeoPandas)
    assert pq.set_crs(api.crs, allow_override=True).geometry.geom_equals_exact(api.geometry, tolerance=1e-9).all()
    assert pq["vehicle"].tolist() == api["vehicle"].tolist()


@pytest.mark.slow
def test_spark_gives_the_same_geodataframes(spark, trace):
    path, df = trace
    prog = spatec.compile(PROGRAM)
    local = prog.replay_local({"BusGPS": str(path)})
    raw = pd.read_csv(path, dtype=str)
    on_spark = prog.replay_spark({"BusGPS": spark.createDataFrame(raw)}, spark=spark)
    assert list(on_spark) == list(local)
    for name in local:
        check_frame(on_spark[name], ("since", "until"))
        pd.testing.assert_frame_equal(pd.DataFrame(on_spark[name]), pd.DataFrame(local[name]))
    assert on_spark.rejected == local.rejected > 0
    assert on_spark.read == local.read == len(df)
    # the Spark DataFrames' API keeps its rejects too
    lazy = prog.replay(spark, {"BusGPS": spark.createDataFrame(raw)})
    assert lazy.rejected == local.rejected and sorted(lazy) == sorted(local)

"""Spark runner features: leaf pre-filter parity, the CLI, the Python API, a real cluster."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from spatec.exec.prefilter import prefilter_regions
from spatec.plan.program import compile_program
from spatec.runners.replay import replay_local
from tests.runners.conftest import BUS, FILTERABLE, REPO, SHARED, on_spark, outputs

SPATEC = Path(sys.executable).parent / "spatec"


def test_prefilter_only_where_every_leaf_has_a_region_and_no_successive(tmp_path):
    p = tmp_path / "f.spatec"
    p.write_text(FILTERABLE)
    c = compile_program(p)
    regions = prefilter_regions(c.plan("CentreThenHospital"), c.program, "EPSG:32631")
    assert set(regions["BusGPS"]) == {"centre", "hospital", "station_300m"}
    # the absence's X is at the hospital or the station: an event elsewhere cannot be one
    c = compile_program(SHARED / "spec" / "examples" / "hospital_to_station.spatec")
    assert set(prefilter_regions(c.plan("HospitalToStation"), c.program, "EPSG:32631")["BusGPS"]) == \
        {"hospital", "station"}
    # successive; an absence of any fix (Silent); a leaf with no place (Bunching)
    for prog in ("stuck", "silent_and_bunching"):
        c = compile_program(SHARED / "spec" / "examples" / f"{prog}.spatec")
        for plan in c.plans:
            assert prefilter_regions(plan, c.program, "EPSG:32631") == {}, plan.name


@pytest.fixture(params=["on", "off"])
def prefilter(request):
    """The leaf pre-filter on and off (``spark.spatec.prefilter``): the same files."""
    return {"spark.spatec.prefilter": request.param}


@pytest.mark.slow
def test_prefilter_gives_the_same_rows(spark, prefilter, slice20, tmp_path):
    p = tmp_path / "f.spatec"
    p.write_text(FILTERABLE)
    c = compile_program(p)
    inputs = [("BusGPS", str(slice20))]
    local = outputs(replay_local(c, inputs, tmp_path / "local"))
    assert len(local["CentreThenHospital.jsonl"]) > 0
    assert outputs(on_spark(spark, c, inputs, tmp_path / "spark", prefilter)) == local


@pytest.mark.slow
def test_prefilter_of_an_absence_gives_the_same_rows(spark, prefilter, hour_path, tmp_path):
    """HospitalToStation on the Cambridge hour: its X (a fix at the hospital or the station
    between A and B) pre-filtered with A's and B's places; the same journeys as without the
    pre-filter and as the local runner, among them some an X between cuts short."""
    c = compile_program(SHARED / "spec" / "examples" / "hospital_to_station.spatec")
    inputs = [("BusGPS", str(hour_path))]
    local = replay_local(c, inputs, tmp_path / "local")
    assert local.counts["HospitalToStation"] >= 10
    assert outputs(on_spark(spark, c, inputs, tmp_path / "spark", prefilter)) == outputs(local)
    # without the absence, every fix at the hospital before the station starts a journey:
    # the X between decides which are kept
    src = SHARED / "spec" / "examples"
    (tmp_path / "bus.spatec").write_text((src / "bus.spatec").read_text())
    text = (src / "hospital_to_station.spatec").read_text()
    line = "    ; not (BusGPS -> X and (at hospital or at station))\n"
    assert line in text
    (tmp_path / "free.spatec").write_text(text.replace(line, ""))
    free = compile_program(tmp_path / "free.spatec")
    assert replay_local(free, inputs, tmp_path / "free").counts["HospitalToStation"] > \
        local.counts["HospitalToStation"]


@pytest.mark.slow
def test_cli_end_to_end_with_rejects_and_map(slice10, tmp_path):
    bad = tmp_path / "with_bad_rows.csv"
    df = pd.read_csv(slice10)
    df.loc[3, "lon"] = "not-a-number"
    df.loc[5, "ts"] = "yesterday"
    df.to_csv(bad, index=False)
    out, html = tmp_path / "out", tmp_path / "map.html"
    r = subprocess.run([str(SPATEC), "replay", str(SHARED / "spec" / "examples" / "silent_and_bunching.spatec"),
                        "--events", f"BusGPS={bad}", "--out", str(out), "--runner", "spark",
                        "--master", "local[2]", "--map", str(html), "--quiet"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "Silent.jsonl").exists() and (out / "Bunching.jsonl").exists()
    rejects = list((out / "_rejects").glob("*.jsonl"))
    assert rejects and sum(len(p.read_text().splitlines()) for p in rejects) == 2
    assert html.exists() and "Bunching" in html.read_text()


@pytest.mark.slow
def test_python_api(spark, slice10, tmp_path):
    import spatec

    prog = spatec.compile(SHARED / "spec" / "examples" / "silent_and_bunching.spatec")
    raw = pd.read_csv(slice10, dtype=str)
    bus = spark.createDataFrame(raw[["vehicle", "line", "operator", "lon", "lat", "ts"]])
    out = prog.replay(spark, {"BusGPS": bus})
    local = prog.replay_local({"BusGPS": raw})
    got = out["Bunching"].toPandas()
    assert [f.name for f in out["Bunching"].schema.fields][:6] == ["phrase", "id", "lo", "hi", "hull", "events"]
    assert dict(out["Bunching"].dtypes)["lo"] == "timestamp"
    assert dict(out["Bunching"].dtypes)["events"] == "map<string,string>"
    want = local["Bunching"]
    assert len(got) == len(want) > 0
    assert sorted(got["id"]) == sorted(want["id"])
    got = got.set_index("id").loc[want["id"]]
    assert (got["events"].map(dict).tolist()) == want["events"].tolist()
    # Spark's session time zone is UTC: its naive timestamps are the instants of the local runner's
    assert got["lo"].dt.tz_localize("UTC").tolist() == want["lo"].dt.tz_convert("UTC").tolist()


@pytest.mark.slow
def test_a_spark_dataframe_is_read_where_its_partitions_are(spark, slice10, monkeypatch):
    """A Spark DataFrame given as an input is typed in Spark tasks, a split per partition
    (never collected: ``toArrow`` and ``toPandas`` fail here), in partition order: the
    composites of the local runner over the same rows in the same order; a copy in a later
    partition and a bad row are rejects with the local runner's reasons, naming their
    partition."""
    import spatec
    from pyspark.sql import DataFrame

    prog = spatec.compile(SHARED / "spec" / "examples" / "silent_and_bunching.spatec")
    raw = pd.read_csv(slice10, dtype=str)[["vehicle", "line", "operator", "lon", "lat", "ts"]]
    bad = raw.iloc[[3]].assign(lat="north")
    raw = pd.concat([raw, raw.iloc[[5]], bad], ignore_index=True)      # a copy of row 5, then a bad row
    chunks = [raw.iloc[a:a + len(raw) // 4 + 1] for a in range(0, len(raw), len(raw) // 4 + 1)]
    bus = spark.createDataFrame(chunks[0])
    for c in chunks[1:]:
        bus = bus.union(spark.createDataFrame(c))
    assert bus.rdd.getNumPartitions() >= 4
    local = prog.replay_local({"BusGPS": raw})

    def collected(*_a, **_k):
        raise AssertionError("the input was collected to the driver")

    monkeypatch.setattr(DataFrame, "toArrow", collected)
    monkeypatch.setattr(DataFrame, "toPandas", collected)
    got = prog.replay_spark({"BusGPS": bus}, spark=spark)
    monkeypatch.undo()
    for name in local:
        pd.testing.assert_frame_equal(pd.DataFrame(got[name]), pd.DataFrame(local[name]))
    assert got.read == local.read == len(raw) and got.rejected == local.rejected == 2
    lr, gr = local.rejects, got.rejects
    assert sorted(lr["reason"]) == sorted(gr["reason"])
    assert any(r.startswith("duplicate") for r in gr["reason"])
    assert all(" partition " in f for f in gr["file"])


@pytest.fixture
def standalone(tmp_path):
    """A Spark standalone master and two workers on 127.0.0.1, each with its own work and
    local directories, started by scripts/local_cluster.sh (the pip package's
    sbin/spark-daemon.sh) and stopped by it whatever happens."""
    script = REPO / "scripts" / "local_cluster.sh"
    home = tmp_path / "cluster"
    env = {**os.environ, "SPATEC_WORKER_MEMORY": "2g"}
    try:
        r = subprocess.run(["bash", str(script), "start", str(home)], capture_output=True, text=True,
                           timeout=300, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        yield r.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(script), "stop", str(home)], capture_output=True, timeout=120, env=env)


#: Bunching keyed by its line (inferred), Silent per vehicle, any two buses within 50 m
#: whatever their line (no key), Stuck's episodes and the pairs of buses stuck together
#: (a phrase over a phrase)
CLUSTER_PROGRAM = f'''
include "{SHARED / "spec" / "examples" / "silent_and_bunching.spatec"}"
include "{SHARED / "spec" / "examples" / "stuck_together.spatec"}"
phrase CloseBuses =
    BusGPS -> A || BusGPS -> B
  where A.vehicle < B.vehicle and distance(A, B) < 50 m
  emit first = A.vehicle, second = B.vehicle, metres = distance(A, B) / 1 m
'''


@pytest.mark.slow
def test_standalone_cluster_matches_local(standalone, slice10, tmp_path):
    """A two-worker cluster, each worker with its own work and local directories, the path a
    real cluster gets: the events through Spark's shuffle (``spark.spatec.exchange=shuffle``,
    no folder shared for them), each phrase written by the executors as a folder of parts
    (``spark.spatec.output=dataset``): the parts in order are the local runner's file, byte
    for byte. (Merged outputs and the files exchange: test_executors_agree.)"""
    prog = tmp_path / "cluster.spatec"
    prog.write_text(CLUSTER_PROGRAM)
    runs = {"local": ["--runner", "local"],
            "dataset": ["--master", standalone, "--conf", "spark.spatec.output=dataset",
                        "--conf", "spark.spatec.exchange=shuffle"]}
    outs = {}
    for name, args in runs.items():
        out = tmp_path / name
        cmd = [str(SPATEC), "replay", str(prog), "--events", f"BusGPS={slice10}", "--out", str(out),
               "--quiet", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        got = {}
        for p in sorted(out.glob("*.jsonl")):
            got[p.name] = p.read_bytes()
        for d in sorted(q for q in out.iterdir() if q.is_dir() and not q.name.startswith(("_", "."))):
            parts = sorted(d.glob("part-*.jsonl"))
            got[f"{d.name}.jsonl"] = b"".join(p.read_bytes() for p in parts)
        outs[name] = got
    assert (tmp_path / "dataset" / "Silent").is_dir() and list((tmp_path / "dataset" / "Silent").glob("part-*"))
    for name in runs:
        assert outs[name] == outs["local"], name
    for f in ("Bunching.jsonl", "CloseBuses.jsonl", "StuckTogether.jsonl"):
        assert len(outs["local"][f]) > 0, f


SUCCESSIVE_PER_LINE = f'''
include "{BUS}"
phrase NextOnLine per line =
    BusGPS -> A ; BusGPS -> B
  where successive(A, B)
  within 10 min
  emit vehicle = A.vehicle, line = A.line
'''


def test_successive_sees_the_source_across_per_partitions(spark, tmp_path):
    """`per line` while a bus changes line: `successive` still means the bus's next fix
    (SPEC §4: nothing of that type and source between), on both runners."""
    p = tmp_path / "s.spatec"
    p.write_text(SUCCESSIVE_PER_LINE)
    csv = tmp_path / "bus.csv"
    rows = [("v1", "a", 0), ("v1", "b", 20), ("v1", "a", 40), ("v1", "a", 60), ("v2", "a", 10)]
    pd.DataFrame([{"vehicle": v, "line": l, "operator": "X", "lon": 0.12, "lat": 52.2,
                   "ts": 1569920000 + s} for v, l, s in rows]).to_csv(csv, index=False)
    c = compile_program(p)
    inputs = [("BusGPS", str(csv))]
    local = replay_local(c, inputs, tmp_path / "local")
    # only v1's 40 s → 60 s: 0 s → 40 s has the line-b fix between them
    assert [dict(e) for e in local.frames["NextOnLine"]["events"]] == [{"A": "BusGPS:v1:2019-10-01T08:54:00Z",
                                                                         "B": "BusGPS:v1:2019-10-01T08:54:20Z"}]
    assert outputs(on_spark(spark, c, inputs, tmp_path / "spark")) == outputs(local)


@pytest.mark.slow
@pytest.mark.parametrize("program", ["silent_and_bunching", "stuck", "wet_weather"])
def test_spark_matches_local(spark, slice10, hour_path, program, tmp_path):
    """Broadcast types (rain), keys inferred from equalities (bunching), successive
    chains and absences: the Spark executor writes the local runner's files, cut into
    small groups and stretches of time too (``bucketRows``, ``timeWindow``)."""
    extra, bus = [], slice10
    if program == "wet_weather":
        bus = hour_path       # its two journeys are in the second half hour
        path = REPO / "examples" / "wet_weather" / "wet_weather.spatec"
        extra = [("Rain", str(REPO / "examples" / "wet_weather" / "rain_2019-10-01.csv"))]
    else:
        path = SHARED / "spec" / "examples" / f"{program}.spatec"
    c = compile_program(path)
    inputs = [("BusGPS", str(bus))] + extra
    local = replay_local(c, inputs, tmp_path / "local")
    assert sum(local.counts.values()) > 0
    small = {"spark.spatec.bucketRows": "500", "spark.spatec.timeWindow": "600", "spark.spatec.ingestRows": "2000"}
    for name, conf in (("spark", {}), ("small", small)):
        assert outputs(on_spark(spark, c, inputs, tmp_path / name, conf)) == outputs(local), name


@pytest.mark.slow
def test_parquet_output_is_merged_from_the_tasks_parts(spark, slice10, tmp_path):
    """GeoParquet like JSON lines: the tasks write their parts, the driver puts them end to
    end (never holding the composites); the files hold the local runner's table."""
    import pyarrow.parquet as pq

    from spatec.exec.commit import WrittenFrames

    c = compile_program(REPO / "bench" / "three_phrases.spatec")
    inputs = [("BusGPS", str(slice10))]
    got = on_spark(spark, c, inputs, tmp_path / "spark", fmt="parquet")
    want = replay_local(c, inputs, tmp_path / "local", fmt="parquet")
    assert isinstance(got.frames, WrittenFrames)
    assert got.counts == want.counts and sum(want.counts.values()) > 0
    for name, path in want.paths.items():
        a, b = pq.read_table(got.paths[name]), pq.read_table(path)
        assert a.schema.equals(b.schema, check_metadata=True), (name, a.schema.metadata, b.schema.metadata)
        assert a.equals(b), name
        assert len(got.frames[name]) == want.counts[name]      # read back from the file

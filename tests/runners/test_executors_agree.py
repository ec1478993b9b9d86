"""Every Executor writes the same files: the in-process executor (``--runner local``, the
reference) and the Spark executor, on small generated inputs cut into many splits (several
files, Parquet row groups, small splits and groups), with copies across files and bad rows,
under each exchange (``files``, ``shuffle``) and output layout (``merged``, ``dataset``).

The program has a phrase of every kind the Spark executor runs differently: keyed
(HospitalToStation, Silent), runs (StuckEpisode), keyless and local in time (Bunching: cut
into stretches of time, or by Sedona's distance join), and phrases over phrases
(StuckTogether over StuckEpisode: a stage of its own, keyless)."""
from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.plan.program import compile_program
from spatec.runners.replay import replay_local
from tests.runners.conftest import REPO, on_spark, outputs

PROGRAM = f'''
include "{REPO / "examples" / "episodes" / "episodes.spatec"}"

phrase StuckTogether =
    StuckEpisode -> S1 ||= StuckEpisode -> S2
  where S1.vehicle < S2.vehicle
  within 3 h
  emit first = S1.vehicle, second = S2.vehicle, since = S1.since

phrase HospitalToStation per vehicle =
    (BusGPS -> A and at hospital) ; not (BusGPS -> X and (at hospital or at station))
    ; (BusGPS -> B and at station)
  within 40 min
  emit vehicle = A.vehicle, left = A.t, arrived = B.t

phrase Silent per vehicle =
    BusGPS -> A ; not BusGPS -> X within 3 min
  emit vehicle = A.vehicle, last_seen = A.t

phrase Bunching =
    BusGPS -> A || BusGPS -> B
  where A.line == B.line and A.vehicle < B.vehicle and distance(A, B) < 100 m
  emit line = A.line, first = A.vehicle, second = B.vehicle
'''

#: Where a bus may be: the hospital, the station, the centre, and a road between.
ANCHORS = [(0.14491, 52.17590), (0.13610, 52.19300), (0.12415, 52.20520), (0.1400, 52.1850)]
T0 = 1569916800
COLUMNS = ["vehicle", "line", "operator", "direction", "lon", "lat", "ts"]


@st.composite
def traces(draw):
    """A few buses, each a sequence of stays (an anchor, some fixes 10-40 s apart, a few
    metres of jitter), then some copies of fixes and some bad rows, shuffled into files."""
    rows = []
    for v in range(draw(st.integers(2, 4))):
        t = T0 + draw(st.integers(0, 600))
        line = draw(st.sampled_from(["U", "1"]))
        for _ in range(draw(st.integers(2, 4))):
            lon, lat = ANCHORS[draw(st.integers(0, len(ANCHORS) - 1))]
            for _ in range(draw(st.integers(1, 8))):
                j = draw(st.integers(-3, 3)) * 1e-5
                rows.append([f"v{v}", line, "SCCM", "INBOUND", f"{lon + j:.6f}", f"{lat - j:.6f}", str(t)])
                t += draw(st.integers(10, 40))
            t += draw(st.integers(0, 400))
    df = pd.DataFrame(rows, columns=COLUMNS)
    copies = draw(st.lists(st.integers(0, len(df) - 1), max_size=4))
    bad = draw(st.lists(st.integers(0, len(df) - 1), max_size=2))
    df = pd.concat([df, df.iloc[copies], df.iloc[bad].assign(lat="north")], ignore_index=True)
    order = draw(st.permutations(list(range(len(df)))))
    df = df.iloc[list(order)].reset_index(drop=True)
    cuts = sorted(draw(st.lists(st.integers(1, len(df) - 1), max_size=2, unique=True)))
    return [df.iloc[a:b] for a, b in zip([0, *cuts], [*cuts, len(df)])]


def written(parts, folder) -> list:
    """The parts as input files: the first as Parquet in row groups of 7 rows (Spark reads it
    as several splits), the others as CSV."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, part in enumerate(parts):
        if i == 0:
            p = folder / "a.parquet"
            part.to_parquet(p, index=False, row_group_size=7)
        else:
            p = folder / f"b{i}.csv"
            part.to_csv(p, index=False)
        paths.append(("BusGPS", str(p)))
    return paths


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(parts=traces(), exchange=st.sampled_from(["files", "shuffle"]),
       layout=st.sampled_from(["merged", "dataset"]), split_rows=st.integers(5, 40),
       bucket_rows=st.integers(4, 60))
def test_the_spark_executor_writes_the_local_executors_files(spark, tmp_path_factory, parts, exchange, layout,
                                                             split_rows, bucket_rows):
    tmp = tmp_path_factory.mktemp("agree")
    (tmp / "p.spatec").write_text(PROGRAM, encoding="utf-8")
    c = compile_program(tmp / "p.spatec")
    inputs = written(parts, tmp / "in")
    want = replay_local(c, inputs, tmp / "local")
    conf = {"spark.spatec.exchange": exchange, "spark.spatec.output": layout,
            "spark.spatec.ingestRows": str(split_rows), "spark.spatec.bucketRows": str(bucket_rows),
            "spark.spatec.timeWindow": "600"}
    got = on_spark(spark, c, inputs, tmp / "spark", conf)
    assert got.counts == want.counts
    assert got.ingest.rows == want.ingest.rows
    mine, theirs = outputs(got), outputs(want)
    assert {k.split(".")[0]: v for k, v in mine.items()} == {k.split(".")[0]: v for k, v in theirs.items()}
    rej = sorted((tmp / "local" / "_rejects").glob("*.jsonl"))
    assert [p.read_bytes() for p in rej] == [(tmp / "spark" / "_rejects" / p.name).read_bytes() for p in rej]


@pytest.mark.parametrize("exchange", ["files", "shuffle"])
def test_a_geojson_feature_collection_from_spark_is_the_local_one(spark, tmp_path, exchange):
    # several parts of several features: the separators between features and between parts,
    # where a newline alone made the collection unreadable
    import json

    rows = []
    for v in range(6):
        for k in range(40):
            lon, lat = ANCHORS[(v + k // 10) % len(ANCHORS)]
            rows.append([f"v{v}", "1", "SCCM", "INBOUND", f"{lon:.6f}", f"{lat:.6f}", str(T0 + 30 * k + v)])
    (tmp_path / "p.spatec").write_text(PROGRAM, encoding="utf-8")
    c = compile_program(tmp_path / "p.spatec")
    inputs = written([pd.DataFrame(rows, columns=COLUMNS)], tmp_path / "in")
    want = replay_local(c, inputs, tmp_path / "local", fmt="geojson")
    got = on_spark(spark, c, inputs, tmp_path / "spark", {"spark.spatec.exchange": exchange,
                                                           "spark.spatec.bucketRows": "30"}, fmt="geojson")
    assert got.counts == want.counts and sum(want.counts.values()) > 10
    for name, path in want.paths.items():
        theirs = json.loads(open(path, encoding="utf-8").read())
        mine = json.loads(open(got.paths[name], encoding="utf-8").read())
        assert mine == theirs
        if exchange == "files":         # (the tasks write the parts as the local executor does)
            assert open(got.paths[name], "rb").read() == open(path, "rb").read()


def test_text_chunks_are_the_lines_of_a_part():
    import json

    import pyarrow as pa

    from spatec.exec.parts import TEXT_RUN as TEXT_CHUNK
    from spatec.runners.spark.executor import text_chunks

    n = TEXT_CHUNK + 5
    lines = pa.array([f'{{"i": {i}}}\n' for i in range(n)])
    got = [v[0].as_py() for v, _ in text_chunks(lines, "jsonl")]
    assert "\n".join(got) + "\n" == "".join(lines.to_pylist())
    features = pa.array([f'{{"i": {i}}}' for i in range(n)])
    rows = [v[0].as_py() for v, k in text_chunks(features, "geojson")]
    assert len(rows) == 2
    assert [f["i"] for f in json.loads("[" + "\n".join(rows) + "]")] == list(range(n))

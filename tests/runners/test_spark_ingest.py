"""Ingest in Spark tasks (staged exchange): inputs cut into many chunks give exactly
what one whole-input read on the driver gives — rows, rejects (their order too),
counts, CRS — whatever the chunk boundaries, duplicates across chunks included."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spatec.plan.program import compile_program
from spatec.runners.replay import replay_local
from spatec.runners.spark.batch import replay_spark
from spatec.runners.spark.ingest import INGEST_ROWS_KEY
from tests.runners.conftest import REPO, SHARED

BUS = REPO / "examples" / "bus.spatec"
RAIN = REPO / "examples" / "wet_weather" / "rain_2019-10-01.csv"


@pytest.fixture
def chunk_rows(spark):
    """Set the rows per ingest chunk for one test (restored after)."""
    old = spark.conf.get(INGEST_ROWS_KEY, None)

    def set_(n: int):
        spark.conf.set(INGEST_ROWS_KEY, str(n))

    yield set_
    if old is None:
        spark.conf.unset(INGEST_ROWS_KEY)
    else:
        spark.conf.set(INGEST_ROWS_KEY, old)


def _outputs(out: Path) -> dict:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.jsonl"))}


def assert_same(spark, program: Path, inputs, tmp_path: Path):
    """``replay_spark`` (chunked ingest) and the local runner: the same output files,
    byte for byte, the same rejects file, the same counts per input and CRS."""
    c = compile_program(program)
    local = replay_local(c, inputs, tmp_path / "local")
    remote = replay_spark(c, inputs, tmp_path / "spark", spark=spark)
    assert remote.crs == local.crs
    assert remote.ingest.rows == local.ingest.rows
    a, b = _outputs(tmp_path / "local"), _outputs(tmp_path / "spark")
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], name
    return local, remote


@pytest.mark.slow
@pytest.mark.parametrize("program", ["hospital_to_station", "stuck", "wet_weather"])
def test_many_chunks_match_one_read(spark, chunk_rows, hour_path, program, tmp_path):
    """The Cambridge hour as 9 chunks: every example's rows as the local runner's."""
    chunk_rows(7_000)
    if program == "wet_weather":
        path, inputs = REPO / "examples" / "wet_weather" / "wet_weather.spatec", [("Rain", str(RAIN))]
    else:
        path, inputs = SHARED / "spec" / "examples" / f"{program}.spatec", []
    local, _ = assert_same(spark, path, [("BusGPS", str(hour_path))] + inputs, tmp_path)
    assert sum(local.counts.values()) > 0


def _bus_rows(hour_path: Path, n: int) -> pd.DataFrame:
    return pd.read_csv(hour_path, dtype=str, keep_default_na=False).head(n)


def test_duplicates_and_rejects_across_chunks(spark, chunk_rows, hour_path, tmp_path):
    """Copies of an event in a later chunk of the same file, or in a later input, are
    rejects (``duplicate of``) in file order among the other rejects; bad rows are
    rejects; used + rejected = read for every input (SPEC: a copy is dropped and counted)."""
    chunk_rows(400)
    df = _bus_rows(hour_path, 2_000)
    copies = df.iloc[[10, 11, 450, 900]].copy()
    copies.loc[copies.index[0], "lon"] = "0.2"          # a copy: same source and time, other values
    bad = df.iloc[[20, 21]].copy()
    bad.loc[bad.index[0], "lon"] = "400"                # out of range
    bad.loc[bad.index[1], "ts"] = "not a time"
    whole = pd.concat([df.iloc[:1_000], copies, bad, df.iloc[1_000:], copies.iloc[[2]]], ignore_index=True)
    first = tmp_path / "bus.csv"
    whole.to_csv(first, index=False)
    second = tmp_path / "bus_again.csv"
    pd.concat([df.iloc[[5, 1_500]], df.iloc[[1_999]]]).to_csv(second, index=False)
    inputs = [("BusGPS", str(first)), ("BusGPS", str(second))]
    program = SHARED / "spec" / "examples" / "stuck.spatec"
    local, remote = assert_same(spark, program, inputs, tmp_path)
    rows = {r[1]: r[2:] for r in remote.ingest.rows}
    read, used, rejected = rows[str(first)]
    assert read == len(whole) and used + rejected == read
    lines = [json.loads(l) for l in (tmp_path / "spark" / "_rejects" / "BusGPS.jsonl").read_text().splitlines()]
    dup = [l for l in lines if l["reason"].startswith("duplicate of ") and l["file"] == str(first)]
    # the 4 copies after row 1,000 and the last row (a second copy of row 450)
    assert len(dup) == 5 and rejected >= 5 + 2
    assert [l["row"] for l in lines if l["file"] == str(first)] == sorted(l["row"] for l in lines
                                                                          if l["file"] == str(first))
    assert rows[str(second)] == (3, 0, 3)
    assert [l["reason"].startswith("duplicate of ") for l in lines if l["file"] == str(second)] == [True] * 3


def test_events_without_a_source_deduplicate_across_chunks(spark, chunk_rows, tmp_path):
    """A type without a source is identified by its record: a copy in a later chunk, or
    in a later input, is a reject."""
    chunk_rows(3)
    p = tmp_path / "p.spatec"
    p.write_text('''
event Reading(station: str, level: float, at: time, lon: float, lat: float)
    time at
    place point(lon, lat)
phrase High = Reading -> A where A.level > 2.0 emit station = A.station
''')
    recs = [("s1", 1.0, "2019-10-01T08:00:00Z"), ("s1", 3.0, "2019-10-01T08:05:00Z"),
            ("s2", 2.5, "2019-10-01T08:05:00Z"), ("s1", 3.0, "2019-10-01T08:05:00Z"),
            ("s3", 4.0, "2019-10-01T08:10:00Z"), ("s2", 2.5, "2019-10-01T08:05:00Z"),
            ("s4", 5.0, "2019-10-01T08:20:00Z")]
    rows = [{"station": s, "level": v, "at": t, "lon": 0.12, "lat": 52.2} for s, v, t in recs]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    pd.DataFrame(rows).to_csv(a, index=False)
    pd.DataFrame(rows[4:5] + [rows[6]]).to_csv(b, index=False)
    local, remote = assert_same(spark, p, [("Reading", str(a)), ("Reading", str(b))], tmp_path)
    assert remote.ingest.rows[0][2:] == (7, 5, 2)
    assert remote.ingest.rows[1][2:] == (2, 0, 2)
    assert remote.counts["High"] == 4


def test_parquet_and_jsonl_inputs(spark, chunk_rows, hour_path, tmp_path):
    """Parquet is read in slices on the driver; JSONL on the driver whole (one chunk):
    together they give the local rows."""
    chunk_rows(1_500)
    df = _bus_rows(hour_path, 6_000)
    pq_path, js_path = tmp_path / "a.parquet", tmp_path / "b.jsonl"
    df.iloc[:4_000].to_parquet(pq_path, index=False)
    df.iloc[3_900:].to_json(js_path, orient="records", lines=True)
    program = SHARED / "spec" / "examples" / "stuck.spatec"
    local, remote = assert_same(spark, program, [("BusGPS", str(pq_path)), ("BusGPS", str(js_path))], tmp_path)
    assert [r[2] for r in remote.ingest.rows] == [4_000, 2_100]
    assert sum(local.counts.values()) > 0


def test_a_missing_column_fails_before_any_task(spark, tmp_path):
    from spatec.errors import DataError

    c = compile_program(SHARED / "spec" / "examples" / "stuck.spatec")
    bad = tmp_path / "bus.csv"
    pd.DataFrame({"vehicle": ["v"], "lon": [0.1]}).to_csv(bad, index=False)
    with pytest.raises(DataError, match="bus.csv"):
        replay_spark(c, [("BusGPS", str(bad))], tmp_path / "out", spark=spark)


def test_streamed_csv_slices_are_the_whole_read(hour_path, tmp_path):
    """A large CSV is streamed in slices: the same records, numbers, columns and
    reject records as reading it whole; a malformed record stops the stream."""
    import pyarrow as pa

    from spatec.events.formats import StreamFailed, csv_slices, read_csv

    cols = ["vehicle", "line", "operator", "lon", "lat", "ts"]
    whole = read_csv(str(hour_path), cols)
    parts = list(csv_slices(str(hour_path), cols, rows=5_000))
    assert len(parts) > 5
    assert pa.concat_tables([p.table for p in parts]).equals(whole.table)
    assert [int(r) for p in parts for r in p.rows] == whole.rows.tolist()
    last = parts[-1]
    assert last.records([0]) == whole.records([int(last.rows[0]) - 1])
    bad = tmp_path / "bad.csv"
    text = hour_path.read_bytes()
    import gzip

    lines = gzip.decompress(text).decode().splitlines()
    lines.insert(30_000, "x,y")
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(StreamFailed):
        list(csv_slices(str(bad), cols, rows=5_000))


def test_streamed_csv_matches_local_with_a_malformed_record(spark, chunk_rows, hour_path, monkeypatch, tmp_path):
    """Streaming every CSV (threshold 0): a clean file and one with a malformed record
    (read again whole: its reject numbered exactly) give the local runner's files."""
    import gzip

    from spatec.runners.spark import ingest as spark_ingest

    monkeypatch.setattr(spark_ingest, "STREAM_CSV_BYTES", 0)
    chunk_rows(4_000)
    lines = gzip.decompress(hour_path.read_bytes()).decode().splitlines()[:12_001]
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("\n".join(lines) + "\n")
    lines.insert(9_000, "x,y")
    bad.write_text("\n".join(lines) + "\n")
    program = SHARED / "spec" / "examples" / "stuck.spatec"
    local, remote = assert_same(spark, program, [("BusGPS", str(good)), ("BusGPS", str(bad))], tmp_path)
    assert remote.ingest.rows[1][4] >= 1
    assert sum(local.counts.values()) > 0


def test_staged_exchange_without_a_staging_directory_is_a_clear_error(spark, tmp_path):
    from spatec.errors import SpatecError
    from spatec.runners.spark.exchange import EXCHANGE_KEY
    from spatec.runners.spark.staging import STAGING_KEY

    c = compile_program(SHARED / "spec" / "examples" / "stuck.spatec")
    spark.conf.set(EXCHANGE_KEY, "staged")
    spark.conf.set(STAGING_KEY, "off")
    try:
        with pytest.raises(SpatecError, match="needs a staging directory"):
            replay_spark(c, [("BusGPS", str(tmp_path / "none.csv"))], tmp_path / "out", spark=spark)
    finally:
        spark.conf.unset(EXCHANGE_KEY)
        spark.conf.unset(STAGING_KEY)


# ------------------------------------------------------------------------------- stretches of time

def test_a_phrase_without_a_key_is_matched_in_stretches_of_time(spark, chunk_rows, hour_path, tmp_path):
    """A phrase without a key (every bus against every other) cut into 4-minute
    stretches matched apart, the events less than a span (2 min) into a stretch in
    the one before too: exactly the local runner's composites, none twice, none
    lost at a boundary."""
    from spatec.runners.spark.scheduling import TIME_WINDOW_KEY, time_window

    program = tmp_path / "passing.spatec"
    program.write_text(f'include "{BUS}"\n'
                       "phrase Passing =\n"
                       "    (BusGPS -> A and at centre) ; (BusGPS -> B and at centre)\n"
                       "  where A.vehicle < B.vehicle\n"
                       "  within 2 min\n"
                       "  emit first = A.vehicle, second = B.vehicle\n")
    plan = compile_program(program).plans[0]
    assert plan.key == ()
    old = spark.conf.get(TIME_WINDOW_KEY, None)
    spark.conf.set(TIME_WINDOW_KEY, "240")
    try:
        assert time_window(spark, plan) == 240_000_000
        chunk_rows(20_000)
        local, _ = assert_same(spark, program, [("BusGPS", str(hour_path))], tmp_path)
    finally:
        if old is None:
            spark.conf.unset(TIME_WINDOW_KEY)
        else:
            spark.conf.set(TIME_WINDOW_KEY, old)
    assert local.counts["Passing"] > 100


def test_window_groups_and_which_phrases_take_them(spark):
    from spatec.runners.spark.scheduling import time_window
    from spatec.runners.spark.staging import window_groups

    lo = np.array([0, 5, 10, 12, 25, 30, 31], dtype=np.int64)
    g, rows = window_groups(lo, 10, 2)
    # an event starting at most 2 into a stretch is in the one before too
    assert list(zip(g.tolist(), rows.tolist())) == [(-1, 0), (0, 0), (0, 1), (0, 2), (0, 3), (1, 2), (1, 3),
                                                    (2, 4), (2, 5), (2, 6), (3, 5), (3, 6)]
    keyed = compile_program(SHARED / "spec" / "examples" / "stuck.spatec").plans[0]
    assert time_window(spark, keyed) is None                  # a key: grouped by it
    for text in ("phrase P = BusGPS -> A ; not BusGPS -> X within 5 min",      # absence after A
                 "phrase P = BusGPS -> A ; not BusGPS -> X ; BusGPS -> B within 5 min",
                 "phrase P = BusGPS -> A ; BusGPS -> B where successive(A, B)"):    # needs the events between
        plan = _plan(text)
        assert time_window(spark, plan) is None, text
    assert time_window(spark, _plan("phrase P = BusGPS -> A ; BusGPS -> B within 20 min")) == 3600 * 10**6
    assert time_window(spark, _plan("phrase P = BusGPS -> A ; BusGPS -> B within 5 h")) == 2 * 5 * 3600 * 10**6


def _plan(text: str):
    return compile_program(REPO / "examples" / "inline.spatec", f'include "bus.spatec"\n{text}\n').plans[0]


@pytest.mark.parametrize("n, rows, cores, want", [
    (1000, 300, 2, [250] * 4),          # 4 slices of 300 would leave a core 100 rows
    (1000, 300, 1, [250] * 4),
    (1000, 5000, 2, [1000]),            # one slice: nothing to share
    (7, 3, 2, [2, 2, 2, 1]),
])
def test_files_are_cut_in_slices_the_cores_share_evenly(n, rows, cores, want, tmp_path):
    """A Parquet file (rows known from its footer) and a CSV read whole are cut in equal
    slices, at most ``rows`` each, as many as the cores share evenly; every record is in
    one slice, numbered as in the file."""
    from spatec.runners.spark.ingest import slice_inputs

    c = compile_program(REPO / "examples" / "bus.spatec")
    df = pd.DataFrame({"vehicle": [f"v{i % 5}" for i in range(n)], "line": "1", "operator": "OP",
                       "direction": "INBOUND", "lon": 0.1, "lat": 52.2, "ts": 1_569_916_800 + np.arange(n)})
    df.to_parquet(tmp_path / "in.parquet", index=False)
    df.to_csv(tmp_path / "in.csv", index=False)
    for name in ("in.parquet", "in.csv"):
        (tmp_path / (name + ".d")).mkdir()
        chunks, _ = slice_inputs(c.program, [("BusGPS", str(tmp_path / name))], str(tmp_path / name) + ".d",
                                 rows, cores)
        assert [ch.rows for ch in chunks] == want, name
        numbers = np.concatenate([ch.load().rows for ch in chunks])
        assert numbers.tolist() == list(range(1, n + 1)) or numbers.tolist() == list(range(2, n + 2)), name


def test_task_log_times_every_chunk_and_group(spark, chunk_rows, hour_path, tmp_path):
    """With ``spark.spatec.taskLog`` set, every ingest chunk and every matched group adds
    one JSON line: its steps' seconds, its CPU and kernel seconds, its rows; the groups'
    rows add up to the composites written, the chunks' rows to the rows read. The
    driver adds one line per replay, its own steps from reading to cleaning up."""
    from spatec.runners.spark.scheduling import TASK_LOG_KEY

    log = tmp_path / "tasks.jsonl"
    chunk_rows(20_000)
    spark.conf.set(TASK_LOG_KEY, str(log))
    try:
        c = compile_program(SHARED / "spec" / "examples" / "stuck.spatec")
        result = replay_spark(c, [("BusGPS", str(hour_path))], tmp_path / "out", spark=spark)
    finally:
        spark.conf.unset(TASK_LOG_KEY)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    ingest = [x for x in lines if x["stage"] == "ingest"]
    match = [x for x in lines if x["stage"] == "match"]
    driver = [x for x in lines if x["stage"] == "driver"]
    assert len(ingest) + len(match) + len(driver) == len(lines) and len(driver) == 1
    assert list(driver[0]["seconds"]) == ["read", "ingest tasks", "decide", "match tasks", "merge", "clean up"]
    assert sum(driver[0]["seconds"].values()) <= driver[0]["total_s"] + 1e-6
    assert sorted(x["item"] for x in ingest) == list(range(len(ingest))) and len(ingest) >= 3
    assert sum(x["rows"] for x in ingest) == result.ingest.read
    assert {x["phrase"] for x in match} == {"Stuck"}
    assert sum(x["rows"] for x in match) == result.counts["Stuck"]
    assert sorted(x["item"] for x in match) == list(range(len(match)))     # each group once
    for x in ingest + match:
        steps = {"ingest": {"type", "stage"}, "match": {"load", "match", "write"}}[x["stage"]]
        assert set(x["seconds"]) == steps
        assert 0 <= x["kernel_s"] <= x["cpu_s"] and sum(x["seconds"].values()) <= x["total_s"] + 1e-6
    # off again: the next run adds nothing
    replay_spark(c, [("BusGPS", str(hour_path))], tmp_path / "again", spark=spark)
    assert len(log.read_text().splitlines()) == len(lines)


def test_tasks_take_unbegun_groups_from_each_other_and_do_each_once(tmp_path):
    """Groups dealt to two tasks (:func:`balance`: largest first) are claimed as they are
    begun (:func:`items_of`): a task done with its own takes the others' not yet begun,
    from the end of their lists; every group is matched once however the tasks interleave,
    and a retried task (same seed) takes its claimed groups again, never another's."""
    from spatec.runners.spark.scheduling import balance, items_of

    sizes = [50, 10, 40, 30, 20, 5]
    tasks = balance(sizes, 2)
    assert tasks == [[0, 4, 1], [2, 3, 5]]        # 50 + 20 + 10 against 40 + 30 + 5
    seed = lambda s: pd.DataFrame({"g": [s]})     # noqa: E731

    assert list(items_of(seed(1), tasks)) == [2, 3, 5]     # no claims: its own only

    # one task after the other: the first takes everything, the second nothing
    claims = tmp_path / "one"
    claims.mkdir()
    assert list(items_of(seed(0), tasks, str(claims))) == [0, 4, 1, 5, 3, 2]
    assert list(items_of(seed(1), tasks, str(claims))) == []

    # interleaved, one group at a time each: task 1 is slow (3 steps per group)
    claims = tmp_path / "two"
    claims.mkdir()
    a, b = items_of(seed(0), tasks, str(claims)), items_of(seed(1), tasks, str(claims))
    done = {0: [], 1: []}
    busy = {0: 0, 1: 0}
    live = {0: a, 1: b}
    while live:
        for s, it in list(live.items()):
            if busy[s]:
                busy[s] -= 1
                continue
            g = next(it, None)
            if g is None:
                del live[s]
                continue
            done[s].append(g)
            busy[s] = 2 if s == 1 else 0
    assert sorted(done[0] + done[1]) == list(range(6))
    assert done[1][0] == 2 and 5 in done[0]          # the slow task's last group taken by the other

    # a retry of task 0 after it failed: its claims again, and the groups no one claimed
    claims = tmp_path / "retry"
    claims.mkdir()
    first = items_of(seed(0), tasks, str(claims))
    assert [next(first), next(first)] == [0, 4]      # ... then task 0 dies
    assert next(items_of(seed(1), tasks, str(claims))) == 2
    assert list(items_of(seed(0), tasks, str(claims))) == [0, 4, 1, 5, 3]


def test_tasks_do_their_own_groups_where_claims_cannot_be_made(tmp_path, monkeypatch):
    """A staging directory on a file system without symbolic links: no claim can be made,
    so each task does the groups dealt to it, all of them, and takes none of another's."""
    import os

    from spatec.runners.spark.scheduling import balance, items_of

    def refused(*a):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "symlink", refused)
    tasks = balance([50, 10, 40, 30, 20, 5], 2)
    got = [list(items_of(pd.DataFrame({"g": [s]}), tasks, str(tmp_path))) for s in (0, 1)]
    assert got == tasks


def test_groups_of_a_key_too_large_are_cut_in_time_when_matches_are_local(spark, hour_path, tmp_path):
    """A phrase with a key whose matches lie within a span and depend on their own events
    (Bunching: a line is its key) has its largest groups cut into stretches of equal time
    (:func:`split_in_time`): a stretch reports the matches that start in it, from the events
    that start in it or up to a span after; the stretches cover the group's starts end to
    end. A phrase with ``successive`` (Stuck) is never cut. The replay of the Cambridge
    hour, with its groups cut, is the local runner's, byte for byte."""
    from spatec.runners.spark.scheduling import GROUPS_PER_CORE, split_in_time

    bunching = compile_program(REPO / "examples" / "bunching" / "bunching.spatec").plans[0]
    stuck = compile_program(SHARED / "spec" / "examples" / "stuck.spatec").plans[0]
    span = bunching.span_bound
    big = {"rows": 900, "lo": (0, 100 * span), "key": 0, "frames": {}, "history": {}}
    small = {"rows": 100, "lo": (5, 50 * span), "key": 1, "frames": {}, "history": {}}
    # a share is 1,000 / (2 cores * GROUPS_PER_CORE) rows; the big group is cut in
    # ceil(900 / share), the small one (100 rows, less than 1.5 shares) not
    k = math.ceil(900 / (1000 / (2 * GROUPS_PER_CORE)))
    got = split_in_time([big, small], bunching, 2)
    assert k >= 2 and len(got) == k + 1 and got[-1] is small
    owns = [g["own"] for g in got[:-1]]
    assert owns[0][0] == 0 and owns[-1][1] == 100 * span + 1
    assert all(a[1] == b[0] for a, b in zip(owns, owns[1:]))
    assert all(g["lo_range"] == (g["own"][0], g["own"][1] + span) for g in got[:-1])
    assert split_in_time([big, small], stuck, 2) == [big, small]
    narrow = {**big, "lo": (0, 3 * span)}                  # stretches are at least two spans
    assert len(split_in_time([narrow, small], bunching, 2)) == 2
    # a share above ``most`` events (more days, the same keys): stretches of at most ``most``
    assert split_in_time([big, small], bunching, 2, most=200) == got
    capped = split_in_time([big, small], bunching, 1, most=50)
    assert len(capped) == math.ceil(900 / 50) + math.ceil(100 / 50)
    assert all(g["rows"] <= 50 for g in capped) and {g["key"] for g in capped} == {0, 1}

    out_s, out_l = tmp_path / "spark", tmp_path / "local"
    c = compile_program(REPO / "examples" / "bunching" / "bunching.spatec")
    seen = []
    import spatec.runners.spark.match as sb
    real = sb.split_in_time

    def spy(groups, plan, cores, most=None):
        got = real(groups, plan, cores, most)
        seen.append((len(groups), len(got)))
        return got

    sb.split_in_time = spy
    try:
        replay_spark(c, [("BusGPS", str(hour_path))], out_s, spark=spark)
    finally:
        sb.split_in_time = real
    replay_local(c, [("BusGPS", str(hour_path))], out_l)
    assert seen and seen[0][1] > seen[0][0]               # some group was cut
    assert (out_s / "Bunching.jsonl").read_bytes() == (out_l / "Bunching.jsonl").read_bytes()


@pytest.mark.parametrize("dtype", ["float64", "int64", "Int64", "boolean", "object", "datetime64[ns]", "string", None])
def test_an_unread_attribute_is_missing_as_the_driver_typed_it(dtype):
    """A task puts back the attributes its phrase never reads as missing values of the
    driver's dtype (missing_column): what converting a column of None gave."""
    from spatec.runners.spark.staging import missing_column, restore_dtypes

    converted = pd.DataFrame({"x": range(4)})
    converted["c"] = None
    converted = restore_dtypes(converted, {"c": dtype} if dtype else {})
    made = pd.DataFrame({"x": range(4)})
    made["c"] = missing_column(4, dtype)
    assert made["c"].dtype == converted["c"].dtype and made["c"].isna().all()
    assert [repr(v) for v in made["c"]] == [repr(v) for v in converted["c"]]

"""Composite events to JSON lines, GeoParquet and GeoJSON."""
from __future__ import annotations

import doctest
import errno
import fcntl
import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shapely

from spatec.sinks import files as sinks
from spatec.sinks.files import (
    extension,
    read_jsonl_composites,
    read_parquet_composites,
    write_geojson,
    write_jsonl,
    write_parquet,
    writer,
)

T = 1569916778_000000
TRI = "POLYGON ((0.1 52.1, 0.2 52.1, 0.15 52.2, 0.1 52.1))"


@pytest.fixture
def composites() -> pd.DataFrame:
    # deliberately out of (lo, hi, id) order
    return pd.DataFrame({
        "phrase": ["Slow", "Slow", "Slow"],
        "id": ["c", "b", "a"],
        "lo": np.array([T + 60_000_000, T, T], dtype=np.int64),
        "hi": np.array([T + 90_000_000, T + 30_000_000, T + 30_000_000], dtype=np.int64),
        "hull": [TRI, "POINT (0.12 52.2)", TRI],
        "events": [{"B": "BusGPS:X:3", "A": "BusGPS:X:1"}, {"A": "BusGPS:Y:1"}, {"A": "BusGPS:Z:1"}],
        "vehicle": ["X", "Y", "Z"],
        "minutes": [1.5, np.nan, 0.25],
        "count": pd.array([3, None, 1], dtype="Int64"),
        "started": np.array([T, T + 500, T], dtype=np.int64),
    })


def test_doctests():
    assert doctest.testmod(sinks).failed == 0


def test_jsonl(tmp_path, composites):
    p = tmp_path / "out" / "slow.jsonl"
    write_jsonl(composites, p, {"started"})
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    assert list(rows[0]) == ["phrase", "id", "lo", "hi", "hull", "events", "vehicle", "minutes", "count", "started"]
    assert rows[1] == {"phrase": "Slow", "id": "b", "lo": "2019-10-01T07:59:38Z", "hi": "2019-10-01T08:00:08Z",
                       "hull": "POINT (0.12 52.2)", "events": {"A": "BusGPS:Y:1"}, "vehicle": "Y",
                       "minutes": None, "count": None, "started": "2019-10-01T07:59:38.000500Z"}
    assert list(rows[2]["events"]) == ["A", "B"]
    back = read_jsonl_composites(p, {"started"})
    assert back["lo"].tolist() == [T, T, T + 60_000_000] and back["started"].tolist()[1] == T + 500


def test_parquet_round_trip_with_geoparquet_metadata(tmp_path, composites):
    p = tmp_path / "slow.parquet"
    write_parquet(composites, p, {"started"})
    schema = pq.read_schema(p)
    for c in ("lo", "hi", "started"):
        assert schema.field(c).type == pa.timestamp("us", tz="UTC")
    assert schema.field("hull").type == pa.binary()
    assert schema.field("events").type == pa.map_(pa.string(), pa.string())
    geo = json.loads(schema.metadata[b"geo"])
    assert geo["version"] == "1.0.0" and geo["primary_column"] == "hull"
    assert geo["columns"]["hull"]["encoding"] == "WKB"
    assert geo["columns"]["hull"]["geometry_types"] == ["Point", "Polygon"]
    assert geo["columns"]["hull"]["bbox"] == [0.1, 52.1, 0.2, 52.2]
    assert "crs" not in geo["columns"]["hull"]   # omitted: OGC:CRS84

    back = read_parquet_composites(p)
    want = composites.sort_values(["lo", "hi", "id"]).reset_index(drop=True)
    want["events"] = [dict(sorted(e.items())) for e in want["events"]]
    assert back.attrs["geo"] == geo
    pd.testing.assert_frame_equal(back, want, check_dtype=False)
    assert back["lo"].dtype == np.dtype("int64")


def test_geojson(tmp_path, composites):
    p = tmp_path / "slow.geojson"
    write_geojson(composites, p, {"started"})
    doc = json.loads(p.read_text())
    assert doc["type"] == "FeatureCollection" and [f["id"] for f in doc["features"]] == ["a", "b", "c"]
    f = doc["features"][1]
    assert f["geometry"] == {"type": "Point", "coordinates": [0.12, 52.2]}
    assert f["properties"]["lo"] == "2019-10-01T07:59:38Z" and "hull" not in f["properties"]
    assert shapely.from_geojson(json.dumps(doc["features"][0]["geometry"])).equals(shapely.from_wkt(TRI))


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "geojson"])
def test_writers_are_deterministic_and_empty_safe(tmp_path, composites, fmt):
    w = writer(fmt)
    assert w.extension == extension(fmt) == fmt
    a, b = tmp_path / f"a.{w.extension}", tmp_path / f"b.{w.extension}"
    w(composites, a, {"started"})
    w(composites.iloc[::-1], b, {"started"})
    assert a.read_bytes() == b.read_bytes()
    w(composites.iloc[:0], tmp_path / f"empty.{w.extension}")
    assert not list(tmp_path.glob(".*.tmp"))


def test_unknown_writer():
    with pytest.raises(ValueError, match="expected one of jsonl, parquet, geojson"):
        writer("csv")


def _rows_frame(rows):
    cols = ["phrase", "id", "lo", "hi", "hull", "events", "vehicle", "count", "started"]
    return pd.DataFrame(rows, columns=cols)


def _row(i, count, lo=None):
    lo = T + (lo if lo is not None else (i * 7919) % 13) * 1_000_000
    return {"phrase": "P", "id": f"{i:04d}", "lo": lo, "hi": lo + 30_000_000, "hull": TRI,
            "events": {"B": f"BusGPS:X:{i}", "A": f"BusGPS:Y:{i}"}, "vehicle": "é" if i % 5 else None,
            "count": count, "started": lo if i % 3 else None}


@pytest.mark.parametrize("mixed, segment, direct", [
    (False, 4 << 20, True), (True, 4 << 20, True), (False, 4096, True), (False, 4096, False),
    (False, 300, False), (False, 37, False), (False, 1, False)])
def test_jsonl_parts_merge_to_what_one_write_gives(tmp_path, monkeypatch, mixed, segment, direct):
    """Parts written separately (as Spark tasks write them) and merged: byte for byte
    the file that write_jsonl writes for all their rows at once, in (lo, hi, id) order
    across the parts, a composite in two parts written once. With ``mixed`` one part
    has an integer column with a missing value (a float column in pandas) and another
    not, so the parts' lines differ from the whole's: the merge writes them again.
    ``segment``: bytes of the output filled and written at a time, by threads that write
    their segments in any order (the file is about 11 KB: one segment; three, the last
    padded when written around the page cache, ``direct``; or segments shorter than a
    line, ~260 bytes, so that lines begin and end inside them and cross several)."""
    monkeypatch.setattr(sinks, "MERGE_SEGMENT", segment)
    monkeypatch.setattr(sinks, "MERGE_DIRECT", direct)
    rows = [_row(i, i) for i in range(40)]
    if mixed:
        rows[3]["count"] = None
    split = [rows[:15], rows[15:33], rows[33:] + rows[20:21]]      # row 20 in two parts
    parts = []
    for k, part in enumerate(split):
        p = tmp_path / f"g{k}.jsonl"
        parts.append((str(p), sinks.write_jsonl_part(_rows_frame(part), p, {"started"})))
    kinds = {k.schema.metadata[b"kinds"] for _, k in parts}
    assert (len(kinds) > 1) == mixed
    sinks.merge_jsonl_parts(parts, tmp_path / "merged.jsonl", {"started"})
    write_jsonl(_rows_frame(rows), tmp_path / "whole.jsonl", {"started"})
    whole = (tmp_path / "whole.jsonl").read_bytes()
    assert (tmp_path / "merged.jsonl").read_bytes() == whole
    assert whole.count(b"\n") == 40
    if mixed:
        assert b'"count": 4.0' in whole        # what pandas makes of it, in both


@pytest.mark.parametrize("mixed, rows_at_a_time", [(False, 131_072), (True, 131_072), (True, 7), (False, 1)])
def test_parquet_parts_merge_to_what_one_write_gives(tmp_path, monkeypatch, mixed, rows_at_a_time):
    """GeoParquet parts written separately (as Spark tasks write them) and merged a few
    rows at a time: the table write_parquet writes for all their rows at once, in
    (lo, hi, id) order across the parts, a composite in two parts written once, the
    GeoParquet metadata of the whole. With ``mixed``, one part has no value of
    ``vehicle`` (a column of nulls) and an integer column with a missing value (a
    float column), the others not: the merged columns take the type that holds both."""
    monkeypatch.setattr(sinks, "MERGE_ROWS", rows_at_a_time)
    rows = [_row(i, i) for i in range(40)]
    rows[25]["hull"] = "POINT (0.3 52.4)"
    if mixed:
        for r in rows[:15]:
            r["vehicle"] = None
        rows[3]["count"] = None
    split = [rows[:15], rows[15:33], rows[33:] + rows[20:21]]      # row 20 in two parts
    parts = []
    for k, part in enumerate(split):
        p = tmp_path / f"g{k}.arrow"
        parts.append((str(p), sinks.write_parquet_part(_rows_frame(part), p, {"started"})))
    n = sinks.merge_parquet_parts(parts, tmp_path / "merged.parquet", _rows_frame([]), {"started"})
    assert n == 40
    write_parquet(_rows_frame(rows), tmp_path / "whole.parquet", {"started"})
    merged, whole = pq.read_table(tmp_path / "merged.parquet"), pq.read_table(tmp_path / "whole.parquet")
    assert merged.schema.equals(whole.schema, check_metadata=True)
    assert merged.equals(whole)
    geo = json.loads(merged.schema.metadata[b"geo"])["columns"]["hull"]
    assert geo["geometry_types"] == ["Point", "Polygon"] and geo["bbox"] == [0.1, 52.1, 0.3, 52.4]


def test_parquet_merge_of_no_rows(tmp_path):
    p = tmp_path / "g0.arrow"
    keys = sinks.write_parquet_part(_rows_frame([]), p)
    assert sinks.merge_parquet_parts([(str(p), keys)], tmp_path / "out.parquet", _rows_frame([])) == 0
    assert pq.read_table(tmp_path / "out.parquet").num_rows == 0


def test_jsonl_merge_of_no_rows(tmp_path):
    p = tmp_path / "g0.jsonl"
    keys = sinks.write_jsonl_part(_rows_frame([]), p)
    assert sinks.merge_jsonl_parts([(str(p), keys)], tmp_path / "out.jsonl") == 0
    assert (tmp_path / "out.jsonl").read_bytes() == b""


# --- JSON lines written column by column: what json.dumps writes for each row dict ----------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _dumped(df, time_fields, tz=None):
    """The definition: json.dumps of each row dict, one line each."""
    df = sinks._ordered(df)
    return [(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
            for row in sinks.json_rows(df, time_fields, tz)]


_text = st.text(st.characters(codec="utf-8"), max_size=6) | st.sampled_from(["", "a%s", '"', "\\", "\x00", "é\n", "%"])
_events = (st.dictionaries(st.sampled_from(["A", "B", "C", "x%"]), _text | st.integers(0, 9), max_size=3)
           | st.sampled_from([{"A": "BusGPS:1", "B": "BusGPS:2"}, {"B": "BusGPS:1", "A": "BusGPS:2"}, {}])
           | st.none())
#: a phrase's variables bound to event ids (mostly text JSON writes as it is)
_bound = st.fixed_dictionaries({"A": _text | st.just("BusGPS:WP-1:2019"), "B": st.sampled_from(["BusGPS:2", "é:3"])})
_columns = {
    "text": st.lists(_text, min_size=1, max_size=8).map(lambda v: pd.Series(v, dtype=object)),
    "text_or_none": st.lists(_text | st.none(), min_size=1, max_size=8).map(lambda v: pd.Series(v, dtype=object)),
    "float": st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=8).map(pd.Series),
    "finite": st.lists(st.floats(-1e300, 1e300), min_size=1, max_size=8).map(pd.Series),
    "int": st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=8).map(lambda v: pd.Series(v, dtype="int64")),
    "Int64": st.lists(st.integers(-9, 9) | st.none(), min_size=1, max_size=8).map(lambda v: pd.Series(v, dtype="Int64")),
    "bool": st.lists(st.booleans(), min_size=1, max_size=8).map(pd.Series),
    "mixed": st.lists(st.none() | st.booleans() | st.integers(-5, 5) | st.floats() | _text
                      | st.lists(st.integers(0, 3), max_size=2) | st.dictionaries(_text, st.integers(0, 3), max_size=2),
                      min_size=1, max_size=8).map(lambda v: pd.Series(v, dtype=object)),
    "time": st.lists(st.integers(0, 4_000_000_000_000_000) | st.none(), min_size=1, max_size=8)
                     .map(lambda v: pd.Series(v, dtype="Int64")),
    # int64 times, some shared with lo and hi (formatted once for all of them)
    "time64": st.lists(st.integers(-3, 4).map(lambda v: T + v) | st.integers(-2**62, 4_000_000_000_000_000),
                       min_size=1, max_size=8).map(lambda v: pd.Series(v, dtype="int64")),
}


@st.composite
def _frames(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(_columns)), max_size=4))
    cols = [draw(_columns[k]) for k in kinds]
    n = min([len(c) for c in cols] + [draw(st.integers(0, 8))])
    ids = draw(st.lists(_text, min_size=n, max_size=n))
    df = pd.DataFrame({
        "phrase": [draw(st.sampled_from(["Stuck", 'Ph"ase', "é"]))] * n,
        "id": ids,
        "lo": np.array(draw(st.lists(st.integers(0, 3) .map(lambda v: T + v), min_size=n, max_size=n)), dtype=np.int64),
        "hi": np.full(n, T + 10, dtype=np.int64),
        "hull": draw(st.lists(st.sampled_from([TRI, "POINT (0.12 52.2)"]) | st.none(), min_size=n, max_size=n)),
        "events": draw(st.lists(_events, min_size=n, max_size=n) | _events.map(lambda e: [e] * n)
                       | st.lists(_bound, min_size=n, max_size=n)),
    })
    names = draw(st.lists(st.sampled_from(["vehicle", "n%s", 'q"uote', "é", "since"]), min_size=len(cols),
                          max_size=len(cols), unique=True))
    for name, c in zip(names, cols):
        df[name] = c.iloc[:n].reset_index(drop=True)
    if draw(st.booleans()):     # the events as the fast path gives a part's: an Arrow struct
        df["events"] = _as_struct(df["events"])
    return df, {n for n, k in zip(names, kinds) if k in ("time", "time64")}


def _as_struct(events: pd.Series) -> pd.Series:
    """A column of dicts with the same keys in the same order as an Arrow struct column
    (whose Python values are those dicts), else as it is."""
    values = events.tolist()
    if not values or not all(type(v) is dict and v for v in values) or len({tuple(v) for v in values}) != 1:
        return events
    try:
        arr = pa.array(values)
    except (pa.ArrowException, OverflowError):
        return events
    return pd.Series(pd.arrays.ArrowExtensionArray(arr), index=events.index) if arr.to_pylist() == values else events


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_frames(), st.sampled_from([1, 3, 4096]), st.sampled_from([None, "Europe/London", "Australia/Lord_Howe"]))
def test_jsonl_lines_are_json_dumps_of_each_row(frame, chunk, tz):
    """The column-wise writer gives each row's json.dumps, byte for byte, for every kind
    of column (text needing escapes, %, NaN and inf, missing values, nested values,
    times, events with other variables or values), across chunk boundaries; a value
    json.dumps refuses is refused too. write_jsonl_part's line ends are the lines'."""
    df, time_fields = frame
    old, sinks._CHUNK = sinks._CHUNK, chunk
    try:
        try:
            want = _dumped(df, time_fields, tz)
        except (ValueError, TypeError) as exc:
            with pytest.raises(type(exc)):
                list(sinks._jsonl_lines(sinks._ordered(df), time_fields, tz))
            return
        got = list(sinks._jsonl_lines(sinks._ordered(df), time_fields, tz))
        assert b"".join(b for b, _ in got) == b"".join(want)
        assert [n for _, sizes in got for n in sizes] == [len(line) for line in want]
    finally:
        sinks._CHUNK = old


def test_jsonl_part_ends_are_line_ends(tmp_path, composites):
    keys = sinks.write_jsonl_part(composites, tmp_path / "p.jsonl", {"started"})
    data = (tmp_path / "p.jsonl").read_bytes()
    assert keys.column("end").to_pylist() == [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    assert data == b"".join(_dumped(composites, {"started"}))


def test_jsonl_merge_of_a_part_cut_short_says_which(tmp_path):
    """A part shorter than its keys say (a task killed while writing, a full disk) is an
    error naming the part and where it ends, not a merged file with lines missing."""
    parts = []
    for k, rows in enumerate([[_row(i, i) for i in range(0, 6)], [_row(i, i) for i in range(6, 12)]]):
        p = tmp_path / f"g{k}.jsonl"
        parts.append((str(p), sinks.write_jsonl_part(_rows_frame(rows), p, {"started"})))
    whole = (tmp_path / "g1.jsonl").read_bytes()
    (tmp_path / "g1.jsonl").write_bytes(whole[:len(whole) // 2])
    with pytest.raises(OSError, match=r"g1\.jsonl: ends at byte \d+, its keys go to \d+"):
        sinks.merge_jsonl_parts(parts, tmp_path / "merged.jsonl", {"started"})
    assert not (tmp_path / "merged.jsonl").exists() and not list(tmp_path.glob(".*.tmp"))


def test_merge_writes_resume_after_short_writes(tmp_path, monkeypatch):
    """The merge's vectored writes resume where a short write stopped, inside a line or
    between lines: the file is the same as when every write goes through whole."""
    parts = []
    for k, rows in enumerate([[_row(i, i) for i in range(0, 9)], [_row(i, i) for i in range(9, 20)]]):
        p = tmp_path / f"g{k}.jsonl"
        parts.append((str(p), sinks.write_jsonl_part(_rows_frame(rows), p, {"started"})))
    sinks.merge_jsonl_parts(parts, tmp_path / "whole.jsonl", {"started"})
    real = os.pwritev
    sizes = iter([7, 1, 300, 2, 5000] * 1000)

    def short(fd, bufs, offset):
        n = next(sizes)
        data = b"".join(bytes(b) for b in bufs)[:n]
        return real(fd, [data], offset)

    monkeypatch.setattr(os, "pwritev", short)
    sinks.merge_jsonl_parts(parts, tmp_path / "short.jsonl", {"started"})
    assert (tmp_path / "short.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()


def test_merge_falls_back_to_the_page_cache_where_direct_writes_are_refused(tmp_path, monkeypatch):
    """Written around the page cache (O_DIRECT) where the file system takes it; where it
    refuses to open the file so (tmpfs) or refuses a write (EINVAL), through it: the same
    bytes either way, the last segment's padding cut off."""
    parts = []
    for k, rows in enumerate([[_row(i, i) for i in range(0, 25)], [_row(i, i) for i in range(25, 60)]]):
        p = tmp_path / f"g{k}.jsonl"
        parts.append((str(p), sinks.write_jsonl_part(_rows_frame(rows), p, {"started"})))
    monkeypatch.setattr(sinks, "MERGE_SEGMENT", 4096)
    write_jsonl(_rows_frame([_row(i, i) for i in range(60)]), tmp_path / "whole.jsonl", {"started"})
    whole = (tmp_path / "whole.jsonl").read_bytes()
    assert len(whole) % 4096 and len(whole) > 3 * 4096

    opened, real_open, real_pwritev = [], os.open, os.pwritev

    def spy_open(path, flags, *a):
        opened.append(bool(flags & getattr(os, "O_DIRECT", 0)))
        return real_open(path, flags, *a)

    monkeypatch.setattr(os, "open", spy_open)
    sinks.merge_jsonl_parts(parts, tmp_path / "direct.jsonl", {"started"})
    assert (tmp_path / "direct.jsonl").read_bytes() == whole
    assert any(opened) == hasattr(os, "O_DIRECT")

    def no_direct_open(path, flags, *a):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *a)

    monkeypatch.setattr(os, "open", no_direct_open)
    sinks.merge_jsonl_parts(parts, tmp_path / "refused_open.jsonl", {"started"})
    assert (tmp_path / "refused_open.jsonl").read_bytes() == whole

    refused = []

    def no_direct_write(fd, bufs, offset):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & getattr(os, "O_DIRECT", 0):
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwritev(fd, bufs, offset)

    monkeypatch.setattr(os, "open", real_open)
    monkeypatch.setattr(os, "pwritev", no_direct_write)
    sinks.merge_jsonl_parts(parts, tmp_path / "refused_write.jsonl", {"started"})
    assert (tmp_path / "refused_write.jsonl").read_bytes() == whole
    assert len(refused) >= (1 if hasattr(os, "O_DIRECT") and any(opened) else 0)


def test_a_text_column_held_as_arrow_writes_the_same_lines(tmp_path):
    """The Spark tasks' hulls come as Arrow text (pandas ArrowDtype): the JSON lines are
    those of the same texts as Python strings, also when one needs escaping or is missing."""
    import pyarrow as pa

    from spatec.sinks.files import write_jsonl_part

    base = pd.DataFrame({"phrase": ["P"] * 3, "id": ["a", "b", "c"], "lo": [1, 2, 3], "hi": [4, 5, 6],
                         "hull": ["POLYGON ((0 0, 1 0, 1 1, 0 0))", "POINT (1 2)", "POINT (3 4)"],
                         "events": [{"A": "e1"}, {"A": "e2"}, {"A": "e3"}]})
    for hulls in (base["hull"].tolist(), ['say "hi"', "back\\slash", "tab\tand é"], ["POINT (1 2)", None, "x"]):
        plain = base.assign(hull=pd.Series(hulls, dtype=object))
        arrow = base.assign(hull=pd.array(hulls, dtype=pd.ArrowDtype(pa.string())))
        a = write_jsonl_part(plain, tmp_path / "a.jsonl")
        b = write_jsonl_part(arrow, tmp_path / "b.jsonl")
        assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes() and a.equals(b)


def test_plain_text_reads_a_slices_own_bytes():
    """An Arrow text slice shares its array's buffer: only its own texts decide."""
    import pyarrow as pa

    from spatec.events.columns import json_plain_text as _plain_text

    arr = pa.array(['a "quoted" one', "plain", "also plain", "back\\slash", "ctrl\x01", ""], pa.string())
    assert _plain_text(arr.slice(1, 2)) and _plain_text(arr.slice(5, 1)) and _plain_text(arr.slice(2, 0))
    assert not _plain_text(arr.slice(0, 2)) and not _plain_text(arr.slice(2, 2)) and not _plain_text(arr.slice(4, 1))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_frames())
def test_parquet_events_of_a_struct_column_are_those_of_its_dicts(frame):
    """GeoParquet's events map from an Arrow struct column (the fast path's bound events)
    equals the one made from the same rows as dicts."""
    df, time_fields = frame
    if not isinstance(df["events"].dtype, pd.ArrowDtype):
        df = df.assign(events=_as_struct(df["events"]))
    dicts = df.assign(events=pd.Series(df["events"].tolist(), index=df.index, dtype=object))
    df, dicts = df.drop(columns="hull"), dicts.drop(columns="hull")
    assert sinks._string_map(df["events"]).equals(sinks._string_map(dicts["events"]))


_TEXTS = st.lists(st.text(st.characters(codec="utf-8"), max_size=5) | st.sampled_from(['"', "\\", "\x1f", "\x7f", ""]),
                  max_size=8)


@settings(max_examples=300, deadline=None)
@given(_TEXTS, st.data(), st.sampled_from([1, 2, 1 << 18]))
def test_plain_text_is_what_json_writes_as_it_is(texts, data, block):
    """json_plain_text of any slice, read in blocks of any size, says whether json.dumps
    writes each text as it is between quotes."""
    from spatec.events.columns import json_plain_text

    from spatec.events import columns as C

    a = data.draw(st.integers(0, len(texts)))
    b = data.draw(st.integers(a, len(texts)))
    old, C._PLAIN_BLOCK = C._PLAIN_BLOCK, block
    try:
        got = json_plain_text(pa.array(texts, pa.string()).slice(a, b - a))
    finally:
        C._PLAIN_BLOCK = old
    assert got == all(json.dumps(t, ensure_ascii=False) == f'"{t}"' for t in texts[a:b])


_PLAINISH = st.text(st.characters(codec="utf-8", exclude_categories=["Cc"]), max_size=6) | _text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_PLAINISH, _PLAINISH), min_size=1, max_size=9), st.sampled_from([["A", "B"], ["B", "A"], ["A", "é"]]),
       st.sampled_from([2, 4096]))
def test_jsonl_events_of_a_struct_column_are_those_of_its_dicts(tmp_path_factory, pairs, keys, chunk):
    """A part's events as an Arrow struct column (the fast path's, Matches.event_ids(arrow=True))
    give the lines of the same rows as dicts: json.dumps of each row, keys in any order,
    ids needing escapes or not."""
    n = len(pairs)
    dicts = [dict(zip(keys, p)) for p in pairs]
    base = pd.DataFrame({"phrase": ["P"] * n, "id": [str(i) for i in range(n)],
                         "lo": np.full(n, T, dtype=np.int64), "hi": np.arange(n, dtype=np.int64) + T,
                         "hull": ["POINT (1 2)"] * n, "events": dicts})
    struct = base.assign(events=pd.Series(pd.arrays.ArrowExtensionArray(pa.array(dicts))))
    assert struct["events"].tolist() == dicts
    d = tmp_path_factory.mktemp("parts")
    old, sinks._CHUNK = sinks._CHUNK, chunk
    try:
        a = sinks.write_jsonl_part(base, d / "a.jsonl")
        b = sinks.write_jsonl_part(struct, d / "b.jsonl")
    finally:
        sinks._CHUNK = old
    assert (d / "b.jsonl").read_bytes() == (d / "a.jsonl").read_bytes() == b"".join(_dumped(base, ()))
    assert a.equals(b, check_metadata=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.sampled_from(["a", "b", "é", "ab", "Z", "b\u00e9"])),
                min_size=0, max_size=40))
def test_merged_order_is_the_first_copy_of_each_composite_in_key_order(rows):
    """The merge's order (:func:`merged_order`): the parts' keys sorted by ``(lo, hi, id)``
    (ids by code point), a composite met twice (the same id, in two parts) taken once,
    from its first copy: what keeping each id's first row, then sorting, gives."""
    import pyarrow as pa

    from spatec.sinks.files import merged_order

    # an id is one composite: the same lo and hi wherever it is met
    first = {}
    rows = [first.setdefault(i, (lo, hi, i)) for lo, hi, i in rows]
    keys = pa.table({"lo": pa.array([r[0] for r in rows], pa.int64()), "hi": pa.array([r[1] for r in rows], pa.int64()),
                     "id": pa.array([r[2] for r in rows], pa.string())})
    seen, kept = set(), []
    for k, r in enumerate(rows):
        if r[2] not in seen:
            seen.add(r[2])
            kept.append(k)
    want = sorted(kept, key=lambda k: (rows[k][0], rows[k][1], rows[k][2]))
    assert merged_order(keys).tolist() == want

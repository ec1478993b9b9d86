"""Composite events to JSON lines, GeoParquet and GeoJSON."""
from __future__ import annotations

import doctest
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
    json.dumps refuses is refused too. """
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


def test_a_text_column_held_as_arrow_writes_the_same_lines(tmp_path):
    """The Spark tasks' hulls come as Arrow text (pandas ArrowDtype): the JSON lines are
    those of the same texts as Python strings, also when one needs escaping or is missing."""
    import pyarrow as pa

    from spatec.sinks.files import jsonl_texts

    base = pd.DataFrame({"phrase": ["P"] * 3, "id": ["a", "b", "c"], "lo": [1, 2, 3], "hi": [4, 5, 6],
                         "hull": ["POLYGON ((0 0, 1 0, 1 1, 0 0))", "POINT (1 2)", "POINT (3 4)"],
                         "events": [{"A": "e1"}, {"A": "e2"}, {"A": "e3"}]})
    for hulls in (base["hull"].tolist(), ['say "hi"', "back\\slash", "tab\tand é"], ["POINT (1 2)", None, "x"]):
        plain = base.assign(hull=pd.Series(hulls, dtype=object))
        arrow = base.assign(hull=pd.array(hulls, dtype=pd.ArrowDtype(pa.string())))
        a, b = jsonl_texts(plain), jsonl_texts(arrow)
        assert a.to_pylist() == b.to_pylist() and len(a) == 3
        write_jsonl(plain, tmp_path / "whole.jsonl")
        assert (tmp_path / "whole.jsonl").read_text(encoding="utf-8") == "".join(t + "\n" for t in a.to_pylist())


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
    old, sinks._CHUNK = sinks._CHUNK, chunk
    try:
        a = sinks.jsonl_texts(base)
        b = sinks.jsonl_texts(struct)
    finally:
        sinks._CHUNK = old
    assert "".join(t + "\n" for t in b.to_pylist()).encode() == "".join(t + "\n" for t in a.to_pylist()).encode() \
        == b"".join(_dumped(base, ()))



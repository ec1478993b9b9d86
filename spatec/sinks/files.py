"""Composite events to files: JSON lines, GeoParquet, GeoJSON.

Composites arrive as a DataFrame with ``phrase``, ``id``, ``lo``, ``hi``
(int64 µs UTC), ``hull`` (WKT, lon/lat), ``events`` (dict variable -> event
id), then the phrase's emit fields by name. Time-valued emit fields are int64
µs and are named in ``time_fields``. Every writer orders composites by
``(lo, hi, id)`` and writes ``events`` with its variables sorted, so the same
composites give the same bytes; files are written whole and then renamed into
place, so a reader never sees half a file.

- JSON lines: times as ISO 8601 UTC text (or, given a time zone, ISO 8601 with that
  zone's offset: ``--tz``), NaN and missing values as null.
- GeoParquet 1.0: ``lo``, ``hi`` and time fields as ``timestamp[us, tz=UTC]``;
  ``hull`` as WKB with the ``geo`` schema metadata (crs omitted: OGC:CRS84);
  ``events`` as ``map<string, string>``.
- GeoJSON: a FeatureCollection, geometry = hull, properties = the rest
  (feature ``id`` = composite id).

>>> w = writer("parquet")
>>> w.fmt, w.extension, extension("geojson")
('parquet', 'parquet', 'geojson')
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterator, Union

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import shapely

from spatec.events.columns import arrow_text, json_plain_text, one_array
from spatec.events.raw import to_arrow
from spatec.events.timefmt import format_times, parse_times, time_texts
from spatec.sinks.encoding import json_verbatim
from spatec.spatial.hullcol import hull_array, hull_wkb
from spatec.spatial.wkb import wkb_column
from spatec.storage.atomic import atomic_write

FIXED = ("phrase", "id", "lo", "hi", "hull", "events")
#: columns of text → text: the bound events' ids, and the bound places' (SPEC §9, ``places``)
MAPS = ("events", "places")
PathLike = Union[str, os.PathLike]


# --------------------------------------------------------------------------- shared

def _ordered(df: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in FIXED if c not in df.columns]
    if missing:
        raise ValueError(f"composites lack column(s) {', '.join(missing)}")
    if not len(df) or _in_order(df):
        return df.reset_index(drop=True)
    return df.sort_values(["lo", "hi", "id"], kind="stable").reset_index(drop=True)


def _in_order(df: pd.DataFrame) -> bool:
    """Whether rows are already in (lo, hi, id) order (as the runners' frames are)."""
    lo, hi = df["lo"].to_numpy(), df["hi"].to_numpy()
    if lo.dtype.kind not in "iu" or hi.dtype.kind not in "iu":
        return False
    dlo, dhi = np.diff(lo), np.diff(hi)
    if (dlo < 0).any() or ((dlo == 0) & (dhi < 0)).any():
        return False
    tie = np.flatnonzero((dlo == 0) & (dhi == 0))
    ids = df["id"].to_numpy()
    return all(a <= b for a, b in zip(ids[tie].tolist(), ids[tie + 1].tolist()))


def _emit_fields(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c not in FIXED]


def plain_value(v: Any) -> Any:
    """A Python value that JSON can hold: NaN and missing values become None."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, dict):
        return {str(k): plain_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [plain_value(x) for x in v]
    if isinstance(v, shapely.Geometry):
        return shapely.to_wkt(v, rounding_precision=-1)
    if isinstance(v, (pd.Timestamp, _dt.datetime)):
        return pd.Timestamp(v).isoformat()
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    return v


def events_dict(v: Any) -> dict[str, str]:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return {}
    items = v.items() if isinstance(v, dict) else v  # a map column read back is a list of pairs
    return {str(k): str(x) for k, x in sorted(items)}


def _columns(df: pd.DataFrame, time_fields: Collection[str], tz: str | None = None) -> dict[str, list]:
    """Each output column as a list of JSON-ready values, times as ISO text (UTC, or in ``tz``)."""
    out: dict[str, list] = {}
    for c in df.columns:
        if c in ("lo", "hi") or c in time_fields:
            out[c] = list(format_times(df[c], tz))
        elif c in MAPS:
            out[c] = [events_dict(v) for v in df[c]]
        else:
            out[c] = _plain_column(df[c])
    return out


def _plain_column(s: pd.Series) -> list:
    """:func:`plain_value` of every value; whole columns of text or of finite floats as they are."""
    if s.dtype == np.float64:
        a = s.to_numpy()
        if np.isfinite(a).all():
            return a.tolist()
    values = s.tolist()
    if s.dtype == object and (not values or set(map(type, values)) == {str}):
        return values
    return [plain_value(v) for v in values]


def json_rows(df: pd.DataFrame, time_fields: Collection[str], tz: str | None = None) -> Iterator[dict[str, Any]]:
    cols = _columns(df, time_fields, tz)
    names = [*FIXED, *_emit_fields(df)]
    for values in zip(*(cols[n] for n in names)):
        yield dict(zip(names, values))


# --------------------------------------------------------------------------- JSON lines

def write_jsonl(df: pd.DataFrame, path: PathLike, time_fields: Collection[str] = (), tz: str | None = None) -> None:
    """One JSON object a line: phrase, id, lo, hi, hull, events, then the emit fields;
    times in UTC (``Z``), or with ``tz`` in that zone with its offset."""
    df = _ordered(df)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.writelines(block for block, _ in _jsonl_lines(df, time_fields, tz))

    atomic_write(path, write)


def _jsonl_lines(df: pd.DataFrame, time_fields: Collection[str], tz: str | None = None) -> Iterator[tuple[Any, list]]:
    """The rows' lines, as ``json.dumps(row, ensure_ascii=False, allow_nan=False)``
    writes :func:`json_rows`'s dicts, in blocks of up to :data:`_CHUNK` lines: each
    block's bytes (a bytes-like object) and the length in bytes of each of its lines."""
    names = [*FIXED, *_emit_fields(df)]
    if len(set(names)) != len(names) or not all(type(n) is str for n in names):
        dumps = json.dumps
        for row in json_rows(df, time_fields, tz):
            line = (dumps(row, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
            yield line, [len(line)]
        return
    if not len(df):
        return
    columns = _json_columns(df, names, time_fields, tz)
    for a in range(0, len(df), _CHUNK):
        lines = _jsonl_chunk(columns, a, min(a + _CHUNK, len(df)))
        ends = np.frombuffer(lines.buffers()[1], dtype=np.int32, count=len(lines) + 1, offset=4 * lines.offset)
        yield memoryview(lines.buffers()[2])[int(ends[0]):int(ends[-1])], np.diff(ends).tolist()


#: Lines rendered at a time: bounds the text held in memory to a few MB.
_CHUNK = 4096


def jsonl_texts(df: pd.DataFrame, time_fields: Collection[str] = (), tz: str | None = None,
                newline: bool = False) -> "pa.Array | pa.ChunkedArray":
    """Each row's line of :func:`write_jsonl` (rows in the frame's order), without its newline
    (with it: ``newline``), as Arrow text: the same bytes as the file's lines. Over
    :data:`_CHUNK` rows, a chunked array of the chunks as rendered, not put together: the
    texts are an item's largest values (1.4 kB a composite of the three-phrase program), and
    a copy of all of them was the largest block of memory a matching task touched anew."""
    names = [*FIXED, *_emit_fields(df)]
    if not len(df):
        return pa.array([], pa.string())
    if len(set(names)) != len(names) or not all(type(n) is str for n in names):
        dumps = json.dumps
        end = "\n" if newline else ""
        return pa.array([dumps(row, ensure_ascii=False, allow_nan=False) + end for row in json_rows(df, time_fields, tz)],
                        pa.string())
    columns = _json_columns(df, names, time_fields, tz, end="}\n" if newline else "}")
    chunks = [_jsonl_chunk(columns, a, min(a + _CHUNK, len(df))) for a in range(0, len(df), _CHUNK)]
    return pa.chunked_array(chunks) if len(chunks) > 1 else chunks[0]


def _json_columns(df: pd.DataFrame, names: list, time_fields: Collection[str], tz: str | None = None,
                  end: str = "}\n") -> list:
    """The lines' pieces for the whole frame, in order: the text before and between the
    columns (str) and the columns of JSON text (Arrow string arrays, or dictionary arrays
    of them), column by column rather than row by row (:func:`_jsonl_chunk` joins them).

    ``json.dumps`` of a row dict is ``{"name": value, ...}`` with each value as
    ``json.dumps`` writes it alone, so each column is turned into its JSON texts at
    once (text that needs no escaping goes between quotes as it is). Every value's text
    is its own, whatever the rows around it: the columns are made once for all
    chunks. Time columns of int64 are formatted once per distinct time of them all
    (:func:`_shared_times`)."""
    times = _shared_times(df, [n for n in names if n in ("lo", "hi") or n in time_fields], tz)
    pieces: list = []
    text = "{"
    for i, name in enumerate(names):
        between, cols = times[name] if name in times else _json_column(name, df[name], time_fields, tz)
        text += ("" if i == 0 else ", ") + _json_key(name) + ": " + between[0]
        for col, after in zip(cols, between[1:]):
            pieces += [text, col if isinstance(col, pa.Array) else pa.array(col, pa.string())]
            text = after
    pieces.append(text + end)         # (the fixed fields always give columns to join)
    return pieces


def _shared_times(df: pd.DataFrame, names: list, tz: str | None) -> dict:
    """:func:`_json_column` of the time columns held as int64: their distinct times formatted
    once (:func:`~spatec.events.timefmt.time_texts`, value by value the same texts), each
    column a dictionary array of them. A composite's ``lo``, ``hi`` and its time fields
    are mostly its events' times: several columns share most of theirs."""
    ints = [n for n in names if df[n].dtype == np.int64]
    if not ints or not len(df):
        return {}
    codes, uniques = pd.factorize(np.concatenate([df[n].to_numpy() for n in ints]))
    text = time_texts(pd.Series(uniques, dtype=np.int64), tz, distinct=True)
    if text.null_count or not json_plain_text(text):
        return {}
    codes = codes.astype(np.int32)
    n = len(df)
    return {name: (('"', '"'), [pa.DictionaryArray.from_arrays(pa.array(codes[i * n:(i + 1) * n]), text)])
            for i, name in enumerate(ints)}


def _jsonl_chunk(pieces: list, a: int, b: int) -> pa.Array:
    """Lines ``a`` to ``b`` (an Arrow string array) from :func:`_json_columns`' pieces,
    joined by Arrow, in C (``binary_join_element_wise``): no dict, no encoder call and
    no string per row."""
    part = []
    for p in pieces:
        if isinstance(p, pa.DictionaryArray):
            p = p.dictionary.take(p.indices.slice(a, b - a))
        elif isinstance(p, pa.Array):
            p = p.slice(a, b - a)
        part.append(p)
    return pc.binary_join_element_wise(*part, "")


def _json_key(name: str) -> str:
    """A key as JSON text."""
    return json.dumps(name, ensure_ascii=False)


def _json_column(name: str, s: pd.Series, time_fields: Collection[str], tz: str | None = None) -> tuple[tuple, list]:
    """A column's texts: the text around and between its values (one more than the columns
    of values) and the columns of values (JSON text, a list or an Arrow string array)."""
    if name in ("lo", "hi") or name in time_fields:
        text = time_texts(s, tz)
        if not text.null_count and json_plain_text(text):
            return ('"', '"'), [text]
        return _json_values(text.to_pylist())
    if name in MAPS:
        struct = _arrow_struct(s)
        if struct is not None:
            got = _struct_events(struct)
            return got if got is not None else _json_events(struct.to_pylist())
        return _json_events(s.tolist())
    arr = arrow_text(s)
    if arr is not None and not arr.null_count and json_plain_text(arr):
        # Arrow text (the Spark tasks' hulls): between quotes as it is, nothing to escape
        return ('"', '"'), [arr]
    return _json_values(_plain_column(s))


def _arrow_struct(s: pd.Series) -> pa.StructArray | None:
    """The Arrow struct array behind a column of ``pd.ArrowDtype`` structs (the fast path's
    bound events, :meth:`~spatec.vector.fastpath.Matches.event_ids`), as one array; else None."""
    dtype = s.dtype
    if isinstance(dtype, pd.ArrowDtype) and pa.types.is_struct(dtype.pyarrow_dtype):
        return one_array(pa.array(s.array))
    return None


def _struct_fields(arr: pa.StructArray) -> tuple[list, list] | None:
    """A struct array's field names and arrays when they stand for the rows' dicts of
    :func:`events_dict` (names sorted and distinct, text fields, no missing value or
    struct); else None."""
    keys = [f.name for f in arr.type]
    if not keys or keys != sorted(keys) or len(set(keys)) != len(keys) or arr.null_count:
        return None
    cols = arr.flatten()
    if not all(c.type == pa.string() and not c.null_count for c in cols):
        return None
    return keys, cols


def _struct_events(arr: pa.StructArray) -> tuple[tuple, list] | None:
    """:func:`_json_events` of a struct array (its Python values are the rows' dicts): when
    its fields are sorted text with no missing value or struct, each needing no escaping,
    ``{"A": "…", ...}`` around the fields' own arrays; else None."""
    got = _struct_fields(arr)
    if got is None or not all(json_plain_text(c) for c in got[1]):
        return None
    keys, cols = got
    between = ["{" + _json_key(keys[0]) + ': "']
    between += ['", ' + _json_key(k) + ': "' for k in keys[1:]]
    return (*between, '"}'), cols


def _json_values(values: list) -> tuple[tuple, list]:
    """:func:`_json_column` of JSON-ready values (as :func:`plain_value` gives them). One
    text in every row (a phrase's name) is written once, a dictionary array of it."""
    if len(values) > 1 and type(values[0]) is str and values[0] == values[-1] \
            and values.count(values[0]) == len(values) and set(map(type, values)) == {str}:
        between, (col,) = _json_values(values[:1])
        col = col if isinstance(col, pa.Array) else pa.array(col, pa.string())
        return between, [pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(values), np.int32)), col)]
    text = json_verbatim(values)
    if text is not None:
        return ('"', '"'), [text]
    if set(map(type, values)) <= _SCALAR.keys():
        enc = _SCALAR
        return ("", ""), [[enc[type(v)](v) for v in values]]
    dumps = json.dumps
    return ("", ""), [[dumps(v, ensure_ascii=False, allow_nan=False) for v in values]]


def _json_events(values: list) -> tuple[tuple, list]:
    """:func:`_json_column` of ``events``. When every row binds the same variables, in
    order, to text that needs no escaping (the usual case: a phrase's variables to event
    ids), ``{"A": "…", ...}`` around a column of ids per variable; else each row's dict as
    :func:`events_dict` makes it."""
    if values and all(type(v) is dict for v in values):
        keys = tuple(values[0])
        if all(type(k) is str for k in keys) and list(keys) == sorted(keys) \
                and all(tuple(v) == keys for v in values):
            cols = [json_verbatim([v[k] for v in values]) for k in keys]
            if all(c is not None for c in cols):
                if not keys:
                    return ("{}",), []
                between = ["{" + _json_key(keys[0]) + ': "']
                between += ['", ' + _json_key(k) + ': "' for k in keys[1:]]
                return (*between, '"}'), cols
    dumps = json.dumps
    return ("", ""), [[dumps(events_dict(v), ensure_ascii=False) for v in values]]


#: JSON text of a plain value, as json.dumps writes it (floats are finite here: plain_value
#: turns the others into None).
_SCALAR = {
    str: json.encoder.encode_basestring,
    int: int.__repr__,
    float: float.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
}


def read_jsonl_composites(path: PathLike, time_fields: Collection[str] = ()) -> pd.DataFrame:
    """Composites written by :func:`write_jsonl`, with ``lo``, ``hi`` and ``time_fields`` back as µs."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return _frame_back(rows, time_fields)


def _frame_back(rows: list, time_fields: Collection[str]) -> pd.DataFrame:
    """JSON lines records as the frame they were written from (times back to µs)."""
    df = pd.DataFrame(rows, columns=list(rows[0]) if rows else list(FIXED))
    return _times_back(df, ("lo", "hi", *time_fields))


def _times_back(df: pd.DataFrame, names: Collection[str]) -> pd.DataFrame:
    for c in names:
        if c in df.columns:
            p = parse_times(df[c].astype(object).where(df[c].notna(), None))
            if p.errors:
                raise ValueError(f"{c}: {next(iter(p.errors.values()))}")
            df[c] = pd.array(np.where(p.missing, 0, p.values), dtype="Int64")
            df.loc[p.missing, c] = pd.NA
            if not p.missing.any():
                df[c] = df[c].astype("int64")
    return df


# --------------------------------------------------------------------------- GeoParquet

def _timestamps(values: Any) -> pa.Array:
    return pa.array(pd.array(values, dtype="Int64"), pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def _geo_metadata(types: set, bbox: list | None) -> dict[str, Any]:
    column: dict[str, Any] = {"encoding": "WKB", "geometry_types": sorted(types)}
    if bbox is not None:
        column["bbox"] = bbox
    return {"version": "1.0.0", "primary_column": "hull", "columns": {"hull": column}}


def _string_map(column: pd.Series) -> pa.Array:
    """A ``map<string, string>`` column of :func:`events_dict` of each value. When every
    value is a dict of text to text with the same keys in sorted order (a phrase's
    variables to event ids), built from one column of values per key, without a
    dict per row; from an Arrow struct column of such (the fast path's bound events,
    :func:`_arrow_struct`), from its fields' arrays."""
    struct = _arrow_struct(column)
    if struct is not None:
        got = _struct_map(struct)
        if got is not None:
            return got
    values = column.tolist() if struct is None else struct.to_pylist()
    if values and all(type(v) is dict for v in values):
        keys = list(values[0])
        if all(type(k) is str for k in keys) and keys == sorted(keys) and len(set(keys)) == len(keys) \
                and all(list(v) == keys for v in values):
            cols = [[v[k] for v in values] for k in keys]
            if all(type(x) is str for col in cols for x in col):
                n, k = len(values), len(keys)
                items = pa.array([x for row in zip(*cols) for x in row], pa.string()) if k else pa.array([], pa.string())
                return pa.MapArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32) * k),
                                               pa.array(np.tile(np.array(keys, dtype=object), n), pa.string()),
                                               items, pa.map_(pa.string(), pa.string()))
    return pa.array([list(events_dict(v).items()) for v in values], pa.map_(pa.string(), pa.string()))


def _struct_map(arr: pa.StructArray) -> pa.Array | None:
    """:func:`_string_map` of a struct array of sorted, distinct text fields with no missing
    value or struct: each row's fields in order, as the dicts' items; else None."""
    got = _struct_fields(arr)
    if got is None:
        return None
    keys, cols = got
    n, k = len(arr), len(keys)
    # row i's item j is field j's value i: row-major positions in the fields put end to end
    at = (np.arange(k, dtype=np.int64)[None, :] * n + np.arange(n, dtype=np.int64)[:, None]).reshape(-1)
    items = pa.concat_arrays(cols).take(pa.array(at))
    return pa.MapArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32) * k),
                                   pa.array(np.tile(np.array(keys, dtype=object), n), pa.string()),
                                   items, pa.map_(pa.string(), pa.string()))


def write_parquet(df: pd.DataFrame, path: PathLike, time_fields: Collection[str] = (), tz: str | None = None) -> None:
    """GeoParquet 1.0: hull as WKB, times as UTC timestamps, events as a string map.
    ``tz`` is not used: a timestamp is an instant, whatever zone shows it."""
    table = parquet_table(_ordered(df), time_fields)
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))


#: The Arrow type of an emit field of each checker type in GeoParquet (every file and part of a
#: phrase the same schema, whatever values it happens to hold).
PARQUET_TYPES = {"str": pa.string(), "bool": pa.bool_(), "int": pa.int64(), "geometry": pa.string()}


def parquet_table(df: pd.DataFrame, time_fields: Collection[str] = (), plan=None) -> pa.Table:
    """Ordered composites as the Arrow table :func:`write_parquet` writes, with its
    GeoParquet metadata (``geo``). With ``plan`` (the phrase's), each emit field has its
    type's Arrow type (:data:`PARQUET_TYPES`; numbers of every unit float64), so that every
    part of a phrase's output has one schema."""
    hulls = hull_array(df["hull"])        # (the fast path's WKB, for Spark tasks' parts)
    hull = hull_wkb(hulls) if hulls is not None else wkb_column(_text_column(df["hull"]))
    arrays = {
        "phrase": pa.array(df["phrase"].tolist(), pa.string()),
        "id": pa.array(df["id"].tolist(), pa.string()),
        "lo": _timestamps(df["lo"]),
        "hi": _timestamps(df["hi"]),
        "hull": hull.wkb,
        "events": _string_map(df["events"]),
    }
    for c in _emit_fields(df):
        if c in MAPS:
            arrays[c] = _string_map(df[c])
        elif c in time_fields:
            arrays[c] = _timestamps(df[c])
        else:
            arrays[c] = to_arrow(df[c]) if len(df) else pa.array([], pa.null())
    if plan is not None:
        types = dict(plan.schema)
        for c in list(arrays):
            if c in types and c not in time_fields and c not in MAPS:
                want = PARQUET_TYPES.get(types[c], pa.float64())
                if arrays[c].type != want:
                    arrays[c] = arrays[c].cast(want)
    table = pa.table(arrays)
    return table.replace_schema_metadata({b"geo": json.dumps(_geo_metadata(hull.types, hull.bbox)).encode()})


def _text_column(s: pd.Series):
    """A column of WKT as the Arrow array behind it (Spark tasks' hulls) or as objects."""
    arr = arrow_text(s)
    return arr if arr is not None else s.to_numpy(dtype=object)


def merge_parquet_files(files: list, path: PathLike) -> int:
    """GeoParquet parts (each in order, the parts in order) as one file, row group after row
    group (never the whole table in memory), with the parts' ``geo`` metadata put together;
    the rows written. The parts of one phrase have one schema (:func:`parquet_table` with its
    plan); they are cast to the first's should they differ."""
    files = [os.fspath(f) for f in files]
    schemas = [pq.read_schema(f) for f in files]
    schema = schemas[0].remove_metadata().with_metadata(merged_metadata(schemas))
    n = 0
    with pq.ParquetWriter(os.fspath(path), schema) as w:
        for f in files:
            pf = pq.ParquetFile(f)
            for g in range(pf.metadata.num_row_groups):
                t = pf.read_row_group(g)
                if t.schema.remove_metadata() != schema.remove_metadata():
                    t = t.cast(schema.remove_metadata())
                w.write_table(t.replace_schema_metadata(schema.metadata))
                n += t.num_rows
    return n


def merged_metadata(schemas: list) -> dict:
    """The schema metadata of GeoParquet parts put together: the first's, with the ``geo``
    of them all (:func:`_merged_geo`: every geometry type, the box around every box)."""
    geos = [json.loads(sc.metadata[b"geo"])["columns"]["hull"] for sc in schemas
            if sc.metadata and b"geo" in sc.metadata]
    meta = dict(schemas[0].metadata or {})
    if geos:
        meta[b"geo"] = json.dumps(_merged_geo(geos)).encode()
    return meta


def _merged_geo(columns: list) -> dict[str, Any]:
    """The ``geo`` metadata of the parts' hull columns put together (types, bounding box)."""
    column: dict[str, Any] = {"encoding": "WKB",
                              "geometry_types": sorted({t for c in columns for t in c["geometry_types"]})}
    boxes = np.array([c["bbox"] for c in columns if "bbox" in c], dtype=float)
    if len(boxes):
        column["bbox"] = [float(boxes[:, 0].min()), float(boxes[:, 1].min()), float(boxes[:, 2].max()),
                          float(boxes[:, 3].max())]
    return {"version": "1.0.0", "primary_column": "hull", "columns": {"hull": column}}


def read_parquet_composites(path: PathLike) -> pd.DataFrame:
    """Composites written by :func:`write_parquet`: timestamps back to µs, hull to WKT,
    events to dicts. The GeoParquet metadata is in ``df.attrs["geo"]``."""
    table = pq.read_table(path)
    columns = {}
    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_timestamp(col.type):
            ints = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            columns[name] = ints.to_pandas() if ints.null_count else ints.to_numpy()
        elif name == "hull":
            wkb = col.to_numpy()
            columns[name] = shapely.to_wkt(shapely.from_wkb(wkb), rounding_precision=-1) if len(wkb) else wkb
        elif name in MAPS:
            columns[name] = [events_dict(v) for v in col.to_pylist()]
        else:
            columns[name] = col.to_pandas()
    df = pd.DataFrame(columns)
    meta = table.schema.metadata or {}
    if b"geo" in meta:
        df.attrs["geo"] = json.loads(meta[b"geo"])
    return df


# --------------------------------------------------------------------------- GeoJSON

#: A GeoJSON file is this, its features' texts joined by :data:`GEOJSON_BETWEEN`, then :data:`GEOJSON_TAIL`:
#: the bytes ``json.dump`` writes for the FeatureCollection.
GEOJSON_HEAD = '{"type": "FeatureCollection", "features": ['
GEOJSON_BETWEEN = ", "
GEOJSON_TAIL = "]}\n"


def geojson_texts(df: pd.DataFrame, time_fields: Collection[str] = (), tz: str | None = None) -> pa.Array:
    """Each row's feature of :func:`write_geojson` (rows in the frame's order) as JSON text:
    geometry = hull; properties = phrase, id, lo, hi, events, emit fields (times in UTC, or
    with ``tz`` in that zone with its offset)."""
    if not len(df):
        return pa.array([], pa.string())
    geoms = shapely.from_wkt(np.asarray(_text_column(df["hull"]), dtype=object))
    geojson = shapely.to_geojson(geoms)
    dumps = json.dumps
    out = []
    for row, g in zip(json_rows(df, time_fields, tz), geojson):
        properties = {k: v for k, v in row.items() if k != "hull"}
        out.append(dumps({"type": "Feature", "id": row["id"], "geometry": json.loads(g) if g is not None else None,
                          "properties": properties}, ensure_ascii=False, allow_nan=False))
    return pa.array(out, pa.string())


def write_geojson(df: pd.DataFrame, path: PathLike, time_fields: Collection[str] = (), tz: str | None = None) -> None:
    """A FeatureCollection of the composites (:func:`geojson_texts`)."""
    texts = geojson_texts(_ordered(df), time_fields, tz)

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(GEOJSON_HEAD)
            f.write(GEOJSON_BETWEEN.join(texts.to_pylist()))
            f.write(GEOJSON_TAIL)

    atomic_write(path, write)


# --------------------------------------------------------------------------- choosing one

@dataclass(frozen=True)
class Writer:
    """A sink format: its name, its file extension (no dot) and the function that writes it."""

    fmt: str
    extension: str
    write: Callable[..., None]

    def __call__(self, df: pd.DataFrame, path: PathLike, time_fields: Collection[str] = (),
                 tz: str | None = None) -> None:
        self.write(df, path, time_fields, tz)


WRITERS: dict[str, Writer] = {
    "jsonl": Writer("jsonl", "jsonl", write_jsonl),
    "parquet": Writer("parquet", "parquet", write_parquet),
    "geojson": Writer("geojson", "geojson", write_geojson),
}


def writer(fmt: str) -> Writer:
    """The writer of a sink format: ``jsonl``, ``parquet`` or ``geojson``."""
    try:
        return WRITERS[fmt]
    except KeyError:
        raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(WRITERS)}") from None


def extension(fmt: str) -> str:
    """The file extension of a sink format, without the dot: ``f"{phrase}.{extension(fmt)}"``."""
    return writer(fmt).extension

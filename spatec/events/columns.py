"""Typing one column: raw values (any Arrow type) to a declared attribute type.

One converter per type in ``CONVERTERS``; each returns a :class:`Parsed`
(values, missing rows, failed rows with the problem). The common cases run
vectorised over the whole column; the rows they leave undone go through the
per-row ``_scalar_*`` function of that type, which is the definition of what
is accepted and says why a value is not.

Result types: str -> object (Python str, None), int -> pandas Int64,
float -> float64 (NaN), bool -> pandas boolean, time -> int64 µs UTC,
geometry -> WKT text (object; lon/lat as given).
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import shapely

from spatec.events.raw import (
    FLOAT_PATTERN,
    FLOAT_RE,
    INT_PATTERN,
    INT_RE,
    SPECIAL_FLOAT_PATTERN,
    SPECIAL_FLOAT_RE,
    blank,
    cast_numbers,
    matches,
    show,
    to_arrow,
    trimmed,
)
from spatec.events.timefmt import Parsed, parse_times

TRUE_WORDS = ("true", "t", "yes", "y", "1")
FALSE_WORDS = ("false", "f", "no", "n", "0")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _prepare(values: Any) -> pa.Array:
    arr = to_arrow(values)
    return arr.cast(pa.string()) if pa.types.is_null(arr.type) else arr


def _missing(arr: pa.Array) -> np.ndarray:
    if pa.types.is_string(arr.type):
        return blank(arr)
    return pc.is_null(arr).to_numpy(zero_copy_only=False)


def _finish(arr: pa.Array, done: np.ndarray, missing: np.ndarray, scalar: Callable[[Any], Any],
            put: Callable[[int, Any], None]) -> dict[int, str]:
    """Run the per-row definition on the rows the fast path left undone."""
    errors: dict[int, str] = {}
    for i in np.flatnonzero(~done & ~missing):
        try:
            put(int(i), scalar(arr[int(i)].as_py()))
        except ValueError as e:
            errors[int(i)] = str(e)
    return errors


# --------------------------------------------------------------------------- str

def to_str(values: Any) -> Parsed:
    arr = _prepare(values)
    missing = _missing(arr)
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type) or pa.types.is_fixed_size_binary(arr.type):
        return _binary_text(arr, missing)
    if not pa.types.is_string(arr.type):
        if pa.types.is_floating(arr.type):
            # 401.0 read from JSON is the text "401.0"; JSON's own rendering, not Arrow's "401"
            arr = pa.array([None if v is None else json.dumps(v) for v in arr.to_pylist()], pa.string())
        else:
            try:
                arr = arr.cast(pa.string())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                arr = pa.array([None if v is None else show(v, limit=10**9) for v in arr.to_pylist()],
                               pa.string())
    out = str_objects(arr)
    out[missing] = None
    return Parsed(out, missing, {}, arrow=arr)


def _binary_text(arr: pa.Array, missing: np.ndarray) -> Parsed:
    """Bytes (a Parquet ``binary`` column) as the text they are in UTF-8, as a CSV file's are
    read; a value that is not UTF-8 is an error of its row (kept as it is, never replaced),
    as in a CSV file: ``BUS-\\xe9`` and ``BUS-\\xe8`` are never one vehicle."""
    values = arr.to_pylist()
    texts: list = []
    errors: dict = {}
    for i, v in enumerate(values):
        if v is None:
            texts.append(None)
            continue
        try:
            texts.append(v.decode("utf-8"))
        except UnicodeDecodeError as e:
            errors[i] = (f"not UTF-8 (byte 0x{v[e.start]:02X} at character {len(v[:e.start].decode('utf-8')) + 1}); "
                         "convert the column to UTF-8 text")
            texts.append(None)
    bad = np.zeros(len(values), dtype=bool)
    if errors:
        bad[list(errors)] = True
    text = pa.array(texts, pa.string())
    missing = blank(text) & ~bad         # (blank like a text column's; a bad value is its error)
    out = str_objects(text)
    out[missing | bad] = None
    return Parsed(out, missing, errors, arrow=text)


def one_array(arr) -> pa.Array:
    """An Arrow array, or a chunked one as one array."""
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def arrow_text(values) -> pa.Array | None:
    """The Arrow string array behind a pandas Series (or array) of ``pd.ArrowDtype``
    text, as one array; None for a column held otherwise."""
    dtype = getattr(values, "dtype", None)
    if isinstance(dtype, pd.ArrowDtype) and pa.types.is_string(dtype.pyarrow_dtype):
        return one_array(pa.array(values.array if isinstance(values, pd.Series) else values))
    return None


def str_objects(arr: pa.Array) -> np.ndarray:
    """A string array as a numpy array of Python strings. Text columns repeat a few
    values (vehicles, lines, operators): each distinct value is made a Python string
    once and shared, about three times cheaper than one string per row; when most
    values are distinct, one per row it is."""
    if len(arr) >= 1024:
        enc = arr.dictionary_encode()
        if len(enc.dictionary) * 4 <= len(arr):
            if not len(enc.dictionary):
                return np.full(len(arr), None, dtype=object)
            values = enc.dictionary.to_numpy(zero_copy_only=False).astype(object, copy=False)
            out = values[enc.indices.fill_null(0).to_numpy()]
            if enc.indices.null_count:
                out[pc.is_null(enc.indices).to_numpy(zero_copy_only=False)] = None
            return out
    return arr.to_numpy(zero_copy_only=False).astype(object, copy=False)


# --------------------------------------------------------------------------- float

def _scalar_float(v: Any) -> float:
    if isinstance(v, str):
        s = v.strip()
        if FLOAT_RE.match(s) or SPECIAL_FLOAT_RE.match(s):
            return float(s)
    elif isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
        return float(v)
    raise ValueError(f"cannot parse {show(v)} as a float")


def to_float(values: Any) -> Parsed:
    arr = _prepare(values)
    t = arr.type
    fast = cast_numbers(arr, pa.float64()) if pa.types.is_string(t) else None
    if fast is not None:  # no blanks (they fail the cast); nulls are missing
        return Parsed(fast.fill_null(np.nan).to_numpy(zero_copy_only=False),
                      pc.is_null(fast).to_numpy(zero_copy_only=False), {})
    n = len(arr)
    missing = _missing(arr)
    out = np.full(n, np.nan)
    done = np.zeros(n, bool)
    if pa.types.is_string(t):
        s = trimmed(arr)
        ok = (matches(s, FLOAT_PATTERN) | matches(s, SPECIAL_FLOAT_PATTERN)) & ~missing
        if ok.any():
            out[ok] = pc.cast(s.filter(ok), pa.float64()).to_numpy(zero_copy_only=False)
            done |= ok
    elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        vals = arr.cast(pa.float64()).to_numpy(zero_copy_only=False)
        out[~missing] = vals[~missing]
        done |= ~missing

    def put(i: int, v: float) -> None:
        out[i] = v

    return Parsed(out, missing, _finish(arr, done, missing, _scalar_float, put))


# --------------------------------------------------------------------------- int

def _scalar_int(v: Any) -> int:
    bad = ValueError(f"cannot parse {show(v)} as an int")
    if isinstance(v, (bool, np.bool_)):
        raise bad
    if isinstance(v, str):
        s = v.strip()
        if INT_RE.match(s):
            x = int(s)
        elif FLOAT_RE.match(s) and float(s).is_integer():
            x = int(float(s))  # "3.0", "1e3": integral numbers written as floats
        else:
            raise bad
    elif isinstance(v, (int, np.integer)):
        x = int(v)
    elif isinstance(v, (float, np.floating)) and math.isfinite(v) and float(v).is_integer():
        x = int(v)
    else:
        raise bad
    if not INT64_MIN <= x <= INT64_MAX:
        raise ValueError(f"{show(v)} is out of range for an int")
    return x


def to_int(values: Any) -> Parsed:
    arr = _prepare(values)
    n = len(arr)
    missing = _missing(arr)
    out = np.zeros(n, np.int64)
    done = np.zeros(n, bool)
    t = arr.type
    fast = cast_numbers(arr, pa.int64()) if pa.types.is_string(t) else None
    if fast is not None:
        out[~missing] = fast.fill_null(0).to_numpy()[~missing]
        done |= ~missing
    elif pa.types.is_string(t):
        s = trimmed(arr)
        ok = matches(s, INT_PATTERN) & ~missing
        if ok.any():
            try:
                out[ok] = pc.cast(pc.replace_substring_regex(s.filter(ok), r"^\+", ""), pa.int64()).to_numpy()
                done |= ok
            except (pa.ArrowInvalid, OverflowError):
                pass  # out of int64 somewhere: per row
    elif pa.types.is_integer(t):
        try:
            vals = arr.cast(pa.int64()).fill_null(0).to_numpy()
            out[~missing] = vals[~missing]
            done |= ~missing
        except (pa.ArrowInvalid, OverflowError):
            pass
    elif pa.types.is_floating(t):
        vals = arr.fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float64)
        ok = ~missing & np.isfinite(vals) & (vals == np.floor(vals)) & (np.abs(vals) < 2.0**63)
        out[ok] = vals[ok].astype(np.int64)
        done |= ok

    def put(i: int, v: int) -> None:
        out[i] = v

    errors = _finish(arr, done, missing, _scalar_int, put)
    result = pd.array(out, dtype="Int64")
    result[missing] = pd.NA
    return Parsed(result, missing, errors)


# --------------------------------------------------------------------------- bool

def _scalar_bool(v: Any) -> bool:
    """Words (true/false, t/f, yes/no, y/n) or the numbers 0 and 1, written or typed
    (JSON does not tell 1 from 1.0, so neither does this)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in TRUE_WORDS + FALSE_WORDS:
            return s in TRUE_WORDS
        if FLOAT_RE.match(s) and float(s) in (0.0, 1.0):
            return float(s) == 1.0
    elif isinstance(v, (int, float, np.integer, np.floating)) and v in (0, 1):
        return bool(v)
    raise ValueError(f"cannot parse {show(v)} as a bool")


def to_bool(values: Any) -> Parsed:
    arr = _prepare(values)
    n = len(arr)
    missing = _missing(arr)
    out = np.zeros(n, bool)
    done = np.zeros(n, bool)
    if pa.types.is_boolean(arr.type):
        out[~missing] = arr.fill_null(False).to_numpy(zero_copy_only=False)[~missing]
        done |= ~missing
    elif pa.types.is_string(arr.type):
        low = pc.utf8_lower(trimmed(arr))
        yes = pc.is_in(low, pa.array(TRUE_WORDS)).fill_null(False).to_numpy(zero_copy_only=False)
        no = pc.is_in(low, pa.array(FALSE_WORDS)).fill_null(False).to_numpy(zero_copy_only=False)
        out |= yes
        done |= yes | no

    def put(i: int, v: bool) -> None:
        out[i] = v

    errors = _finish(arr, done, missing, _scalar_bool, put)
    result = pd.array(out, dtype="boolean")
    result[missing] = pd.NA
    return Parsed(result, missing, errors)


# --------------------------------------------------------------------------- geometry

def _parse_geometries(arr: pa.Array) -> np.ndarray:
    """shapely geometries (None where unreadable) from WKT or GeoJSON text, or WKB bytes."""
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        return shapely.from_wkb(arr.to_numpy(zero_copy_only=False), on_invalid="ignore")
    text = trimmed(arr.cast(pa.string()) if not pa.types.is_string(arr.type) else arr)
    vals = text.to_numpy(zero_copy_only=False).astype(object)
    geoms = np.full(len(vals), None, dtype=object)
    is_json = pc.starts_with(text, "{").fill_null(False).to_numpy(zero_copy_only=False)
    if (~is_json).any():
        geoms[~is_json] = shapely.from_wkt(vals[~is_json], on_invalid="ignore")
    if is_json.any():
        geoms[is_json] = shapely.from_geojson(vals[is_json], on_invalid="ignore")
    return geoms


def to_geometry(values: Any) -> Parsed:
    arr = _prepare(values)
    missing = _missing(arr)
    errors: dict[int, str] = {}
    try:
        geoms = _parse_geometries(arr)
    except Exception:  # shapely/GEOS raise several kinds; the message goes in the reason below
        geoms = np.full(len(arr), None, dtype=object)
    failed = ~missing & pd.isna(geoms)
    for i in np.flatnonzero(failed):
        errors[int(i)] = f"cannot parse {show(arr[int(i)].as_py())} as a geometry (WKT or GeoJSON)"
    ok = ~missing & ~failed
    out = np.full(len(arr), None, dtype=object)
    if ok.any():
        out[ok] = shapely.to_wkt(geoms[ok], rounding_precision=-1)
    return Parsed(out, missing, errors)


def geometry_bounds(wkt: np.ndarray) -> np.ndarray:
    """(minx, miny, maxx, maxy) per WKT text (NaN for empty or missing)."""
    return shapely.bounds(shapely.from_wkt(wkt))


CONVERTERS: dict[str, Callable[..., Parsed]] = {
    "str": to_str,
    "int": to_int,
    "float": to_float,
    "bool": to_bool,
    "geometry": to_geometry,
    "time": parse_times,
}


def convert(values: Any, type_name: str, tz: str = "UTC") -> Parsed:
    """Type a column as a declared attribute type (``str``, ``int``, ``float``, ``bool``,
    ``time``, ``geometry``)."""
    if type_name not in CONVERTERS:
        raise ValueError(f"unknown attribute type {type_name!r}; expected one of {sorted(CONVERTERS)}")
    if type_name == "time":
        return parse_times(values, tz)
    return CONVERTERS[type_name](values)


def json_plain_text(arr: pa.Array) -> bool:
    """Whether JSON writes every text of a string array as it is, in quotes: no quote,
    backslash or control character (what ``json.dumps`` escapes with ``ensure_ascii=False``).
    The writers' test (:func:`spatec.sinks.encoding.json_verbatim`) and the composite ids'
    (:mod:`spatec.vector.ids`)."""
    # in UTF-8 a byte below 0x20 is a control character: no other character has one;
    # (a slice of an array shares the whole array's buffer: only its own bytes are read).
    # The bytes are read in place, a block at a time (kept in cache for the three tests),
    # rather than copied to look for quotes and backslashes with bytes.find
    ends = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=4 * arr.offset)
    a, b = int(ends[0]), int(ends[-1])
    if b > a:
        text = np.frombuffer(arr.buffers()[2], dtype=np.uint8, count=b - a, offset=a)
        for i in range(0, len(text), _PLAIN_BLOCK):
            block = text[i:i + _PLAIN_BLOCK]
            if block.min() < 0x20 or (block == 0x22).any() or (block == 0x5C).any():   # ", \\
                return False
    return True


#: Bytes of text tested at a time by :func:`json_plain_text`.
_PLAIN_BLOCK = 1 << 18

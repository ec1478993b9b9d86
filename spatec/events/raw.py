"""Records as read, before they are typed: one :class:`RawBatch` per input file.

Every reader (CSV, Parquet, JSON lines, SIRI-VM polls) produces raw batches;
:mod:`spatec.events.canonical` turns them into events. A batch keeps its columns
as Arrow arrays in whatever types the file had (CSV: all strings), so typing
runs vectorised over whole columns and only the rows that fail the fast path
are looked at one by one.

This module also holds what readers and converters share: turning Python or
pandas values into one Arrow array, the number grammar accepted in text, and
how a bad value is shown in a reject reason.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

# --------------------------------------------------------------------------- number grammar
# One grammar for numbers written as text, used by the vectorised paths (RE2 via
# pyarrow) and the per-row paths (Python re) alike, so both accept the same text.
# Python's float() alone would also take "1_000" and " 1 " variants we do not.
INT_PATTERN = r"^[+-]?[0-9]+$"
FLOAT_PATTERN = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
SPECIAL_FLOAT_PATTERN = r"(?i)^[+-]?(?:nan|inf|infinity)$"
INT_RE = re.compile(INT_PATTERN)
FLOAT_RE = re.compile(FLOAT_PATTERN)
SPECIAL_FLOAT_RE = re.compile(SPECIAL_FLOAT_PATTERN)


def matches(arr: pa.Array, pattern: str) -> np.ndarray:
    """Rows of a string array that match ``pattern`` (nulls never match)."""
    return pc.match_substring_regex(arr, pattern).fill_null(False).to_numpy(zero_copy_only=False)


def cast_numbers(arr: pa.Array, to: pa.DataType) -> pa.Array | None:
    """A whole text column cast to a number type at once, or None when any value is not
    plainly a number in the grammar above (a blank, padding, ...): then the caller takes
    the slower path. Arrow's cast accepts a little more than the grammar (hex integers,
    "nan(…)"); columns with those take the slower path too, so a value reads the same
    whichever path it takes."""
    try:
        pc.cast(arr.slice(0, 64), to)  # a failing cast of a long column is slow to fail
        out = pc.cast(arr, to)
    except (pa.ArrowInvalid, OverflowError):
        return None
    odd = "x" if pa.types.is_integer(to) else "("
    if pc.any(pc.match_substring(arr, odd, ignore_case=True)).as_py():
        return None
    return out


def trimmed(arr: pa.Array) -> pa.Array:
    return pc.utf8_trim_whitespace(arr)


def blank(arr: pa.Array) -> np.ndarray:
    """Missing values of a string array: null, empty, or only whitespace.

    CSV cannot tell an empty cell from a null, so spatec never does: blank
    text is a missing value in every format.
    """
    empty = pc.or_kleene(pc.equal(arr, ""), pc.utf8_is_space(arr))
    return pc.or_kleene(pc.is_null(arr), empty).fill_null(True).to_numpy(zero_copy_only=False)


# --------------------------------------------------------------------------- showing values

def show(value: Any, limit: int = 80) -> str:
    """A raw value as it appears in a reject reason: JSON-style, strings quoted."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=_json_default)
    except ValueError:
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _json_default(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (_dt.timedelta, pd.Timedelta)):
        return str(v)
    return str(v)


# --------------------------------------------------------------------------- bytes that are not UTF-8
# Text is decoded with ``surrogateescape``: a byte that is not UTF-8 stays itself (as a lone
# surrogate), never becomes U+FFFD, so two different bad ids can never read as one. A record
# holding one is a reject (:func:`utf8_problem` says where), shown with the byte escaped.

def utf8_problem(text: str) -> str | None:
    """Where ``text`` (decoded with ``surrogateescape``) holds a byte that is not UTF-8,
    or None.

    >>> utf8_problem(b"BUS-\\xe9".decode("utf-8", "surrogateescape"))
    'byte 0xE9 at character 5'
    """
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"byte 0x{ord(text[e.start]) - 0xDC00:02X} at character {e.start + 1}"
    return None


def printable(text: str) -> str:
    """``text`` with every byte that is not UTF-8 written as ``\\xNN`` (to show it).

    >>> printable(b"BUS-\\xe9".decode("utf-8", "surrogateescape"))
    'BUS-\\\\xe9'
    """
    if text.isascii():
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def printable_value(value: Any) -> Any:
    """A parsed JSON value with :func:`printable` applied to every string in it, keys too."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(str(k)): printable_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_value(v) for v in value]
    return value


def json_record(record: Mapping[str, Any]) -> str:
    """A raw record as one JSON string (the ``record`` of a reject)."""
    return json.dumps(record, ensure_ascii=False, default=_json_default)


# --------------------------------------------------------------------------- Arrow normalisation

def _stringify(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, float) and np.isnan(v):
        return None
    return json.dumps(v, ensure_ascii=False, default=_json_default)


def to_arrow(values: Any) -> pa.Array:
    """One Arrow array from a list, numpy array, pandas Series or Arrow array.

    Uniform columns keep their type (strings, integers, floats, booleans,
    timestamps). A column that mixes kinds (JSON: a number in one record, a
    string in the next) or nests objects becomes strings, numbers and objects
    written as JSON text: every converter reads text.
    """
    if isinstance(values, pa.ChunkedArray):
        arr = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    elif isinstance(values, pa.Array):
        arr = values
    else:
        if isinstance(values, (pd.Series, pd.Index)) and isinstance(values.dtype, pd.CategoricalDtype):
            values = values.astype(object)
        try:
            arr = pa.array(values, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            return pa.array([_stringify(v) for v in _as_list(values)], pa.string())
        if pa.types.is_floating(arr.type) and isinstance(values, list) \
                and any(isinstance(v, (int, np.integer, np.bool_)) for v in values):
            # Arrow reads [0, 0.5, False] as doubles; as text each keeps what it was
            # ("0", "0.5", "false"), so a row reads the same whatever its neighbours
            return pa.array([_stringify(v) for v in values], pa.string())
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_nested(arr.type):
        return pa.array([_stringify(v) for v in arr.to_pylist()], pa.string())
    if pa.types.is_large_string(arr.type) or pa.types.is_string_view(arr.type):
        arr = arr.cast(pa.string())
    return arr


def _as_list(values: Any) -> list:
    if isinstance(values, (pd.Series, pd.Index)):
        return values.astype(object).where(values.notna(), None).tolist()
    if isinstance(values, np.ndarray):
        return values.tolist()
    return list(values)


def unify(arrays: Sequence[pa.Array]) -> pa.Array:
    """Concatenate arrays of one column read from several files.

    Equal types concatenate as they are; integers with floats become floats;
    anything else mixed is read as text (see :func:`to_arrow`).
    """
    typed = [a for a in arrays if not pa.types.is_null(a.type)]
    if not typed:
        return pa.nulls(sum(len(a) for a in arrays), pa.string())
    kinds = {a.type for a in typed}
    if len(kinds) == 1:
        target = typed[0].type
    elif all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in kinds):
        target = pa.float64()
    else:
        target = pa.string()
    out = []
    for a in arrays:
        if a.type == target:
            out.append(a)
        elif pa.types.is_null(a.type):
            out.append(pa.nulls(len(a), target))
        elif target == pa.string() and not pa.types.is_string(a.type):
            out.append(pa.array([_stringify(v) for v in a.to_pylist()], pa.string()))
        else:
            out.append(a.cast(target))
    return pa.concat_arrays(out) if out else pa.array([], target)


def records_to_table(records: Sequence[Mapping[str, Any]],
                     only: Collection[str] | None = None) -> tuple[pa.Table, list[str]]:
    """A table from JSON objects: columns in order of first appearance, absent keys null.

    With ``only``, just those fields become columns. Second: every field seen.
    """
    names: dict[str, None] = {}
    for r in records:
        names.update(dict.fromkeys(r))
    cols = {k: to_arrow([r.get(k) for r in records]) for k in names if only is None or k in only}
    return (pa.table(cols) if cols else pa.table({})), list(names)


# --------------------------------------------------------------------------- raw batches

@dataclass
class RawBatch:
    """The records of one input file, as read.

    ``names`` maps an attribute name to the index of the column that feeds it:
    the identity for CSV, Parquet and JSON lines; a format adapter such as
    SIRI-VM renames here, so the raw columns keep their names in reject
    records. ``rows`` is each table row's record number in the file.

    ``unreadable`` holds records that could not even be split into fields (a
    malformed CSV row, a line that is not JSON): ``(row, reason, record
    JSON)``. ``provides`` names attributes the format defines even when this
    file happens to lack the field (a poll in which no vehicle reports a
    bearing): their column is all nulls, not an error.

    A reader may load only the columns an event type uses; then ``present``
    lists every column of the file and ``fetch`` renders whole records for
    some table rows (JSON: from the parsed objects; CSV, Parquet: by reading
    the file again, paid only when there are rejects).

    ``clock`` is the feed's own time when the file is a feed's poll that says when it was
    made (epoch seconds: a SIRI-VM poll's ``ts``, a GTFS-realtime header's timestamp).
    """

    file: str
    table: pa.Table
    rows: np.ndarray
    names: Mapping[str, int]
    unreadable: list[tuple[int, str, str]] = field(default_factory=list)
    provides: frozenset[str] = frozenset()
    present: tuple[str, ...] = ()
    fetch: Optional[Callable[[Sequence[int]], list[str]]] = None
    clock: Optional[float] = None

    @classmethod
    def of(cls, file: str, table: pa.Table, rows: Iterable[int] | None = None,
           unreadable: list[tuple[int, str, str]] | None = None,
           renames: Mapping[str, str] | None = None, provides: Iterable[str] = (),
           present: Sequence[str] | None = None,
           fetch: Optional[Callable[[Sequence[int]], list[str]]] = None) -> "RawBatch":
        """A batch whose attribute names are its column names (first of duplicates wins),
        plus ``renames`` (attribute -> column name) where a format adapter maps fields."""
        names: dict[str, int] = {}
        for i, name in enumerate(table.column_names):
            names.setdefault(name, i)
        if renames:
            for attr, col in renames.items():
                if col in names:
                    names[attr] = names[col]
        n = table.num_rows
        row_arr = np.arange(1, n + 1, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        return cls(file, table, row_arr, names, list(unreadable or []), frozenset(provides),
                   tuple(table.column_names if present is None else present), fetch)

    @classmethod
    def from_records(cls, file: str, records: Sequence[Mapping[str, Any]], rows: Sequence[int],
                     unreadable: list[tuple[int, str, str]], columns: Collection[str] | None = None,
                     renames: Mapping[str, str] | None = None, provides: Iterable[str] = ()) -> "RawBatch":
        """A batch of JSON objects; with ``columns`` (attribute names) only the fields that feed
        them are made columns. Reject records are the objects themselves."""
        renames = dict(renames or {})
        only = None if columns is None else {renames.get(c, c) for c in columns}
        table, present = records_to_table(records, only)
        return cls.of(file, table, rows=rows, unreadable=unreadable, renames=renames, provides=provides,
                      present=present, fetch=lambda idx: [json_record(records[i]) for i in idx])

    @property
    def read(self) -> int:
        """Records read from the file: the rows of the table and the unreadable ones."""
        return self.table.num_rows + len(self.unreadable)

    def column(self, attr: str) -> pa.Array:
        """The column feeding ``attr``; all nulls where the format knows a field this file lacks."""
        if attr in self.names:
            return to_arrow(self.table.column(self.names[attr]))
        return pa.nulls(self.table.num_rows, pa.string())

    def records(self, indices: Sequence[int]) -> list[str]:
        """Table rows ``indices`` as the raw records' JSON, every column the file has."""
        if self.fetch is not None:
            return self.fetch(indices)
        return [self._record(i) for i in indices]

    def _record(self, i: int) -> str:
        row = {}
        for name, col in zip(self.table.column_names, self.table.columns):
            row.setdefault(name, col[i].as_py())
        return json_record(row)

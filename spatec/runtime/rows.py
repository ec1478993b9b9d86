"""Decided composites as output rows: one dict per composite (or many held as
columns), the hulls as WKT in lon/lat (:mod:`spatec.sinks.encoding` writes them),
the frame every sink writes."""
from __future__ import annotations

import math
import numpy as np
import pandas as pd
import pyarrow as pa

from spatec.automata.machine import Automaton, Context, RunState
from spatec.frontend.program import PLACES_FIELD
from spatec.plan.nodes import PhrasePlan
from spatec.sinks.encoding import to_lonlat_wkt
from spatec.spatial.crs import Projector

STD_COLUMNS = ("phrase", "id", "lo", "hi", "hull", "events")


class ColumnRows:
    """Output rows held as columns (name → one value per row, in :func:`output_row`'s
    order of fields): what the fast path makes for many composites at once. To whoever
    iterates them they are :func:`output_row` dicts, each made on demand (a pickle, a
    raw frame); :func:`dedupe`, :func:`rows_starting` and :func:`rows_frame` work on
    the columns instead, without a dict per composite. ``lo`` and ``hi``: int64 arrays."""

    def __init__(self, columns: dict):
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns["id"])

    def __iter__(self):
        names = list(self.columns)
        return (dict(zip(names, values)) for values in zip(*map(_as_list, self.columns.values())))

    def take(self, idx) -> "ColumnRows":
        idx = np.asarray(idx, dtype=np.int64)
        return ColumnRows({k: _take(v, idx) for k, v in self.columns.items()})


def _as_list(column) -> list:
    """A :class:`ColumnRows` column (a list, a numpy array or Arrow text) as a list."""
    if isinstance(column, np.ndarray):
        return column.tolist()
    return column.to_pylist() if isinstance(column, pa.Array) else column


def _take(column, idx: np.ndarray):
    """Rows ``idx`` of a :class:`ColumnRows` column, held as it is."""
    if isinstance(column, np.ndarray):
        return column[idx]
    if isinstance(column, pa.Array):
        return column.take(pa.array(idx))
    return [column[i] for i in idx.tolist()]


def rows_starting(rows, start: int, end: int):
    """The rows whose ``lo`` is in ``[start, end)`` (a time window's own matches)."""
    if isinstance(rows, ColumnRows):
        lo = rows.columns["lo"]
        return rows.take(np.flatnonzero((lo >= start) & (lo < end)))
    return [r for r in rows if start <= r["lo"] < end]


def dedupe(rows: list) -> list:
    """A composite found in two partitions (broadcast-only phrases) is reported once."""
    if isinstance(rows, ColumnRows):
        ids = rows.columns["id"]
        if len(set(ids)) == len(ids):
            return rows
        first = pd.Series(ids, dtype=object).duplicated(keep="first").to_numpy()
        return rows.take(np.flatnonzero(~first))
    seen, out = set(), []
    for r in rows:
        if r["id"] in seen:
            continue
        seen.add(r["id"])
        out.append(r)
    return out


def output_row(am: Automaton, c, projector: Projector, state: RunState | None = None,
               hull: bool = True) -> dict:
    """One composite as an output record (times as int µs; durations in seconds).
    ``hull=False``: the hull is left None, for a caller that writes many at once."""
    row = {"phrase": c.phrase, "id": c.id, "lo": int(c.lo), "hi": int(c.hi),
           "hull": to_lonlat_wkt(c.loc, projector) if hull else None,
           "events": {v: e.id for v, e in sorted(c.bindings.items())}}
    if am.plan.places:
        row[PLACES_FIELD] = {v: p.id for v, p in sorted(c.places.items())}
    if not am.emit:
        return row
    types = am.__dict__.get("_emit_types")
    if types is None:
        types = am._emit_types = dict(am.plan.schema)
    for name, v in emit_values(am, c, state).items():
        row[name] = convert_value(v, types.get(name))
    return row


def emit_values(am: Automaton, c, state: RunState | None = None) -> dict:
    """A composite's emit fields as the conditions compute them (times and durations in µs),
    before :func:`convert_value`: the attributes of the composite as an event (SPEC §8).
    A value that cannot be computed (division by zero) or is not a number (NaN) is missing."""
    ctx = Context(state or RunState())
    out = {}
    env = c.env()
    for name, f in am.emit:
        try:
            v = f(env, ctx)
        except (ZeroDivisionError, OverflowError, TypeError):
            v = None
        if isinstance(v, float) and math.isnan(v):
            v = None
        out[name] = v
    return out


def convert_value(v, t: str | None):
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if t == "duration":
        return v / 1e6
    if t == "time":
        return int(v)
    if t == "number" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v) if not float(v).is_integer() or isinstance(v, float) else v
    return v


def convert_values(vals: list, t: str | None) -> list:
    """:func:`convert_value` of every value of an emitted column. A column whose values
    it would all leave as they are (by their exact types: None, and ints for a time,
    anything but floats for a field neither time, duration nor number; bool is not
    int here, as ``int(True)`` is 1) is given back as it is: one pass over the
    types in C instead of a Python call per value (four fields per composite)."""
    kinds = set(map(type, vals))
    kinds.discard(type(None))
    if t == "time" and kinds <= {int}:
        return vals
    if t not in ("duration", "time", "number") and float not in kinds:
        return vals
    return [convert_value(v, t) for v in vals]


def time_fields(plan: PhrasePlan) -> set:
    return {name for name, t in plan.schema if t == "time"}


def output_columns(plan: PhrasePlan) -> list:
    """The fields of a phrase's records: the standard ones, ``places`` for a phrase that binds
    places (SPEC §9), then its emit fields."""
    return list(STD_COLUMNS) + ([PLACES_FIELD] if plan.places else []) + [name for name, _ in plan.schema]


def rows_frame(plan: PhrasePlan, rows: list) -> pd.DataFrame:
    """The output frame of a phrase's rows (dicts, or :class:`ColumnRows`), in order of
    ``lo``, ``hi``, ``id``."""
    cols = output_columns(plan)
    if isinstance(rows, ColumnRows) and len(rows):
        return _columns_frame(cols, rows.columns)
    rows = list(rows)
    if not rows:
        return pd.DataFrame(rows, columns=cols)
    columns = {c: [r.get(c) for r in rows] for c in cols}
    for c in ("lo", "hi"):
        columns[c] = np.asarray(columns[c], dtype=np.int64)
    return _columns_frame(cols, columns)


def _columns_frame(cols: list, columns: dict) -> pd.DataFrame:
    """:func:`rows_frame` of rows held as columns: the same frame as from their dicts. The
    standard columns' types are known (``lo``, ``hi`` int64; the others Python objects,
    as pandas infers for text and dicts); the emit fields are inferred as pandas does
    for records (from tuples: the same inference, column by column), where a field no
    row has is NaN. Sorted by (lo, hi) and, only among rows that tie on both, id: the
    order of a stable sort by the three, without comparing most ids."""
    n = len(columns["id"])
    out = {}
    for c in STD_COLUMNS:
        v = columns[c]
        if c in ("lo", "hi"):
            out[c] = np.asarray(v, dtype=np.int64)
        elif isinstance(v, pa.Array):       # Arrow text or a hull column (fast_rows' arrow_hulls): kept so
            out[c] = pd.arrays.ArrowExtensionArray(v)
        else:
            out[c] = np.empty(n, dtype=object)
            out[c][:] = v
    extra = [c for c in cols if c not in STD_COLUMNS]
    if extra:
        nan = [np.nan] * n
        out.update(_emit_arrays({c: columns.get(c, nan) for c in extra}))
    lo, hi = out["lo"], out["hi"]
    order = np.lexsort((hi, lo))
    same = (lo[order][1:] == lo[order][:-1]) & (hi[order][1:] == hi[order][:-1])
    if same.any():
        tied = np.zeros(n, bool)
        tied[order[1:][same]] = True
        tied[order[:-1][same]] = True
        rank = np.zeros(n, np.int64)
        ids = out["id"][tied]
        if any(i.endswith("\0") for i in ids):     # numpy text drops trailing NULs
            rank[tied] = pd.factorize(ids, sort=True)[0]
        else:   # as numpy text: compared by code point, as Python compares str, in C
            rank[tied] = np.unique(ids.astype(str), return_inverse=True)[1]
        order = np.lexsort((rank, hi, lo))
    return pd.DataFrame({c: out[c][order] for c in cols}, copy=False)


def _emit_arrays(columns: dict) -> dict:
    """The emit fields' columns (lists of Python values) as arrays whose dtype follows from the
    kinds of values they hold, never from the values' mix alone: text, floats (NaN for a
    missing one), ints (int64; ``Int64`` with a missing one), booleans (``boolean`` with a
    missing one), else Python objects as they are. A value is then written the same whatever
    the other rows hold (an int stays an int beside a missing value), so each part of an
    output is the bytes of its rows in the whole."""
    out = {}
    for c, v in columns.items():
        if isinstance(v, np.ndarray) and v.dtype != object:
            out[c] = v
            continue
        kinds = set(map(type, v))
        missing = type(None) in kinds or (float in kinds and any(x != x for x in v if type(x) is float))
        kinds.discard(type(None))
        a = None
        if kinds == {str} and not missing:
            a = _objects(v)
        elif kinds <= {float}:
            a = np.array([np.nan if x is None else x for x in v], dtype=np.float64)
        elif kinds == {int}:
            try:
                a = pd.array(v, dtype="Int64") if missing else np.array(v, dtype=np.int64)
            except (OverflowError, TypeError):
                a = None        # (beyond int64: Python ints)
        elif kinds == {bool}:
            a = pd.array(v, dtype="boolean") if missing else np.array(v, dtype=bool)
        out[c] = a if a is not None else _objects(v)
    return out


def _objects(values) -> np.ndarray:
    a = np.empty(len(values), dtype=object)
    a[:] = list(values)
    return a

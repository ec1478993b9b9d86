"""Matching one item: its events (Arrow, as they travel) → the phrases' composites.

An item's events arrive as one Arrow table of every type its grouping reads (``_type``
says which; attributes as ``<type>__<attr>``, so that types whose attributes share a name
do not clash; ``_hist`` flags the events that are ``successive``'s history only). They are
made the canonical frames the local runner evaluates (:func:`frames_of`: the same columns
and dtypes as :func:`~spatec.events.canonical.to_events` gives), pre-filtered by the
phrase's leaf regions where that pays in the task, and matched by
:func:`~spatec.runtime.batch.phrase_rows` — the local runner's own function, fast paths
included — with each phrase's final watermark. A stretch of time keeps the matches that
start in it (:func:`~spatec.runtime.rows.rows_starting`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spatec.events.canonical import empty_events
from spatec.runtime.batch import phrase_rows
from spatec.runtime.derived import Produced
from spatec.runtime.events import attribute_names
from spatec.runtime.rows import rows_starting

CANONICAL = ("_type", "_id", "_source", "_t", "_lo", "_hi", "_place", "_lon", "_lat", "_r", "_geom")


def prefixed(type_name: str, attr: str) -> str:
    """An attribute's column in an item's table (see the module)."""
    return f"{type_name}__{attr}"


def event_dtypes(program, type_name: str) -> dict:
    """The dtypes of a type's canonical frame (:func:`~spatec.events.canonical.empty_events`)."""
    return {c: str(d) for c, d in empty_events(program.events[type_name]).dtypes.items()}


def wanted(program, plans, type_name: str) -> tuple:
    """The attributes of ``type_name`` that ``plans`` read (their expressions, key, source)."""
    keep = set()
    for p in plans:
        keep.update(p.physical.attributes_of(type_name))
    return tuple(a for a in attribute_names(program, type_name) if a in keep)


def frames_of(table: pa.Table, program, types) -> tuple[dict, dict]:
    """An item's table → canonical frames by type, and the history frames (``_hist``)."""
    frames, history = {}, {}
    if table is None or not table.num_rows:
        return frames, history
    kinds = table.column("_type")
    if pa.types.is_dictionary(kinds.type):
        kinds = kinds.cast(pa.string())
    hist = None
    if "_hist" in table.column_names:
        hist = pc.fill_null(table.column("_hist"), False).to_numpy(zero_copy_only=False).astype(bool)
    for t in types:
        rows = np.flatnonzero(pc.fill_null(pc.equal(kinds, t), False).to_numpy(zero_copy_only=False))
        if not len(rows):
            continue
        if len(rows) == table.num_rows:
            sub = table                                 # (one type: every row, no copy)
        elif rows[-1] - rows[0] + 1 == len(rows):
            sub = table.slice(int(rows[0]), len(rows))  # (a run of rows: no copy either)
        else:
            sub = table.take(pa.array(rows))
        if hist is not None and hist[rows].any():
            h = hist[rows].astype(bool)
            history[t] = canonical_frame(sub.filter(pa.array(h)), program, t)
            sub = sub.filter(pa.array(~h))
        frames[t] = canonical_frame(sub, program, t)
    return frames, history


def canonical_frame(table: pa.Table, program, type_name: str) -> pd.DataFrame:
    """One type's rows of an item's table as its canonical frame (the attributes a phrase
    never reads are put back as missing). Ids stay Arrow text (pandas' ``ArrowDtype``): the
    fast path makes strings of the ids its composites bind only."""
    dtypes = event_dtypes(program, type_name)
    out = {"_type": one_object(table.num_rows, type_name)}
    cols = set(table.column_names)
    for c in CANONICAL[1:]:
        if c == "_id":
            ids = table.column("_id")
            if pa.types.is_large_string(ids.type):
                ids = ids.cast(pa.string())
            out[c] = pd.arrays.ArrowExtensionArray(ids.combine_chunks() if ids.num_chunks != 1 else ids.chunk(0))
            continue
        out[c] = _values(table.column(c), dtypes[c]) if c in cols else _missing(table.num_rows, dtypes[c])
    for a in attribute_names(program, type_name):
        name = prefixed(type_name, a)
        out[a] = _values(table.column(name), dtypes[a]) if name in cols else _missing(table.num_rows, dtypes[a])
    return pd.DataFrame(out, copy=False)


def _values(col, dtype: str):
    """A column of Arrow values as the canonical frame holds them (``dtype``)."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if dtype == "object":
        if pa.types.is_null(col.type):
            return np.full(len(col), None, dtype=object)
        return text_objects(col)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if dtype in ("int64", "float64"):
        if col.null_count and dtype == "int64":
            return pd.array(col.to_pylist(), dtype="Int64")
        return col.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    return pd.Series(col.to_pandas(), copy=False).astype(dtype).array


def one_object(n: int, value) -> np.ndarray:
    """``n`` rows of one value, one object (``np.full`` of a string makes a string per row)."""
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


def text_objects(col: pa.Array) -> np.ndarray:
    """Arrow text (or other values) as an object array, each distinct text one Python string
    that its rows share: a bus's id is in every one of its fixes. ``to_numpy`` makes a string
    per row: 1.9 million strings (130 MB) for an item of 568,000 fixes."""
    enc = col if pa.types.is_dictionary(col.type) else \
        pc.dictionary_encode(col) if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) else None
    if enc is None:
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)
    words = np.asarray(enc.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    at = enc.indices
    if at.null_count:
        words = np.append(words, None)
        at = pc.fill_null(at, len(words) - 1)
    return words[at.to_numpy(zero_copy_only=False).astype(np.intp, copy=False)]


def _missing(n: int, dtype: str):
    if dtype == "float64":
        return np.full(n, np.nan)
    if dtype == "object":
        return np.full(n, None, dtype=object)
    if dtype == "int64":
        return np.zeros(n, dtype=np.int64)
    return pd.array([None] * n, dtype=dtype)


@dataclass
class Matched:
    """One phrase's composites of one item: its rows (as :func:`phrase_rows` gives them) and,
    for a phrase others read, its composites as events and its least undecided ``lo``."""

    phrase: str
    rows: object
    produced: Produced | None = None


@dataclass(frozen=True)
class MatchJob:
    """What every task of a grouping needs to match an item (sent to the tasks once)."""

    program: object
    plans: tuple            # the grouping's phrases
    crs: str
    watermarks: dict        # phrase → its final watermark
    produce: frozenset = frozenset()    # phrases whose composites others read
    regions: dict = field(default_factory=dict)   # phrase → {type: {name: Loc}}: in-task pre-filter
    engine: str | None = None
    log: str | None = None      # the task log (:mod:`spatec.exec.tasklog`)


def match_item(job: MatchJob, frames: dict, history: dict, own: tuple | None = None, derived: dict | None = None,
               projector=None, arrow_hulls: bool | str = False) -> list:
    """Every phrase of ``job`` over one item's frames: a :class:`Matched` each."""
    from spatec.spatial.crs import Projector

    proj = projector or Projector(job.crs)
    out = []
    for plan in job.plans:
        mine = {t: df for t, df in frames.items() if t in plan.physical.types}
        regions = job.regions.get(plan.name)
        if regions:
            mine = {t: prefiltered_frame(df, regions[t], job.crs, job.engine) if t in regions else df
                    for t, df in mine.items()}
        hist = {t: df for t, df in history.items() if t in plan.physical.types}
        produced = Produced() if plan.name in job.produce else None
        rows, _size = phrase_rows(plan, job.program, mine, proj, job.watermarks[plan.name], history=hist,
                                  derived={t: (derived or {}).get(t, []) for t in plan.physical.derived} or None,
                                  produced=produced, arrow_hulls=False if produced is not None else arrow_hulls)
        if own is not None:
            rows = rows_starting(rows, *own)
            if produced is not None:
                produced.events = [e for e in produced.events if own[0] <= e.lo < own[1]]
        out.append(Matched(plan.name, rows, produced))
    return out


def prefiltered_frame(df: pd.DataFrame, regions: dict, crs: str, engine: str | None) -> pd.DataFrame:
    """The events of ``df`` that possibly meet one of ``regions`` (the in-task leaf pre-filter:
    :func:`spatec.exec.prefilter.keep_mask`: lon/lat boxes, then the engine's join)."""
    from spatec.exec.prefilter import keep_mask, task_engine

    if not len(df):
        return df
    keep = keep_mask(df, regions, crs, task_engine(engine or "shapely"))
    return df if keep.all() else df[keep].reset_index(drop=True)

"""Raw records to canonical events: the contract between ingest and everything after it.

An event declaration (``EventDecl``) says how a record becomes an event:
which attribute is the source, how the time stamp and the location stamp are
built. :func:`to_events` applies it to raw batches and returns the events as
one pandas DataFrame with the columns of :func:`event_columns`:

``_type _id _source _t _lo _hi _place _lon _lat _r _geom <attributes> _file _row``

- ``_t``, ``_lo``, ``_hi``: int64 µs UTC. ``_t`` is the local time (the
  attribute of ``time ts [± d]``, or the upper bound of ``time L .. H`` with
  its offset); ``[_lo, _hi]`` is the time stamp.
- ``_place``: ``"point"`` (disc of radius ``_r`` m around ``_lon``, ``_lat``),
  ``"geom"`` (``_geom``, WKT lon/lat, widened by ``_r`` m) or ``"none"``.
- attributes under their declared names and types (see :mod:`spatec.events.columns`);
  a missing value is null, except where the event needs it: the source, every
  ``time`` attribute (int64 µs has no null), the place's coordinates or
  geometry — those make the record a reject.
- ``_file``, ``_row``: where the record came from (1-based record number).

Records that cannot become events are rejects with a reason: every bad or
missing value, in declared attribute order, each naming the attribute and
the value (joined by ``"; "``), and a point at exactly (0, 0) (:data:`NO_FIX`:
a GPS receiver without a fix); failing those, ``lo > hi``; failing that, a
duplicate (SPEC §4: the same ``(type, source, t)`` — or the same record for a
type without a source — seen before; the first in input order wins).
Events keep input order.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spatec.errors import DataError
from spatec.events.columns import convert, geometry_bounds, str_objects
from spatec.events.raw import RawBatch, show, to_arrow, unify
from spatec.events.timefmt import event_id, event_ids_arrow, format_time, format_times
from spatec.frontend.ast import EventDecl, TimeBound

HEAD_COLUMNS = ("_type", "_id", "_source", "_t", "_lo", "_hi", "_place", "_lon", "_lat", "_r", "_geom")
TAIL_COLUMNS = ("_file", "_row")
REJECT_COLUMNS = ("type", "file", "row", "reason", "record")
DUPLICATE = "duplicate of "
#: The reason of a fix at exactly (0, 0) (its own, so that it can be counted apart).
NO_FIX = "position (0, 0) is no position (what a GPS receiver without a fix reports)"

_DTYPES = {"str": object, "int": "Int64", "float": "float64", "bool": "boolean",
           "time": "int64", "geometry": object}


def event_columns(decl: EventDecl) -> list[str]:
    """The canonical columns of events of ``decl``, in order."""
    return [*HEAD_COLUMNS, *(a.name for a in decl.attrs), *TAIL_COLUMNS]


def empty_events(decl: EventDecl) -> pd.DataFrame:
    """A canonical events frame with no rows and the right dtypes."""
    dtypes = {"_type": object, "_id": object, "_source": object, "_t": "int64", "_lo": "int64",
              "_hi": "int64", "_place": object, "_lon": "float64", "_lat": "float64", "_r": "float64",
              "_geom": object, **{a.name: _DTYPES[a.type] for a in decl.attrs},
              "_file": object, "_row": "int64"}
    return pd.DataFrame({c: pd.Series([], dtype=dtypes[c]) for c in event_columns(decl)})


_EMPTY_REJECTS: list = []


def empty_rejects() -> pd.DataFrame:
    """A rejects frame with no rows (a copy of one made once: most batches have no rejects,
    and building a frame costs about a millisecond)."""
    if not _EMPTY_REJECTS:
        _EMPTY_REJECTS.append(pd.DataFrame({c: pd.Series([], dtype="int64" if c == "row" else object)
                                            for c in REJECT_COLUMNS}))
    return _EMPTY_REJECTS[0].copy()


@dataclass(frozen=True, eq=False)
class IngestResult:
    """Events of one type read from some input, the records rejected, and the counts.

    Every record read is either used or rejected: ``read == used + rejected``.
    ``rejects`` has the columns ``type, file, row, reason, record`` (the raw
    record as JSON text).
    """

    type: str
    events: pd.DataFrame
    rejects: pd.DataFrame
    read: int
    #: Some of ``events``' text columns as Arrow string arrays, row for row (what
    #: ``pa.array`` makes of the column, nulls for None): read as they were, so that a
    #: runner that hands the events on as Arrow need not convert Python strings back.
    #: Only what :func:`to_events` returns holds any; a result made otherwise has none.
    texts: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.read != self.used + self.rejected:
            raise AssertionError(f"{self.type}: read {self.read} != used {self.used} + rejected {self.rejected}")

    @property
    def used(self) -> int:
        return len(self.events)

    @property
    def rejected(self) -> int:
        return len(self.rejects)

    @property
    def duplicates(self) -> int:
        """Rejects that are second copies of an event (counted among ``rejected``)."""
        return int(self.rejects["reason"].str.startswith(DUPLICATE).sum()) if self.rejected else 0

    @staticmethod
    def concat(results: Sequence["IngestResult"], decl: EventDecl) -> "IngestResult":
        """Results of consecutive reads of one type as one (e.g. the chunks of :func:`iter_events`)."""
        events = [r.events for r in results if len(r.events)]
        rejects = [r.rejects for r in results if len(r.rejects)]
        return IngestResult(
            decl.name,
            pd.concat(events, ignore_index=True) if events else empty_events(decl),
            pd.concat(rejects, ignore_index=True) if rejects else empty_rejects(),
            sum(r.read for r in results))


# --------------------------------------------------------------------------- checks

def check_columns(batch: RawBatch, decl: EventDecl) -> None:
    """Every declared attribute must have a column (its own name's, or the one it is read
    ``from``): a whole-file problem, not a reject; the message names the columns the file has,
    the one each missing attribute may have meant, and how to read it from that."""
    if batch.table.num_rows == 0 and not batch.present:
        return  # nothing to map (an empty poll, an empty JSON file)
    missing = [a for a in decl.attrs if a.source_column not in batch.names and a.name not in batch.provides]
    if missing:
        columns = list(dict.fromkeys([*batch.present, *sorted(batch.provides)]))
        present = ", ".join(columns) or "(none)"
        names = ", ".join(a.source_column if a.column is None else f'{a.name} (from "{a.column}")'
                          for a in missing)
        hints = []
        for a in missing:
            close = _close_column(a.source_column, columns)
            if close is not None:
                hints.append(f'{a.source_column}: did you mean `{close}`? Read it with `{a.name}: {a.type} from '
                             f'"{close}"` in the event declaration')
        raise DataError(f"{batch.file}: {decl.name} declares {names} but the file has no "
                        f"such column{'s' if len(missing) > 1 else ''}; columns present: {present}"
                        + "".join(f"\n    hint: {h}" for h in hints))


def _close_column(name: str, columns: list) -> str | None:
    """The column of ``columns`` that ``name`` looks like a slip of (case and `_` aside)."""
    import difflib

    def norm(c: str) -> str:
        return c.lower().replace("_", "").replace(" ", "")

    by_norm = {norm(c): c for c in columns}
    want = norm(name)
    if want in by_norm:
        return by_norm[want]
    close = difflib.get_close_matches(want, list(by_norm), n=1, cutoff=0.7)
    if close:
        return by_norm[close[0]]
    longer = [c for n, c in by_norm.items() if len(want) >= 3 and (n.startswith(want) or want.startswith(n))]
    return longer[0] if len(longer) == 1 else None     # `lon`: `Longitude`


def mapped(batch: RawBatch, decl: EventDecl) -> RawBatch:
    """``batch`` with each attribute declared ``from "COLUMN"`` fed by that column."""
    moved = {a.name: batch.names[a.column] for a in decl.attrs
             if a.column is not None and a.column in batch.names}
    if not moved:
        return batch
    return replace(batch, names={**batch.names, **moved})


class _Problems:
    """Reasons per row, in the order they are found."""

    def __init__(self, n: int):
        self.n = n
        self.by_row: dict[int, list[str]] = {}

    def add(self, rows: Iterable[int], text) -> None:
        for i in rows:
            self.by_row.setdefault(int(i), []).append(text(int(i)) if callable(text) else text)

    def mask(self) -> np.ndarray:
        m = np.zeros(self.n, bool)
        if self.by_row:
            m[list(self.by_row)] = True
        return m


# --------------------------------------------------------------------------- events

def to_events(batches: Sequence[RawBatch], decl: EventDecl, tz: str = "UTC",
              seen: set[str] | None = None) -> IngestResult:
    """Type, stamp, identify and deduplicate the records of ``batches`` as events of ``decl``.

    ``seen``, when given, holds the ids of events accepted by earlier calls (a
    stream read in chunks): those are duplicates here too, and the ids
    accepted here are added to it.
    """
    if decl.time is None:
        raise ValueError(f"{decl.name}: an event type needs a time clause to be read")
    for b in batches:
        check_columns(b, decl)
    batches = [mapped(b, decl) for b in batches]
    sizes = np.array([b.table.num_rows for b in batches], dtype=np.int64)
    n = int(sizes.sum())
    problems = _Problems(n)
    typed, source_text, texts = _typed(batches, decl, tz, problems)

    t, lo, hi = _stamps(decl, typed, n)
    flipped = np.flatnonzero(~problems.mask() & (lo > hi))
    clause = _clause_text(decl)
    problems.add(flipped, lambda i: f"{clause}: lo {format_time(lo[i])} is after hi {format_time(hi[i])}")

    keep = np.flatnonzero(~problems.mask())
    sources = ids_kept = None
    if decl.source is not None:
        # _source is text whatever the attribute's type, and never the attribute's own array
        sources = str_objects(source_text)
        text = source_text.take(pa.array(keep)) if len(keep) < n else source_text
        id_text = event_ids_arrow(decl.name, text, t[keep]) if len(keep) else None
        ids_kept = id_text.to_numpy(zero_copy_only=False) if len(keep) else np.zeros(0, object)
        dup = _repeats(text.dictionary_encode().indices.fill_null(-1).to_numpy(), t[keep])
    else:
        ids_kept = _record_ids(decl, typed, keep)
        dup = pd.Series(ids_kept, dtype=object).duplicated(keep="first").to_numpy()
    if seen:
        dup |= np.fromiter(map(seen.__contains__, ids_kept), bool, len(ids_kept))
    ids = np.full(n, None, dtype=object)
    ids[keep] = ids_kept
    problems.add(keep[dup], lambda i: f"{DUPLICATE}{ids[i]}")
    keep = keep[~dup]
    if seen is not None:
        seen.update(ids[keep])

    files = np.repeat(np.array([b.file for b in batches], dtype=object), sizes) if n else np.zeros(0, object)
    rows = np.concatenate([b.rows for b in batches]) if batches else np.zeros(0, np.int64)
    events = _frame(decl, typed, keep, n, ids, sources, t, lo, hi, files, rows)
    rejects = _rejects(decl, batches, problems, files, rows, sizes)
    if len(events):
        if decl.source is not None:
            texts.update(_id=id_text.filter(pa.array(~dup)), _source=source_text)
        texts = _kept_texts(decl, texts, keep, n, batches)
    else:
        texts = {}
    return IngestResult(decl.name, events, rejects, int(sum(b.read for b in batches)), texts)


def _kept_texts(decl: EventDecl, texts: dict, keep: np.ndarray, n: int, batches) -> dict:
    """:attr:`IngestResult.texts` of the kept rows: the text attributes and the source
    (``n`` rows, read), the ids (kept already), and the columns of one value."""
    m = len(keep)
    at = pa.array(keep) if m < n else None
    out = {c: (a.take(at) if at is not None and c != "_id" else a) for c, a in texts.items()
           if isinstance(a, pa.Array) and a.type == pa.string()}
    place = decl.place
    kind = "none" if place is None else "geom" if place.geom is not None else "point"
    out["_type"] = pa.repeat(pa.scalar(decl.name, pa.string()), m)
    out["_place"] = pa.repeat(pa.scalar(kind, pa.string()), m)
    if kind != "geom":
        out["_geom"] = pa.nulls(m, pa.string())
    if decl.source is None:
        out["_source"] = pa.nulls(m, pa.string())
    if len({b.file for b in batches}) == 1 and isinstance(batches[0].file, str):
        out["_file"] = pa.repeat(pa.scalar(batches[0].file, pa.string()), m)
    return out


def _typed(batches: Sequence[RawBatch], decl: EventDecl, tz: str,
           problems: _Problems) -> tuple[dict[str, object], pa.Array | None, dict[str, pa.Array]]:
    """Each declared attribute typed; each bad value, and each missing one that its role
    needs (source, time, coordinate, place geometry), noted as a problem of its row.
    Second: the source as Arrow text, for making ids; third: the text attributes as Arrow
    (:attr:`IngestResult.texts`)."""
    place = decl.place
    coords = {place.lon: (-180, 180), place.lat: (-90, 90)} if place and place.geom is None else {}
    geom = place.geom if place is not None else None
    source = decl.source.attr if decl.source else None
    typed: dict[str, object] = {}
    source_text = None
    texts: dict[str, pa.Array] = {}
    unplaced = None     # rows whose coordinates are missing or bad (reported already)
    for a in decl.attrs:
        raw = unify([b.column(a.name) for b in batches])
        shown = lambda i, raw=raw: show(raw[int(i)].as_py())  # noqa: E731
        p = convert(raw, a.type, tz)
        typed[a.name] = p.values
        if a.name == source:
            source_text = p.arrow if p.arrow is not None else to_arrow(p.values).cast(pa.string())
        if a.type == "str" and isinstance(p.arrow, pa.Array) and p.arrow.type == pa.string():
            # as the values: a missing (blank) text is None there, null here
            texts[a.name] = pc.if_else(pa.array(p.missing), None, p.arrow) if p.missing.any() else p.arrow
        problems.add(sorted(p.errors), lambda i, a=a, p=p: f"{a.name}: {p.errors[i]}")
        role = ("empty source" if a.name == source else "missing time" if a.type == "time"
                else "missing coordinate" if a.name in coords else "missing geometry" if a.name == geom else None)
        if role:
            problems.add(np.flatnonzero(p.missing), f"{a.name}: {role}")
        if a.name in coords:
            low, high = coords[a.name]
            vals = _floats(p.values)
            failed = np.zeros(len(vals), bool)
            failed[list(p.errors)] = True
            with np.errstate(invalid="ignore"):
                out = ~p.missing & ~failed & ~((vals >= low) & (vals <= high))
            text = f"out of range [{low}, {high}]"
            if a.name == place.lat:
                text += " (a longitude? `place point(lon, lat)` takes the longitude first)"
            problems.add(np.flatnonzero(out), lambda i, a=a, shown=shown, text=text: f"{a.name}: {shown(i)} {text}")
            bad = p.missing | failed
            unplaced = bad if unplaced is None else unplaced | bad
        if a.name == geom:
            _check_geometry(a.name, p.values, problems, shown)
    if coords:
        # a GPS receiver without a fix reports (0, 0): no position, not a place in the Gulf of Guinea
        with np.errstate(invalid="ignore"):
            nowhere = (_floats(typed[place.lon]) == 0) & (_floats(typed[place.lat]) == 0) & ~unplaced
        problems.add(np.flatnonzero(nowhere), f"{place.lon}, {place.lat}: {NO_FIX}")
    return typed, source_text, texts


def _repeats(codes: np.ndarray, t: np.ndarray) -> np.ndarray:
    """True where (source, t) already occurred earlier in input order: a copy of an event.
    ``codes``: the sources as integers, equal where the sources are (Arrow's dictionary
    encoding of the text: several times cheaper than factorizing Python strings)."""
    if not len(t):
        return np.zeros(0, bool)
    t0, span = int(t.min()), int(t.max()) - int(t.min()) + 1
    if (int(codes.max()) + 2) * span < 2**62:
        # (source, t) as one int64: a hash table's pass instead of a sort
        key = (codes.astype(np.int64) + 1) * span + (t - t0)
        return pd.Series(key, copy=False).duplicated(keep="first").to_numpy()
    order = np.lexsort((t, codes))  # stable: equal keys stay in input order
    c, tt = codes[order], t[order]
    again = np.zeros(len(order), bool)
    again[1:] = (c[1:] == c[:-1]) & (tt[1:] == tt[:-1])
    out = np.empty(len(order), bool)
    out[order] = again
    return out


def _floats(values) -> np.ndarray:
    """Coordinates as float64 (an attribute may be declared int)."""
    if isinstance(values, pd.api.extensions.ExtensionArray):
        return values.to_numpy(dtype=np.float64, na_value=np.nan)
    return np.asarray(values, dtype=np.float64)


def _check_geometry(name: str, wkt: np.ndarray, problems: _Problems, raw_value) -> None:
    has = np.flatnonzero(pd.notna(wkt))
    if not len(has):
        return
    b = geometry_bounds(wkt[has])
    empty = np.isnan(b[:, 0])
    problems.add(has[empty], f"{name}: empty geometry")
    with np.errstate(invalid="ignore"):
        out = ~empty & ((b[:, 0] < -180) | (b[:, 2] > 180) | (b[:, 1] < -90) | (b[:, 3] > 90))
    problems.add(has[out], lambda i: f"{name}: {raw_value(i)} has coordinates out of range (lon/lat)")


def _bound(bound: TimeBound, typed: dict, n: int) -> np.ndarray:
    base = np.asarray(typed[bound.attr], dtype=np.int64) if n else np.zeros(0, np.int64)
    return base + (bound.offset.micros() if bound.offset is not None else 0)


def _stamps(decl: EventDecl, typed: dict, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    clause = decl.time
    for b in (clause.low, clause.high):
        if b is not None and next((a.type for a in decl.attrs if a.name == b.attr), None) != "time":
            raise ValueError(f"{decl.name}: time clause attribute {b.attr!r} is not a declared time attribute")
    widen = abs(clause.widen.micros()) if clause.widen is not None else 0
    if clause.high is None:
        t = _bound(clause.low, typed, n)
        return t, t - widen, t + widen
    lo, hi = _bound(clause.low, typed, n), _bound(clause.high, typed, n)
    return hi, lo - widen, hi + widen


def _clause_text(decl: EventDecl) -> str:
    def text(b: TimeBound) -> str:
        if b.offset is None:
            return b.attr
        q = b.offset
        return f"{b.attr} {'-' if q.value < 0 else '+'} {abs(q.value):g} {q.unit}"
    c = decl.time
    return text(c.low) if c.high is None else f"{text(c.low)} .. {text(c.high)}"


def _record_ids(decl: EventDecl, typed: dict, keep: np.ndarray) -> np.ndarray:
    """Ids of events without a source: a hash of the declared attributes (times as ISO text)."""
    cols = {}
    for a in decl.attrs:
        v = typed[a.name]
        if a.type == "time":
            cols[a.name] = format_times(np.asarray(v)[keep])
        elif a.type in ("int", "bool"):
            cols[a.name] = v[keep].to_numpy(dtype=object, na_value=None)
        else:
            cols[a.name] = np.asarray(v, dtype=object)[keep]
    names = list(cols)
    out = np.empty(len(keep), dtype=object)
    for j, values in enumerate(zip(*(cols[k] for k in names))):
        out[j] = event_id(decl.name, record=dict(zip(names, values)))
    return out


def _constant(m: int, value) -> np.ndarray:
    out = np.empty(m, dtype=object if value is None or isinstance(value, str) else np.float64)
    out[:] = value
    return out


def _frame(decl: EventDecl, typed: dict, keep: np.ndarray, n: int, ids: np.ndarray, sources, t, lo, hi,
           files: np.ndarray, rows: np.ndarray) -> pd.DataFrame:
    m = len(keep)
    if m == 0:
        return empty_events(decl)
    take = (lambda a: a) if m == n else (lambda a: a[keep])  # all kept: no copy
    place = decl.place
    radius = place.widen.metres() if place is not None and place.widen is not None else 0.0
    nan = _constant(m, np.nan)
    cols: dict[str, object] = {
        "_type": _constant(m, decl.name),
        "_id": take(ids),
        "_source": take(sources) if sources is not None else _constant(m, None),
        "_t": take(t), "_lo": take(lo), "_hi": take(hi),
    }
    if place is None:
        cols.update(_place=_constant(m, "none"), _lon=nan, _lat=nan.copy(), _geom=_constant(m, None))
    elif place.geom is not None:
        cols.update(_place=_constant(m, "geom"), _lon=nan, _lat=nan.copy(),
                    _geom=take(np.asarray(typed[place.geom], dtype=object)))
    else:
        cols.update(_place=_constant(m, "point"), _lon=take(_floats(typed[place.lon])),
                    _lat=take(_floats(typed[place.lat])), _geom=_constant(m, None))
    cols["_r"] = _constant(m, float(radius))
    for a in decl.attrs:
        v = typed[a.name]
        if a.name in (place.lon if place else None, place.lat if place else None) and a.type == "float":
            v = v.copy()  # not the same array as _lon/_lat
        cols[a.name] = take(v) if a.type in ("int", "bool") else take(np.asarray(v))
    cols["_file"] = take(files)
    cols["_row"] = take(rows)
    return pd.DataFrame({c: cols[c] for c in event_columns(decl)}, copy=False)


def _rejects(decl: EventDecl, batches: Sequence[RawBatch], problems: _Problems, files: np.ndarray,
             rows: np.ndarray, sizes: np.ndarray) -> pd.DataFrame:
    starts = np.concatenate([[0], np.cumsum(sizes)])
    by_batch: dict[int, list[int]] = {}
    for i in sorted(problems.by_row):
        by_batch.setdefault(int(np.searchsorted(starts, i, side="right") - 1), []).append(i)
    out = []  # (batch, row, file, reason, record)
    for k, idx in by_batch.items():
        records = batches[k].records([i - int(starts[k]) for i in idx])
        for i, record in zip(idx, records):
            out.append((k, int(rows[i]), files[i], "; ".join(problems.by_row[i]), record))
    for k, b in enumerate(batches):
        for row, reason, record in b.unreadable:
            out.append((k, row, b.file, reason, record))
    if not out:
        return empty_rejects()
    out.sort(key=lambda r: (r[0], r[1]))
    return pd.DataFrame({
        "type": [decl.name] * len(out),
        "file": [r[2] for r in out],
        "row": np.array([r[1] for r in out], dtype=np.int64),
        "reason": [r[3] for r in out],
        "record": [r[4] for r in out],
    })

"""What every runner shares: compiling a program, choosing the metric CRS,
turning canonical event rows into run-time events, partitioning them by the
phrase's key, running one partition's automaton and shaping its output rows.

Runners differ only in where these run (in-process, Spark tasks, streaming
state); the semantics is here and in :mod:`spatec.automata`.
"""
from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import shapely
from shapely import wkt as shp_wkt

from spatec.automata.machine import Automaton, RunState, _Ctx, build
from spatec.automata.step import step
from spatec.frontend.check import Program, check_file
from spatec.plan.build import plan_program
from spatec.plan.nodes import Leaf, PhrasePlan, walk_nodes
from spatec.spatial import stamps as S
from spatec.spatial.crs import Projector, data_centre, utm_epsg

CHUNK = 512
STD_COLUMNS = ("phrase", "id", "lo", "hi", "hull", "events")


@dataclass
class Compiled:
    """A checked program with the plans of its phrases."""

    program: Program
    plans: list

    def plan(self, name: str) -> PhrasePlan:
        for p in self.plans:
            if p.name == name:
                return p
        raise KeyError(name)


def compile_program(path, text: str | None = None) -> Compiled:
    program = check_file(path, text)
    return Compiled(program, plan_program(program))


# ------------------------------------------------------------------------------- CRS

def choose_crs(program: Program, frames: dict, override: str | None = None, bounds=()) -> str:
    """The metric CRS: ``override``, the program's ``crs``, else the UTM zone of the
    centre of the bounding box of every event's location (SPEC §1). ``bounds``:
    more events' extents, as ``(lon min, lon max, lat min, lat max)`` (chunks of
    events ingested elsewhere)."""
    if override:
        return override
    if program.crs:
        return program.crs
    lons = [np.array([b[0], b[1]]) for b in bounds]
    lats = [np.array([b[2], b[3]]) for b in bounds]
    for df in frames.values():
        if len(df) == 0:
            continue
        pts = df["_place"] == "point"
        if pts.any():
            lons.append(df.loc[pts, "_lon"].to_numpy(float))
            lats.append(df.loc[pts, "_lat"].to_numpy(float))
        geo = df["_place"] == "geom"
        if geo.any():
            b = shapely.bounds(shapely.from_wkt(df.loc[geo, "_geom"].to_numpy()))
            lons.append(b[:, [0, 2]].ravel())
            lats.append(b[:, [1, 3]].ravel())
    if not lons:
        # no located events: fall back to the program's places
        for pd_ in program.places.values():
            if pd_.kind == "circle":
                lons.append(np.array([pd_.lon]))
                lats.append(np.array([pd_.lat]))
            else:
                b = shp_wkt.loads(pd_.wkt).bounds
                lons.append(np.array([b[0], b[2]]))
                lats.append(np.array([b[1], b[3]]))
    if not lons:
        return "EPSG:32631"
    lon, lat = data_centre(np.concatenate(lons), np.concatenate(lats))
    return utm_epsg(lon, lat)


# ------------------------------------------------------------------------------- events

def attribute_names(program: Program, type_name: str) -> list[str]:
    return [a.name for a in program.events[type_name].attrs]


def to_evs(df: pd.DataFrame, program: Program, projector: Projector) -> list:
    """Canonical event rows (one type) → run-time events, projected."""
    from spatec.automata.machine import Ev

    n = len(df)
    if n == 0:
        return []
    type_name = df["_type"].iloc[0]
    names = attribute_names(program, type_name)
    attr_cols = [_pycol(df[c]) for c in names]
    ids = df["_id"].tolist()
    srcs = df["_source"].tolist()
    if float in set(map(type, srcs)):
        srcs = [None if _missing(v) else v for v in srcs]
    ts, los, his = (df[c].to_numpy(np.int64).tolist() for c in ("_t", "_lo", "_hi"))
    rows = zip(*attr_cols) if names else itertools.repeat((), n)
    return [Ev(type_name, i, src, t, lo, hi, loc, dict(zip(names, vals)))
            for i, src, t, lo, hi, loc, vals in zip(ids, srcs, ts, los, his, _locs(df, projector), rows)]


def _locs(df: pd.DataFrame, projector: Projector) -> list:
    """Each row's location stamp: a disc for a point (all at once when every row is a
    point with finite coordinates: GPS fixes), a grown geometry, or UNIVERSE."""
    n = len(df)
    kinds = df["_place"].to_numpy()
    rs = df["_r"].to_numpy(float)
    xs = np.full(n, np.nan)
    ys = np.full(n, np.nan)
    pts = kinds == "point"
    if pts.any():
        x, y = projector.forward(df["_lon"].to_numpy(float)[pts], df["_lat"].to_numpy(float)[pts])
        xs[pts], ys[pts] = x, y
        if pts.all():
            locs = S.Loc.discs(xs, ys, rs)
            if locs is not None:
                return locs
    geoms = [None] * n
    geo = np.flatnonzero(kinds == "geom")
    if len(geo):
        gs = shapely.from_wkt(df["_geom"].to_numpy()[geo])
        gs = shapely.transform(gs, lambda c: np.column_stack(projector.forward(c[:, 0], c[:, 1])))
        for i, g in zip(geo, gs):
            geoms[i] = g
    out = []
    for i in range(n):
        k = kinds[i]
        if k == "point":
            out.append(S.Loc.disc(float(xs[i]), float(ys[i]), float(rs[i])))
        elif k == "geom":
            out.append(S.Loc.of(geoms[i], float(rs[i])))
        else:
            out.append(S.UNIVERSE)
    return out


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _pycol(s: pd.Series) -> list:
    """A column as Python values with None for missing (NaN, NA)."""
    if s.dtype == object or s.dtype == np.float64:
        vals = s.tolist()
        miss = pd.isna(s.to_numpy())
        if miss.any():
            for i in np.flatnonzero(miss).tolist():
                vals[i] = None
        return vals
    if s.dtype.kind in "iub" and isinstance(s.dtype, np.dtype):
        return s.tolist()   # a numpy int or bool column (times: int64 µs) has nothing missing
    return s.astype(object).where(s.notna(), None).tolist()


def phrase_types(plan: PhrasePlan, program: Program) -> set:
    """Event types a phrase reads (None among leaves: every type)."""
    types = set()
    for n in walk_nodes(plan.root):
        if isinstance(n, Leaf):
            types.add(n.type)
        if getattr(n, "absence", None) is not None:
            types |= {l.type for l in n.absence.leaves}
    if None in types:
        return set(program.events)
    return types


def keyed_types(plan: PhrasePlan, program: Program, types) -> set:
    """Types that carry every key attribute (partitioned); the others are broadcast."""
    if not plan.key:
        return set(types)
    out = set()
    for t in types:
        names = {a.name for a in program.events[t].attrs}
        if all(k in names for k in plan.key):
            out.add(t)
    return out


def partitions(plan: PhrasePlan, program: Program, evs_by_type: dict, history: dict | None = None) -> dict:
    """key value → events (broadcast types in every partition), each sorted by event time.

    ``history`` (type → events): events of other partitions, held elsewhere
    (another Spark group), that ``successive`` may need as history only."""
    types = phrase_types(plan, program)
    keyed = keyed_types(plan, program, types)
    parts: dict = {}
    broadcast = []
    for t in types:
        for ev in evs_by_type.get(t, ()):
            if not plan.key:
                parts.setdefault((), []).append(ev)
            elif t in keyed:
                k = tuple(ev.attrs.get(a) for a in plan.key)
                if any(v is None for v in k):
                    continue  # an event with no key value relates to no other (SPEC: shares its value)
                parts.setdefault(k, []).append(ev)
            else:
                broadcast.append(ev)
    if broadcast:
        if not parts and not keyed:
            parts[()] = []
        for k in parts:
            parts[k] = parts[k] + broadcast
    if needs_source_history(plan, program):
        _add_source_history(plan, program, parts, evs_by_type, types, history or {})
    for k in parts:
        parts[k].sort(key=event_order)
    return parts


def needs_source_history(plan: PhrasePlan, program: Program) -> bool:
    """A phrase using ``successive`` partitioned by something other than the source:
    partitions need other partitions' events of their sources as history."""
    if not plan.key or not uses_successive(plan):
        return False
    for t in phrase_types(plan, program):
        decl = program.events.get(t)
        if decl is not None and decl.source is not None and tuple(plan.key) != (decl.source.attr,):
            return True
    return False


def uses_successive(plan: PhrasePlan) -> bool:
    from spatec.frontend import ast as A

    exprs = list(plan.deferred)
    for n in walk_nodes(plan.root):
        exprs += list(n.preds)
        if getattr(n, "absence", None) is not None:
            exprs += list(n.absence.conds)
    return any(isinstance(x, A.Call) and x.func == "successive" for e in exprs for x in A.walk(e))


def _add_source_history(plan: PhrasePlan, program: Program, parts: dict, evs_by_type: dict, types,
                        history: dict) -> None:
    """``successive`` means nothing of the same type and source between (SPEC §4):
    when the partition key is not the source, a partition also needs, as history
    only, the events of its sources that the key sent to other partitions."""
    from spatec.automata.machine import HistoryEv

    for t in types:
        decl = program.events.get(t)
        if decl is None or decl.source is None or tuple(plan.key) == (decl.source.attr,):
            continue
        by_source: dict = {}
        for ev in list(evs_by_type.get(t, ())) + list(history.get(t, ())):
            if ev.source is not None:
                by_source.setdefault(ev.source, []).append(ev)
        for k, evs in parts.items():
            mine = {id(e) for e in evs}
            sources = {e.source for e in evs if e.type == t and e.source is not None}
            extra = [HistoryEv(e.type, e.id, e.source, e.t, e.lo, e.hi, e.loc, e.attrs)
                     for s in sources for e in by_source[s] if id(e) not in mine]
            evs.extend(extra)


def final_watermark(frames: dict) -> int:
    """The batch's final watermark: the latest event time (``_hi``) over every input event."""
    his = [int(df["_hi"].max()) for df in frames.values() if len(df)]
    return max(his) if his else 0


def event_order(ev):
    return (ev.hi, ev.lo, ev.type, ev.id)


def fastpath_enabled(flag: bool | None = None) -> bool:
    """Whether batch replays may use the fast paths: ``flag`` if given, else
    unless the environment sets ``SPATEC_FASTPATH=0``."""
    if flag is not None:
        return bool(flag)
    return os.environ.get("SPATEC_FASTPATH", "1").strip() not in ("0", "false", "no", "off")


def run_partition(am: Automaton, evs: list, final_watermark: int, state: RunState | None = None,
                  fastpath: bool | None = None):
    """Replay one partition's events (sorted by event time) to the end: decided composites.

    A phrase with a fast path (:mod:`spatec.automata.fastpath`) is evaluated
    by it unless ``fastpath`` is False (or ``SPATEC_FASTPATH=0``); the run state
    returned is then empty."""
    if state is None and fastpath_enabled(fastpath):
        from spatec.automata.fastpath import run_events

        got = run_events(am, evs, final_watermark)
        if got is not None:
            return got, RunState()
    st = state or RunState()
    out = []
    for i in range(0, len(evs), CHUNK):
        got, _late = step(am, st, evs[i:i + CHUNK], ordered=True)
        out.extend(got)
    got, _ = step(am, st, [], watermark=final_watermark, final=True)
    out.extend(got)
    return out, st


# ------------------------------------------------------------------------------- one phrase

def phrase_rows(plan: PhrasePlan, program: Program, frames: dict, projector: Projector, final_watermark: int,
                fastpath: bool | None = None, history: dict | None = None, evs_by_type=None,
                progress=None, arrow_hulls: bool = False) -> tuple[list, int]:
    """One phrase over canonical event frames (type → DataFrame): its output rows
    (as :func:`output_row`, each id once) and the largest per-key state size.

    ``frames`` hold every partition, or (a Spark group) a set of whole
    partitions; ``history`` (type → frame) then holds the events of other
    partitions that ``successive`` needs as history only. A phrase with a fast
    path runs it over all partitions at once (state size 0) unless
    ``fastpath`` is False or the data does not fit it. ``evs_by_type``: a
    callable giving the run-time events of ``frames`` by type (a cache shared
    by phrases). ``progress(phrase, events, composites)`` per partition.
    ``arrow_hulls``: the fast path's hulls as Arrow text (:func:`fast_rows`).
    """
    from spatec.automata.fastpath import fast_path

    history = {t: df for t, df in (history or {}).items() if len(df)}
    fp = fast_path(plan, program) if fastpath_enabled(fastpath) else None
    if fp is not None:
        df = frames.get(fp.type)
        hist = history.get(fp.type)
        if hist is not None:
            df = pd.concat([df.assign(_hist=False), hist.assign(_hist=True)], ignore_index=True) \
                if df is not None else None
        rows = [] if df is None or not len(df) else fast_rows(fp, df, program, projector, final_watermark,
                                                              arrow_hulls)
        if rows is not None:
            if progress:
                progress(plan.name, 0 if df is None else len(df), len(rows))
            return dedupe(rows), 0
    if evs_by_type is None:
        evs = {t: to_evs(df, program, projector) for t, df in frames.items()}
    else:
        evs = evs_by_type()
    hist_evs = {t: to_evs(df, program, projector) for t, df in history.items()}
    am = build(plan, program, projector)
    rows, size = [], 0
    for _key, part in partitions(plan, program, evs, hist_evs).items():
        got, st = run_partition(am, part, final_watermark, fastpath=False)
        size = max(size, st.size())
        rows.extend(output_row(am, c, projector, st) for c in got)
        if progress:
            progress(plan.name, len(part), len(got))
    return dedupe(rows), size


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


# ------------------------------------------------------------------------------- output rows

def output_row(am: Automaton, c, projector: Projector, state: RunState | None = None,
               hull: bool = True) -> dict:
    """One composite as an output record (times as int µs; durations in seconds).
    ``hull=False``: the hull is left None, for a caller that writes many at once."""
    row = {"phrase": c.phrase, "id": c.id, "lo": int(c.lo), "hi": int(c.hi),
           "hull": S.to_lonlat_wkt(c.loc, projector) if hull else None,
           "events": {v: e.id for v, e in sorted(c.bindings.items())}}
    if not am.emit:
        return row
    ctx = _Ctx(state or RunState())
    types = am.__dict__.get("_emit_types")
    if types is None:
        types = am._emit_types = dict(am.plan.schema)
    for name, f in am.emit:
        try:
            v = f(c.bindings, ctx)
        except (ZeroDivisionError, OverflowError, TypeError):
            v = None
        row[name] = convert_value(v, types.get(name))
    return row


def fast_rows(fp, df: pd.DataFrame, program: Program, projector: Projector, final_watermark: int,
              arrow_hulls: bool = False):
    """Output rows (as :func:`output_row`, held as :class:`ColumnRows`) of a fast-path
    phrase over the canonical events of its type, every partition at once; None when
    the data does not fit. ``arrow_hulls``: the hulls' texts as an Arrow string array
    (a frame of them has an Arrow text column; for the JSON lines writer)."""
    from spatec.automata.fastpath import run_frame

    m = run_frame(fp, df, program, projector, final_watermark, lambda d: to_evs(d, program, projector))
    if m is None:
        return None
    types = dict(fp.plan.schema)
    emit = m.emit(program.timezone)
    columns = [("phrase", [fp.phrase] * len(m)), ("id", m.ids()),
               ("lo", np.asarray(m.lo, dtype=np.int64)), ("hi", np.asarray(m.hi, dtype=np.int64)),
               ("hull", m.hulls_wkt(projector, arrow=arrow_hulls)), ("events", m.event_ids())]
    columns += [(name, convert_values(vals, types.get(name))) for name, vals in emit.items()]
    return ColumnRows(dict(columns))


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


def rows_frame(plan: PhrasePlan, rows: list) -> pd.DataFrame:
    """The output frame of a phrase's rows (dicts, or :class:`ColumnRows`), in order of
    ``lo``, ``hi``, ``id``."""
    cols = list(STD_COLUMNS) + [name for name, _ in plan.schema]
    if isinstance(rows, ColumnRows) and len(rows):
        return _columns_frame(cols, rows.columns)
    df = pd.DataFrame(rows, columns=cols)
    if len(df):
        df = df.sort_values(["lo", "hi", "id"], kind="mergesort").reset_index(drop=True)
    return df


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
        elif isinstance(v, pa.Array):       # Arrow text (fast_rows' arrow_hulls): kept so
            out[c] = pd.arrays.ArrowExtensionArray(v)
        else:
            out[c] = np.empty(n, dtype=object)
            out[c][:] = v
    extra = [c for c in cols if c not in STD_COLUMNS]
    if extra:
        nan = [np.nan] * n
        emit = pd.DataFrame(list(zip(*(columns.get(c, nan) for c in extra))), columns=extra)
        out.update({c: emit[c].to_numpy() for c in extra})
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

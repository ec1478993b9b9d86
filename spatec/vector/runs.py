"""The fast path ``run``: runs (SPEC §7) cut vectorised per source, over whole frames.

A phrase that is one run leaf, ``run T -> R [while C] [gap D]`` (with any patterns and
places on the run, ``where``, ``within`` and ``emit``; :func:`spatec.plan.evaluator.run_ok`),
is cut here the way :mod:`spatec.automata.runs` cuts it one event at a time:

1. the type's events as columns grouped by source, in local-time order
   (:func:`spatec.vector.fastpath.frame_columns`; data the automaton would take in
   another order is refused, and the runner falls back to the automaton);
2. which event may join the one before it, whatever the run's first event: both pass
   the run's patterns, same source, within ``gap`` (:func:`joinable`);
3. the ``while`` condition: over pairs (prev, this) at once when it does not read
   ``R.first``; else greedily, every source at once in lockstep (:func:`cut`): each
   source's open run tests a block of its next events against its first one, and the
   first that fails starts the next run;
4. the runs' summaries (first, last, count, ``[min lo, max hi]``), complete when the
   source has a next event or the end watermark passes ``R.last.hi + gap``;
5. the ``where`` conjuncts about the run alone that the vectorised expressions decide
   (:class:`RunEvaluator`: ``count(R)``, ``duration(R)``, ``R.first.X``, ``R.last.X``, ...)
   drop the runs they reject;
6. the runs left become :class:`~spatec.automata.runs.RunEv` (hull and aggregates as the
   running summary gives them) and enter the automaton's tree at the leaf
   (:func:`spatec.automata.step.enter_runs`), which applies the patterns, places,
   conditions and ``within`` and makes the composites: the same code as the automaton's.

So the fast path's composites are the automaton's, byte for byte (tested with hypothesis
against the automaton and the oracle); it saves the automaton's per-event work.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import shapely

from spatec.automata.machine import RunState, build
from spatec.automata.places import PlaceSets
from spatec.automata.runs import Open, RunEv, aggregates_of, hull_of_points
from spatec.automata.step import enter_runs
from spatec.frontend import ast as A
from spatec.frontend.runs import run_ref
from spatec.plan.predicates import expr_vars
from spatec.spatial.stamps import concat_ranges
from spatec.vector.fastpath import FastPath, frame_columns
from spatec.vector.vexpr import Bound, Col, Columns, Evaluator, Patterns

#: the first block of events a run's first event is tested against; doubled while runs go on
BLOCK = 4
BLOCK_MAX = 256
#: names the member events of a run are bound to in rewritten expressions
FIRST, PREV, THIS, LAST, RUN = "\0first", "\0prev", "\0this", "\0last", "\0run"


def run_composites(fp: FastPath, df, program, projector, final_watermark: int, materialise):
    """``(automaton, state, composites, open_low)`` of the run phrase ``fp`` over the canonical
    events ``df`` of its type (every partition at once): ``open_low`` the least ``lo`` of the
    runs left incomplete at the end (None: none). None when the data does not fit."""
    plan = fp.plan
    leaf = plan.root
    info = leaf.run
    cols = frame_columns(fp, df, projector, materialise)
    if cols is None:
        return None
    am = build(plan, program, projector)
    st = RunState()
    if cols.n == 0:
        return am, st, [], None
    ev = Evaluator(program.timezone)
    rows = np.arange(cols.n, dtype=np.int64)
    if info.filter is not None:
        pats = Patterns(program.places, program.timezone, projector, PlaceSets(program.place_sets, projector))
        passes = pats.mask((info.filter,), cols, rows)
    else:
        passes = np.ones(cols.n, dtype=bool)
    cond = None if info.cond is None else while_expr(info.cond, leaf.var)
    join = cut(cols, passes, joinable(cols, passes, info.gap), cond, ev)
    first, last = runs_of(passes, join)
    g, hi = cols.group, cols.hi
    # the watermark at the end: the final one, or the partition's latest event time
    typed = df["_type"].to_numpy() == fp.type
    w_all = max(int(final_watermark), int(df["_hi"].to_numpy(np.int64)[typed].max()))
    nxt = np.minimum(last + 1, cols.n - 1)
    complete = (last + 1 < cols.n) & (g[nxt] == g[last])
    if info.gap is not None:
        w_end = w_all if not plan.key else np.maximum(int(final_watermark), _group_last(g, hi)[g[last]])
        complete |= w_end > hi[last] + info.gap
    lo, rhi = _reduce(cols.lo, first, last, np.minimum), _reduce(hi, first, last, np.maximum)
    open_low = int(lo[~complete].min()) if (~complete).any() else None
    first, last, lo, rhi = first[complete], last[complete], lo[complete], rhi[complete]
    count = last - first + 1
    keep = np.ones(len(first), dtype=bool)
    if plan.within is not None:
        keep &= rhi - lo <= plan.within
    summary = RunColumns(first, last, count, lo, rhi)
    rev = RunEvaluator(program.timezone, summary)
    for c in leaf.preds:
        if not keep.any():
            break
        e = where_expr(c, leaf.var)
        if e is None:
            continue
        idx = np.flatnonzero(keep)
        b = Bound(cols, {FIRST: first[idx], LAST: last[idx], RUN: idx})
        try:
            keep[idx] = rev.value(e, b).truth()
        except Unsure:
            continue
    idx = np.flatnonzero(keep)
    runs = make_runs(cols, info, first[idx], last[idx], lo[idx], rhi[idx])
    w = max(w_all, int(final_watermark))
    return am, st, enter_runs(am, st, [(leaf, r) for r in runs], w), open_low


def _group_last(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per group code, the value of ``v`` at the group's last row (rows grouped, in order)."""
    out = np.zeros(int(g.max()) + 1, dtype=v.dtype)
    ends = np.flatnonzero(np.r_[g[1:] != g[:-1], True])
    out[g[ends]] = v[ends]
    return out


def _reduce(v: np.ndarray, first: np.ndarray, last: np.ndarray, ufunc) -> np.ndarray:
    """``ufunc`` over ``v[first[i]:last[i] + 1]`` for each run (runs disjoint, in order)."""
    if not len(first):
        return first.copy()
    bounds = np.empty(2 * len(first), dtype=np.int64)
    bounds[0::2], bounds[1::2] = first, last + 1
    ok = bounds < len(v)
    got = ufunc.reduceat(v, bounds[ok])
    full = np.empty(2 * len(first), dtype=v.dtype)
    full[np.flatnonzero(ok)] = got
    return full[0::2]


# ---------------------------------------------------------------------------- cutting

def joinable(cols: Columns, passes: np.ndarray, gap) -> np.ndarray:
    """Where an event may join the run of the event before it, whatever the ``while``
    condition says: both pass the run's patterns, one source, ``hi`` within ``gap``."""
    n = cols.n
    j = np.zeros(n, dtype=bool)
    if n > 1:
        g, hi = cols.group, cols.hi
        j[1:] = passes[1:] & passes[:-1] & (g[1:] == g[:-1])
        if gap is not None:
            j[1:] &= hi[1:] <= hi[:-1] + gap
    return j


def cut(cols: Columns, passes: np.ndarray, j: np.ndarray, cond, ev: Evaluator) -> np.ndarray:
    """Where an event joins the run before it (SPEC §7, greedy): ``j`` and the ``while``
    condition ``cond`` (rewritten by :func:`while_expr`; None: none) with ``R.first`` the
    run's first event, ``R.prev`` the one before, ``R.this`` the event."""
    join = j.copy()
    if cond is None or not j.any():
        return join
    names = expr_vars(cond)
    idx = np.flatnonzero(j)
    if FIRST not in names:
        join[idx] = ev.holds([cond], Bound(cols, {PREV: idx - 1, THIS: idx, FIRST: idx - 1}))
        return join
    # stretches a..b: a starts a run for sure (passes, cannot join), a+1..b may join
    n = cols.n
    starts = np.flatnonzero(passes & ~j)
    stops = np.flatnonzero(~j)
    k = np.searchsorted(stops, starts, side="right")
    ends = np.where(k < len(stops), stops[np.minimum(k, len(stops) - 1)] - 1, n - 1)
    long = ends > starts
    f, p, b = starts[long], starts[long] + 1, ends[long]      # first, next to test, last of the stretch
    block = np.full(len(f), BLOCK, dtype=np.int64)
    while len(f):
        m = np.minimum(block, b - p + 1)
        this = concat_ranges(p, m)
        ok = ev.holds([cond], Bound(cols, {FIRST: np.repeat(f, m), PREV: this - 1, THIS: this}))
        offsets = np.concatenate([[0], np.cumsum(m)[:-1]])
        big = np.iinfo(np.int64).max
        fail_at = np.minimum.reduceat(np.where(ok, big, this), offsets)
        failed = fail_at != big
        join[fail_at[failed]] = False
        f = np.where(failed, fail_at, f)
        p = np.where(failed, fail_at + 1, p + m)
        block = np.where(failed, BLOCK, np.minimum(2 * block, BLOCK_MAX))
        on = p <= b
        f, p, b, block = f[on], p[on], b[on], block[on]
    return join


def runs_of(passes: np.ndarray, join: np.ndarray):
    """(first rows, last rows) of every run, in row order: a run starts at an event that
    passes and does not join, and takes the events that join after it."""
    first = np.flatnonzero(passes & ~join)
    nonjoin = np.flatnonzero(~join)
    k = np.searchsorted(nonjoin, first, side="right")
    last = np.where(k < len(nonjoin), nonjoin[np.minimum(k, max(len(nonjoin) - 1, 0))] - 1, len(join) - 1)
    return first, last


# ---------------------------------------------------------------------------- expressions

class Unsure(Exception):
    """A ``where`` conjunct the vectorised expressions do not decide: the automaton will."""


def _rewrite(e, var: str, members: dict, run_kinds: dict):
    """``e`` with the run ``var``'s references replaced: member events by the names of
    ``members`` (member → variable), other references by ``run_kinds`` (kind → function
    of the RunRef giving a node), None where something cannot be rewritten."""
    ref = run_ref(e, {var})
    if ref is not None:
        if ref.kind == "member":
            name = members.get(ref.member)
            return None if name is None else A.Var(name)
        if ref.kind == "attr":
            name = members.get(ref.member)
            return None if name is None else A.Attr(name, ref.attr)
        make = run_kinds.get(ref.kind)
        return None if make is None else make(ref)
    if isinstance(e, (A.Num, A.Quantity, A.Str, A.BoolLit, A.TimeLit)):
        return e
    if isinstance(e, A.UnaryOp):
        x = _rewrite(e.operand, var, members, run_kinds)
        return None if x is None else dataclasses.replace(e, operand=x)
    if isinstance(e, (A.BinOp, A.BoolOp)):
        x, y = _rewrite(e.left, var, members, run_kinds), _rewrite(e.right, var, members, run_kinds)
        return None if x is None or y is None else dataclasses.replace(e, left=x, right=y)
    if isinstance(e, A.Call):
        if e.func == "duration" and len(e.args) == 1 and run_ref(e.args[0], {var}) is not None \
                and run_ref(e.args[0], {var}).kind == "run" and "duration" in run_kinds:
            return run_kinds["duration"](None)
        args = [_rewrite(a, var, members, run_kinds) for a in e.args]
        if any(a is None or not isinstance(a, A.Var) for a in args):
            return None
        return dataclasses.replace(e, args=tuple(args))
    return None


def while_expr(e, var: str):
    """The ``while`` condition over plain variables: ``R.first`` → :data:`FIRST`, ``R.prev`` →
    :data:`PREV`, ``R.this`` → :data:`THIS` (``R.X`` is ``R.first.X``)."""
    got = _rewrite(e, var, {"first": FIRST, "prev": PREV, "this": THIS}, {})
    if got is None:
        raise ValueError("a while condition the planner should not have sent to the fast path")
    return got


def where_expr(e, var: str):
    """A ``where`` conjunct about run ``var`` alone over :data:`FIRST`, :data:`LAST` and the
    run's summary (:data:`RUN`: ``count``, ``lo``, ``hi``, ``duration``), or None."""
    kinds = {"count": lambda ref: A.Attr(RUN, "count"),
             "stamp": lambda ref: A.Attr(RUN, ref.attr),
             "duration": lambda ref: A.BinOp("-", A.Attr(RUN, "hi"), A.Attr(RUN, "lo"))}
    if not expr_vars(e) <= {var}:
        return None
    return _rewrite(e, var, {"first": FIRST, "last": LAST}, kinds)


@dataclasses.dataclass
class RunColumns:
    """Complete runs as arrays: first and last rows, count, composite stamps."""

    first: np.ndarray
    last: np.ndarray
    count: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


class RunEvaluator(Evaluator):
    """The vectorised expressions, with the run's summary read as :data:`RUN`'s attributes;
    what they do not vectorise raises :class:`Unsure` (the automaton decides it)."""

    def __init__(self, tz: str, runs: RunColumns):
        super().__init__(tz)
        self.runs = runs

    def _vec(self, e, b: Bound) -> Col:
        if isinstance(e, A.Attr) and e.var == RUN:
            return Col(getattr(self.runs, e.name)[b.rows[RUN]])
        return super()._vec(e, b)

    def _scalar(self, e, b: Bound, errors: bool = False) -> Col:
        raise Unsure


# ---------------------------------------------------------------------------- complete runs

def make_runs(cols: Columns, info, first: np.ndarray, last: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list:
    """The complete runs ``first[i]..last[i]`` as :class:`RunEv`: hulls and aggregates as
    the running summary (:class:`~spatec.automata.runs.Open`) gives them."""
    if not len(first):
        return []
    count = last - first + 1
    firsts = cols.evs(first)
    lasts = cols.evs(last)
    locs = hulls(cols, first, last)
    keys = tuple(info.aggregates)
    out = []
    for i in range(len(first)):
        a, z = int(first[i]), int(last[i])
        loc = locs[i]
        aggs = {}
        if loc is None or keys:
            evs = cols.evs(np.arange(a, z + 1, dtype=np.int64))
            if loc is None:         # stamps other than equal discs: the summary's own fold
                o = Open(evs[0], ())
                for e in evs[1:]:
                    o.add(e, ())
                loc = o.hull()
            if keys:
                aggs = aggregates_of(keys, lambda attr: [e.attrs.get(attr) for e in evs])
        out.append(RunEv(firsts[i], lasts[i], int(count[i]), int(lo[i]), int(hi[i]), loc, aggs))
    return out


def hulls(cols: Columns, first: np.ndarray, last: np.ndarray) -> list:
    """Each run's hull as :meth:`Open.hull` makes it (None where its stamps are not discs of
    one radius): ``hull_of_points`` of the extreme points of the centres, found with one
    vectorised GEOS hull of each run's centres (a point in the hull's interior or on an
    edge between two others is never extreme)."""
    n = len(first)
    count = last - first + 1
    every = concat_ranges(first, count)
    x, y, disc = cols.centres(every)
    r = cols.r[every]
    owner = np.repeat(np.arange(n), count)
    r0 = np.repeat(cols.r[first], count)
    bad = np.zeros(n, dtype=bool)
    np.logical_or.at(bad, owner, ~disc | (r != r0))
    out: list = [None] * n
    r_first = cols.r[first]
    at = np.concatenate([[0], np.cumsum(count)[:-1]])      # each run's first row in `every`
    many = np.flatnonzero(~bad & (count > 1))
    for i in np.flatnonzero(~bad & (count == 1)).tolist():
        out[i] = hull_of_points([(float(x[at[i]]), float(y[at[i]]))], float(r_first[i]))
    if len(many):
        sel = concat_ranges(at[many], count[many])
        xs, ys = x[sel], y[sel]
        lines = shapely.from_ragged_array(
            shapely.GeometryType.LINESTRING, np.ascontiguousarray(np.column_stack([xs, ys])),
            (np.concatenate([[0], np.cumsum(count[many])]).astype(np.int64),))
        geoms = shapely.convex_hull(lines)
        for i, gm in zip(many.tolist(), geoms.tolist()):
            pts = sorted({(float(px), float(py)) for px, py in shapely.get_coordinates(gm).tolist()})
            out[i] = hull_of_points(pts, float(r_first[i]))
    return out

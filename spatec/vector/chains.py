"""Fast path ``chains``: two chains of one event type joined at the root, evaluated with numpy.

The shape (:func:`spatec.plan.evaluator.fast_path_shape`)::

    (T -> A [and patterns] op T -> B op ...) OP (T -> E op T -> F op ...)
      where successive(A, B, ...) and successive(E, F, ...) and ...

each side a chain over its own variables in order (as the ``chain`` shape of
:mod:`spatec.vector.fastpath`; a side may be one leaf), ``OP`` any
spatio-temporal operator or ``and``, bounded by concurrency or ``within``;
the root's conjuncts relate the sides (Issue 17's TwoStuck: two stuck buses
near each other at once).

Evaluation, all sources at once:

1. each side's matches: sliding windows of ``k`` consecutive events of one
   source, in one partition, that pass the side's leaf patterns and
   conjuncts and its spatial suffixes (:func:`fastpath.chain_side`, the
   ``chain`` shape's own evaluation);
2. the join: candidate pairs of side matches from a window on the sides'
   time stamps within each partition — and, when a root conjunct is
   ``distance(X, Y) < D`` with X on one side and Y on the other, from a grid
   of X's and Y's centres too (:func:`fastpath.grid_window_pairs`); then the
   exact tests: distinct events, the root's time relation
   (``relations.before`` over sides of one source each), ``within``, the
   space suffix (:func:`fastpath.hull_overlap`) and the root's conjuncts
   (:class:`vexpr.Evaluator`).

The result is a :class:`fastpath.Matches`, from which the runners write rows
as for every other fast path. Data the shape was not proven for (ties in a
source's local times, ...) is refused by :func:`fastpath.frame_columns`:
None, and the runner falls back to the automaton, which stays the reference.
"""
from __future__ import annotations

import numpy as np

from spatec.automata.places import PlaceSets
from spatec.frontend import ast as A
from spatec.plan.evaluator import chain_preds
from spatec.plan.nodes import Join
from spatec.spatial.stamps import concat_ranges
from spatec.vector.fastpath import (
    ChainSide,
    FastPath,
    Filters,
    GroupSearch,
    Matches,
    chain_side,
    empty_matches,
    frame_columns,
    grid_window_pairs,
    hull_overlap,
    near_bound,
    within_mask,
)
from spatec.vector.vexpr import Bound, Columns, Evaluator, Patterns

#: candidate pairs tested at once (bounds the memory of the join's arrays)
BLOCK = 1 << 20


def run_frame(fp: FastPath, df, program, projector, final_watermark: int, materialise) -> Matches | None:
    """Every partition's matches at once over the canonical events ``df`` of ``fp.type``
    (None: the data does not fit the shape); as :func:`fastpath.run_frame`."""
    cols = frame_columns(fp, df, projector, materialise)
    if cols is None:
        return None
    pats = Patterns(program.places, program.timezone, projector, PlaceSets(program.place_sets, projector))
    return evaluate(fp, cols, program.timezone, Filters(patterns=pats))


def evaluate(fp: FastPath, cols: Columns, tz: str, filters: Filters) -> Matches:
    """The composites of ``fp`` (shape ``chains``) over ``cols`` (:func:`frame_columns`)."""
    ev = Evaluator(tz)
    root: Join = fp.plan.root
    left = chain_side(fp.plan, root.left, cols, ev, filters)
    right = chain_side(fp.plan, root.right, cols, ev, filters) if len(left.start) else left
    if not len(left.start) or not len(right.start):
        return empty_matches(fp, cols)
    li, rj = _candidates(fp, cols, root, left, right)
    if not len(li):
        return empty_matches(fp, cols)
    parts = []
    for a in range(0, len(li), BLOCK):
        parts.append(_exact(fp, cols, root, ev, left, right, li[a:a + BLOCK], rj[a:a + BLOCK]))
    rows = {v: np.concatenate([p[0][v] for p in parts]) for v in fp.vars}
    lo = np.concatenate([p[1] for p in parts])
    hi = np.concatenate([p[2] for p in parts])
    return Matches(fp, cols, rows, lo, hi)


def _near(preds, left: ChainSide, right: ChainSide):
    """(X, Y, D): a conjunct ``distance(X, Y) < D`` (or ``<=``) with X on the left and Y
    on the right; None if there is none."""
    for x in left.offset:
        for y in right.offset:
            d = near_bound(preds, x, y)
            if d is not None:
                return x, y, d
    return None


def _candidates(fp: FastPath, cols: Columns, root: Join, left: ChainSide, right: ChainSide):
    """(left positions, right positions): pairs of side matches in one partition whose
    time stamps the root's operator and ``within`` allow (a superset: the exact tests
    follow), narrowed by a grid when a conjunct bounds a distance across the sides."""
    w = fp.plan.within
    time_rel = A.op_parts(root.op)[0]
    if time_rel == "||":
        # concurrent stamps meet (relations.before's interval test fails both ways)
        lower, upper = left.lo - int((right.hi - right.lo).max()), left.hi
        if w is not None:
            lower = np.maximum(lower, left.hi - w)
    else:
        lower, upper = left.hi - w, left.lo + w            # the span hi - lo is at most `within`
    gl, gr = cols.part[left.start], cols.part[right.start]
    near = _near(chain_preds(root), left, right)
    if near is not None:
        x, y, d = near
        xa, ya, da = cols.centres(left.start + left.offset[x])
        xb, yb, db = cols.centres(right.start + right.offset[y])
        if da.all() and db.all():
            rmax = float(max(cols.r[left.start + left.offset[x]].max(), cols.r[right.start + right.offset[y]].max()))
            got = grid_window_pairs(xa, ya, gl, lower, upper, xb, yb, gr, right.lo, d + 2 * rmax)
            if got is not None:
                return got
    order = np.lexsort((right.lo, gr))
    search = GroupSearch(gr[order], right.lo[order])
    s = search.search(gl, lower, "left")
    e = search.search(gl, upper, "right")
    cnt = np.maximum(e - s, 0)
    return np.repeat(np.arange(len(left.start), dtype=np.int64), cnt), order[concat_ranges(s, cnt)]


def _exact(fp: FastPath, cols: Columns, root: Join, ev: Evaluator, left: ChainSide, right: ChainSide, li, rj):
    """The candidate pairs ``(li, rj)`` that are composites: (rows by variable, lo, hi)."""
    sa, sb = left.start[li], right.start[rj]
    src = cols.src_code
    same = src[sa] == src[sb]                              # (every row of a chain has a source)
    # distinct variables, distinct events: a source's windows share events when they meet
    keep = ~(same & (sa <= sb + right.k - 1) & (sb <= sa + left.k - 1))
    keep &= cols.part[sa] == cols.part[sb]
    lo = np.minimum(left.lo[li], right.lo[rj])
    hi = np.maximum(left.hi[li], right.hi[rj])
    keep &= within_mask(fp.plan, lo, hi)
    time_rel, space = A.op_parts(root.op)
    if time_rel:
        t = cols.t
        # relations.before of two sides of one source each: all of one before all of the
        # other (same source: by local time, the windows in order; else by interval)
        ab = (left.hi[li] < right.lo[rj]) | (same & (t[sa + left.k - 1] < t[sb]))
        ba = (right.hi[rj] < left.lo[li]) | (same & (t[sb + right.k - 1] < t[sa]))
        keep &= ab if time_rel == ";" else ~ab & ~ba
    idx = np.flatnonzero(keep)
    li, rj, sa, sb, lo, hi = li[idx], rj[idx], sa[idx], sb[idx], lo[idx], hi[idx]
    if space and len(li):
        ov = hull_overlap(cols, [sa + o for o in range(left.k)], [sb + o for o in range(right.k)])
        idx = np.flatnonzero(ov if space == "=" else ~ov)
        li, rj, sa, sb, lo, hi = li[idx], rj[idx], sa[idx], sb[idx], lo[idx], hi[idx]
    preds = chain_preds(root)
    near = _near(preds, left, right)
    if near is not None and len(li):
        # first drop pairs of discs clearly too far apart (a necessary condition, with room for
        # rounding, as fastpath's pair shape); the conjuncts below decide exactly
        x, y, d = near
        ra, rb = sa + left.offset[x], sb + right.offset[y]
        xa, ya, da = cols.centres(ra)
        xb, yb, db = cols.centres(rb)
        reach = d + cols.r[ra] + cols.r[rb]
        with np.errstate(invalid="ignore"):
            far = da & db & ((xa - xb) ** 2 + (ya - yb) ** 2 > (reach * (1 + 1e-9) + 1e-6) ** 2)
        idx = np.flatnonzero(~far)
        li, rj, sa, sb, lo, hi = li[idx], rj[idx], sa[idx], sb[idx], lo[idx], hi[idx]
    rows = {**{v: sa + o for v, o in left.offset.items()}, **{v: sb + o for v, o in right.offset.items()}}
    if preds and len(li):
        keep = ev.holds(preds, Bound(cols, rows))
        rows = {v: r[keep] for v, r in rows.items()}
        lo, hi = lo[keep], hi[keep]
    return rows, lo, hi

"""Fast paths: phrases of a few proven shapes evaluated with numpy (DESIGN, "Fast paths").

The general automaton (:mod:`spatec.automata.step`) is the reference. When
:func:`fast_path` can prove from the plan that a phrase has one of these
shapes, a vectorised evaluator gives the same composites (ids, stamps,
bindings) over all of a type's events at once:

``leaf``
    one event leaf, ``T -> A [and patterns] [where A ...] [within D]``:
    every event that passes is a composite.
``chain``
    ``T -> A op T -> B op ...`` with ``successive(A, B, ...)`` over all the
    variables in order, ops from ``; || = <> ;= ;<> ||= ||<> and``: the
    candidates are runs of consecutive events of one source (among all its
    events, whatever their partition: SPEC §4) that all lie in one partition.
``after``
    ``T -> A ; not T -> X within D`` with one source per partition: A is
    reported iff no later X of its source (passing X's patterns, spatial
    suffix and conditions) has ``X.hi <= A.hi + D``, and ``A.hi + D`` is not
    past the final watermark.
``between``
    ``T -> A ; not T -> X ; T -> B within D`` with one source per partition:
    pairs A before B with no X strictly between them in the source's order.
    X's spatial suffixes and conditions may relate it to A or to B (not both).
``pair``
    ``T -> A op T -> B [where ...]`` with ``op`` concurrent (``||``, with any
    spatial suffix) or any operator under ``within D``: a spatio-temporal join
    within each partition (Bunching: two buses of a line at once, close).
    Candidates come from a window on the sorted time stamps — B's ``lo`` within
    A's stamp widened by the longest stamp, or within ``D`` of A — so the join
    stays near-linear; each is then tested exactly (relation, space suffix,
    ``within``, conditions).

``run``
    one run leaf, ``run T -> R [while C] [gap D]`` with its patterns, places,
    where and emit: cut per source in :mod:`spatec.vector.runs`, the complete
    runs handed to the automaton's own code at the leaf.
``chains``
    ``(T -> A op T -> B ...) OP (T -> E op T -> F ...)``, each side a chain
    (its own ``successive``) or one leaf: the sides' windows joined by time
    window and grid, in :mod:`spatec.vector.chains` (which uses this
    module's columns, tests and :class:`Matches`).

Anything else is not a fast path (None): the general automaton runs. The
evaluators also refuse data they were not proven for (two events of one
source at one local time, a local time outside its stamp, ...) by returning
None, so the runner falls back to the automaton.

Events come as :class:`~spatec.vector.vexpr.Columns`, grouped (by source for
a chain, by partition otherwise) and sorted by local time within a group; a match is one row index per
variable (:class:`Matches`), from which the runners build composites or, all
at once, output rows (the hulls' text: :func:`spatec.sinks.encoding.matches_hulls_wkt`).
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from spatec.automata.machine import Composite, composite_id
from spatec.automata.places import PlaceSets
from spatec.frontend import ast as A
from spatec.plan.evaluator import chain_preds, x_side
from spatec.plan.nodes import After, Join, PhrasePlan, walk_nodes
from spatec.plan.physical import FAST_PATH_SHAPES
from spatec.plan.predicates import expr_vars
from spatec.spatial.stamps import concat_ranges
from spatec.vector.vexpr import (
    Bound,
    Columns,
    Evaluator,
    Patterns,
    TextColumn,
    all_distinct,
    present,
    source_codes,
)

SHAPES = FAST_PATH_SHAPES
#: Metres. A hull relation whose distance lies this close to the sum of radii
#: is decided by the exact scalar test instead of the numpy one.
MARGIN = 1e-6


@dataclass(frozen=True)
class FastPath:
    """A phrase proven to have one of :data:`SHAPES`."""

    shape: str
    phrase: str
    type: str                 # the one event type of every leaf and negated leaf
    vars: tuple               # positive variables, slot order
    plan: PhrasePlan = field(repr=False, compare=False)

    def describe(self) -> str:
        return f"fast path: {self.shape} over {self.type} ({', '.join(self.vars)})"


def fast_path(plan: PhrasePlan) -> FastPath | None:
    """The fast path the planner chose for ``plan`` (``plan.physical.fast_path``), or None:
    the general automaton."""
    shape = plan.physical.fast_path if plan.physical is not None else None
    if shape is None:
        return None
    return FastPath(shape, plan.name, plan.leaves[0].type, tuple(l.var for l in plan.leaves), plan)


# ============================================================================ columns

def frame_columns(fp: FastPath, df, projector, materialise) -> Columns | None:
    """The canonical events of ``fp.type`` (every partition at once) as grouped, sorted columns.

    Groups: a chain's are sources, over every event of the source whatever its
    partition (``successive`` sees them all, SPEC §4), with ``part`` telling
    which partition an event belongs to (-1: none, history only); an
    absence's are partitions, which must be one source each. Columns are
    taken from ``df`` as they are needed, through one array of positions.
    ``materialise(frame) -> [Ev]`` makes run-time events of canonical rows
    (the runners' ``to_evs``). None when the data does not fit the shape.
    """
    plan = fp.plan
    pos = np.arange(len(df))
    mine = df["_type"].to_numpy() == fp.type
    if not mine.all():
        pos = pos[mine]
    phys = plan.physical
    key = list(phys.key) if fp.type in phys.keyed else []
    if phys.key and not key:
        if fp.shape in ("after", "between"):
            return None
        # a type without the key is broadcast: one partition of everything
    keyed = np.logical_and.reduce([present(df[k]) for k in key]) if key else np.ones(len(df), dtype=bool)
    src = source_codes(df["_source"])
    chained = fp.shape in ("chain", "chains")     # sources' whole histories (successive)
    by_source = chained or fp.shape == "run"
    pos = pos[src[pos] >= 0] if chained else pos[keyed[pos] & (src[pos] >= 0)] if by_source \
        else pos[keyed[pos]]
    part = np.zeros(len(df), dtype=np.int64)
    if key and len(df):
        if len(key) == 1 and keyed.all():   # one key, never missing: its values' codes in order of
            # appearance, the numbers ngroup(sort=False) gives its groups (a groupby factorizes them)
            part = pd.factorize(df[key[0]], sort=False)[0].astype(np.int64)
        else:
            part = df.groupby(key, sort=False, dropna=False).ngroup().to_numpy(np.int64)
        part[~keyed] = -1
    if "_hist" in df.columns:
        # events of other partitions held elsewhere, seen by successive as history only
        part[df["_hist"].to_numpy(bool)] = -1
    if by_source:
        g = src
    else:
        g = part if fp.shape != "leaf" else np.zeros(len(df), dtype=np.int64)
    t = df["_t"].to_numpy(np.int64)
    if fp.shape != "leaf":
        pos = pos[np.lexsort((t[pos], g[pos]))]

    def locate(rows):
        at = pos if rows is None else pos[rows]
        kinds = df["_place"].to_numpy()[at]
        x, y = np.full(len(at), np.nan), np.full(len(at), np.nan)
        pts = kinds == "point"
        if pts.any():
            x[pts], y[pts] = projector.forward(df["_lon"].to_numpy(float)[at][pts],
                                               df["_lat"].to_numpy(float)[at][pts])
        return x, y, pts & np.isfinite(x) & np.isfinite(y)

    def attr_values(name, rows):
        return df[name].iloc[pos if rows is None else pos[rows]]

    lazy = TextColumn.of(df["_id"])         # ids still Arrow (a Spark task's staged events)
    ids = lazy.take(pos) if lazy is not None else df["_id"].to_numpy(object)[pos]
    cols = Columns(ids=ids, src_code=src[pos], t=t[pos],
                   lo=df["_lo"].to_numpy(np.int64)[pos], hi=df["_hi"].to_numpy(np.int64)[pos],
                   r=df["_r"].to_numpy(float)[pos], locate=locate, attr_values=attr_values,
                   materialise=lambda rows: materialise(df.iloc[pos[rows]]), group=g[pos], part=part[pos])
    return cols if _fits(fp, cols) else None


def event_columns(fp: FastPath, evs: list) -> Columns | None:
    """One partition's run-time events as grouped, sorted columns (None: not fit for the shape).

    A partition of a chain may hold events it sees only as history
    (:class:`~spatec.automata.machine.HistoryEv`): they group with their
    source but bind no variable (``part`` -1)."""
    from spatec.automata.machine import HistoryEv

    if any(e.type != fp.type for e in evs):
        return None
    history = [e.__class__ is HistoryEv for e in evs]
    if any(history) and fp.shape != "chain":
        return None
    if fp.shape == "chain":
        keep = [i for i, e in enumerate(evs) if e.source is not None]
        evs, history = [evs[i] for i in keep], [history[i] for i in keep]
    n = len(evs)
    t = np.fromiter((e.t for e in evs), np.int64, n)
    part = -np.fromiter(history, np.int64, n)
    src = source_codes([e.source for e in evs])
    g = src if fp.shape == "chain" else np.zeros(n, dtype=np.int64)   # else one partition: one source
    order = np.lexsort((t, g)) if fp.shape != "leaf" else np.arange(n)
    evs = [evs[i] for i in order.tolist()]
    xy = [e.loc.xy for e in evs]
    disc = np.fromiter((p is not None for p in xy), bool, n)
    x = np.array([p[0] if p is not None else np.nan for p in xy], dtype=float)
    y = np.array([p[1] if p is not None else np.nan for p in xy], dtype=float)
    r = np.array([e.loc.r if p is not None else 0.0 for e, p in zip(evs, xy)], dtype=float)

    def locate(rows):
        return (x, y, disc) if rows is None else (x[rows], y[rows], disc[rows])

    def attr_values(name, rows):
        return [evs[i].attrs.get(name) for i in (range(n) if rows is None else rows.tolist())]

    ids = np.empty(n, dtype=object)
    ids[:] = [e.id for e in evs]
    cols = Columns(ids=ids, src_code=src[order], t=t[order], lo=np.fromiter((e.lo for e in evs), np.int64, n),
                   hi=np.fromiter((e.hi for e in evs), np.int64, n), r=r, locate=locate,
                   attr_values=attr_values, materialise=lambda rows: [evs[i] for i in rows.tolist()],
                   group=g[order], part=part[order])
    return cols if _fits(fp, cols) else None


def _ids_distinct(cols: Columns) -> bool:
    """Whether the rows' events (of one type) have distinct ids. An event with a source
    is named by its type, source and local time (SPEC §4, ``TYPE:source:t``, ``t`` in
    ISO text, which no such id's text can end otherwise), so when every row has a
    source, distinct (source, time) pairs are distinct ids: integers compared, where
    hashing the ids' text took 3% of Bunching's Spark tasks."""
    src, t = cols.src_code, cols.t
    if cols.n and (src >= 0).all():
        t0 = int(t.min())
        span = int(t.max()) - t0 + 1
        if (int(src.max()) + 1) * span < 2 ** 62:
            return bool(pd.Series(src * span + (t - t0), copy=False).is_unique)
    return all_distinct(cols.ids)


def _fits(fp: FastPath, cols: Columns) -> bool:
    """What the shapes assume of the data: distinct ids (one id, two events: which composite
    the automaton keeps depends on its order), distinct local times in a group, ``lo <= t <= hi``,
    stamps ending in local-time order, one source per partition for the absences."""
    if fp.shape == "leaf" or cols.n == 0:
        return _ids_distinct(cols)
    g, t = cols.group, cols.t
    if fp.shape == "pair":
        return _ids_distinct(cols) and not ((cols.lo > t) | (t > cols.hi)).any()
    same = g[1:] == g[:-1]
    if (same & (t[1:] <= t[:-1])).any():
        return False
    if ((cols.lo > t) | (t > cols.hi)).any():
        return False
    if (same & (cols.hi[1:] < cols.hi[:-1])).any():
        return False
    if fp.shape == "run" and (same & (cols.hi[1:] == cols.hi[:-1]) & (cols.lo[1:] <= cols.lo[:-1])).any():
        return False        # the automaton takes a source's events in order of (hi, lo): as of t here
    if fp.shape in ("after", "between"):
        if (cols.src_code < 0).any() or (same & (cols.src_code[1:] != cols.src_code[:-1])).any():
            return False
    return _group_ids_distinct(cols, same) or _ids_distinct(cols)


def _group_ids_distinct(cols: Columns, same: np.ndarray) -> bool:
    """Whether rows sorted by group, with local times rising within each group, have distinct
    ids for want of a source shared by two groups: every row has a source, one per group and
    another in each group (a chain's groups are its sources), so a source and a local time
    name one row (:func:`_ids_distinct`), without hashing them."""
    src = cols.src_code
    if not cols.n:
        return True
    if (src < 0).any() or (same & (src[1:] != src[:-1])).any():
        return False
    firsts = src[np.r_[True, ~same]]
    return len(np.unique(firsts)) == len(firsts)


# ============================================================================ evaluate

class Filters:
    """Pattern tests of plan nodes over rows: vectorised (:class:`Patterns`) or, for
    run-time events, the automaton's own compiled closures."""

    def __init__(self, patterns: Patterns | None = None, closures: dict | None = None):
        self.patterns, self.closures = patterns, closures or {}

    def mask(self, node, cols: Columns, rows) -> np.ndarray:
        if not node.filters:
            return np.ones(len(rows), dtype=bool)
        if self.patterns is not None:
            return self.patterns.mask(node.filters, cols, rows)
        f = self.closures[node.id]
        return np.fromiter((f(e.lo, e.hi, e.loc) for e in cols.evs(rows)), bool, len(rows))


@dataclass
class Matches:
    """The composites found: for each variable the row it binds, and the stamps."""

    fp: FastPath
    cols: Columns
    rows: dict                # var → row indices (np.int64), one per match
    lo: np.ndarray
    hi: np.ndarray

    def __len__(self) -> int:
        return len(self.lo)

    def composites(self) -> list:
        """As :class:`~spatec.automata.machine.Composite` objects (bindings are run-time events)."""
        from spatec.spatial import stamps as S

        evs = {v: self.cols.evs(self.rows[v]) for v in self.fp.vars}
        out = []
        for i in range(len(self)):
            bind = {v: evs[v][i] for v in self.fp.vars}
            members = list(bind.values())
            loc = members[0].loc if len(members) == 1 else S.hull([e.loc for e in members])
            cid = composite_id(self.fp.phrase, [(v, e.id) for v, e in bind.items()])
            out.append(Composite(self.fp.phrase, cid, int(self.lo[i]), int(self.hi[i]), loc, bind, members))
        return out

    def ids(self) -> list:
        """:func:`~spatec.automata.machine.composite_id` of every match, from the same JSON
        payload. Ids held as Arrow text (staged events; :meth:`_bound_arrow`) are joined
        into the payloads and hashed by :func:`spatec.vector.ids.composite_ids`; others
        go through :meth:`_ids_of_lists`."""
        if not len(self):
            return []
        vs = sorted(self.fp.vars)        # the payload's pairs, sorted: variables are distinct
        arrs = [self._bound_arrow(v) for v in vs]
        if vs and type(self.fp.phrase) is str and all(a is not None for a in arrs):
            from spatec.vector.ids import composite_ids

            return composite_ids(self.fp.phrase, vs, arrs)
        return self._ids_of_lists(vs)

    def _ids_of_lists(self, vs: list) -> list:
        """:meth:`ids` from each variable's ids as Python strings: ids that JSON writes as
        they are, in quotes (the usual case; :func:`spatec.vector.ids.plain_ids`), go into a
        ``%`` template of the whole payload (``json.dumps`` encodes strings
        with ``encode_basestring`` when ``ensure_ascii=False``): one format per match
        rather than an encoder call and a string per match and variable."""
        import hashlib
        from json.encoder import encode_basestring as enc

        from spatec.vector.ids import plain_ids

        # ["phrase",[["A","id of A"],["B","id of B"]]]
        ids = [self._bound_ids(v) for v in vs]
        head = f"[{enc(self.fp.phrase)},["
        sha = hashlib.sha256
        # the whole column's text checked once (a staged Arrow column), else each variable's ids
        plain = isinstance(self.cols.ids, TextColumn) and self.cols.ids.json_plain()
        if plain or all(plain_ids(c) for c in ids):
            line = (head + ",".join(f"[{enc(v)},\"\0\"]" for v in vs) + "]]").replace("%", "%%").replace("\0", "%s")
            return [sha((line % pairs).encode("utf-8")).hexdigest()[:32] for pairs in zip(*ids)]
        cols = [[f"[{enc(v)},{enc(x)}]" for x in c] for v, c in zip(vs, ids)]
        return [sha((head + ",".join(pairs) + "]]").encode("utf-8")).hexdigest()[:32] for pairs in zip(*cols)]

    def event_ids(self, arrow: bool = False):
        """``{variable: event id}`` per match, variables sorted (as output rows have them).
        ``arrow``: where the ids are Arrow text, as an Arrow struct array of one string
        field per variable, sorted (its Python values are those dicts), no Python string
        made; for a writer that reads them as columns (:mod:`spatec.sinks.files`)."""
        vs = sorted(self.fp.vars)
        if arrow and vs and len(self):
            arrs = [self._bound_arrow(v) for v in vs]
            if all(a is not None for a in arrs):
                return pa.StructArray.from_arrays(arrs, names=vs)
        cols = [self._bound_ids(v) for v in vs]
        return [dict(zip(vs, ids)) for ids in zip(*cols)] if len(self) else []

    def _bound_ids(self, v: str) -> list:
        """The ids of the events variable ``v`` binds, one per match (made once: :meth:`ids`
        and :meth:`event_ids` both need them)."""
        got = self.__dict__.setdefault("_ids", {})
        if v not in got:
            got[v] = self.cols.ids[self.rows[v]].tolist()
        return got[v]

    def _bound_arrow(self, v: str) -> "pa.Array | None":
        """:meth:`_bound_ids` as an Arrow string array when the ids are Arrow text
        (:class:`~spatec.vector.vexpr.TextColumn`) with no missing value; else None."""
        got = self.__dict__.setdefault("_arrow_ids", {})
        if v not in got:
            col = self.cols.ids
            arr = col.arrow(self.rows[v]) if isinstance(col, TextColumn) and col.arr.type == pa.string() else None
            got[v] = arr if arr is not None and not arr.null_count else None
        return got[v]

    def emit(self, tz: str) -> dict:
        """Emitted field → Python values (None where missing), as the scalar closures give them."""
        ev = Evaluator(tz)
        b = Bound(self.cols, self.rows)
        return {f.name: (ev.emit(f.expr, b) if len(self) else []) for f in self.fp.plan.emit}


def evaluate(fp: FastPath, cols: Columns, final_watermark: int, tz: str, filters: Filters) -> Matches:
    """The composites of ``fp`` over ``cols`` (prepared by :func:`frame_columns` or :func:`event_columns`)."""
    ev = Evaluator(tz)
    run = {"leaf": _leaf, "chain": _chain, "after": _after, "between": _between, "pair": _pair}[fp.shape]
    return run(fp, cols, final_watermark, ev, filters)


def empty_matches(fp: FastPath, cols: Columns) -> Matches:
    z = np.zeros(0, dtype=np.int64)
    return Matches(fp, cols, {v: z for v in fp.vars}, z, z)


def unary(node, cols: Columns, rows, ev: Evaluator, filters: Filters, var: str) -> np.ndarray:
    """Rows passing ``node``'s patterns and conjuncts over ``var`` alone."""
    ok = filters.mask(node, cols, rows)
    preds = chain_preds(node)
    if preds and ok.any():
        idx = np.flatnonzero(ok)
        ok[idx] = ev.holds(preds, Bound(cols, {var: rows[idx]}))
    return ok


def within_mask(plan, lo, hi) -> np.ndarray:
    return np.ones(len(lo), dtype=bool) if plan.within is None else hi - lo <= plan.within


# ---------------------------------------------------------------------------- leaf

def _leaf(fp, cols, final_w, ev, filters) -> Matches:
    leaf = fp.plan.root
    rows = np.arange(cols.n, dtype=np.int64)
    ok = within_mask(fp.plan, cols.lo, cols.hi)
    idx = np.flatnonzero(ok)
    idx = idx[unary(leaf, cols, idx, ev, filters, leaf.var)]
    rows = rows[idx]
    return Matches(fp, cols, {leaf.var: rows}, cols.lo[rows], cols.hi[rows])


# ---------------------------------------------------------------------------- chain

@dataclass
class ChainSide:
    """A chain's matches: the first row of each window, each variable's offset from it, the stamps."""

    start: np.ndarray         # first row of each match (its events: start .. start + k - 1)
    k: int
    offset: dict              # variable → its row's offset from start
    lo: np.ndarray            # the side's time stamp
    hi: np.ndarray


def chain_side(plan, node, cols: Columns, ev: Evaluator, filters: Filters) -> ChainSide:
    """The matches of a chain (``node``: the root of shape ``chain``, or a side of shape
    ``chains``: a chain over consecutive slots, or a leaf) as windows of
    consecutive events of a source in one partition (history rows, ``part`` -1, bind
    nothing), passing its leaves' patterns and conjuncts, its joins' conjuncts and
    spatial suffixes, and ``within`` (a side's span is at most the composite's)."""
    leaves = [l for l in plan.leaves if l.slot in node.slots]
    base = leaves[0].slot
    offset = {l.var: l.slot - base for l in leaves}
    k = len(leaves)
    z = np.zeros(0, dtype=np.int64)
    n = cols.n
    if n < k or any(isinstance(m, Join) and m.op.startswith("||") for m in walk_nodes(node)):
        # a join's left events all come before its right ones in their source's order: never concurrent
        return ChainSide(z, k, offset, z, z)
    g, part = cols.group, cols.part
    start = np.arange(n - k + 1, dtype=np.int64)
    ok = (g[start] == g[start + k - 1]) & (part[start] >= 0)      # k consecutive events of a source ...
    for s_ in range(1, k):
        ok &= part[start + s_] == part[start]                        # ... all in one partition
    start = start[ok]

    def stamps(start):
        lo = np.min([cols.lo[start + s] for s in range(k)], axis=0) if len(start) else start
        hi = np.max([cols.hi[start + s] for s in range(k)], axis=0) if len(start) else start
        return lo, hi

    lo, hi = stamps(start)
    start = start[within_mask(plan, lo, hi)]
    for leaf in leaves:
        if not len(start):
            break
        start = start[unary(leaf, cols, start + offset[leaf.var], ev, filters, leaf.var)]
    for m in walk_nodes(node):
        if not isinstance(m, Join) or not len(start):
            continue
        preds = chain_preds(m)
        if preds:
            start = start[ev.holds(preds, Bound(cols, {v: start + o for v, o in offset.items()}))]
        space = A.op_parts(m.op)[1]
        if space and len(start):
            ov = hull_overlap(cols, [start + (s - base) for s in sorted(m.left.slots)],
                              [start + (s - base) for s in sorted(m.right.slots)])
            start = start[ov if space == "=" else ~ov]
    lo, hi = stamps(start)
    return ChainSide(start, k, offset, lo, hi)


def _chain(fp, cols, final_w, ev, filters) -> Matches:
    side = chain_side(fp.plan, fp.plan.root, cols, ev, filters)
    return Matches(fp, cols, {v: side.start + o for v, o in side.offset.items()}, side.lo, side.hi)


def hull_overlap(cols: Columns, left: list, right: list) -> np.ndarray:
    """``stamps.overlap`` of the hulls of two sets of events, row by row.

    ``left``/``right``: lists of row-index arrays (one per event of the side).
    Two discs: the squared-distance test. A disc against the hull of equal
    discs: distance from the centre to the hull of the other centres, from
    its segments and triangles, decided in numpy unless it lies within
    :data:`MARGIN` of the sum of radii; those rows, and every other case, are
    decided by the scalar functions on the same stamps.
    """
    m = len(left[0])
    rows = np.concatenate(left + right)
    discs = cols.all_discs(rows)
    if discs and len(left) == 1 and len(right) == 1:
        a, b = left[0], right[0]
        dx = cols.x[a] - cols.x[b]
        dy = cols.y[a] - cols.y[b]
        s = cols.r[a] + cols.r[b]
        return dx * dx + dy * dy <= s * s
    out = np.zeros(m, dtype=bool)
    todo = np.arange(m)
    if discs and (len(left) == 1 or len(right) == 1) and m and np.all(cols.r[rows] == cols.r[rows[0]]):
        one, many = (left, right) if len(left) == 1 else (right, left)
        yes, no = _disc_to_hull(cols, one[0], many)
        out[yes] = True
        todo = np.flatnonzero(~yes & ~no)
    if len(todo):
        out[todo] = _overlap_exact(cols, [r[todo] for r in left], [r[todo] for r in right])
    return out


def _disc_to_hull(cols: Columns, q, many: list):
    """(surely overlapping, surely not) for disc ``q`` against the hull of the discs ``many``."""
    r = cols.r[q[0]] if len(q) else 0.0
    s = 2.0 * r
    qx, qy = cols.x[q], cols.y[q]
    px = [cols.x[p] - qx for p in many]      # centres relative to the disc's: exact for nearby points
    py = [cols.y[p] - qy for p in many]
    k = len(many)
    d = np.full(len(q), np.inf)
    for u in range(k):
        for v in range(u, k):
            d = np.minimum(d, _seg_dist(px[u], py[u], px[v], py[v]))
    inside = np.zeros(len(q), dtype=bool)
    outside = np.ones(len(q), dtype=bool)
    for u in range(k):
        for v in range(u + 1, k):
            for w in range(v + 1, k):
                tin, tout = _in_triangle(px[u], py[u], px[v], py[v], px[w], py[w])
                inside |= tin
                outside &= tout
    yes = inside | (d < s - MARGIN)
    no = ~yes & outside & (d > s + MARGIN)
    return yes, no


def _seg_dist(ax, ay, bx, by):
    """Distance from the origin to segment ab."""
    dx, dy = bx - ax, by - ay
    l2 = dx * dx + dy * dy
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(l2 > 0, -(ax * dx + ay * dy) / np.where(l2 > 0, l2, 1.0), 0.0)
    u = np.clip(u, 0.0, 1.0)
    cx, cy = ax + u * dx, ay + u * dy
    return np.sqrt(cx * cx + cy * cy)


def _in_triangle(ax, ay, bx, by, cx, cy):
    """(origin surely inside, surely outside) triangle abc; thin triangles (height under the
    margin) count as outside: a point in one is within the margin of a segment anyway."""
    area2 = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
    sign = np.sign(area2)
    edges = ((ax, ay, bx, by), (bx, by, cx, cy), (cx, cy, ax, ay))
    lens = [np.hypot(x1 - x0, y1 - y0) for x0, y0, x1, y1 in edges]
    longest = np.maximum(np.maximum(lens[0], lens[1]), lens[2])
    with np.errstate(divide="ignore", invalid="ignore"):
        thin = ~(np.abs(area2) / np.where(longest > 0, longest, 1.0) > MARGIN) | (longest == 0)
        inside = ~thin
        outside = thin.copy()
        for (x0, y0, x1, y1), ln in zip(edges, lens):
            # signed distance of the origin from the edge's line, positive on the triangle's side
            sd = sign * ((x1 - x0) * (0.0 - y0) - (y1 - y0) * (0.0 - x0)) / np.where(ln > 0, ln, 1.0)
            inside &= sd > MARGIN
            outside |= ~thin & (sd < -MARGIN)
    return inside, outside


def _overlap_exact(cols: Columns, left: list, right: list) -> np.ndarray:
    """``stamps.overlap`` of the hulls, one row at a time (as the automaton computes it)."""
    from spatec.spatial import stamps as S

    lev = [cols.evs(r) for r in left]
    rev = [cols.evs(r) for r in right]

    def loc(evs):
        return evs[0].loc if len(evs) == 1 else S.hull([e.loc for e in evs])

    m = len(left[0])
    return np.fromiter((S.overlap(loc([side[i] for side in lev]), loc([side[i] for side in rev]))
                        for i in range(m)), bool, m)


# ---------------------------------------------------------------------------- grouped search

def group_search(g: np.ndarray, v: np.ndarray, gq: np.ndarray, q: np.ndarray, side: str) -> np.ndarray:
    """``searchsorted`` of values ``q`` within groups ``gq``, rows sorted by (group, ``v``)."""
    return GroupSearch(g, v).search(gq, q, side)


class GroupSearch:
    """:func:`group_search` over one sorted ``(g, v)``, its search key made once for many
    searches: rows sorted by (group, ``v``); ``search(gq, q, side)`` finds where each
    value ``q`` goes within its group ``gq``."""

    def __init__(self, g: np.ndarray, v: np.ndarray):
        self.g, self.v, self.key = g, v, None
        if len(v):
            self.vmin, self.vmax = int(v.min()), int(v.max())
            self.span = self.vmax - self.vmin + 3
            if (int(g.max()) + 1) * self.span < 2 ** 62:
                # one number per row, in order: the group, then the value within it
                self.key = g * self.span + (v - self.vmin + 1)

    def search(self, gq: np.ndarray, q: np.ndarray, side: str) -> np.ndarray:
        g, v = self.g, self.v
        if len(v) == 0 or len(q) == 0:
            return np.zeros(len(q), dtype=np.int64)
        if self.key is not None:
            qk = gq * self.span + (np.clip(q, self.vmin - 1, self.vmax + 1) - self.vmin + 1)
            return np.searchsorted(self.key, qk, side=side).astype(np.int64)
        out = np.empty(len(q), dtype=np.int64)
        for grp in np.unique(gq).tolist():
            sel = gq == grp
            a, b = np.searchsorted(g, grp, side="left"), np.searchsorted(g, grp, side="right")
            out[sel] = a + np.searchsorted(v[a:b], q[sel], side=side)
        return out


# ---------------------------------------------------------------------------- absences

def _x_mask(neg, cols: Columns, ev: Evaluator, filters: Filters, related: bool) -> np.ndarray:
    """Rows that could be the negated event: some alternative's patterns, and the
    conditions that mention X alone (all of them when X relates to nothing else)."""
    rows = np.arange(cols.n, dtype=np.int64)
    ok = np.zeros(cols.n, dtype=bool)
    for leaf in neg.leaves:
        ok |= filters.mask(leaf, cols, rows)
    if neg.conds and not related and ok.any():
        idx = np.flatnonzero(ok)
        ok[idx] = ev.holds(neg.conds, Bound(cols, {_xvar(neg): idx}))
    return ok


def _xvar(neg) -> str:
    return neg.var or "\0X"


def _x_pair(neg, cols, ev: Evaluator, var: str, side: str, rows_v, rows_x) -> np.ndarray:
    """X's condition against a positive event: the spatial suffix and the conditions."""
    x = _xvar(neg)
    b = Bound(cols, {var: rows_v, x: rows_x})
    ok = np.ones(len(rows_v), dtype=bool)
    space = neg.left_space if side == "A" else neg.right_space
    if space:
        pair = (A.Var(var), A.Var(x)) if side == "A" else (A.Var(x), A.Var(var))
        ov = ev.value(A.Call("overlap", pair), b).truth()
        ok &= ov if space == "=" else ~ov
    if neg.conds and ok.any():
        idx = np.flatnonzero(ok)
        ok[idx] = ev.holds(neg.conds, b.take(idx))
    return ok


def _first_x(cand, limit, xpos, test, forward: bool) -> np.ndarray:
    """For each candidate row, the nearest X row after it (``forward``) up to ``limit``, or before it
    down to ``limit``, for which ``test(candidates, xs)`` holds; -1 where none."""
    found = np.full(len(cand), -1, dtype=np.int64)
    if forward:
        p = np.searchsorted(xpos, cand, side="right")
    else:
        p = np.searchsorted(xpos, cand, side="left") - 1
    active = np.arange(len(cand))
    while len(active):
        pa = p[active]
        inb = (pa < len(xpos)) & (pa >= 0)
        active, pa = active[inb], pa[inb]
        k = xpos[pa]
        inr = k <= limit[active] if forward else k >= limit[active]
        active, k = active[inr], k[inr]
        if not len(active):
            break
        hit = test(cand[active], k)
        found[active[hit]] = k[hit]
        active = active[~hit]
        p[active] += 1 if forward else -1
    return found


def _after(fp, cols, final_w, ev, filters) -> Matches:
    plan = fp.plan
    node: After = plan.root
    leaf, neg = node.left, node.absence
    rows = np.arange(cols.n, dtype=np.int64)
    ok = within_mask(plan, cols.lo, cols.hi) & (cols.hi + neg.window <= final_w)
    cand = rows[ok]
    cand = cand[unary(leaf, cols, cand, ev, filters, leaf.var)]
    if len(cand):
        cand = cand[unary(node, cols, cand, ev, filters, leaf.var)]
    related = bool(neg.left_space) or any(leaf.var in expr_vars(c) for c in neg.conds)
    xmask = _x_mask(neg, cols, ev, filters, related)
    # the X that count: later in the source, ending by A.hi + window
    end = group_search(cols.group, cols.hi, cols.group[cand], cols.hi[cand] + neg.window, "right") - 1
    if not related:
        cum = np.concatenate([[0], np.cumsum(xmask)])
        clear = cum[end + 1] - cum[cand + 1] <= 0
    else:
        def test(a, x):
            return _x_pair(neg, cols, ev, leaf.var, "A", a, x)
        clear = _first_x(cand, end, np.flatnonzero(xmask), test, True) < 0
    cand = cand[clear]
    return Matches(fp, cols, {leaf.var: cand}, cols.lo[cand], cols.hi[cand])


def _between(fp, cols, final_w, ev, filters) -> Matches:
    plan = fp.plan
    node: Join = plan.root
    la, lb, neg = node.left, node.right, node.absence
    w = plan.within
    rows = np.arange(cols.n, dtype=np.int64)
    ia = rows[unary(la, cols, rows, ev, filters, la.var)]
    jb = rows[unary(lb, cols, rows, ev, filters, lb.var)]
    side = x_side(node)
    xmask = _x_mask(neg, cols, ev, filters, side != "")
    xpos = np.flatnonzero(xmask)
    g, t = cols.group, cols.t
    if side != "B":
        # from each A: B up to the first X after A (B may be that X), and no further than the
        # window allows (t_B - lo_A <= span <= within)
        limit = group_search(g, t, g[ia], cols.lo[ia] + w, "right") - 1
        if side == "":
            nxt = np.append(xpos, np.iinfo(np.int64).max)     # past the last X: no X
            upto = np.minimum(limit, nxt[np.searchsorted(xpos, ia, side="right")])
        else:
            def test(a, x):
                return _x_pair(neg, cols, ev, la.var, "A", a, x)
            f = _first_x(ia, limit, xpos, test, True)
            upto = np.where(f >= 0, np.minimum(limit, f), limit)
        s = np.searchsorted(jb, ia, side="right")
        e = np.searchsorted(jb, upto, side="right")
        cnt = np.maximum(e - s, 0)
        ii = np.repeat(ia, cnt)
        jj = jb[concat_ranges(s, cnt)]
    else:
        # to each B: A from the last X before B (A may be that X), and no earlier than the window allows
        limit = group_search(g, t, g[jb], cols.hi[jb] - w, "left")

        def test(b, x):
            return _x_pair(neg, cols, ev, lb.var, "B", b, x)
        f = _first_x(jb, limit, xpos, test, False)
        frm = np.where(f >= 0, np.maximum(limit, f), limit)
        s = np.searchsorted(ia, frm, side="left")
        e = np.searchsorted(ia, jb, side="left")
        cnt = np.maximum(e - s, 0)
        jj = np.repeat(jb, cnt)
        ii = ia[concat_ranges(s, cnt)]
    lo = np.minimum(cols.lo[ii], cols.lo[jj])
    hi = np.maximum(cols.hi[ii], cols.hi[jj])
    keep = (g[ii] == g[jj]) & (ii < jj) & (hi - lo <= w)
    return _two(fp, cols, node, ev, ii[keep], jj[keep], lo[keep], hi[keep])


def _two(fp, cols, node: Join, ev, ii, jj, lo, hi) -> Matches:
    """Pairs (A row, B row) of a two-leaf join that also satisfy its conjuncts."""
    preds = chain_preds(node)
    near = near_bound(preds, node.left.var, node.right.var)
    if near is not None and len(ii):
        # a conjunct distance(A, B) < D: first drop the pairs of discs whose centres are
        # clearly too far apart (a necessary condition, with room for rounding; the
        # conjuncts below decide exactly) — bunching's time windows give ~150 candidates
        # per composite
        xa, ya, da = cols.centres(ii)
        xb, yb, db = cols.centres(jj)
        reach = near + cols.r[ii] + cols.r[jj]
        with np.errstate(invalid="ignore"):
            far = da & db & ((xa - xb) ** 2 + (ya - yb) ** 2 > (reach * (1 + 1e-9) + 1e-6) ** 2)
        keep = ~far
        ii, jj, lo, hi = ii[keep], jj[keep], lo[keep], hi[keep]
    if preds and len(ii):
        keep = ev.holds(preds, Bound(cols, {node.left.var: ii, node.right.var: jj}))
        ii, jj, lo, hi = ii[keep], jj[keep], lo[keep], hi[keep]
    return Matches(fp, cols, {node.left.var: ii, node.right.var: jj}, lo, hi)


def _grid_pairs(cols, ia, jb, lower, upper, near: float):
    """(A rows, B rows): the pairs of :func:`_pair`'s time windows (B's ``lo`` in
    ``[lower, upper]`` of its A, same partition) whose discs lie in the same or
    neighbouring cells of a grid as wide as the farthest two related discs can be
    (:func:`grid_window_pairs`) — bunching's time windows alone give 1.5 M pairs an
    hour for 11k matches. None when some event is not a disc (or the grid's numbers
    would not fit)."""
    xa, ya, da = cols.centres(ia)
    xb, yb, db = cols.centres(jb)
    if not (da.all() and db.all()) or not len(ia) or not len(jb):
        return None
    rmax = float(max(cols.r[ia].max(), cols.r[jb].max()))
    got = grid_window_pairs(xa, ya, cols.group[ia], lower, upper, xb, yb, cols.group[jb], cols.lo[jb],
                            near + 2 * rmax)
    if got is None:
        return None
    pa, pb = got
    return ia[pa], jb[pb]


def grid_window_pairs(xa, ya, ga, lower, upper, xb, yb, gb, kb, reach: float):
    """(positions in a, positions in b): the pairs of the same group (``ga``/``gb``) whose
    ``kb`` lies in ``[lower, upper]`` of the a item and whose points lie in the same or
    neighbouring cells of a grid as wide as ``reach`` (the farthest two related points
    can be, with :func:`_two`'s room for rounding): every pair within ``reach``, and some
    others. None when the grid's numbers would not fit."""
    size = reach * (1 + 1e-9) + 1e-6 + 1.0
    if not (math.isfinite(size) and size > 0):
        return None
    if not len(xa) or not len(xb):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    cx = np.floor(np.concatenate([xa, xb]) / size)
    cy = np.floor(np.concatenate([ya, yb]) / size)
    x0, y0 = cx.min() - 1, cy.min() - 1
    nx, ny = cx.max() - x0 + 2, cy.max() - y0 + 2
    ng = float(max(ga.max(), gb.max())) + 1
    if ng * nx * ny >= 2 ** 62:
        return None
    cx, cy = (cx - x0).astype(np.int64), (cy - y0).astype(np.int64)
    nx, ny = int(nx), int(ny)
    na = len(xa)
    cell_a = (ga * nx + cx[:na]) * ny + cy[:na]
    cell_b = (gb * nx + cx[na:]) * ny + cy[na:]
    # a's items in order of (cell, lower): each search below then looks its values up in
    # order, which numpy's binary search does about four times faster than at random
    # (Bunching's hour: 18 searches, 25 -> 7 ms); the pairs come out in another order
    oa = np.lexsort((lower, cell_a))
    lower, upper, cell_a = lower[oa], upper[oa], cell_a[oa]
    order = np.lexsort((kb, cell_b))
    cell_b = cell_b[order]
    cells, dense = np.unique(cell_b, return_inverse=True)       # b's cells, numbered in order
    within = GroupSearch(dense, kb[order])
    # a's items share few cells: each neighbour of each of a's cells is looked up once
    cells_a, of_a = np.unique(cell_a, return_inverse=True)
    out_i, out_j = [], []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            q = cells_a + dx * ny + dy
            pos_u = np.minimum(np.searchsorted(cells, q), len(cells) - 1)
            found = cells[pos_u] == q
            if not found.any():
                continue
            hit = np.flatnonzero(found[of_a])
            pos = pos_u[of_a[hit]]
            s = within.search(pos, lower[hit], "left")
            e = within.search(pos, upper[hit], "right")
            cnt = np.maximum(e - s, 0)
            out_i.append(np.repeat(oa[hit], cnt))
            out_j.append(order[concat_ranges(s, cnt)])
    if not out_i:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(out_i), np.concatenate(out_j)


def near_bound(preds, a: str, b: str) -> float | None:
    """D (metres) when a conjunct is ``distance(a, b) < D`` or ``<= D`` (either argument
    order, or written ``D > distance(a, b)``), D a length; None otherwise."""
    flip = {">": "<", ">=": "<="}
    for c in preds:
        if not isinstance(c, A.BinOp) or c.op not in ("<", "<=", ">", ">="):
            continue
        call, bound, op = c.left, c.right, c.op
        if op in flip:
            call, bound, op = c.right, c.left, flip[op]
        if not (isinstance(call, A.Call) and call.func == "distance" and len(call.args) == 2
                and isinstance(bound, A.Quantity) and bound.unit in A.DIST_UNITS):
            continue
        if {getattr(x, "name", None) for x in call.args} == {a, b} and all(isinstance(x, A.Var) for x in call.args):
            return bound.metres()
    return None


# ---------------------------------------------------------------------------- pair

def _pair(fp, cols, final_w, ev, filters) -> Matches:
    plan = fp.plan
    node: Join = plan.root
    la, lb = node.left, node.right
    w = plan.within
    time_rel, space = A.op_parts(node.op)
    rows = np.arange(cols.n, dtype=np.int64)
    ia = rows[unary(la, cols, rows, ev, filters, la.var)]
    jb = rows[unary(lb, cols, rows, ev, filters, lb.var)]
    if not len(ia) or not len(jb):
        return empty_matches(fp, cols)
    g, lo, hi, t = cols.group, cols.lo, cols.hi, cols.t
    longest = int((hi - lo).max())
    # B's candidates, sorted by (partition, lo): lo within a window of A's stamp
    jb = jb[np.lexsort((lo[jb], g[jb]))]
    if time_rel == "||":
        lower, upper = lo[ia] - longest, hi[ia]          # concurrent: lo_B <= hi_A, hi_B >= lo_A
        if w is not None:
            lower = np.maximum(lower, hi[ia] - w)
    else:
        lower, upper = hi[ia] - w, lo[ia] + w             # the span hi - lo is at most `within`
    near = near_bound(chain_preds(node), la.var, lb.var)
    got = _grid_pairs(cols, ia, jb, lower, upper, near) if near is not None else None
    if got is not None:
        ii, jj = got
    else:
        s = group_search(g[jb], lo[jb], g[ia], lower, "left")
        e = group_search(g[jb], lo[jb], g[ia], upper, "right")
        cnt = np.maximum(e - s, 0)
        ii = np.repeat(ia, cnt)
        jj = jb[concat_ranges(s, cnt)]
    keep = ii != jj                                        # distinct variables, distinct events
    ii, jj = ii[keep], jj[keep]
    if time_rel:
        same = (cols.src_code[ii] >= 0) & (cols.src_code[ii] == cols.src_code[jj])
        # relations.before on two events (composite_before's interval shortcut first)
        ab = (hi[ii] < lo[jj]) | (same & (t[ii] < t[jj]))
        if time_rel == ";":
            keep = ab
        else:
            ba = (hi[jj] < lo[ii]) | (same & (t[jj] < t[ii]))
            keep = ~ab & ~ba
        ii, jj = ii[keep], jj[keep]
    plo = np.minimum(lo[ii], lo[jj])
    phi = np.maximum(hi[ii], hi[jj])
    keep = within_mask(plan, plo, phi)
    ii, jj, plo, phi = ii[keep], jj[keep], plo[keep], phi[keep]
    if space and len(ii):
        ov = hull_overlap(cols, [ii], [jj])
        keep = ov if space == "=" else ~ov
        ii, jj, plo, phi = ii[keep], jj[keep], plo[keep], phi[keep]
    return _two(fp, cols, node, ev, ii, jj, plo, phi)


# ============================================================================ runner entry points

_FOR_AUTOMATON: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def run_events(am, evs: list, final_watermark: int) -> list | None:
    """One partition's composites by the fast path of automaton ``am`` (None: no fast path,
    or the data does not fit it). Patterns are tested with the automaton's own closures."""
    if am not in _FOR_AUTOMATON:
        _FOR_AUTOMATON[am] = fast_path(am.plan)
    fp = _FOR_AUTOMATON[am]
    if fp is None or fp.shape in ("run", "chains"):
        return None     # (cut over whole frames: spatec.vector.runs, spatec.vector.chains)
    cols = event_columns(fp, evs)
    if cols is None:
        return None
    closures = dict(am.filters)
    for _node, _neg, _cond, fs in am.negs.values():
        closures.update(fs)
    return evaluate(fp, cols, final_watermark, am.tz, Filters(closures=closures)).composites()


def run_frame(fp: FastPath, df, program, projector, final_watermark: int, materialise) -> Matches | None:
    """Every partition's matches at once over the canonical events ``df`` of ``fp.type``
    (None: the data does not fit the shape)."""
    cols = frame_columns(fp, df, projector, materialise)
    if cols is None:
        return None
    pats = Patterns(program.places, program.timezone, projector, PlaceSets(program.place_sets, projector))
    return evaluate(fp, cols, final_watermark, program.timezone, Filters(patterns=pats))

"""Runs (SPEC §7) in the automaton: each source's events cut into runs, kept as a running summary.

A run leaf of the operator tree (``Leaf.run``) does not take events one by one: its
events go to the *cut* of their source (:class:`Cut`, one per run leaf and source, in
the key's :class:`~spatec.automata.machine.RunState` ``runs``), which holds

- ``pending``: the source's events not yet *settled*, in order of local time. An event
  is settled once no event of its source with an earlier local time can still arrive:
  when the watermark reaches its ``hi`` (events of one type and source have ``hi - t``
  fixed, and anything behind the watermark is late), or at once in an ordered replay,
  or at the end of input;
- ``open``: the open run's summary (:class:`Open`): first and last event, count,
  ``[min lo, max hi]``, the convex hull, one accumulator per aggregate the phrase
  uses, and whether its events share the ``per`` key: never the run's events.

Settled events are cut in local-time order exactly as SPEC §7 words it (an event joins
when it passes the run's patterns, is within ``gap`` of the last and the ``while``
condition holds with ``R.first``, ``R.prev``, ``R.this``; otherwise the run is complete
and the event starts the next one if it passes the patterns). A run is also complete
when the watermark passes ``R.last.hi + gap``. A complete run becomes a :class:`RunEv`:
one value standing for the composite of its events (its id is its first event's), which
enters the operator tree at the run leaf like an event.

Complete runs reach the tree late (a run ends when its source's next event is settled),
so a key's buffers are pruned by :func:`floor`: nothing a future run may still match is
dropped. Hulls of equal discs (GPS fixes) are kept as the extreme points of their centres,
and made with GEOS from those points sorted, which gives the same geometry as the hull of
all the run's points.
"""
from __future__ import annotations

import bisect

import numpy as np
import shapely

from spatec.spatial import stamps as S

#: aggregate functions a run keeps an accumulator for
AGGREGATES = ("min", "max", "avg")


class RunEv:
    """A complete run as one composite value, read like an event
    (:class:`~spatec.automata.machine.Ev`) where a run may stand: stamps ``[min lo, max hi]``
    and the convex hull ``loc``; ``id``, ``type``, ``t``, ``source``, ``attrs`` are its first
    event's (``R.ATTR`` is ``R.first.ATTR``); ``first``, ``last`` its member events;
    ``count``; ``aggs``: ``(func, attr) → value``; ``t_last``: its last event's local time."""

    __slots__ = ("type", "id", "source", "t", "lo", "hi", "loc", "attrs", "first", "last", "count", "aggs",
                 "t_last")
    is_run = True

    def __init__(self, first, last, count, lo, hi, loc, aggs):
        self.type, self.id, self.source, self.t, self.attrs = first.type, first.id, first.source, first.t, first.attrs
        self.lo, self.hi, self.loc = lo, hi, loc
        self.first, self.last, self.count, self.aggs, self.t_last = first, last, count, aggs, last.t

    def __getstate__(self):
        return (self.first, self.last, self.count, self.lo, self.hi, self.loc, self.aggs)

    def __setstate__(self, s):
        self.__init__(*s)

    def __repr__(self):
        return f"RunEv({self.id} .. {self.last.id}, {self.count})"


class Growing:
    """A run as its ``while`` condition sees it: ``R.first``, ``R.prev``, ``R.this`` (``R.ATTR``
    is ``R.first.ATTR``)."""

    __slots__ = ("first", "prev", "this", "attrs")

    def __init__(self, first, prev, this):
        self.first, self.prev, self.this, self.attrs = first, prev, this, first.attrs


class Open:
    """The summary of an open run (see the module's docstring). ``pts``: the extreme points of
    the events' disc centres, all of radius ``r``; None once an event is not such a disc, and
    the hull is then folded into ``loc`` with :func:`spatec.spatial.stamps.hull`."""

    __slots__ = ("first", "last", "count", "lo", "hi", "pts", "r", "loc", "aggs", "same")

    def __init__(self, ev, aggs: tuple):
        self.first = self.last = ev
        self.count = 1
        self.lo, self.hi = ev.lo, ev.hi
        xy = ev.loc.xy
        if xy is not None:
            self.pts, self.r, self.loc = [xy], ev.loc.r, None
        else:
            self.pts, self.r, self.loc = None, 0.0, ev.loc
        self.aggs = {}
        for key in aggs:
            self.aggs[key] = None
            _accumulate(self.aggs, key, ev.attrs.get(key[1]))
        self.same = True

    def add(self, ev, aggs: tuple) -> None:
        self.last = ev
        self.count += 1
        if ev.lo < self.lo:
            self.lo = ev.lo
        if ev.hi > self.hi:
            self.hi = ev.hi
        loc = ev.loc
        if self.pts is not None and loc.xy is not None and loc.r == self.r:
            self.pts = add_point(self.pts, loc.xy)
        else:
            self.loc = S.hull([self.hull(), loc])
            self.pts = None
        for key in aggs:
            _accumulate(self.aggs, key, ev.attrs.get(key[1]))

    def hull(self):
        """The convex hull of the run's location stamps."""
        if self.pts is None:
            return self.loc
        return hull_of_points(self.pts, self.r)

    def complete(self) -> RunEv:
        return RunEv(self.first, self.last, self.count, self.lo, self.hi, self.hull(), finish(self.aggs))


def finish(accs: dict) -> dict:
    """The aggregates' values from their accumulators (an open run's ``aggs``)."""
    aggs = {}
    for (func, attr), acc in accs.items():
        if func == "avg":
            aggs[(func, attr)] = None if acc is None else acc[0] / acc[1]
        else:
            aggs[(func, attr)] = acc
    return aggs


def aggregates_of(keys: tuple, values) -> dict:
    """The aggregates ``keys`` of a complete run as :meth:`Open.complete` gives them, its events'
    attribute values read as ``values(attr)`` (in the events' order; None: missing)."""
    accs = {key: None for key in keys}
    for key in keys:
        for v in values(key[1]):
            _accumulate(accs, key, v)
    return finish(accs)


def _accumulate(aggs: dict, key: tuple, v) -> None:
    if v is None or isinstance(v, bool) or (isinstance(v, float) and v != v):
        return   # missing values are left out (SQL's aggregates)
    func = key[0]
    acc = aggs[key]
    if func == "avg":
        aggs[key] = [v, 1] if acc is None else [acc[0] + v, acc[1] + 1]
    elif acc is None or (v < acc if func == "min" else v > acc):
        aggs[key] = v


# ------------------------------------------------------------------------------ hulls

def hull_of_points(pts, r: float):
    """The stamp ``conv(pts) ⊕ r`` made by GEOS from the points in sorted order (so that any
    set of points with the same extreme points gives the same geometry)."""
    if len(pts) == 1:
        return S.Loc.disc(pts[0][0], pts[0][1], r)
    g = shapely.convex_hull(shapely.multipoints(np.array(sorted(pts), dtype=float)))
    return S.Loc.of(g, r)


def add_point(pts: list, p: tuple) -> list:
    """The extreme points of ``pts + [p]``, counter-clockwise when three or more (``pts``:
    extreme points as this function gives them). A point clearly inside the hull changes
    nothing; otherwise GEOS decides, as it does for the hull of all the points."""
    if len(pts) >= 3 and _inside(pts, p):
        return pts
    if p in pts:
        return pts
    g = shapely.convex_hull(shapely.multipoints(np.array(sorted(pts + [p]), dtype=float)))
    if shapely.get_type_id(g) == 3:     # a polygon: its ring, counter-clockwise, not closed
        ring = g.exterior
        c = shapely.get_coordinates(ring)[:-1]
        if not ring.is_ccw:
            c = c[::-1]
        return [tuple(x) for x in c.tolist()]
    return [tuple(x) for x in np.unique(shapely.get_coordinates(g), axis=0).tolist()]


def _inside(ring: list, p: tuple) -> bool:
    """``p`` inside the counter-clockwise convex polygon ``ring`` by a clear margin (else: not sure)."""
    x, y = p
    n = len(ring)
    ax, ay = ring[-1]
    for i in range(n):
        bx, by = ring[i]
        ex, ey = bx - ax, by - ay
        cross = ex * (y - ay) - ey * (x - ax)
        if cross <= 1e-9 * (abs(ex) + abs(ey) + 1.0) * (abs(x - ax) + abs(y - ay) + 1.0):
            return False
        ax, ay = bx, by
    return True


# ------------------------------------------------------------------------------ cutting

class Cut:
    """One source's events for one run leaf: those not yet settled, and the open run."""

    __slots__ = ("pending", "open")

    def __init__(self):
        self.pending: list = []
        self.open: Open | None = None

    def size(self) -> int:
        return len(self.pending) + (self.open is not None)

    def due(self, gap) -> int | None:
        """The smallest watermark at which stepping this cut changes it (None: only an event can)."""
        t = None
        if self.pending:
            t = self.pending[0].hi
        if gap is not None and self.open is not None:
            g = self.open.last.hi + gap + 1
            t = g if t is None or g < t else t
        return t


class RunLeaf:
    """A run leaf of a bound automaton: its leaf, the test of the run's patterns on one event,
    the ``while`` condition, ``gap`` (µs), the aggregates kept and the attributes its events
    must share."""

    __slots__ = ("leaf", "var", "passes", "cond", "gap", "aggs", "same")

    def __init__(self, leaf, passes, cond, gap, aggs, same):
        self.leaf, self.var, self.passes, self.cond, self.gap = leaf, leaf.var, passes, cond, gap
        self.aggs, self.same = tuple(aggs), tuple(same)


def feed(rl: RunLeaf, st, ev, settle_now: bool, ctx, done: list) -> None:
    """Give ``ev`` to its source's cut; settle the cut at once when ``settle_now`` (an ordered
    replay). Complete runs are appended to ``done`` as ``(RunLeaf, RunEv)``."""
    if ev.source is None:
        return
    key = (rl.leaf.id, ev.source)
    cut = st.runs.get(key)
    if cut is None:
        cut = st.runs[key] = Cut()
    pend = cut.pending
    if cut.open is not None and ev.t <= cut.open.last.t:
        return   # at or before the open run's last event: a copy (ids are (type, source, t))
    if not pend or ev.t > pend[-1].t:
        pend.append(ev)
    else:
        i = bisect.bisect_left([e.t for e in pend], ev.t)
        if i < len(pend) and pend[i].t == ev.t:
            return
        pend.insert(i, ev)
    if settle_now:
        _settle(rl, cut, None, ctx, done)
        if cut.open is None and not cut.pending:
            del st.runs[key]


def settle(am, st, w: int, final: bool, ctx, done: list) -> None:
    """Settle what watermark ``w`` settles in every cut of ``st`` (``final``: the end of
    input: every event), and complete the runs it leaves more than ``gap`` behind."""
    if not st.runs:
        return
    empty = []
    for key, cut in st.runs.items():
        rl = am.run_leaves[key[0]]
        _settle(rl, cut, None if final else w, ctx, done)
        o = cut.open
        if o is not None and rl.gap is not None and w > o.last.hi + rl.gap:
            if o.same:
                done.append((rl, o.complete()))
            cut.open = None
        if cut.open is None and not cut.pending:
            empty.append(key)
    for key in empty:
        del st.runs[key]


def _settle(rl: RunLeaf, cut: Cut, w, ctx, done: list) -> None:
    pend = cut.pending
    n = 0
    for ev in pend:
        if w is not None and ev.hi > w:
            break
        n += 1
        _cut(rl, cut, ev, ctx, done)
    if n:
        del pend[:n]


def _cut(rl: RunLeaf, cut: Cut, ev, ctx, done: list) -> None:
    passes = rl.passes is None or rl.passes(ev.lo, ev.hi, ev.loc)
    o = cut.open
    if o is not None:
        if passes and (rl.gap is None or ev.hi <= o.last.hi + rl.gap) and (
                rl.cond is None or rl.cond({rl.var: Growing(o.first, o.last, ev)}, ctx)):
            o.add(ev, rl.aggs)
            if rl.same and o.same:
                o.same = _shares(o.first, ev, rl.same)
            return
        if o.same:
            done.append((rl, o.complete()))
        cut.open = None
    if passes:
        o = cut.open = Open(ev, rl.aggs)
        if rl.same:
            o.same = _shares(ev, ev, rl.same)


def _shares(a, b, keys) -> bool:
    for k in keys:
        v = a.attrs.get(k)
        if v is None or b.attrs.get(k) != v:
            return False
    return True


def floor(st, w: int) -> int:
    """The watermark to prune ``st`` by: ``w``, or less while a run is open or events are
    unsettled (a run still to complete may hold events from as early as their ``lo``)."""
    for cut in st.runs.values():
        if cut.open is not None and cut.open.lo < w:
            w = cut.open.lo
        for e in cut.pending:
            if e.lo < w:
                w = e.lo
    return w


def next_due(am, st) -> int | None:
    """The smallest watermark at which :func:`settle` changes some cut of ``st``."""
    t = None
    for (lid, _src), cut in st.runs.items():
        d = cut.due(am.run_leaves[lid].gap)
        if d is not None and (t is None or d < t):
            t = d
    return t


# ------------------------------------------------------------------------------ identity

def shares_events(xs, ys) -> bool:
    """Whether events/runs ``xs`` and ``ys`` share an event through a run: a run holds every
    event of its type and source from its first local time to its last."""
    for a in xs:
        for b in ys:
            if not (a.is_run or b.is_run) or a.type != b.type or a.source is None or a.source != b.source:
                continue
            a1 = a.t_last if a.is_run else a.t
            b1 = b.t_last if b.is_run else b.t
            if a.t <= b1 and b.t <= a1:
                return True
    return False


def contains(runs, x) -> bool:
    """Whether event ``x`` is one of the events of a run among ``runs``."""
    for r in runs:
        if r.is_run and r.type == x.type and r.source == x.source and r.t <= x.t <= r.t_last:
            return True
    return False

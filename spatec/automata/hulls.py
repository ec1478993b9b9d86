"""A partial match's location stamp made from its halves' (issue 17: chains of any length).

A join with a spatial relation (``;=``, ``=``, ``<>``) compares the hulls of its two sides'
events. Made from every event each time, a chain of n events joined by ``;=`` costs n² point
work. A join over many events (:data:`MIN_EVENTS`; spatial or not, as a spatial join above
may read its matches' stamps) therefore gives each match it makes the
*support* of its halves' hulls (:func:`~spatec.spatial.stamps.hull_support`: the few stamps
that make a hull, in slot order), and the match's stamp, when asked for, is the hull of
those: the same stamp, bit for bit, as the hull of all its events (see ``hull_support`` for
why), in work proportional to the hull's size. A support is valid for a larger hull only
while the least radius stays the same (the points the hull takes of a stamp depend on it):
when one half's radius is smaller than the other's least and the other's support is not all
its events, the match's stamp is made from all its events, as before.

A partial match (:class:`~spatec.automata.machine.PM`) keeps ``_loc`` (its stamp, once
made) and ``_hb`` (a :class:`Support`, or None: made from its events).
"""
from __future__ import annotations

from spatec.spatial import stamps as S

#: joins of at least this many events make their matches' stamps from their halves'
MIN_EVENTS = 16

_ALL = slice(None)


class Support:
    """Stamps whose hull, in this order, is a partial match's stamp: ``pairs`` ``((slot,
    Loc), ...)`` in slot order; ``reduced``: only the stamps that make the hull
    (:func:`~spatec.spatial.stamps.hull_support`), else every one of both halves' supports;
    ``complete``: one pair per event of the match (then valid whatever the radii)."""

    __slots__ = ("pairs", "reduced", "complete")

    def __init__(self, pairs: tuple, reduced: bool, complete: bool):
        self.pairs, self.reduced, self.complete = pairs, reduced, complete


def loc(pm, where: slice = _ALL):
    """``pm``'s location stamp, the hull of its events' in slot order (made once: ``pm._loc``);
    ``where``: where its events are among the slots (the rest are None)."""
    h = pm._loc
    if h is None:
        hb = pm._hb
        if hb is not None:
            h = S.hull([x for _, x in hb.pairs])     # two or more: see join()
        else:
            locs = [e.loc for e in pm.ev[where] if e is not None]
            h = locs[0] if len(locs) == 1 else S.hull(locs)
        pm._loc = h
    return h


def support(pm, where: slice = _ALL) -> Support:
    """The stamps that make ``pm``'s stamp (:class:`Support`, reduced; kept on ``pm``)."""
    hb = pm._hb
    if hb is not None and hb.reduced:
        return hb
    h = loc(pm, where)
    if hb is not None:
        pairs, complete = hb.pairs, hb.complete
    else:
        at = where.start or 0
        pairs = tuple((at + i, e.loc) for i, e in enumerate(pm.ev[where]) if e is not None)
        complete = True
    if len(pairs) > 1 and h.geom is not None:
        keep = S.hull_support([x for _, x in pairs], h)
        if len(keep) < len(pairs):
            pairs, complete = tuple(pairs[i] for i in keep), False
    hb = pm._hb = Support(pairs, True, complete)
    return hb


def _slot(pair):
    return pair[0]


def join(c, left, right, lsl: slice = _ALL, rsl: slice = _ALL) -> None:
    """``c``, made of ``left`` and ``right``, gets what makes its stamp from theirs (made
    here if the join did not compare them). ``lsl``, ``rsl``: where each side's events are."""
    a, b = loc(left, lsl), loc(right, rsl)
    if a.geom is None or b.geom is None:
        c._loc = S.UNIVERSE     # what hull() gives for any UNIVERSE among the stamps
        return
    sa, sb = support(left, lsl), support(right, rsl)
    r = a.r if a.r < b.r else b.r
    if (a.r != r and not sa.complete) or (b.r != r and not sb.complete):
        return      # a smaller radius: the points the hull takes of the larger side change
    pa, pb = sa.pairs, sb.pairs
    pairs = pa + pb if pa[-1][0] < pb[0][0] else tuple(sorted(pa + pb, key=_slot))
    c._hb = Support(pairs, False, sa.complete and sb.complete)

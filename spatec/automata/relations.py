"""The time relations of SPEC §2 on events and on composites (sets of events).

``before(a, b)``: same source → local order ``a.t < b.t``; otherwise
``a.hi < b.lo``. For composites, ``before(A, B)`` holds when it holds for every
pair; ``concurrent`` when neither order holds.
"""
from __future__ import annotations


def ev_before(a, b) -> bool:
    if a.source is not None and a.source == b.source:
        return a.t < b.t
    return a.hi < b.lo


def ev_concurrent(a, b) -> bool:
    return not ev_before(a, b) and not ev_before(b, a)


def before(left, right) -> bool:
    """Every event of ``left`` certainly before every event of ``right``.

    ``left``/``right`` are sequences of events with their hull stamps given as
    (lo, hi) for the quick test: if the hulls are apart the answer is yes
    (t lies within [lo, hi], so local order agrees with interval order).
    """
    for a in left:
        for b in right:
            if a.source is not None and a.source == b.source:
                if not a.t < b.t:
                    return False
            elif not a.hi < b.lo:
                return False
    return True


def composite_before(l_events, l_hi, r_events, r_lo) -> bool:
    if l_hi < r_lo:
        return True
    return before(l_events, r_events)


def composite_concurrent(l_events, l_lo, l_hi, r_events, r_lo, r_hi) -> bool:
    return not composite_before(l_events, l_hi, r_events, r_lo) and \
        not composite_before(r_events, r_hi, l_events, l_lo)

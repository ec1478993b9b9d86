"""A phrase's events in groups that are matched apart: by key, or by stretch of time.

- A phrase with a key (``per vehicle``) hashes its keyed events into ``buckets`` groups by
  the key's values (:func:`~spatec.runtime.routing.key_buckets`, the one hash every runner
  uses): every partition (key value) lies wholly in one group; the broadcast types' events
  go to every group; for ``successive`` under a key that is not the source, a group also
  gets, as history only, the events of its sources that other groups hold.
- A phrase whose matches are local in time (bounded, depending on their own events only) is
  cut into stretches of time: a keyless one always (stretches of ``timeWindow``, at least two
  spans), a keyed one where a group holds much more than its share (a key whose events grow
  with the days replayed, Bunching's lines). A stretch ``[t0, t1)`` reports the matches that
  start in it, from the events that start in ``[t0, t1 + span]``: exact by construction.
- Phrases that read the same types under the same key, with nothing else apart, are one
  :class:`Grouping`: their groups are made, moved and loaded once for all of them (Stuck and
  Silent, both ``per vehicle`` over every fix).

An :class:`Item` is one group (or one stretch of one) of one grouping: the unit a task
matches. Which events an item holds is :func:`item_rows` of the events' columns: the same
function wherever it runs (a Spark task before the shuffle, this process).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spatec.plan.nodes import PhrasePlan
from spatec.runtime.routing import key_buckets

#: Groups per core at least: keys differ in size, and several groups a core let the
#: scheduler even the cores out.
GROUPS_PER_CORE = 6


@dataclass(frozen=True)
class Grouping:
    """Phrases matched together over one set of groups (see the module)."""

    index: int
    phrases: tuple          # names, in flow order
    types: tuple            # event types read
    key: tuple
    keyed: tuple
    buckets: int
    #: µs: keyless phrases local in time are cut into stretches of this length (None: not)
    window: int | None = None
    #: µs: the longest match (a stretch's events reach this far beyond its end)
    span: int = 0
    local_in_time: bool = False
    history: tuple = ()     # types whose sources' other events are history (``successive``)
    derived: tuple = ()     # the types that are other phrases' composites

    @property
    def broadcast(self) -> tuple:
        return tuple(t for t in self.types if t not in self.keyed)


@dataclass(frozen=True)
class Item:
    """One group, or one stretch of one, of a grouping: what one task matches."""

    grouping: int
    group: int
    #: the matches this item reports start in ``[own[0], own[1])`` (None: every match)
    own: tuple | None = None
    #: the events it loads start in ``[lo_range[0], lo_range[1]]`` (None: every event)
    lo_range: tuple | None = None
    rows: int = 0


def groupings(plans: list, rows: int, cores: int, bucket_rows: int, window_s: int) -> list:
    """The :class:`Grouping` of each phrase of ``plans`` (phrases that can share one do),
    for an input of about ``rows`` events."""
    out: list = []
    shared: dict = {}
    buckets = bucket_count(rows, cores, bucket_rows)
    for plan in plans:
        phys = plan.physical
        window = None
        if not phys.key and phys.local_in_time and not phys.derived:
            window = max(int(window_s) * 1_000_000, 2 * int(plan.span_bound or 0), 1)
        alone = (window is not None or phys.source_history or phys.proximity is not None or phys.derived
                 or not phys.key)
        # phrases local in time may be cut into stretches of their own span: they share only alike
        sig = (tuple(phys.types), tuple(phys.key), tuple(phys.keyed), phys.local_in_time,
               int(plan.span_bound or 0) if phys.local_in_time else 0)
        if not alone and sig in shared:
            g = out[shared[sig]]
            out[shared[sig]] = Grouping(g.index, g.phrases + (plan.name,), g.types, g.key, g.keyed, g.buckets,
                                        g.window, g.span, g.local_in_time, g.history, g.derived)
            continue
        if not alone:
            shared[sig] = len(out)
        out.append(Grouping(len(out), (plan.name,), tuple(phys.types), tuple(phys.key), tuple(phys.keyed),
                            buckets if phys.key else 1, window, int(plan.span_bound or 0),
                            bool(phys.local_in_time), tuple(phys.source_history), tuple(phys.derived)))
    return out


def bucket_count(rows: int, cores: int, bucket_rows: int) -> int:
    """How many groups a keyed phrase's events are hashed into: enough for every core to
    have :data:`GROUPS_PER_CORE`, and groups of about ``bucket_rows`` events."""
    par = max(1, cores)
    rounds = max(GROUPS_PER_CORE, -(-rows // (par * max(1, bucket_rows))))
    return par * rounds


def group_of(g: Grouping, cols, type_name: str) -> np.ndarray:
    """Each event's group (``cols``: its type's columns, a pandas frame of the key and
    ``_lo``): the key's hash for a keyed type (-1 without a key value: it relates to
    nothing), 0 for a keyless phrase, -2 for a broadcast type (every group)."""
    n = len(cols)
    if type_name not in g.keyed and g.key:
        return np.full(n, -2, dtype=np.int64)
    if not g.key:
        return np.zeros(n, dtype=np.int64)
    return key_buckets(cols, g.key, g.buckets)


def items_of(g: Grouping, stats: dict, cores: int, most: int) -> list:
    """The items of grouping ``g`` from its groups' statistics (``stats``: group → (events,
    least lo, greatest lo) of its keyed events): one per group, a group local in time that
    holds much more than its share cut into stretches of equal time (at least two spans long,
    at most ``most`` events), a keyless phrase local in time into stretches of ``g.window``.
    Groups with broadcast events only: one item (group 0)."""
    if not stats:
        return []
    if g.window is not None:
        out = []
        for grp, (n, lo0, lo1) in sorted(stats.items()):
            w = g.window
            for s in range(int(lo0 // w), int(lo1 // w) + 1):
                t0, t1 = s * w, (s + 1) * w
                out.append(Item(g.index, grp, (t0, t1), (t0, t1 + g.span), max(1, n // max(1, (lo1 - lo0) // w + 1))))
        return out
    total = sum(n for n, _, _ in stats.values())
    share = total / max(1, cores * GROUPS_PER_CORE)
    if most:
        share = min(share, most)
    out = []
    for grp, (n, lo0, lo1) in sorted(stats.items()):
        k = -int(-n // max(share, 1)) if (g.local_in_time and g.key and n > 1.5 * share) else 1
        k = min(k, (lo1 - lo0) // max(2 * g.span, 1)) if k > 1 else 1
        if k < 2:
            out.append(Item(g.index, grp, rows=n))
            continue
        cuts = [lo0 + (lo1 + 1 - lo0) * i // k for i in range(k + 1)]
        for t0, t1 in zip(cuts[:-1], cuts[1:]):
            out.append(Item(g.index, grp, (t0, t1), (t0, t1 + g.span), n // k))
    return out


def item_rows(items: list, groups: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(row, item)`` pairs: which of ``items`` (of one grouping) each event goes to, from
    its group (:func:`group_of`: -1 nowhere, -2 every group) and ``lo``; an event may go to
    several (a broadcast event; a stretch's events that reach into the one before)."""
    rows_out, items_out = [], []
    by_group: dict = {}
    for i, it in enumerate(items):
        by_group.setdefault(it.group, []).append(i)
    for grp, idx in by_group.items():
        sel = np.flatnonzero((groups == grp) | (groups == -2))
        if not len(sel):
            continue
        for i in idx:
            r = items[i].lo_range
            take = sel if r is None else sel[(lo[sel] >= r[0]) & (lo[sel] <= r[1])]
            if len(take):
                rows_out.append(take)
                items_out.append(np.full(len(take), i, dtype=np.int64))
    if not rows_out:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(rows_out), np.concatenate(items_out)


def dealt(items: list, parts: int | None = None) -> list:
    """The items' order of work: largest first (a scheduler that takes tasks in order then
    ends the stage when the work does, as the longest-processing-time rule)."""
    return sorted(range(len(items)), key=lambda i: (-items[i].rows, i))


def plan_of(plans: list, name: str) -> PhrasePlan:
    for p in plans:
        if p.name == name:
            return p
    raise KeyError(name)

"""Which subscriptions an alert goes to: a covering and merging index.

Subscriptions are kept per phrase (plus the ones for every phrase). Three ideas from
content-based routing (Gryphon's information flow graphs, Antipov's covering):

- **Merging**: subscriptions with the same filter and area (the same text, area and
  mode) form one *group*, evaluated once for all its members.
- **Covering**: a group G is covered by a group C when every alert G matches C matches
  too — C's filter is a conjunction of simple comparisons each implied by G's own
  (``line == "1"`` covers ``line == "1" and metres < 50``; ``metres < 80`` covers
  ``metres < 50``), and C has no area or G's area lies inside C's. A covered group is
  evaluated only on its coverer's matches, through an index of the coverer's own (the
  same kind as below). Covering is found when a group is added, against the groups of
  its equality bucket, the ranges and the unindexed ones; of those that cover it, the one
  with most conditions (a group without any covers everything and would save nothing). A
  group whose coverer goes away is indexed on its own again.
- **Indexing** the uncovered groups: a group with an equality comparison is hashed by
  (field, value); else one with a range comparison (``<``, ``<=``, ``>``, ``>=`` on a
  number or time field) is kept in a list sorted by its bound (an alert's value finds all
  the groups it satisfies by bisection); else one with an area is in a spatial index
  (shapely's STRtree over lon/lat boxes); the rest are scanned. A candidate the index
  yields is then tested in full (its filter, its area).

:func:`naive_match` evaluates every subscription: the baseline of ``bench/bench_covering.py``.
"""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field

import numpy as np
import shapely

from spatec.service.filters import Atom

#: most groups a new group is compared with to find a coverer
COVER_CHECKS = 256


@dataclass(eq=False)
class Group:
    """Subscriptions with one filter and area: evaluated once, delivered to all."""

    key: tuple
    phrase: str | None
    filter: object            # filters.Filter or None
    area: object              # areas.Area or None
    members: set = field(default_factory=set)
    covered: "_PhraseIndex | None" = None          # groups evaluated only where this one matches, indexed
    parent: "Group | None" = None
    slot: tuple | None = None                      # where it is indexed (roots only)

    def atoms(self) -> tuple:
        return self.filter.atoms if self.filter is not None else ()

    def test(self, alert: dict, hull) -> bool:
        if self.filter is not None and not self.filter.test(alert):
            return False
        if self.area is not None:
            h = hull()
            return self.area.test(h)
        return True


def group_key(phrase, flt, area) -> tuple:
    a = None if area is None else (json.dumps(area.spec, sort_keys=True), area.certainly)
    return (phrase, None if flt is None else " ".join(flt.text.split()), a)


class CoveringIndex:
    """Subscriptions by group; ``match(alert, hull)`` → the ids of the subscriptions it goes to
    (``hull``: a function giving the alert's hull stamp, called at most once)."""

    def __init__(self):
        self.groups: dict[tuple, Group] = {}
        self.of_sub: dict[str, Group] = {}
        self.phrases: dict = {}           # phrase (None: every phrase) → _PhraseIndex
        self.tests = 0                    # groups tested in full (a measure of the work)

    def __len__(self) -> int:
        return len(self.of_sub)

    def add(self, sub_id: str, phrase: str | None, flt, area) -> None:
        self.remove(sub_id)
        key = group_key(phrase, flt, area)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = Group(key, phrase, flt, area)
            px = self.phrases.setdefault(phrase, _PhraseIndex())
            cover = px.coverer(g)
            if cover is not None:
                g.parent = cover
                if cover.covered is None:
                    cover.covered = _PhraseIndex()
                cover.covered.put(g)
            else:
                px.put(g)
        g.members.add(sub_id)
        self.of_sub[sub_id] = g

    def remove(self, sub_id: str) -> None:
        g = self.of_sub.pop(sub_id, None)
        if g is None:
            return
        g.members.discard(sub_id)
        if g.members:
            return
        del self.groups[g.key]
        px = self.phrases[g.phrase]
        if g.parent is not None:
            g.parent.covered.drop(g)
        else:
            px.drop(g)
        if g.covered is not None:
            for child in g.covered.all():    # on their own again
                child.parent = None
                px.put(child)
            g.covered = None

    def match(self, alert: dict, hull) -> set:
        out: set = set()
        memo = []

        def hull_once():
            if not memo:
                memo.append(hull())
            return memo[0]

        for ph in (alert.get("phrase"), None):
            px = self.phrases.get(ph)
            if px is None:
                continue
            stack = list(px.candidates(alert, hull_once))
            while stack:
                g = stack.pop()
                self.tests += 1
                if g.test(alert, hull_once):
                    out |= g.members
                    if g.covered is not None:
                        stack.extend(g.covered.candidates(alert, hull_once))
        return out


class _PhraseIndex:
    """The uncovered groups of one phrase, indexed."""

    def __init__(self):
        self.eq: dict = {}        # (field, value) → {groups}
        self.ranges: dict = {}    # (field, "<" | ">") → _Sorted
        self.areas: list = []     # groups indexed by area
        self.area_tree = None     # STRtree over self.areas' boxes (None: to rebuild)
        self.rest: set = set()

    # -- where a group goes
    def put(self, g: Group) -> None:
        atoms = g.atoms()
        eq = next((a for a in atoms if a.op == "==" and a.kind in ("str", "num", "bool")), None)
        rng = next((a for a in atoms if a.op in ("<", "<=", ">", ">=") and a.kind in ("num", "time")), None)
        if eq is not None:
            g.slot = ("eq", (eq.field, eq.value))
            self.eq.setdefault(g.slot[1], set()).add(g)
        elif rng is not None:
            side = "<" if rng.op in ("<", "<=") else ">"
            g.slot = ("range", (rng.field, side))
            self.ranges.setdefault(g.slot[1], _Sorted(side)).add(rng, g)
        elif g.area is not None:
            g.slot = ("area", None)
            self.areas.append(g)
            self.area_tree = None
        else:
            g.slot = ("rest", None)
            self.rest.add(g)

    def drop(self, g: Group) -> None:
        kind, k = g.slot
        if kind == "eq":
            self.eq[k].discard(g)
            if not self.eq[k]:
                del self.eq[k]
        elif kind == "range":
            self.ranges[k].remove(g)
        elif kind == "area":
            self.areas.remove(g)
            self.area_tree = None
        else:
            self.rest.discard(g)
        g.slot = None

    def all(self) -> list:
        """Every group indexed here."""
        out = [g for gs in self.eq.values() for g in gs]
        for srt in self.ranges.values():
            out.extend(srt.groups)
        return out + list(self.areas) + list(self.rest)

    def coverer(self, g: Group) -> Group | None:
        """An indexed group that covers ``g`` (see the module docstring), or None."""
        pool = []
        for a in g.atoms():
            if a.op == "==":
                pool.extend(self.eq.get((a.field, a.value), ()))
        pool.extend(self.rest)
        if g.area is None or len(pool) < COVER_CHECKS:
            for s in self.ranges.values():
                pool.extend(s.groups[:COVER_CHECKS])
        best, best_n = None, 0
        for c in pool[:COVER_CHECKS]:
            n = len(c.atoms()) + (c.area is not None)
            if n > best_n and covers(c, g):     # a group without conditions covers all and saves nothing
                best, best_n = c, n
        return best

    # -- what an alert may match
    def candidates(self, alert: dict, hull):
        for _, gs in self._eq_hits(alert):
            yield from gs
        for (f, side), s in self.ranges.items():
            v = _value(alert.get(f), s.kind)
            if v is not None:
                yield from s.satisfied(v)
        if self.areas:
            if self.area_tree is None:
                boxes = [shapely.box(*g.area.box) for g in self.areas]
                self.area_tree = shapely.STRtree(boxes)
            h = hull()
            if h.is_universe:
                yield from self.areas
            else:
                box = _lonlat_box(alert)
                if box is not None:
                    for i in self.area_tree.query(shapely.box(*box)).tolist():
                        yield self.areas[i]
        yield from self.rest

    def _eq_hits(self, alert: dict):
        if not self.eq:
            return
        for f, v in alert.items():
            if isinstance(v, (str, int, float, bool)):
                gs = self.eq.get((f, v))
                if gs:
                    yield f, gs


class _Sorted:
    """Groups with a bound on one field and side, sorted by the bound."""

    def __init__(self, side: str):
        self.side = side
        self.keys: list = []      # the bounds, sorted
        self.strict: list = []
        self.groups: list = []
        self.kind = "num"

    def add(self, a: Atom, g: Group) -> None:
        self.kind = a.kind
        i = bisect.bisect_right(self.keys, a.value)
        self.keys.insert(i, a.value)
        self.strict.insert(i, a.op in ("<", ">"))
        self.groups.insert(i, g)

    def remove(self, g: Group) -> None:
        i = self.groups.index(g)
        del self.keys[i], self.strict[i], self.groups[i]

    def satisfied(self, v) -> list:
        """Groups whose bound the value ``v`` satisfies (side ``<``: ``v < b`` or ``v <= b``)."""
        i, k = bisect.bisect_left(self.keys, v), bisect.bisect_right(self.keys, v)
        equal = [g for g, s in zip(self.groups[i:k], self.strict[i:k]) if not s]
        return equal + self.groups[k:] if self.side == "<" else self.groups[:i] + equal


def _value(v, kind: str):
    if v is None or isinstance(v, bool):
        return None
    if kind == "time":
        if not isinstance(v, str):
            return None
        from spatec.service.filters import time_micros

        try:
            return time_micros(v)
        except (ValueError, TypeError):
            return None
    return v if isinstance(v, (int, float)) else None


def _lonlat_box(alert: dict):
    """The lon/lat box of an alert's hull WKT (no projection needed for the index)."""
    w = alert.get("hull")
    if not w:
        return None
    g = shapely.from_wkt(w)
    b = shapely.bounds(g)
    return None if np.isnan(b).any() else tuple(b.tolist())


# ------------------------------------------------------------------------------ covering

def covers(c: Group, g: Group) -> bool:
    """Whether every alert ``g`` matches, ``c`` matches too (sufficient conditions only)."""
    if c.phrase is not None and c.phrase != g.phrase:
        return False
    if c.filter is not None:
        if c.filter.rest:
            return False
        mine = g.atoms()
        for a in c.filter.atoms:
            if not any(implies(b, a) for b in mine):
                return False
    if c.area is not None:
        if g.area is None:
            return False
        if c.area.certainly and not g.area.certainly:
            return False
        if not _inside(g.area, c.area):
            return False
    return True


def implies(b: Atom, a: Atom) -> bool:
    """Whether a value that satisfies ``b`` satisfies ``a`` (same field)."""
    if b.field != a.field or b.kind != a.kind:
        return False
    if b == a:
        return True
    if b.op == "==":
        if a.op == "==":
            return b.value == a.value
        if a.op == "!=":
            return b.value != a.value
        if a.kind in ("num", "time"):
            return _OPS_OK[a.op](b.value, a.value)
        return False
    if a.kind not in ("num", "time"):
        return False
    if b.op in ("<", "<=") and a.op in ("<", "<="):
        return b.value < a.value or (b.value == a.value and (a.op == "<=" or b.op == "<"))
    if b.op in (">", ">=") and a.op in (">", ">="):
        return b.value > a.value or (b.value == a.value and (a.op == ">=" or b.op == ">"))
    return False


_OPS_OK = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
           ">=": lambda x, y: x >= y}


def _inside(inner, outer) -> bool:
    """Whether area ``inner`` lies inside area ``outer`` (so meeting inner means meeting outer)."""
    from spatec.spatial import stamps as S

    bi, bo = inner.box, outer.box
    if bi[0] < bo[0] or bi[1] < bo[1] or bi[2] > bo[2] or bi[3] > bo[3]:
        return False
    return S.certainly_in(inner.loc, outer.loc)


def naive_match(subs, alert: dict, hull) -> set:
    """Every subscription tested on its own (``subs``: id → (phrase, filter, area))."""
    out = set()
    memo = []
    for sid, (ph, flt, area) in subs.items():
        if ph is not None and ph != alert.get("phrase"):
            continue
        if flt is not None and not flt.test(alert):
            continue
        if area is not None:
            if not memo:
                memo.append(hull())
            if not area.test(memo[0]):
                continue
        out.add(sid)
    return out

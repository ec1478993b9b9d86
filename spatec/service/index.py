"""Which subscriptions an alert goes to: a covering and merging index.

Subscriptions are kept per phrase (plus the ones for every phrase). Ideas from
content-based routing (Gryphon's information flow graphs, Antipov's covering, the
counting algorithm's "index each subscription by one predicate, then test it whole"):

- **Merging**: subscriptions with the same filter and area (the same text, area and
  mode) form one *group*, evaluated once for all its members.
- **Covering**: a group G is covered by a group C when every alert G matches C matches
  too — C's filter is a conjunction of simple comparisons each implied by G's own
  (``line == "1"`` covers ``line == "1" and metres < 50``; ``metres < 80`` covers
  ``metres < 50``), and C has no area or G's area lies inside C's. A covered group is
  evaluated only on its coverer's matches, through an index of the coverer's own (the
  same kind as below). A coverer is looked for when a group is added, among at most
  :data:`COVER_CHECKS` candidates the index itself finds (its equality bucket, looser
  bounds on the same field, the unindexed groups: areas alone are left to the grid,
  which finds them as cheaply); of those that cover it, the
  one with most conditions (a group without any covers everything and would save
  nothing). A group whose coverer goes away is indexed on its own again.
- **Indexing** the uncovered groups: a group with an equality comparison is hashed by
  (field, value) — and within that bucket, one with an area is in a grid of the bucket's
  own (``line == "4"`` near a stop is found by the line, then by the place: a BE-tree's
  partitioning, value first, space second); else one with a range comparison (``<``,
  ``<=``, ``>``, ``>=`` on a number or time field) is kept in a list sorted by its bound
  (an alert's value finds all the groups it satisfies by bisection); else one with an
  area is in a grid of lon/lat cells of several sizes (each area in the level whose
  cells are about its size, so it is in at most four cells: adding and removing cost a
  few dictionary operations, nothing is rebuilt); the rest are scanned. A candidate the
  index yields is then tested in full: its filter, then its area — the circle areas of
  all the candidates of an alert at once (:func:`spatec.spatial.stamps.relate_discs`), and
  the polygons it may meet too (:func:`spatec.spatial.stamps.overlap_many`).

An alert is matched in the language's units (:func:`spatec.service.filters.values`):
the index compares the same values the filters evaluate. A group whose test raises is
reported (``match`` returns it with the error) and never tested again: one bad
subscription cannot stop the others.

:func:`naive_match` evaluates every subscription: the baseline of ``bench/bench_covering.py``.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np
import shapely

from spatec.service.batch import AreaTable, tabled
from spatec.service.filters import Atom
from spatec.spatial import stamps as S

#: most candidate coverers a new group is compared with
COVER_CHECKS = 32
#: the finest cell of the area grid, degrees (about 200 m of latitude); each level doubles it
GRID_BASE = 1 / 512
GRID_LEVELS = 18


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
    slot: tuple | None = None                      # where it is indexed
    error: str | None = None                       # why its test failed (then it is never tested again)
    gid: int | None = None                         # its number for the hub (never another group's)

    @property
    def in_table(self) -> bool:
        """Matched by an area table (its area's metric part is the table's, made for all its
        rows at once), not one by one."""
        return self.slot is not None and self.slot[0] == "table"

    def atoms(self) -> tuple:
        return self.filter.atoms if self.filter is not None else ()

    def conditions(self) -> int:
        return len(self.atoms()) + (self.area is not None)

    def test(self, env: dict, hull) -> bool:
        if self.filter is not None and not self.filter.test(env):
            return False
        if self.area is not None:
            return self.area.test(hull())
        return True


def group_key(phrase, flt, area) -> tuple:
    a = None if area is None else (area.key, area.certainly)
    return (phrase, None if flt is None else " ".join(flt.text.split()), a)


class CoveringIndex:
    """Subscriptions by group; ``match(alert, env, hull)`` → the groups it goes to (their
    members are the subscriptions) and the groups whose test failed (``env``: the alert's
    values; ``hull``: a function giving its hull stamp, called at most once)."""

    def __init__(self):
        self.groups: dict[tuple, Group] = {}
        self.of_sub: dict[str, Group] = {}
        self.phrases: dict = {}           # phrase (None: every phrase) → _PhraseIndex
        self.tables: dict = {}            # phrase (None: every phrase) → AreaTable (groups with an area)
        self._tests = 0
        self._gid = 0                     # the last group's number

    @property
    def tests(self) -> int:
        """Groups tested in full (a measure of the work)."""
        return self._tests + sum(t.tests for t in self.tables.values())

    def __len__(self) -> int:
        return len(self.of_sub)

    def add(self, sub_id: str, phrase: str | None, flt, area) -> Group:
        key = group_key(phrase, flt, area)
        cur = self.of_sub.get(sub_id)
        if cur is not None and cur.key == key:
            return cur
        self.remove(sub_id)
        g = self.groups.get(key)
        if g is None:
            self._gid += 1
            g = self.groups[key] = Group(key, phrase, flt, area, gid=self._gid)
            if tabled(g):                    # an area (and at most an equality first): matched in batches
                g.slot = ("table", None)
                t = self.tables.get(phrase)
                if t is None:
                    t = self.tables[phrase] = AreaTable()
                t.put(g)
            else:
                self._place(g, self.phrases.setdefault(phrase, _PhraseIndex()))
        g.members.add(sub_id)
        self.of_sub[sub_id] = g
        return g

    def _place(self, g: Group, px: "_PhraseIndex") -> None:
        cover = px.coverer(g)
        if cover is not None:
            g.parent = cover
            if cover.covered is None:
                cover.covered = _PhraseIndex()
            cover.covered.put(g)
        else:
            px.put(g)

    def remove(self, sub_id: str) -> None:
        g = self.of_sub.pop(sub_id, None)
        if g is None:
            return
        g.members.discard(sub_id)
        if g.members:
            return
        del self.groups[g.key]
        if g.in_table:
            t = self.tables[g.phrase]
            t.drop(g)
            if not t:
                del self.tables[g.phrase]
            return
        px = self.phrases[g.phrase]
        if g.parent is not None:
            g.parent.covered.drop(g)
        else:
            px.drop(g)
        if g.covered is not None:
            for child in g.covered.all():
                g.covered.drop(child)
                if g.parent is not None:     # covered by g's coverer too: under it
                    child.parent = g.parent
                    g.parent.covered.put(child)
                else:                        # on its own again, or under another coverer
                    child.parent = None
                    self._place(child, px)
            g.covered = None

    def in_table(self, sub_id: str) -> bool:
        """Whether ``sub_id``'s group is matched by an area table (its area's metric part is
        the table's, made for all its rows at once)."""
        g = self.of_sub.get(sub_id)
        return g is not None and g.in_table

    def loose_areas(self) -> list:
        """The areas of the groups matched one by one (not by an area table)."""
        return [g.area for g in self.groups.values() if g.area is not None and not g.in_table]

    def prepare(self) -> None:
        """Make the area tables' trees and their rows' metric parts now (else at the next
        alert): after many subscriptions came at once."""
        for t in self.tables.values():
            t.prepare()

    def match(self, alert: dict, env: dict, hull, lonlat=False) -> tuple[list, list]:
        """(``lonlat``: the hull in lon/lat already parsed, or None for an alert with none.)"""
        got = self.match_many([(alert, env, hull, lonlat)])[0]
        if isinstance(got, Exception):
            raise got
        return got

    def match_many(self, items: list, ids: bool = False) -> list:
        """``match`` of many alerts at once (``items``: ``(alert, env, hull, lonlat)`` each):
        per alert ``(matched, failed)``, or the exception its matching raised. The groups
        with an area are matched for all of them at once (:class:`~spatec.service.batch.AreaTable`).
        ``ids``: ``matched`` as the groups' numbers (``gid``), the tables' read from their arrays
        (not from a hundred groups an alert, scattered in memory)."""
        res: list = [None] * len(items)
        wheres, hulls = [], []
        for i, (alert, env, hull, lonlat) in enumerate(items):
            hull_once = _once(hull)
            where = _Where(alert, hull_once, lonlat)
            wheres.append(where)
            hulls.append(hull_once)
            out: list = []
            failed: list = []
            try:
                ph = alert.get("phrase")
                for p in ((ph, None) if ph is not None else (None,)):
                    px = self.phrases.get(p)
                    if px is None:
                        continue
                    todo = list(px.candidates(env, where))
                    while todo:
                        todo = self._test(todo, env, hull_once, where, out, failed)
            except Exception as e:  # noqa: BLE001 - that alert's own (the caller skips it)
                res[i] = e
                continue
            res[i] = ([g.gid for g in out] if ids else out, failed)
        for p, table in self.tables.items():
            which = [i for i, r in enumerate(res) if not isinstance(r, Exception)
                     and (p is None or items[i][0].get("phrase") == p)]
            if not which:
                continue
            got = table.match([wheres[i] for i in which], [items[i][1] for i in which], [hulls[i] for i in which],
                              ids=ids)
            for i, (matched, failed, err) in zip(which, got):
                if err is not None:
                    res[i] = err
                elif matched or failed:
                    res[i][0].extend(matched)
                    res[i][1].extend(failed)
        return res

    def _test(self, groups, env, hull, where, out: list, failed: list) -> list:
        """Test ``groups`` (filters one by one, circle areas all at once); those that match go
        to ``out``; the candidates of the groups they cover are returned."""
        discs, polys, more = [], [], []

        def matched(g):
            out.append(g)
            if g.covered is not None:
                more.extend(g.covered.candidates(env, where))

        for g in groups:
            if g.error is not None:
                continue
            self._tests += 1
            try:
                if g.filter is not None and not g.filter.test(env):
                    continue
                if g.area is None:
                    matched(g)
                elif g.area.is_disc:
                    discs.append(g)
                elif not g.area.certainly:
                    polys.append(g)
                elif g.area.test(hull()):
                    matched(g)
            except Exception as e:  # noqa: BLE001 - a subscription's own failure, isolated
                g.error = f"{type(e).__name__}: {e}"
                failed.append(g)
        if discs:
            try:
                xs, ys, rs, pts, cert = [], [], [], [], []
                for g in discs:
                    x, y, r, pt = g.area.disc()[:4]
                    xs.append(x)
                    ys.append(y)
                    rs.append(r)
                    pts.append(pt)
                    cert.append(g.area.certainly)
                p, c = S.relate_discs(hull(), xs, ys, rs, pts)
                oks = np.where(cert, c, p).tolist()
            except Exception:  # noqa: BLE001 - one of them cannot be made: each tested alone
                oks = None
            for g, ok in zip(discs, oks if oks is not None else each_alone(discs, hull(), failed)):
                if ok:
                    matched(g)
        if polys:
            try:
                oks = S.overlap_many(hull(), [g.area.loc for g in polys]).tolist()
            except Exception:  # noqa: BLE001 - one of them cannot be made: each tested alone
                oks = None
            for g, ok in zip(polys, oks if oks is not None else each_alone(polys, hull(), failed)):
                if ok:
                    matched(g)
        return more


def _once(make):
    """``make``, called at most once."""
    memo = []

    def once():
        if not memo:
            memo.append(make())
        return memo[0]
    return once


class _Where:
    """Where an alert is, worked out once: its lon/lat box, whether it has no place (from its
    hull in lon/lat: nothing is projected for the index)."""

    __slots__ = ("alert", "hull", "_box", "lonlat")

    def __init__(self, alert: dict, hull, lonlat=False):
        self.alert, self.hull, self._box, self.lonlat = alert, hull, False, lonlat

    def _geom(self):
        if self.lonlat is False:
            w = self.alert.get("hull")
            self.lonlat = shapely.from_wkt(w) if w else None
        return self.lonlat

    def universe(self) -> bool:
        g = self._geom()
        return g is None or g.is_empty

    def box(self):
        if self._box is False:
            g = self._geom()
            b = shapely.bounds(g) if g is not None else None
            self._box = None if b is None or np.isnan(b).any() else tuple(b.tolist())
        return self._box


class _Bucket:
    """The groups hashed under one (field, value): those with an area in a grid of their own."""

    __slots__ = ("plain", "grid")

    def __init__(self):
        self.plain: set = set()
        self.grid = _Grid()

    def __bool__(self) -> bool:
        return bool(self.plain) or bool(self.grid)

    def put(self, g: Group) -> None:
        if g.area is not None:
            self.grid.put(g)
        else:
            self.plain.add(g)

    def drop(self, g: Group) -> None:
        if g.area is not None:
            self.grid.drop(g)
        else:
            self.plain.discard(g)

    def all(self) -> list:
        return list(self.plain) + self.grid.all()

    def candidates(self, where: "_Where"):
        yield from self.plain
        if self.grid:
            yield from self.grid.near(where)


class _PhraseIndex:
    """The uncovered groups of one phrase (or of one coverer), indexed."""

    def __init__(self):
        self.eq: dict = {}        # (field, value) → _Bucket
        self.eq_fields: dict = {}  # field → how many buckets use it
        self.ranges: dict = {}    # (field, "<" | ">") → _Sorted
        self.grid = _Grid()       # groups indexed by area
        self.rest: set = set()

    # -- where a group goes
    def put(self, g: Group) -> None:
        atoms = g.atoms()
        eq = next((a for a in atoms if a.op == "==" and a.kind in ("str", "num", "bool")), None)
        rng = next((a for a in atoms if a.op in ("<", "<=", ">", ">=") and a.kind in ("num", "time")), None)
        if eq is not None:
            k = (eq.field, eq.value)
            g.slot = ("eq", k)
            bucket = self.eq.get(k)
            if bucket is None:
                bucket = self.eq[k] = _Bucket()
                self.eq_fields[eq.field] = self.eq_fields.get(eq.field, 0) + 1
            bucket.put(g)
        elif rng is not None:
            side = "<" if rng.op in ("<", "<=") else ">"
            g.slot = ("range", (rng.field, side))
            self.ranges.setdefault(g.slot[1], _Sorted(side)).add(rng, g)
        elif g.area is not None:
            g.slot = ("area", None)
            self.grid.put(g)
        else:
            g.slot = ("rest", None)
            self.rest.add(g)

    def drop(self, g: Group) -> None:
        kind, k = g.slot
        if kind == "eq":
            bucket = self.eq[k]
            bucket.drop(g)
            if not bucket:
                del self.eq[k]
                self.eq_fields[k[0]] -= 1
                if not self.eq_fields[k[0]]:
                    del self.eq_fields[k[0]]
        elif kind == "range":
            srt = self.ranges[k]
            srt.remove(g)
            if not srt.groups:
                del self.ranges[k]
        elif kind == "area":
            self.grid.drop(g)
        else:
            self.rest.discard(g)
        g.slot = None

    def all(self) -> list:
        """Every group indexed here."""
        out = [g for b in self.eq.values() for g in b.all()]
        for srt in self.ranges.values():
            out.extend(srt.groups)
        return out + self.grid.all() + list(self.rest)

    def coverer(self, g: Group) -> Group | None:
        """An indexed group that covers ``g`` (see the module docstring), or None: looked for
        among the groups without an area of its equality buckets, the looser bounds on its
        range fields and the unindexed groups."""
        pool: list = []
        for a in g.atoms():
            if a.op == "==":
                b = self.eq.get((a.field, a.value))
                if b is not None:
                    pool.extend(b.plain)
            elif a.op in ("<", "<=", ">", ">=") and a.kind in ("num", "time"):
                srt = self.ranges.get((a.field, "<" if a.op in ("<", "<=") else ">"))
                if srt is not None:
                    pool.extend(srt.looser(a.value, COVER_CHECKS))
            if len(pool) >= COVER_CHECKS:
                break
        if len(pool) < COVER_CHECKS:
            pool.extend(list(self.rest)[:COVER_CHECKS - len(pool)])
        best, best_n = None, 0
        seen = set()
        for c in pool[:COVER_CHECKS]:
            if c in seen:
                continue
            seen.add(c)
            n = c.conditions()
            if n > best_n and c.error is None and covers(c, g):   # one without conditions saves nothing
                best, best_n = c, n
        return best

    # -- what an alert may match
    def candidates(self, env: dict, where: "_Where"):
        eq = self.eq
        if eq:
            for f in self.eq_fields:
                v = env.get(f)
                if v is not None:
                    b = eq.get((f, v))
                    if b is not None:
                        yield from b.candidates(where)
        for (f, side), srt in self.ranges.items():
            v = env.get(f)
            if v is not None:
                yield from srt.satisfied(v)
        if self.grid:
            yield from self.grid.near(where)
        yield from self.rest


class _Sorted:
    """Groups with a bound on one field and side, sorted by the bound."""

    def __init__(self, side: str):
        self.side = side
        self.keys: list = []      # the bounds, sorted
        self.strict: list = []
        self.groups: list = []

    def add(self, a: Atom, g: Group) -> None:
        i = bisect.bisect_right(self.keys, a.value)
        self.keys.insert(i, a.value)
        self.strict.insert(i, a.op in ("<", ">"))
        self.groups.insert(i, g)
        g.bound = a.value

    def remove(self, g: Group) -> None:
        v = g.bound
        i, k = bisect.bisect_left(self.keys, v), bisect.bisect_right(self.keys, v)
        i += self.groups[i:k].index(g)
        del self.keys[i], self.strict[i], self.groups[i]

    def satisfied(self, v) -> list:
        """Groups whose bound the value ``v`` satisfies (side ``<``: ``v < b`` or ``v <= b``)."""
        i, k = bisect.bisect_left(self.keys, v), bisect.bisect_right(self.keys, v)
        equal = [g for g, s in zip(self.groups[i:k], self.strict[i:k]) if not s]
        return equal + self.groups[k:] if self.side == "<" else self.groups[:i] + equal

    def looser(self, v, most: int) -> list:
        """Up to ``most`` groups whose bound is at least as loose as ``v`` (candidate coverers)."""
        if self.side == "<":
            i = bisect.bisect_left(self.keys, v)
            return self.groups[i:i + most]
        k = bisect.bisect_right(self.keys, v)
        return self.groups[max(0, k - most):k]


class _Cell:
    """The groups of one grid cell; their boxes as one array (made again after a change) once
    there are many, so that an alert's box is compared with all of them at once."""

    __slots__ = ("groups", "_list", "_boxes")

    MANY = 24

    def __init__(self):
        self.groups: dict = {}          # an ordered set
        self._list: list | None = None
        self._boxes = None

    def __len__(self) -> int:
        return len(self.groups)

    def add(self, g: Group) -> None:
        self.groups[g] = None
        self._list = self._boxes = None

    def discard(self, g: Group) -> None:
        self.groups.pop(g, None)
        self._list = self._boxes = None

    def meeting(self, box) -> list:
        """The groups whose area's box meets ``box``."""
        if len(self.groups) <= self.MANY:
            return [g for g in self.groups if _meets(g.area.box, box)]
        if self._boxes is None:
            self._list = list(self.groups)
            self._boxes = np.array([g.area.box for g in self._list], dtype=np.float64)
        b = self._boxes
        hit = (b[:, 0] <= box[2]) & (b[:, 2] >= box[0]) & (b[:, 1] <= box[3]) & (b[:, 3] >= box[1])
        lst = self._list
        return [lst[i] for i in np.flatnonzero(hit).tolist()]


def _meets(b, box) -> bool:
    return b[0] <= box[2] and box[0] <= b[2] and b[1] <= box[3] and box[1] <= b[3]


class _Grid:
    """Groups by the lon/lat cells their area's box meets, at the level where it meets at
    most 2 x 2 cells (cells ``GRID_BASE * 2**level`` degrees wide)."""

    def __init__(self):
        self.levels: dict[int, dict] = {}      # level → {(i, j): _Cell}
        self.where: dict = {}                  # group → (level, cells)

    def __bool__(self) -> bool:
        return bool(self.where)

    @staticmethod
    def _level(box) -> int:
        size = max(box[2] - box[0], box[3] - box[1], 1e-9)
        return min(GRID_LEVELS, max(0, math.ceil(math.log2(size / GRID_BASE))))

    @staticmethod
    def _cells(level: int, box) -> list:
        s = GRID_BASE * 2 ** level
        i0, i1 = math.floor(box[0] / s), math.floor(box[2] / s)
        j0, j1 = math.floor(box[1] / s), math.floor(box[3] / s)
        return [(i, j) for i in range(i0, i1 + 1) for j in range(j0, j1 + 1)]

    def put(self, g: Group) -> None:
        lv = self._level(g.area.box)
        cells = self._cells(lv, g.area.box)
        level = self.levels.setdefault(lv, {})
        for c in cells:
            cell = level.get(c)
            if cell is None:
                cell = level[c] = _Cell()
            cell.add(g)
        self.where[g] = (lv, cells)

    def drop(self, g: Group) -> None:
        lv, cells = self.where.pop(g)
        level = self.levels[lv]
        for c in cells:
            cell = level[c]
            cell.discard(g)
            if not cell:
                del level[c]
        if not level:
            del self.levels[lv]

    def all(self) -> list:
        return list(self.where)

    def near(self, where: "_Where") -> list:
        """The groups an alert's hull may meet: all of them for an alert with no place."""
        if where.universe():
            return self.all()
        box = where.box()
        return self.query(box) if box is not None else []

    def query(self, box) -> list:
        """Groups whose area's box meets ``box``."""
        out: dict = {}
        for lv, level in self.levels.items():
            cells = self._cells(lv, box)
            found = level.values() if len(cells) > len(level) else (level[c] for c in cells if c in level)
            for cell in found:
                for g in cell.meeting(box):
                    out[g] = None
        return list(out)


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


def members(groups) -> set:
    """The subscriptions of matched groups."""
    out: set = set()
    for g in groups:
        out |= g.members
    return out


def naive_match(subs, alert: dict, env: dict, hull) -> set:
    """Every subscription tested on its own (``subs``: id → (phrase, filter, area))."""
    out = set()
    memo = []
    for sid, (ph, flt, area) in subs.items():
        if ph is not None and ph != alert.get("phrase"):
            continue
        if flt is not None and not flt.test(env):
            continue
        if area is not None:
            if not memo:
                memo.append(hull())
            if not area.test(memo[0]):
                continue
        out.add(sid)
    return out


def each_alone(groups: list, hull, failed: list) -> list:
    """Whether each of ``groups``' areas meets ``hull``, tested one by one (when testing them
    together failed): a group whose own test raises is False, its reason kept in its
    ``error`` and the group put in ``failed``."""
    oks = []
    for g in groups:
        try:
            oks.append(bool(g.area.test(hull)))
        except Exception as e:  # noqa: BLE001 - its own failure
            g.error = f"{type(e).__name__}: {e}"
            failed.append(g)
            oks.append(False)
    return oks

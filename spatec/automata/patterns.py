"""Primitive patterns (SPEC §3) compiled to tests on a stamp.

A pattern denotes a set of places or times. A stamp *possibly* matches when it
meets the set and *certainly* matches when it lies inside it; a plain pattern
means "possibly". Combinations are combinations of sets: ``not at P`` is the
complement of P, so it possibly matches a stamp that is not entirely inside P
(and ``certainly not at P`` a stamp that does not meet P). Within one domain
(space or time) the set algebra is exact; across domains the sets are
products (a place at every time, a time everywhere), so ``and`` / ``or`` of a
space and a time pattern combine their tests.

Each compiled pattern is a pair of functions ``(possibly, certainly)`` taking
``(lo, hi, loc)``.
"""
from __future__ import annotations

import datetime as dt
import functools
import zoneinfo

import shapely
from shapely import wkt as shp_wkt
from shapely.geometry import Polygon

from spatec.frontend import ast as A
from spatec.frontend.check import clock_seconds
from spatec.spatial import stamps as S

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
US = 1_000_000
DAY_US = 86_400 * US


# ------------------------------------------------------------------------------- space sets

class SpaceSet:
    """A region, or its complement (``neg``), in projected coordinates.

    ``atom`` keeps a single place as a Loc so its tests are exact (discs stay
    discs); combinations use a geometry with circles approximated to 1 cm.
    """

    def __init__(self, geom=None, neg=False, atom=None):
        self.geom, self.neg, self.atom = (_polygonal(geom) if geom is not None else None), neg, atom
        self._loc = None

    def _empty(self) -> bool:
        return self.atom is None and self.geom.is_empty

    def region_loc(self):
        """``geom`` as a stamp, made once: what it memoises (the containment
        polygon) is then computed once per pattern, not once per event."""
        if self._loc is None:
            self._loc = S.Loc.of(self.geom, 0.0)
        return self._loc

    def region_geom(self):
        if self.geom is None:
            self.geom = _fine_geom(self.atom)
        return self.geom

    def possibly(self, loc) -> bool:
        if loc is S.UNIVERSE:
            return self.neg or not self.region_geom().is_empty
        if self.atom is not None and not self.neg:
            return S.possibly_in(loc, self.atom)
        if self.atom is not None and self.neg:
            return not S.certainly_in(loc, self.atom)
        if self._empty():
            return self.neg  # the empty set meets nothing; its complement meets every stamp
        if self.neg:
            return not S.certainly_in(loc, self.region_loc())
        return S.possibly_in(loc, self.region_loc())

    def certainly(self, loc) -> bool:
        if loc is S.UNIVERSE:
            return False
        if self.atom is not None:
            return S.certainly_in(loc, self.atom) if not self.neg else not S.possibly_in(loc, self.atom)
        if self._empty():
            return self.neg  # every stamp lies inside the complement of the empty set
        if self.neg:
            return not S.possibly_in(loc, self.region_loc())
        return S.certainly_in(loc, self.region_loc())

    def complement(self) -> "SpaceSet":
        return SpaceSet(self.geom, not self.neg, self.atom)

    def combine(self, other: "SpaceSet", op: str) -> "SpaceSet":
        a, b = self.region_geom(), other.region_geom()
        an, bn = self.neg, other.neg
        if op == "and":
            if not an and not bn:
                return SpaceSet(a.intersection(b))
            if not an and bn:
                return SpaceSet(a.difference(b))
            if an and not bn:
                return SpaceSet(b.difference(a))
            return SpaceSet(a.union(b), neg=True)
        if not an and not bn:
            return SpaceSet(a.union(b))
        if not an and bn:
            return SpaceSet(b.difference(a), neg=True)
        if an and not bn:
            return SpaceSet(a.difference(b), neg=True)
        return SpaceSet(a.intersection(b), neg=True)


def _polygonal(g):
    """Only the areal part of a set operation's result (touching regions leave
    lines and points that have no area and cannot contain a stamp)."""
    if g.is_empty or g.geom_type in ("Polygon", "MultiPolygon"):
        return g
    parts = [p for p in shapely.get_parts(g) if p.geom_type in ("Polygon", "MultiPolygon")]
    if not parts:
        return Polygon()
    return shapely.union_all(parts)


def _fine_geom(loc):
    if loc.r == 0:
        return loc.geom
    import math

    # outer polygon of the disc with at most 1 cm error
    n = max(8, int(math.ceil(math.pi / math.acos(1.0 / (1.0 + 0.01 / loc.r)) / 4.0)))
    return loc.geom.buffer(loc.r, quad_segs=n)


# ------------------------------------------------------------------------------- time sets

class TimeSet:
    """A set of times given by ``intervals(a, b)``: its merged half-open pieces within [a, b)."""

    def __init__(self, fn, neg=False):
        self.fn, self.neg = fn, neg

    def pieces(self, lo: int, hi: int) -> list:
        a, b = lo - 2 * DAY_US, hi + 2 * DAY_US
        ivs = self.fn(a, b)
        if self.neg:
            ivs = _complement(ivs, a, b)
        return ivs

    def possibly(self, lo, hi) -> bool:
        return any(s <= hi and e > lo for s, e in self.pieces(lo, hi))

    def certainly(self, lo, hi) -> bool:
        return any(s <= lo and hi < e for s, e in self.pieces(lo, hi))

    def complement(self) -> "TimeSet":
        return TimeSet(self.fn, not self.neg)

    def combine(self, other: "TimeSet", op: str) -> "TimeSet":
        return TimeSet.combine_all([self, other], op)

    @staticmethod
    def combine_all(sets: list, op: str) -> "TimeSet":
        """The intersection (``and``) or union (``or``) of ``sets``, evaluated in one loop."""
        fs = [x._resolved() for x in sets]

        def fn(a, b):
            if op == "or":
                out = []
                for f in fs:
                    out += f(a, b)
                return _merge(out)
            acc = fs[0](a, b)
            for f in fs[1:]:
                acc = _intersect(acc, f(a, b))
            return acc
        return TimeSet(fn)

    def _resolved(self):
        if not self.neg:
            return self.fn
        f = self.fn
        return lambda a, b: _complement(f(a, b), a, b)


def _merge(ivs):
    out = []
    for s, e in sorted(ivs):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _complement(ivs, a, b):
    out, cur = [], a
    for s, e in _merge(ivs):
        if s > cur:
            out.append((cur, s))
        cur = max(cur, e)
    if cur < b:
        out.append((cur, b))
    return out


def _intersect(x, y):
    out = []
    for s1, e1 in x:
        for s2, e2 in y:
            s, e = max(s1, s2), min(e1, e2)
            if s < e:
                out.append((s, e))
    return _merge(out)


def _local_days(a: int, b: int, tz):
    d = dt.datetime.fromtimestamp(a / US, tz).date() - dt.timedelta(days=1)
    end = dt.datetime.fromtimestamp(b / US, tz).date() + dt.timedelta(days=1)
    while d <= end:
        yield d
        d += dt.timedelta(days=1)


@functools.lru_cache(maxsize=100_000)
def _local_us(d: dt.date, seconds: int, tzname: str) -> int:
    tz = zoneinfo.ZoneInfo(tzname)
    base = dt.datetime.combine(d, dt.time(0), tzinfo=tz) if seconds < 86400 else \
        dt.datetime.combine(d + dt.timedelta(days=1), dt.time(0), tzinfo=tz)
    s = seconds % 86400 if seconds < 86400 else 0
    local = dt.datetime.combine(base.date(), dt.time(s // 3600, s % 3600 // 60, s % 60), tzinfo=tz)
    return int(local.timestamp()) * US


def _day_set(pred, tzname):
    tz = zoneinfo.ZoneInfo(tzname)

    def fn(a, b):
        return _merge([(_local_us(d, 0, tzname), _local_us(d + dt.timedelta(days=1), 0, tzname))
                       for d in _local_days(a, b, tz) if pred(d)])
    return fn


def time_set(p, tzname: str) -> TimeSet:
    tz = zoneinfo.ZoneInfo(tzname)
    if isinstance(p, A.DayPattern):
        if p.name == "weekday":
            return TimeSet(_day_set(lambda d: d.weekday() < 5, tzname))
        if p.name == "weekend":
            return TimeSet(_day_set(lambda d: d.weekday() >= 5, tzname))
        k = DAYS.index(p.name)
        return TimeSet(_day_set(lambda d: d.weekday() == k, tzname))
    if isinstance(p, A.MonthPattern):
        m = MONTHS.index(p.name) + 1
        return TimeSet(_day_set(lambda d: d.month == m, tzname))
    if isinstance(p, A.DatePattern):
        d1, d2 = dt.date.fromisoformat(p.start), dt.date.fromisoformat(p.end)
        return TimeSet(_day_set(lambda d: d1 <= d <= d2, tzname))
    if isinstance(p, A.ClockPattern):
        s, e = clock_seconds(p.start), clock_seconds(p.end)

        def fn(a, b):
            out = []
            for d in _local_days(a, b, tz):
                if s < e:
                    out.append((_local_us(d, s, tzname), _local_us(d, e, tzname)))
                elif s > e:
                    out.append((_local_us(d, s, tzname), _local_us(d + dt.timedelta(days=1), e, tzname)))
                else:
                    out.append((_local_us(d, 0, tzname), _local_us(d + dt.timedelta(days=1), 0, tzname)))
            return _merge(out)
        return TimeSet(fn)
    raise TypeError(type(p).__name__)


# ------------------------------------------------------------------------------- compile

TIME_ATOMS = (A.DayPattern, A.MonthPattern, A.ClockPattern, A.DatePattern)
SPACE_ATOMS = (A.AtPlace, A.InShape, A.NearPlace)


def operands(p, op: str) -> list:
    """The operands of a chain of ``op`` (``and``/``or``) in pattern ``p``, left to right,
    without recursion (a 10,000-term chain is one n-ary operation)."""
    out, todo = [], [p]
    while todo:
        x = todo.pop()
        if isinstance(x, A.Binary) and x.op == op:
            todo += (x.right, x.left)
        else:
            out.append(x)
    return out


def domain(p) -> str | None:
    """"space" / "time" when every atom of ``p`` is of that domain (and no `certainly`)."""
    return A.trampoline(_domain(p))


def _domain(p):
    if isinstance(p, TIME_ATOMS):
        return "time"
    if isinstance(p, SPACE_ATOMS):
        return "space"
    if isinstance(p, A.Not):
        return (yield _domain(p.operand))
    if isinstance(p, A.Binary):
        got = None
        for i, x in enumerate(operands(p, p.op)):
            d = yield _domain(x)
            if d is None or (i and d != got):
                return None
            got = d
        return got
    return None


class PatternCompiler:
    """Compiles pattern ASTs for one program and one projection. ``sets``: the place sets
    (:class:`spatec.automata.places.PlaceSets`), each one pattern over a spatial index."""

    def __init__(self, places: dict, tz: str, projector, sets=None):
        self.places, self.tz, self.proj = places, tz, projector
        self.sets = sets if sets is not None else {}
        self._regions: dict = {}

    def region(self, name: str, widen: float = 0.0):
        key = (name, widen)
        if key not in self._regions:
            pd = self.places[name]
            if pd.kind == "circle":
                x, y = self.proj.forward(pd.lon, pd.lat)
                loc = S.Loc.disc(float(x), float(y), pd.radius + widen)
            else:
                g = shapely.transform(shp_wkt.loads(pd.wkt), lambda c: _fwd(self.proj, c))
                loc = S.Loc.of(g, pd.widen + widen)
            self._regions[key] = loc
        return self._regions[key]

    def shape_region(self, s):
        if isinstance(s, A.Circle):
            x, y = self.proj.forward(s.lon, s.lat)
            return S.Loc.disc(float(x), float(y), s.radius.metres())
        if isinstance(s, A.PointShape):
            x, y = self.proj.forward(s.lon, s.lat)
            return S.Loc.disc(float(x), float(y), s.widen.metres() if s.widen else 0.0)
        g = Polygon(s.coords)
        return S.Loc.of(shapely.transform(g, lambda c: _fwd(self.proj, c)), 0.0)

    def space_set(self, p) -> SpaceSet:
        return A.trampoline(self._space_set(p))

    def _space_set(self, p):
        if isinstance(p, A.AtPlace):
            if p.place in self.sets:
                return self.sets.space(p.place)
            return SpaceSet(atom=self.region(p.place))
        if isinstance(p, A.NearPlace):
            if p.place in self.sets:
                return self.sets.space(p.place, p.distance.metres())
            return SpaceSet(atom=self.region(p.place, p.distance.metres()))
        if isinstance(p, A.InShape):
            return SpaceSet(atom=self.shape_region(p.shape))
        if isinstance(p, A.Not):
            return (yield self._space_set(p.operand)).complement()
        sets = []
        for x in operands(p, p.op):
            sets.append((yield self._space_set(x)))
        if p.op == "or" and not any(x.neg for x in sets):
            # one union of every distinct region (a chain names few places many times)
            geoms = {id(x.atom) if x.atom is not None else id(x): x for x in sets}
            return SpaceSet(shapely.union_all([x.region_geom() for x in geoms.values()]))
        acc = sets[0]
        for x in sets[1:]:
            acc = acc.combine(x, p.op)
        return acc

    def time_set(self, p) -> TimeSet:
        return A.trampoline(self._time_set(p))

    def _time_set(self, p):
        if isinstance(p, A.Not):
            return (yield self._time_set(p.operand)).complement()
        if isinstance(p, A.Binary):
            sets = []
            for x in operands(p, p.op):
                sets.append((yield self._time_set(x)))
            return TimeSet.combine_all(sets, p.op)
        return time_set(p, self.tz)

    def compile(self, p):
        """(possibly, certainly) functions of (lo, hi, loc)."""
        return A.trampoline(self._compile(p))

    def _compile(self, p):
        d = domain(p)
        if d == "space":
            ss = self.space_set(p)
            return (lambda lo, hi, loc: ss.possibly(loc)), (lambda lo, hi, loc: ss.certainly(loc))
        if d == "time":
            ts = self.time_set(p)
            return (lambda lo, hi, loc: ts.possibly(lo, hi)), (lambda lo, hi, loc: ts.certainly(lo, hi))
        if isinstance(p, A.Certainly):
            q = p.pattern
            if isinstance(q, A.AtPlace) and q.place in self.sets:
                # `certainly at SET`: inside one of its places (not merely inside their union)
                ix = self.sets.index(q.place)
                return (lambda lo, hi, loc: ix.inside_one(loc)), (lambda lo, hi, loc: ix.inside_one(loc))
            _, cert = yield self._compile(q)
            return cert, cert
        if isinstance(p, A.Not):
            pos, cert = yield self._compile(p.operand)
            # complement of the set: meets it unless inside the original, and vice versa
            return (lambda lo, hi, loc: not cert(lo, hi, loc)), (lambda lo, hi, loc: not pos(lo, hi, loc))
        if isinstance(p, A.Binary):
            ps, cs = [], []
            for x in operands(p, p.op):
                f, c = yield self._compile(x)
                ps.append(f)
                cs.append(c)
            if len(ps) == 2:
                (lp, rp), (lc, rc) = ps, cs
                if p.op == "and":
                    return (lambda lo, hi, loc: lp(lo, hi, loc) and rp(lo, hi, loc)), \
                           (lambda lo, hi, loc: lc(lo, hi, loc) and rc(lo, hi, loc))
                return (lambda lo, hi, loc: lp(lo, hi, loc) or rp(lo, hi, loc)), \
                       (lambda lo, hi, loc: lc(lo, hi, loc) or rc(lo, hi, loc))
            if p.op == "and":      # n-ary: a chain is evaluated in one loop
                return (lambda lo, hi, loc: all(f(lo, hi, loc) for f in ps)), \
                       (lambda lo, hi, loc: all(f(lo, hi, loc) for f in cs))
            return (lambda lo, hi, loc: any(f(lo, hi, loc) for f in ps)), \
                   (lambda lo, hi, loc: any(f(lo, hi, loc) for f in cs))
        raise TypeError(type(p).__name__)

    def filter(self, patterns):
        """One test ``f(lo, hi, loc)`` that every pattern possibly matches (None if no patterns)."""
        fs = [self.compile(p)[0] for p in patterns]
        if not fs:
            return None
        if len(fs) == 1:
            return fs[0]
        return lambda lo, hi, loc: all(f(lo, hi, loc) for f in fs)


def _fwd(proj, coords):
    import numpy as np

    x, y = proj.forward(coords[:, 0], coords[:, 1])
    return np.column_stack([x, y])

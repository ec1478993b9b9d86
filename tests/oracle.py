"""A brute-force evaluator of SpaTeC phrases, written from SPEC §1–4 alone.

It shares no code with the planner or the automata: it reads the checked AST
(``spatec.frontend``) and uses the location-stamp geometry of
``spatec.spatial.stamps`` (tested on its own), and nothing else of spatec.
Matches are enumerated bottom-up over the match expression (every assignment
of distinct events to its leaves), then filtered by ``per``, ``within``,
``where`` and the absence conditions, each evaluated on the whole composite.

Events are given as :class:`OEv` records; :func:`oevents` builds them from the
same plain rows the tests turn into canonical frames.
"""
from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass, field

import shapely
from shapely import wkt as shp_wkt
from shapely.geometry import Polygon

from spatec.frontend import ast as A
from spatec.spatial import stamps as S

US = 1_000_000
FINE = 256  # quad segments of the polygons standing in for discs in multi-place patterns


@dataclass(frozen=True, eq=False)
class OEv:
    type: str
    id: str
    source: object
    t: int
    lo: int
    hi: int
    loc: object
    attrs: dict = field(default_factory=dict)

    def __repr__(self):
        return f"OEv({self.id})"


def oevents(program, rows, projector) -> list[OEv]:
    """Plain rows (dicts with type, id, source, t, lo, hi, place-kind, lon/lat or
    geom WKT, r, attrs) → oracle events."""
    out = []
    for r in rows:
        if r["place"] == "point":
            x, y = projector.forward(r["lon"], r["lat"])
            loc = S.Loc.disc(float(x), float(y), float(r["r"]))
        elif r["place"] == "geom":
            g = shp_wkt.loads(r["geom"])
            g = shapely.transform(g, lambda c: _fwd(projector, c))
            loc = S.Loc.of(g, float(r["r"]))
        else:
            loc = S.UNIVERSE
        out.append(OEv(r["type"], r["id"], r["source"], r["t"], r["lo"], r["hi"], loc, dict(r["attrs"])))
    return out


def _fwd(proj, c):
    import numpy as np

    x, y = proj.forward(c[:, 0], c[:, 1])
    return np.column_stack([x, y])


# ------------------------------------------------------------------------------ relations (§2)

def ev_before(a: OEv, b: OEv) -> bool:
    if a.source is not None and a.source == b.source:
        return a.t < b.t
    return a.hi < b.lo


def before(xs, ys) -> bool:
    return all(ev_before(a, b) for a in xs for b in ys)


def concurrent(xs, ys) -> bool:
    return not before(xs, ys) and not before(ys, xs)


def hull_loc(evs):
    evs = list(evs)
    return evs[0].loc if len(evs) == 1 else S.hull([e.loc for e in evs])


def overlap(xs, ys) -> bool:
    return S.overlap(hull_loc(xs), hull_loc(ys))


def relation(op: str, xs, ys) -> bool:
    if op == "and":
        return True
    t = op.rstrip("=<>")
    s = op[len(t):]
    if t == ";" and not before(xs, ys):
        return False
    if t == "||" and not concurrent(xs, ys):
        return False
    if s == "=":
        return overlap(xs, ys)
    if s == "<>":
        return not overlap(xs, ys)
    return True


# ------------------------------------------------------------------------------ patterns (§3)

TIME_ATOMS = (A.DayPattern, A.MonthPattern, A.ClockPattern, A.DatePattern)
SPACE_ATOMS = (A.AtPlace, A.InShape, A.NearPlace)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")


def _clock(s: str) -> int:
    p = [int(x) for x in s.split(":")]
    return p[0] * 3600 + p[1] * 60 + (p[2] if len(p) > 2 else 0)


class Patterns:
    """Possibly / certainly for a pattern AST, by enumerating the cells its atoms cut a stamp into.

    A pattern denotes a set of (time, place) points; time atoms cut time, space
    atoms cut space, the set is a boolean formula of atoms. A stamp (interval ×
    region) possibly matches when some point of it is in the set and certainly
    when every point is.
    """

    def __init__(self, program, projector):
        self.places = program.places
        self.tz = zoneinfo.ZoneInfo(program.timezone)
        self.proj = projector

    # regions -------------------------------------------------------------------------
    def place_loc(self, name: str, grow: float = 0.0):
        pd_ = self.places[name]
        if pd_.kind == "circle":
            x, y = self.proj.forward(pd_.lon, pd_.lat)
            return S.Loc.disc(float(x), float(y), pd_.radius + grow)
        g = shapely.transform(shp_wkt.loads(pd_.wkt), lambda c: _fwd(self.proj, c))
        return S.Loc.of(g, pd_.widen + grow)

    def region(self, p):
        if isinstance(p, A.AtPlace):
            return self.place_loc(p.place)
        if isinstance(p, A.NearPlace):
            return self.place_loc(p.place, p.distance.metres())
        s = p.shape
        if isinstance(s, A.Circle):
            x, y = self.proj.forward(s.lon, s.lat)
            return S.Loc.disc(float(x), float(y), s.radius.metres())
        if isinstance(s, A.PointShape):
            x, y = self.proj.forward(s.lon, s.lat)
            return S.Loc.disc(float(x), float(y), s.widen.metres() if s.widen else 0.0)
        g = shapely.transform(Polygon(s.coords), lambda c: _fwd(self.proj, c))
        return S.Loc.of(g, 0.0)

    @staticmethod
    def _poly(loc):
        return loc.geom if loc.r == 0 else loc.geom.buffer(loc.r, quad_segs=FINE)

    # time ----------------------------------------------------------------------------
    def _local(self, t: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(t / US, self.tz)

    def _at(self, d: dt.date, sec: int) -> int:
        d = d + dt.timedelta(days=sec // 86400)
        sec %= 86400
        x = dt.datetime(d.year, d.month, d.day, sec // 3600, sec % 3600 // 60, sec % 60, tzinfo=self.tz)
        return int(x.timestamp()) * US

    def time_in(self, p, t: int) -> bool:
        loc = self._local(t)
        if isinstance(p, A.DayPattern):
            wd = loc.weekday()
            if p.name == "weekday":
                return wd < 5
            if p.name == "weekend":
                return wd >= 5
            return wd == DAYS.index(p.name)
        if isinstance(p, A.MonthPattern):
            return loc.month == MONTHS.index(p.name) + 1
        if isinstance(p, A.DatePattern):
            return dt.date.fromisoformat(p.start) <= loc.date() <= dt.date.fromisoformat(p.end)
        s, e = _clock(p.start), _clock(p.end)
        sec = loc.hour * 3600 + loc.minute * 60 + loc.second + loc.microsecond / US
        if s < e:
            return s <= sec < e
        if s > e:
            return sec >= s or sec < e
        return True

    def time_bounds(self, p, lo: int, hi: int):
        d0 = self._local(lo).date() - dt.timedelta(days=1)
        d1 = self._local(hi).date() + dt.timedelta(days=1)
        secs = [0]
        if isinstance(p, A.ClockPattern):
            secs += [_clock(p.start), _clock(p.end)]
        d = d0
        while d <= d1:
            for s in secs:
                yield self._at(d, s)
            d += dt.timedelta(days=1)

    # cells ---------------------------------------------------------------------------
    def test(self, p, lo: int, hi: int, loc) -> tuple[bool, bool]:
        """(possibly, certainly) for pattern ``p`` and the stamp ([lo, hi], loc)."""
        tatoms, satoms, certs = [], [], []

        def collect(x):
            if isinstance(x, TIME_ATOMS):
                tatoms.append(x)
            elif isinstance(x, SPACE_ATOMS):
                satoms.append(x)
            elif isinstance(x, A.Certainly):
                certs.append(x)
            elif isinstance(x, A.Not):
                collect(x.operand)
            elif isinstance(x, A.Binary):
                collect(x.left)
                collect(x.right)
            else:
                raise TypeError(x)

        collect(p)
        cert_val = {id(c): self.test(c.pattern, lo, hi, loc)[1] for c in certs}
        # time cells: the value of each time atom is constant between boundaries
        points = {lo}
        for a in tatoms:
            points |= {b for b in self.time_bounds(a, lo, hi) if lo < b <= hi}
        tcells = {tuple(self.time_in(a, t) for a in tatoms) for t in points}
        # space cells: which combinations of space atoms some point of loc realises
        regions = [self.region(a) for a in satoms]
        scells = set()
        if len(regions) == 1:
            if loc is S.UNIVERSE:
                scells = {(True,), (False,)}
            else:
                if S.possibly_in(loc, regions[0]):
                    scells.add((True,))
                if not S.certainly_in(loc, regions[0]):
                    scells.add((False,))
        elif regions:
            import itertools

            polys = [self._poly(r) for r in regions]
            base = None if loc is S.UNIVERSE else self._poly(loc)
            for combo in itertools.product((True, False), repeat=len(regions)):
                g = base if base is not None else shapely.box(-1e8, -1e8, 1e8, 1e8)
                for inside, pg in zip(combo, polys):
                    g = g.intersection(pg) if inside else g.difference(pg)
                    if g.is_empty:
                        break
                if not g.is_empty:
                    scells.add(combo)
        else:
            scells = {()}

        def ev(x, tv, sv):
            if isinstance(x, TIME_ATOMS):
                return tv[_index(tatoms, x)]
            if isinstance(x, SPACE_ATOMS):
                return sv[_index(satoms, x)]
            if isinstance(x, A.Certainly):
                return cert_val[id(x)]
            if isinstance(x, A.Not):
                return not ev(x.operand, tv, sv)
            a, b = ev(x.left, tv, sv), ev(x.right, tv, sv)
            return (a and b) if x.op == "and" else (a or b)

        vals = [ev(p, tv, sv) for tv in tcells for sv in scells]
        return any(vals), all(vals)


def _index(seq, x):
    for i, y in enumerate(seq):
        if y is x:
            return i
    raise KeyError(x)


# ------------------------------------------------------------------------------ where (§4)

def split_and(e):
    if e is None:
        return []
    if isinstance(e, A.BoolOp) and e.op == "and":
        return split_and(e.left) + split_and(e.right)
    return [e]


def mentions(e, names) -> bool:
    for n in A.walk(e):
        if isinstance(n, A.Var) and n.name in names:
            return True
        if isinstance(n, A.Attr) and n.var in names:
            return True
    return False


class Where:
    """Three-valued evaluation: None is unknown; a condition holds only when True."""

    def __init__(self, program, all_events):
        self.tz = program.timezone
        self.by_src: dict = {}
        for e in all_events:
            if e.source is not None:
                self.by_src.setdefault((e.type, e.source), []).append(e.t)

    def holds(self, e, env) -> bool:
        return self.val(e, env) is True

    def val(self, e, env):
        if isinstance(e, A.Num):
            return e.value
        if isinstance(e, A.Quantity):
            v = e.base()
            return int(v) if e.dimension == "duration" else v
        if isinstance(e, (A.Str, A.BoolLit)):
            return e.value
        if isinstance(e, A.TimeLit):
            t = dt.datetime.fromisoformat(e.text.replace("Z", "+00:00"))
            if t.tzinfo is None:
                t = t.replace(tzinfo=zoneinfo.ZoneInfo(self.tz))
            return int(t.timestamp()) * US + t.microsecond
        if isinstance(e, A.Attr):
            ev = env.get(e.var)
            if ev is None:
                return None
            if e.name in ("t", "lo", "hi"):
                return getattr(ev, e.name)
            return ev.attrs.get(e.name)
        if isinstance(e, A.Var):
            return env.get(e.name)
        if isinstance(e, A.UnaryOp):
            v = self.val(e.operand, env)
            if v is None:
                return None
            return (not v) if e.op == "not" else -v
        if isinstance(e, A.BoolOp):
            a, b = self.val(e.left, env), self.val(e.right, env)
            if e.op == "and":
                if a is False or b is False:
                    return False
                return None if a is None or b is None else True
            if a is True or b is True:
                return True
            return None if a is None or b is None else False
        if isinstance(e, A.BinOp):
            a, b = self.val(e.left, env), self.val(e.right, env)
            if a is None or b is None:
                return None
            op = e.op
            if op == "==":
                return a == b
            if op == "!=":
                return a != b
            if op == "<":
                return a < b
            if op == "<=":
                return a <= b
            if op == ">":
                return a > b
            if op == ">=":
                return a >= b
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            return None if b == 0 else a / b
        if isinstance(e, A.Call):
            evs = [env.get(a.name) for a in e.args]
            if any(v is None for v in evs):
                return None
            f = e.func
            if f == "duration":
                return evs[1].hi - evs[0].lo
            if f == "distance":
                return S.distance(evs[0].loc, evs[1].loc)
            if f == "speed":
                import math
                gap = abs(evs[1].t - evs[0].t)
                if gap == 0:
                    return None
                (xa, ya), (xb, yb) = S.centroid(evs[0].loc), S.centroid(evs[1].loc)
                return math.hypot(xb - xa, yb - ya) / (gap / US)
            if f == "before":
                return ev_before(evs[0], evs[1])
            if f == "concurrent":
                return not ev_before(evs[0], evs[1]) and not ev_before(evs[1], evs[0])
            if f == "overlap":
                return S.overlap(evs[0].loc, evs[1].loc)
            if f == "disjoint":
                return not S.overlap(evs[0].loc, evs[1].loc)
            if f == "hull_area":
                return S.area(S.hull([v.loc for v in evs]))
            if f == "successive":
                return self.successive(evs)
        raise TypeError(f"cannot evaluate {e!r}")

    def successive(self, evs) -> bool:
        a0 = evs[0]
        if a0.source is None:
            return False
        ts = self.by_src.get((a0.type, a0.source), [])
        for a, b in zip(evs, evs[1:]):
            if b.type != a0.type or b.source != a0.source or not a.t < b.t:
                return False
            if any(a.t < t < b.t for t in ts):
                return False
        return True


# ------------------------------------------------------------------------------ matching (§3)

@dataclass(frozen=True)
class Check:
    """One absence to verify on the whole composite."""

    kind: str            # "between" | "after"
    a: tuple             # events of the part before `not`
    b: tuple             # events of the part after (between only)
    neg: object          # the negated match AST
    lspace: str
    rspace: str
    window: int | None


@dataclass(frozen=True)
class M:
    """A (partial) match: bound variables, every constituent, pending absence checks."""

    binds: tuple          # ((var, OEv), ...)
    evs: tuple            # every positive constituent
    checks: tuple = ()

    @property
    def lo(self):
        return min(e.lo for e in self.evs)

    @property
    def hi(self):
        return max(e.hi for e in self.evs)


def _space(op: str) -> str:
    return "=" if op.endswith("=") else "<>" if op.endswith("<>") else ""


class Oracle:
    def __init__(self, program, projector, events):
        self.program = program
        self.events = list(events)
        self.pat = Patterns(program, projector)
        self.where = Where(program, self.events)
        self.final_w = max((e.hi for e in self.events), default=0)

    # the match expression --------------------------------------------------------------
    def matches(self, m) -> list[M]:
        if A.is_pattern(m):
            return [M((), (e,)) for e in self.events if self.pat.test(m, e.lo, e.hi, e.loc)[0]]
        if isinstance(m, A.EventRef):
            return [M(((m.var, e),) if m.var else (), (e,)) for e in self.events if e.type == m.type]
        if isinstance(m, A.Binary):
            if m.op == "and" and A.is_pattern(m.right):
                return [x for x in self.matches(m.left) if self.pat.test(m.right, x.lo, x.hi, hull_loc(x.evs))[0]]
            if m.op == "and" and A.is_pattern(m.left):
                return [x for x in self.matches(m.right) if self.pat.test(m.left, x.lo, x.hi, hull_loc(x.evs))[0]]
            if m.op == "or":
                return self.matches(m.left) + self.matches(m.right)
            if isinstance(m.right, A.Not) and not A.is_pattern(m.right.operand):
                # A ; not X within D
                return [M(x.binds, x.evs, x.checks + (Check("after", x.evs, (), m.right.operand, _space(m.op), "",
                                                             m.right.within.micros()),))
                        for x in self.matches(m.left)]
            if isinstance(m.left, A.Binary) and isinstance(m.left.right, A.Not) \
                    and not A.is_pattern(m.left.right.operand):
                # A ; not X ; B: A ; B plus the absence
                out = []
                for x, y in self._pairs(m.left.left, m.right):
                    if before(x.evs, y.evs):
                        out.append(M(x.binds + y.binds, x.evs + y.evs, x.checks + y.checks + (
                            Check("between", x.evs, y.evs, m.left.right.operand, _space(m.left.op),
                                  _space(m.op), None),)))
                return out
            return [M(x.binds + y.binds, x.evs + y.evs, x.checks + y.checks)
                    for x, y in self._pairs(m.left, m.right) if relation(m.op, x.evs, y.evs)]
        raise TypeError(f"not a match expression: {m!r}")

    def _pairs(self, l, r):
        ls, rs = self.matches(l), self.matches(r)
        for x in ls:
            xs = set(map(id, x.evs))
            for y in rs:
                if any(id(e) in xs for e in y.evs):
                    continue  # distinct events
                yield x, y

    # the negated part ----------------------------------------------------------------
    def negated(self, n):
        """(event, variable or None) for every event the negated expression matches."""
        if A.is_pattern(n):
            return [(e, None) for e in self.events if self.pat.test(n, e.lo, e.hi, e.loc)[0]]
        if isinstance(n, A.EventRef):
            return [(e, n.var) for e in self.events if e.type == n.type]
        if isinstance(n, A.Binary) and n.op == "or":
            return self.negated(n.left) + self.negated(n.right)
        if isinstance(n, A.Binary) and n.op == "and":
            e_, p = (n.left, n.right) if A.is_pattern(n.right) else (n.right, n.left)
            return [(e, v) for e, v in self.negated(e_) if self.pat.test(p, e.lo, e.hi, e.loc)[0]]
        raise TypeError(f"cannot negate {n!r}")

    # phrases -------------------------------------------------------------------------
    def phrase(self, name: str) -> list[tuple]:
        """Sorted (id, lo, hi, ((var, event id), ...), (constituent ids)) of every composite."""
        from spatec.automata.machine import composite_id

        info = self.program.phrase(name)
        p = info.phrase
        negvars = set(info.negated)
        conj = split_and(p.where)
        pos_conj = [c for c in conj if not mentions(c, negvars)]
        within = p.within.micros() if p.within else None
        seen = {}
        for x in self.matches(p.match):
            ids = [e.id for e in x.evs]
            if len(set(map(id, x.evs))) != len(x.evs):
                continue
            if within is not None and x.hi - x.lo > within:
                continue
            if p.per and not self._per(p.per, x.evs):
                continue
            env = dict(x.binds)
            if not all(self.where.holds(c, env) for c in pos_conj):
                continue
            if not all(self._absent(c, x, env, conj, negvars, p.per) for c in x.checks):
                continue
            binds = tuple(sorted((v, e.id) for v, e in x.binds))
            key = (binds, tuple(sorted(ids)))
            if key in seen:
                continue  # `or`: the same composite found by both branches
            seen[key] = (composite_id(name, list(binds)), x.lo, x.hi, binds, tuple(sorted(ids)))
        return sorted(seen.values())

    def _per(self, key, evs) -> bool:
        vals = [e.attrs.get(key) for e in evs if key in e.attrs]
        if any(v is None for v in vals):
            return False
        return len(set(vals)) <= 1

    def _absent(self, c: Check, x: M, env, conj, negvars, per) -> bool:
        a_hi = max(e.hi for e in c.a)
        if c.kind == "after" and not a_hi + c.window <= self.final_w:
            return False  # the window reaches past the data: not decided, not reported
        nvars = {n.var for n in A.walk(c.neg) if isinstance(n, A.EventRef) and n.var}
        xconj = [k for k in conj if nvars and mentions(k, nvars)]
        members = set(map(id, x.evs))
        for e, var in self.negated(c.neg):
            if id(e) in members:
                continue
            if not before(c.a, (e,)):
                continue
            if c.kind == "between":
                if not before((e,), c.b):
                    continue
            elif e.hi > a_hi + c.window:
                continue
            if c.lspace and S.overlap(hull_loc(c.a), e.loc) != (c.lspace == "="):
                continue
            if c.rspace and S.overlap(e.loc, hull_loc(c.b)) != (c.rspace == "="):
                continue
            if per and per in e.attrs and not self._per(per, x.evs + (e,)):
                continue  # per KEY: the negated event shares the key too
            xenv = dict(env)
            if var:
                xenv[var] = e
            if not all(self.where.holds(k, xenv) for k in xconj):
                continue
            return False  # such an X occurred: the absence fails
        return True

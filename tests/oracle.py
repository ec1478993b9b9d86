"""A brute-force evaluator of SpaTeC phrases, written from SPEC §1–4 and §7–9 alone.

It shares no code with the planner or the automata: it reads the checked AST
(``spatec.frontend``) and uses the location-stamp geometry of
``spatec.spatial.stamps`` (tested on its own), and nothing else of spatec.
Matches are enumerated bottom-up over the match expression (every assignment
of distinct events to its leaves), then filtered by ``per``, ``within``,
``where`` and the absence conditions, each evaluated on the whole composite.

- Runs (§7): each source's events of the run's type, in local-time order,
  are cut greedily into runs exactly as §7 words it; only complete runs
  match. A run is one composite whose constituents are all its events.
- Phrases as event types (§8): a phrase's composites become events of the
  type named after it (attributes: its emit values; no source; stamps: the
  composite's; id: the composite's id; local time ``t``: ``hi``), computed
  when a consumer first needs them. A phrase that reads such events decides
  by the least watermark of the streams it reads; at the end of the input a
  derived stream's watermark is its producer's frontier: the least ``lo`` of
  a composite the producer leaves undecided (one that satisfies everything
  but an absence whose decision has not come, or a run not complete), and at
  most the producer's own watermark (REFERENCE, "A phrase's composites as
  events"). Such a phrase decides its absences as that watermark says, at
  the end too: after, once it has passed the window's end; between, once it
  has reached ``B.hi`` (plus the slack of ``time ts ± d`` types).
- Place sets (§9): ``at SET`` is the union of the set's places as a pattern
  set, ``certainly at SET`` lies inside one of them, ``at SET -> S`` gives
  one match per place the pattern holds for (S is then one place).

Events are given as :class:`OEv` records; :func:`oevents` builds them from the
same plain rows the tests turn into canonical frames.
"""
from __future__ import annotations

import datetime as dt
import math
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


@dataclass(frozen=True, eq=False)
class ORun:
    """A complete run (SPEC §7): a composite of one source's successive events."""

    events: tuple

    @property
    def first(self):
        return self.events[0]

    @property
    def last(self):
        return self.events[-1]

    @property
    def id(self):
        return self.first.id  # a run is identified by its first event (runs are disjoint)

    @property
    def lo(self):
        return min(e.lo for e in self.events)

    @property
    def hi(self):
        return max(e.hi for e in self.events)

    @property
    def loc(self):
        return hull_loc(self.events)

    def __repr__(self):
        return f"ORun({self.first.id} .. {self.last.id}, {len(self.events)})"


@dataclass(frozen=True, eq=False)
class OGrowing:
    """A run while it grows, as its `while` condition sees it."""

    first: object
    prev: object
    this: object


@dataclass(frozen=True, eq=False)
class OPlace:
    """A bound place: its id (``SET:N``), its attributes, its region."""

    id: str
    attrs: dict
    loc: object


def constituents(x) -> tuple:
    """The primitive-or-derived events a bound value stands for (a run: all of its events)."""
    if isinstance(x, ORun):
        return x.events
    return (x,)


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
        self.sets = getattr(program, "place_sets", {})
        self.tz = zoneinfo.ZoneInfo(program.timezone)
        self.proj = projector
        self._locs: dict = {}       # (place, grow) → its region, projected once
        self._bindings: dict = {}   # pattern → its bindings, listed once

    # place sets ----------------------------------------------------------------------
    @staticmethod
    def member(set_name: str, i: int) -> str:
        """The name standing for the i-th place of a set in expanded patterns."""
        return f"\x00{set_name}\x00{i}"

    def members(self, name: str) -> list[str]:
        """The single places a place name stands for: itself, or every place of a set."""
        if name in self.sets:
            return [self.member(name, i) for i in range(len(self.sets[name].places))]
        return [name]

    def expand(self, p):
        """The pattern with every set written out: ``at SET`` as the union ``at p1 or at p2 ...``,
        ``certainly at SET`` as ``certainly at p1 or certainly at p2 ...`` (inside one place)."""
        def union(atoms):
            out = atoms[0]
            for a in atoms[1:]:
                out = A.Binary("or", out, a)
            return out

        if isinstance(p, A.AtPlace) and p.place in self.sets:
            return union([A.AtPlace(n) for n in self.members(p.place)])
        if isinstance(p, A.NearPlace) and p.place in self.sets:
            return union([A.NearPlace(p.distance, n) for n in self.members(p.place)])
        if isinstance(p, A.Certainly):
            if isinstance(p.pattern, A.AtPlace) and p.pattern.place in self.sets:
                return union([A.Certainly(A.AtPlace(n)) for n in self.members(p.pattern.place)])
            return A.Certainly(self.expand(p.pattern))
        if isinstance(p, A.Not):
            return A.Not(self.expand(p.operand))
        if isinstance(p, A.Binary):
            return A.Binary(p.op, self.expand(p.left), self.expand(p.right))
        return p

    def bindings(self, p) -> list:
        """[(((var, OPlace), ...), pattern with those places substituted, ((atom, member, certainly), ...)
        of its ``at nearest`` atoms)] for a pattern that may bind places."""
        got = self._bindings.get(p)
        if got is None:
            got = self._bindings[p] = self._list_bindings(p)
        return got

    def _list_bindings(self, p) -> list:
        bound = [x for x in A.walk(p) if isinstance(x, A.AtPlace) and x.var is not None]
        if not bound:
            return [((), p, ())]
        import itertools

        choices = [[(b, n) for n in self.members(b.place)] for b in bound]
        certain = {id(x.pattern): True for x in A.walk(p) if isinstance(x, A.Certainly)}
        certain = {id(b): certain.get(id(b), False) for b in bound}
        out = []
        for combo in itertools.product(*choices):
            chosen = {id(b): n for b, n in combo}

            def sub(x):
                if isinstance(x, A.AtPlace) and id(x) in chosen:
                    return A.AtPlace(chosen[id(x)])
                if isinstance(x, A.Certainly):
                    return A.Certainly(sub(x.pattern))
                if isinstance(x, A.Not):
                    return A.Not(sub(x.operand))
                if isinstance(x, A.Binary):
                    return A.Binary(x.op, sub(x.left), sub(x.right))
                return x

            out.append((tuple((b.var, self.oplace(n, b.place)) for b, n in combo), sub(p),
                        tuple((b, n, certain[id(b)]) for b, n in combo if b.nearest)))
        return out

    def nearest(self, b, certain: bool, lo: int, hi: int, loc):
        """The member of ``at nearest SET -> S`` (``b``; ``certain``: under ``certainly``) for
        the stamp: of the places its atom alone (``at`` or ``certainly at``) holds for, the one
        whose centre is nearest the stamp's centre, the first of equals (SPEC §9); None if it
        holds for none."""
        best = None
        centre = S.centroid(loc)
        for n in self.members(b.place):
            atom = A.Certainly(A.AtPlace(n)) if certain else A.AtPlace(n)
            if not self.test(atom, lo, hi, loc)[0]:
                continue
            cx, cy = S.centroid(self.place_loc(n))
            d = math.hypot(cx - centre[0], cy - centre[1])
            if best is None or d < best[0]:       # (an unlocated stamp: NaN, the first)
                best = (d, n)
        return None if best is None else best[1]

    def oplace(self, name: str, written: str) -> "OPlace":
        if name.startswith("\x00"):
            _, set_name, i = name.split("\x00")
            s = self.sets[set_name]
            return OPlace(s.place_id(int(i)), dict(s.values[int(i)]), self.place_loc(name))
        return OPlace(written, {"name": written}, self.place_loc(name))

    # regions -------------------------------------------------------------------------
    def place_loc(self, name: str, grow: float = 0.0):
        got = self._locs.get((name, grow))
        if got is None:
            got = self._locs[(name, grow)] = self._place_loc(name, grow)
        return got

    def _place_loc(self, name: str, grow: float):
        if name.startswith("\x00"):
            _, set_name, i = name.split("\x00")
            pd_ = self.sets[set_name].places[int(i)]
        else:
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
        p = self.expand(p)
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

    def add(self, events) -> None:
        """Events known later (a phrase's composites) for ``successive``'s sources."""
        for e in events:
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
            if isinstance(ev, OPlace):
                return ev.attrs.get(e.name)
            if isinstance(ev, (ORun, OGrowing)):
                if e.member is not None:
                    ev = getattr(ev, e.member)
                elif e.name in ("first", "prev", "this", "last"):
                    return getattr(ev, e.name)   # a member event, as a function's argument
                elif e.name in ("lo", "hi") and isinstance(ev, ORun):
                    return getattr(ev, e.name)   # the run composite's stamp
                else:
                    ev = ev.first                # R.ATTR is R.first.ATTR
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
            f = e.func
            if f == "count":
                run = env.get(e.args[0].name)
                return None if run is None else len(run.events)
            if f in ("min", "max", "avg"):
                run = env.get(e.args[0].var)
                if run is None:
                    return None
                vals = [x.attrs.get(e.args[0].name) for x in run.events]
                vals = [v for v in vals if v is not None]   # missing values are left out (SQL)
                if not vals:
                    return None
                return min(vals) if f == "min" else max(vals) if f == "max" else sum(vals) / len(vals)
            evs = [self.val(a, env) for a in e.args]
            if any(v is None for v in evs):
                return None
            if f == "duration":
                return evs[-1].hi - evs[0].lo   # duration(A) is A.hi - A.lo
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
                return before(constituents(evs[0]), constituents(evs[1]))
            if f == "concurrent":
                return concurrent(constituents(evs[0]), constituents(evs[1]))
            if f == "overlap":
                return S.overlap(evs[0].loc, evs[1].loc)
            if f == "disjoint":
                return not S.overlap(evs[0].loc, evs[1].loc)
            if f == "hull_area":
                return S.area(S.hull([x.loc for v in evs for x in constituents(v)]))
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


def _source(attrs: dict, fields) -> object:
    """A derived event's source: the text of its one field's value, a tuple of the texts of
    several; None (no source) without fields or with a value missing."""
    if not fields:
        return None
    texts = []
    for f in fields:
        v = attrs.get(f)
        if v is None:
            return None
        if isinstance(v, float) and v == int(v):
            v = int(v)
        texts.append(str(v))
    return texts[0] if len(texts) == 1 else tuple(texts)


def _known(v):
    """A value, or None for a number that is not one (NaN): missing, as the runners keep it."""
    return None if isinstance(v, float) and v != v else v


class Oracle:
    def __init__(self, program, projector, events):
        self.program = program
        self.events = list(events)          # the primitive events
        self.pat = Patterns(program, projector)
        self.where = Where(program, self.events)
        self.final_w = max((e.hi for e in self.events), default=0)
        self._derived: dict = {}
        self._composites: dict = {}     # phrase → its composites
        self._frontier: dict = {}       # phrase → its frontier at the end
        self._w = self.final_w          # the watermark of the phrase being evaluated
        self._open: list = []           # lo of the runs it leaves open
        # the slack of same-source order: the largest hi - t of a declared type (`time ts ± d`)
        self.slack = max([d.time.widen.micros() if d.time is not None and d.time.high is None
                          and d.time.widen is not None else 0 for d in program.events.values()], default=0)

    # events by type: declared types from the input, phrases from their composites (§8) -------
    def is_derived(self, type_name: str) -> bool:
        t = getattr(self.program, "event_types", {}).get(type_name)
        return t is not None and t.derived

    def events_of(self, type_name: str) -> list:
        if self.is_derived(type_name):
            return self.derived(type_name)
        return [e for e in self.events if e.type == type_name]

    def derived(self, name: str) -> list[OEv]:
        """The composites of phrase ``name`` as events: its emit values as attributes; no source
        and the composite's stamp, or with ``as event source F time G [.. H]`` the source F's
        values (as text: an input event's source is text) and the stamp [G, H] (``t`` = H)."""
        if name not in self._derived:
            info = self.program.phrase(name)
            ae = info.phrase.as_event
            out = []
            for x, binds, cid in self.composites(name):
                env = dict(x.binds)
                attrs = {f.name: _known(self.where.val(f.expr, env)) for f in info.phrase.emit}
                if ae is None:
                    out.append(OEv(name, cid, None, x.hi, x.lo, x.hi, hull_loc(x.evs), attrs))
                    continue
                lo = attrs[ae.time.low.attr]
                hi = attrs[ae.time.high.attr] if ae.time.high is not None else lo
                src = _source(attrs, ae.source.attrs if ae.source is not None else ())
                out.append(OEv(name, cid, src, hi, lo, hi, hull_loc(x.evs), attrs))
            self._derived[name] = out
            self.where.add(out)
        return self._derived[name]

    # runs (§7) -----------------------------------------------------------------------
    def runs(self, r: A.Run) -> list[ORun]:
        """The complete runs of ``run T -> R ...``, cut per source as SPEC §7 says."""
        gap = r.gap.micros() if r.gap is not None else None
        by_source: dict = {}
        for e in self.events:
            if e.type == r.type and e.source is not None:
                by_source.setdefault(e.source, []).append(e)
        out = []
        for src in sorted(by_source, key=str):
            cur: list = []
            for e in sorted(by_source[src], key=lambda x: x.t):
                passes = r.filter is None or self.pat.test(r.filter, e.lo, e.hi, e.loc)[0]
                if cur:
                    joins = passes and (gap is None or e.hi <= cur[-1].hi + gap) and (
                        r.cond is None or self.where.holds(r.cond, {r.var: OGrowing(cur[0], cur[-1], e)}))
                    if joins:
                        cur.append(e)
                        continue
                    out.append(ORun(tuple(cur)))  # the next event did not join: complete
                    cur = []
                if passes:
                    cur = [e]
            if cur and gap is not None and self._w > cur[-1].hi + gap:
                out.append(ORun(tuple(cur)))      # silent for longer than the gap: complete
            elif cur:
                # not complete, like an absence whose window reaches past the data
                self._open.append(min(e.lo for e in cur))
        return out

    # the watermark each phrase decides by, at the end (§8) -------------------------------
    def watermark(self, name: str) -> int:
        """The input's final watermark, at most the frontier of each phrase ``name`` reads."""
        w = self.final_w
        for q in self.program.phrase(name).inputs:
            w = min(w, self.frontier(q))
        return w

    def frontier(self, name: str) -> int:
        """The least lo of a composite phrase ``name`` leaves undecided, at most its watermark."""
        if name not in self._frontier:
            self.composites(name)
        return self._frontier[name]

    def _decided(self, c: "Check", w: int, reads_derived: bool) -> bool:
        """Whether the watermark ``w`` decides absence ``c`` at the end of the input."""
        if c.kind == "after":
            end = max(e.hi for e in c.a) + c.window
            return w > end if reads_derived else end <= w
        return not reads_derived or w >= max(e.hi for e in c.b) + self.slack

    # the match expression --------------------------------------------------------------
    def _with_pattern(self, xs, p) -> list[M]:
        """Matches ``xs`` restricted by pattern ``p`` (``E and P``), one per place ``p`` binds
        (``at nearest SET -> S``: only the nearest of the set's places)."""
        out = []
        for x in xs:
            loc = hull_loc(x.evs)
            near: dict = {}
            for places, q, nearest in self.pat.bindings(p):
                for b, _n, certain in nearest:
                    if id(b) not in near:
                        near[id(b)] = self.pat.nearest(b, certain, x.lo, x.hi, loc)
                if any(near[id(b)] != n for b, n, _c in nearest):
                    continue
                if self.pat.test(q, x.lo, x.hi, loc)[0]:
                    out.append(M(x.binds + places, x.evs, x.checks))
        return out

    def matches(self, m) -> list[M]:
        if A.is_pattern(m):  # any primitive event (a phrase's composites are matched by name only)
            return self._with_pattern([M((), (e,)) for e in self.events], m)
        if isinstance(m, A.EventRef):
            return [M(((m.var, e),) if m.var else (), (e,)) for e in self.events_of(m.type)]
        if isinstance(m, A.Run):
            return [M(((m.var, run),), run.events) for run in self.runs(m)]
        if isinstance(m, A.Binary):
            if m.op == "and" and A.is_pattern(m.right):
                return self._with_pattern(self.matches(m.left), m.right)
            if m.op == "and" and A.is_pattern(m.left):
                return self._with_pattern(self.matches(m.right), m.left)
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
            return [(e, n.var) for e in self.events_of(n.type)]
        if isinstance(n, A.Binary) and n.op == "or":
            return self.negated(n.left) + self.negated(n.right)
        if isinstance(n, A.Binary) and n.op == "and":
            e_, p = (n.left, n.right) if A.is_pattern(n.right) else (n.right, n.left)
            return [(e, v) for e, v in self.negated(e_) if self.pat.test(p, e.lo, e.hi, e.loc)[0]]
        raise TypeError(f"cannot negate {n!r}")

    # phrases -------------------------------------------------------------------------
    def composites(self, name: str) -> list[tuple]:
        """(match, sorted (var, id) pairs, composite id) of every composite of the phrase, by id."""
        if name in self._composites:
            return self._composites[name]
        from spatec.automata.machine import composite_id

        info = self.program.phrase(name)
        p = info.phrase
        negvars = set(info.negated)
        conj = split_and(p.where)
        pos_conj = [c for c in conj if not mentions(c, negvars)]
        within = p.within.micros() if p.within else None
        w = self.watermark(name)            # (the producers' frontiers first)
        reads_derived = bool(info.inputs)
        for q in info.inputs:
            self.derived(q)
        saved = self._w, self._open
        self._w, self._open = w, []
        try:
            found = self.matches(p.match)
            opened = self._open
        finally:
            self._w, self._open = saved
        undecided = list(opened)
        seen = {}
        for x in found:
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
            if not all(self._decided(c, w, reads_derived) for c in x.checks) \
                    or not self._successive_decided(pos_conj, env, w):
                undecided.append(x.lo)      # not reported; it holds back the phrase's frontier
                continue
            if not all(self._absent(c, x, env, conj, negvars, p.per) for c in x.checks):
                continue
            binds = tuple(sorted((v, e.id) for v, e in x.binds))
            key = (binds, tuple(sorted(ids)))
            if key in seen:
                continue  # `or`: the same composite found by both branches
            seen[key] = (x, binds, composite_id(name, list(binds)))
        out = self._composites[name] = sorted(seen.values(), key=lambda c: (c[2], c[0].lo))
        self._frontier[name] = min([w] + undecided)
        return out

    def phrase(self, name: str) -> list[tuple]:
        """Sorted (id, lo, hi, ((var, id), ...), (constituent ids)) of every composite: a bound
        event by its id, a run by its first event's id, a bound place by ``SET:N``."""
        return sorted((cid, x.lo, x.hi, binds, tuple(sorted(e.id for e in x.evs)))
                      for x, binds, cid in self.composites(name))

    def _successive_decided(self, conj, env, w: int) -> bool:
        """``successive`` over a phrase's composites (SPEC §8) says that none came between;
        at the end of the input the producer may still decide one whose time is at least its
        frontier: decided once the watermark ``w`` has reached the last one's time."""
        for c in conj:
            for n in A.walk(c):
                if not (isinstance(n, A.Call) and n.func == "successive"):
                    continue
                evs = [e for e in (self.where.val(a, env) for a in n.args) if isinstance(e, OEv)]
                if any(self.is_derived(e.type) for e in evs) and w < max(e.t for e in evs):
                    return False
        return True

    def _per(self, key, evs) -> bool:
        vals = [e.attrs.get(key) for e in evs if key in e.attrs]
        if any(v is None for v in vals):
            return False
        return len(set(vals)) <= 1

    def _absent(self, c: Check, x: M, env, conj, negvars, per) -> bool:
        a_hi = max(e.hi for e in c.a)
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

"""The checker: names, types, units, bindings and boundedness.

It collects every problem of a program and raises one :class:`CheckError`
with all of them, each positioned ``file:line:col`` with its source line.
On success it returns a :class:`Program`: the declarations resolved and, for
each phrase, the types of its variables and expressions and its output schema.
"""
from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path

from spatec.errors import CheckError, Span
from spatec.frontend import ast as A
from spatec.frontend.load import Loaded, PlaceDef, load_program
from spatec.frontend.printer import print_quantity

ATTR_TYPES = ("str", "int", "float", "bool", "time", "geometry")
STAMP_ATTRS = {"t": "time", "lo": "time", "hi": "time"}
STANDARD_FIELDS = ("phrase", "id", "lo", "hi", "hull", "events")
NUMERIC = ("int", "float", "number")
# dimensioned value types and how they print in messages
DIMENSIONS = ("duration", "distance", "speed", "area")
TYPE_WORDS = {"int": "a number", "float": "a number", "number": "a number", "str": "a string",
              "bool": "a truth value", "time": "a time", "duration": "a duration",
              "distance": "a distance", "speed": "a speed", "area": "an area",
              "geometry": "a geometry", "event": "an event"}

# name → (argument count or (min, None), result type)
FUNCTIONS = {
    "duration": (2, "duration"), "distance": (2, "distance"), "speed": (2, "speed"),
    "before": (2, "bool"), "concurrent": (2, "bool"), "overlap": (2, "bool"), "disjoint": (2, "bool"),
    "hull_area": ((1, None), "area"), "successive": ((2, None), "bool"),
}


@dataclass
class PhraseInfo:
    """A checked phrase: its AST and what the checker learned about it."""

    phrase: A.Phrase
    vars: dict            # variable → event type, for variables bound in the positive match
    negated: dict         # variable → event type, for variables bound inside `not`
    types: dict           # expression node → type word
    schema: list          # [(field, type word)] of the emit fields
    span_bound: int | None  # largest possible time-stamp length of a match (µs), None if unbounded

    @property
    def name(self) -> str:
        return self.phrase.name


@dataclass
class Program:
    """A checked program: declarations resolved, phrases typed."""

    root: str
    timezone: str
    crs: str | None
    events: dict
    places: dict
    phrases: list
    texts: dict = field(default_factory=dict, repr=False)

    def phrase(self, name: str) -> PhraseInfo:
        for p in self.phrases:
            if p.name == name:
                return p
        raise KeyError(name)


def check_file(path: str | Path, text: str | None = None) -> Program:
    """Load, parse and check a program; raise :class:`CheckError` listing every problem."""
    loaded = load_program(path, text)
    return check_loaded(loaded)


def check_loaded(loaded: Loaded) -> Program:
    c = _Checker(loaded)
    program = c.run()
    if loaded.diagnostics:
        diags = sorted(loaded.diagnostics, key=lambda d: (d.span.file != loaded.root, d.span.file,
                                                          d.span.line, d.span.col))
        raise CheckError(diags)
    return program


# ------------------------------------------------------------------------------------------


class _Checker:
    def __init__(self, loaded: Loaded):
        self.L = loaded
        self.events: dict[str, A.EventDecl] = {}
        self.places: dict[str, PlaceDef] = dict(loaded.places)
        self.timezone = "UTC"
        self.crs = None
        self.bad_events: set[str] = set()  # declared with errors: their stamps cannot be measured

    def err(self, span: Span, msg: str, hint: str | None = None) -> None:
        self.L.diag(span, msg, hint)

    # ---------------------------------------------------------------- declarations
    def run(self) -> Program:
        tz_decl = None
        phrases: list[A.Phrase] = []
        for d in self.L.decls:
            if isinstance(d, A.Timezone):
                if tz_decl is not None and d.name != self.timezone:
                    self.err(d.span, f"second timezone \"{d.name}\" (already \"{self.timezone}\")")
                    continue
                try:
                    zoneinfo.ZoneInfo(d.name)
                except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "Europe" is a folder
                    self.err(d.span, f"unknown time zone \"{d.name}\"", "use an IANA name such as \"Europe/London\"")
                    continue
                tz_decl, self.timezone = d, d.name
            elif isinstance(d, A.CrsDecl):
                self._check_crs(d)
            elif isinstance(d, A.EventDecl):
                if d.name in self.events:
                    self.err(d.span, f"event type {d.name} is declared twice",
                             f"first declared at {self.events[d.name].span}")
                    continue
                before = len(self.L.diagnostics)
                self._check_event(d)
                self.events[d.name] = d
                if len(self.L.diagnostics) > before:
                    self.bad_events.add(d.name)
            elif isinstance(d, A.PlaceDecl):
                if d.name in self.places:
                    self.err(d.span, f"place {d.name} is declared twice",
                             f"first declared at {self.places[d.name].span}")
                    continue
                pd = self._place_def(d)
                if pd is not None:
                    self.places[d.name] = pd
            elif isinstance(d, A.Phrase):
                phrases.append(d)
        infos = []
        seen: dict[str, A.Phrase] = {}
        for p in phrases:
            if p.name in seen:
                self.err(p.span, f"phrase {p.name} is defined twice", f"first defined at {seen[p.name].span}")
                continue
            seen[p.name] = p
            info = _PhraseChecker(self, p).run()
            if info is not None:
                infos.append(info)
        return Program(self.L.root, self.timezone, self.crs, self.events, self.places, infos, self.L.texts)

    def _check_crs(self, d: A.CrsDecl) -> None:
        try:
            import pyproj

            crs = pyproj.CRS.from_user_input(d.name)
            units = sorted({axis.unit_name for axis in crs.axis_info})
            if not crs.is_projected or units != ["metre"]:
                why = "is not a projected (metric) CRS" if not crs.is_projected else \
                    f"measures in {', '.join(units)}, not metres"
                self.err(d.span, f"crs \"{d.name}\" {why}",
                         "use a projected CRS such as \"EPSG:27700\" or a UTM zone \"EPSG:32631\"")
                return
        except Exception:  # noqa: BLE001 - pyproj raises several kinds
            self.err(d.span, f"unknown crs \"{d.name}\"", "use an EPSG code such as \"EPSG:32631\"")
            return
        self.crs = d.name

    def _check_event(self, d: A.EventDecl) -> None:
        attrs: dict[str, str] = {}
        for a in d.attrs:
            if a.name in attrs:
                self.err(a.span, f"attribute {a.name} of {d.name} is declared twice")
            elif a.type not in ATTR_TYPES:
                self.err(a.span, f"unknown attribute type `{a.type}`",
                         "types are " + ", ".join(f"`{t}`" for t in ATTR_TYPES))
            else:
                if a.name in STAMP_ATTRS:
                    self.err(a.span, f"attribute name `{a.name}` is reserved: `{a.name}` of every event is "
                                     "part of its time stamp", f"rename it, e.g. `{a.name}_`")
                elif a.name.startswith("_"):
                    self.err(a.span, f"attribute name `{a.name}` is reserved (names starting with `_`)")
                attrs[a.name] = a.type  # known, so that its uses below raise no further errors

        def need(name: str, span: Span, types: tuple, role: str) -> None:
            if name not in attrs:
                self.err(span, f"{d.name} has no attribute {name} (used as {role})",
                         _did_you_mean(name, attrs) or f"attributes: {', '.join(attrs) or 'none'}")
            elif attrs[name] not in types:
                self.err(span, f"{role} {name} must be {' or '.join('`'+t+'`' for t in types)}, "
                               f"not `{attrs[name]}`")

        if d.source is not None:
            need(d.source.attr, d.source.span, ("str", "int"), "the source")
        if d.time is None:
            self.err(d.span, f"event {d.name} has no `time` clause",
                     "say how its time stamp is made, e.g. `time ts - 30 s .. ts`")
        else:
            units_ok = True
            for b in (d.time.low, d.time.high):
                if b is None:
                    continue
                need(b.attr, b.span, ("time",), "a time")
                if b.offset is not None:
                    units_ok = self._unit(b.offset, "duration") and units_ok
            if d.time.widen is not None:
                units_ok = self._unit(d.time.widen, "duration") and units_ok
                if d.time.widen.value < 0:
                    self.err(d.time.widen.span, "a widening must not be negative")
            if units_ok and d.time.high is not None and d.time.low.attr == d.time.high.attr:
                lo = d.time.low.offset.micros() if d.time.low.offset else 0
                hi = d.time.high.offset.micros() if d.time.high.offset else 0
                if lo > hi:
                    self.err(d.time.span, "the time stamp's low end is after its high end",
                             "write `time ts - 30 s .. ts`: low end first")
        if d.place is not None:
            pc = d.place
            if pc.geom is not None:
                need(pc.geom, pc.span, ("geometry",), "the place")
            else:
                need(pc.lon, pc.span, ("float", "int"), "a coordinate")
                need(pc.lat, pc.span, ("float", "int"), "a coordinate")
            if pc.widen is not None:
                self._unit(pc.widen, "distance")
                if pc.widen.value < 0:
                    self.err(pc.widen.span, "a widening must not be negative")

    def _unit(self, q: A.Quantity, dim: str) -> bool:
        if q.dimension != dim:
            self.err(q.span, f"expected {TYPE_WORDS[dim]}, got {TYPE_WORDS[q.dimension]} `{_qtext(q)}`",
                     {"duration": "durations use `s`, `min`, `h` or `d`",
                      "distance": "distances use `m` or `km`"}.get(dim))
            return False
        limit = _LIMITS.get(dim)
        if limit is not None and abs(q.value) * {**A.TIME_UNITS, **A.DIST_UNITS}[q.unit] > limit[0]:
            self.err(q.span, f"`{_qtext(q)}` is too large for {TYPE_WORDS[dim]}", f"at most {limit[1]}")
            return False
        return True

    def _place_def(self, d: A.PlaceDecl) -> PlaceDef | None:
        s = d.shape
        if isinstance(s, A.Circle):
            if not self._unit(s.radius, "distance") or not self._lonlat(s.lon, s.lat, s.span):
                return None
            if s.radius.metres() <= 0:
                self.err(s.radius.span, "a circle's radius must be positive")
                return None
            return PlaceDef(d.name, "circle", s.lon, s.lat, s.radius.metres(), span=d.span)
        if isinstance(s, A.PointShape):
            if not self._lonlat(s.lon, s.lat, s.span):
                return None
            r = 0.0
            if s.widen is not None:
                if not self._unit(s.widen, "distance"):
                    return None
                r = s.widen.metres()
            return PlaceDef(d.name, "circle", s.lon, s.lat, r, span=d.span)
        return self._polygon(d.name, s, d.span)

    def _polygon(self, name: str, s: A.PolygonShape, span: Span) -> PlaceDef | None:
        import shapely
        from shapely.geometry import Polygon

        if len(s.coords) < 3:
            self.err(s.span, "a polygon needs at least 3 corners")
            return None
        for lon, lat in s.coords:
            if not self._lonlat(lon, lat, s.span):
                return None
        g = Polygon(s.coords)
        if not g.is_valid:
            self.err(s.span, f"polygon is not valid: {shapely.is_valid_reason(g)}",
                     "corners go round the boundary once, without crossing")
            return None
        return PlaceDef(name, "polygon", wkt=shapely.to_wkt(g, rounding_precision=-1), span=span)

    def _lonlat(self, lon: float, lat: float, span: Span) -> bool:
        if not (-180 <= lon <= 180 and -90 <= lat <= 90):
            self.err(span, f"({lon}, {lat}) is not a longitude, latitude pair",
                     "coordinates are WGS84 longitude first, then latitude")
            return False
        return True


# Window and offset lengths must fit the runners' 64-bit microsecond clocks;
# radii and distances beyond the Earth's are typing slips.
_LIMITS = {"duration": (1e18, "about 30,000 years"), "distance": (4e7, "40,000 km")}


def _qtext(q: A.Quantity) -> str:
    return print_quantity(q)


def _did_you_mean(name: str, options) -> str | None:
    import difflib

    close = difflib.get_close_matches(name, list(options), n=1)
    return f"did you mean `{close[0]}`?" if close else None


# ------------------------------------------------------------------------------------------


class _PhraseChecker:
    def __init__(self, c: _Checker, p: A.Phrase):
        self.c, self.p = c, p
        self.vars: dict[str, str] = {}
        self.var_spans: dict[str, Span] = {}
        self.negated: dict[str, str] = {}
        self.types: dict = {}
        self.ok = True

    def err(self, span: Span, msg: str, hint: str | None = None) -> None:
        self.ok = False
        self.c.err(span, msg, hint)

    def run(self) -> PhraseInfo | None:
        p = self.p
        self._match(p.match, negated=False)
        if p.per is not None:
            self._per()
        if p.within is not None:
            self.c._unit(p.within, "duration") or setattr(self, "ok", False)
            if p.within.value <= 0:
                self.err(p.within.span, "`within` needs a positive duration")
        if p.where is not None:
            t = self._expr(p.where, allow_negated=True)
            if t is not None and t != "bool":
                self.err(p.where.span, f"`where` needs a condition, got {TYPE_WORDS.get(t, t)}")
        schema = []
        names: dict[str, Span] = {}
        for f in p.emit:
            if f.name in STANDARD_FIELDS:
                self.err(f.span, f"emit field `{f.name}` clashes with a standard output field",
                         "every output already has " + ", ".join(f"`{s}`" for s in STANDARD_FIELDS))
                continue
            if f.name in names:
                self.err(f.span, f"emit field `{f.name}` is given twice")
                continue
            names[f.name] = f.span
            t = self._expr(f.expr, allow_negated=False)
            if t == "event":
                self.err(f.expr.span, "emit an attribute of the event, not the event itself",
                         "its id is in the standard `events` field")
                t = None
            schema.append((f.name, t or "str"))
        bound = None
        if self.ok and not self.c.bad_events:  # stamp lengths need sound event declarations
            bound = self._bounds()
        if not self.ok:
            return None
        return PhraseInfo(p, dict(self.vars), dict(self.negated), self.types, schema, bound)

    # ---------------------------------------------------------------- match
    def _match(self, m, negated: bool) -> None:
        if isinstance(m, A.EventRef):
            if m.type not in self.c.events:
                self.err(m.span, f"unknown event type {m.type}",
                         _did_you_mean(m.type, self.c.events) or "declare it with `event`")
            if m.var is not None:
                target = self.negated if negated else self.vars
                if m.var in self.vars or m.var in self.negated:
                    first = self.var_spans[m.var]
                    self.err(m.var_span if m.var_span.line else m.span, f"variable {m.var} is bound twice",
                             f"first bound at {first}; use another name")
                    return
                if m.var in self.c.events:
                    self.err(m.var_span, f"variable {m.var} has the name of an event type")
                target[m.var] = m.type
                self.var_spans[m.var] = m.var_span if m.var_span.line else m.span
            return
        if isinstance(m, A.Binary):
            if m.op == "or":
                self._or(m, negated)
                return
            if isinstance(m.right, A.Not) and not A.is_pattern(m.right.operand) or (
                    isinstance(m.right, A.Not) and m.right.within is not None):
                self._absence_right(m, negated)
                return
            if isinstance(m.left, A.Binary) and isinstance(m.left.right, A.Not) \
                    and not A.is_pattern(m.left.right.operand) and m.left.right.within is None:
                # A ; not X ; B — the left operand ends in the negation
                for op in (m.left.op, m.op):
                    if op not in A.SEQ_OPS:
                        self.err(m.span, f"`{op}` cannot stand beside `not X`: absence is `A ; not X ; B`",
                                 "use `;`, `;=` or `;<>` on both sides of `not X`")
                        break
                self._match(m.left.left, negated)
                self._match(m.left.right.operand, True)
                self._match(m.right, negated)
                return
            self._match(m.left, negated)
            self._match(m.right, negated)
            return
        if isinstance(m, A.Not):
            if not A.is_pattern(m.operand):
                self.err(m.span, "`not` of an event expression may only stand between two sequences "
                                 "(`A ; not X ; B`) or after one (`A ; not X within D`)",
                         "to exclude places or times, negate a pattern: `BusGPS -> A and not at station`")
            self._match(m.operand, negated)
            return
        if isinstance(m, A.Certainly):
            if not A.is_pattern(m.pattern):
                self.err(m.span, "`certainly` applies to a pattern (`certainly at P`, `certainly Tuesday`)")
            self._match(m.pattern, negated)
            return
        self._pattern(m)

    def _absence_right(self, m: A.Binary, negated: bool) -> None:
        neg = m.right
        if negated:
            self.err(neg.span, "absence cannot be nested inside another `not`")
        if m.op not in A.SEQ_OPS:
            self.err(m.span, f"`{m.op} not` is not an absence form",
                     "absence is `A ; not X ; B` or `A ; not X within D` (also `;=`, `;<>`)")
        elif neg.within is None:
            self.err(neg.span, "`not X` needs an event after it or a window",
                     "write `A ; not X ; B` or `A ; not X within 5 min`")
        else:
            if self.c._unit(neg.within, "duration") and neg.within.value <= 0:
                self.err(neg.within.span, "the absence window must be positive")
        self._match(m.left, negated)
        self._match(neg.operand, True)

    def _or(self, m: A.Binary, negated: bool) -> None:
        before_pos, before_neg = dict(self.vars), dict(self.negated)
        self._match(m.left, negated)
        left_pos = {k: v for k, v in self.vars.items() if k not in before_pos}
        left_neg = {k: v for k, v in self.negated.items() if k not in before_neg}
        # the right branch may bind the same names: one binding (SPEC §3)
        self.vars, self.negated = dict(before_pos), dict(before_neg)
        saved_spans = dict(self.var_spans)
        self._match(m.right, negated)
        right_pos = {k: v for k, v in self.vars.items() if k not in before_pos}
        right_neg = {k: v for k, v in self.negated.items() if k not in before_neg}
        for k in sorted(set(left_pos) | set(right_pos)):
            if k not in left_pos or k not in right_pos:
                self.err(m.span, f"the branches of `or` must bind the same variables: {k} is bound "
                                 f"only in the {'left' if k in left_pos else 'right'} one")
            elif left_pos[k] != right_pos[k]:
                self.err(m.span, f"variable {k} is a {left_pos[k]} in one branch of `or` and a "
                                 f"{right_pos[k]} in the other")
        self.vars = {**before_pos, **left_pos, **right_pos}
        self.negated = {**before_neg, **left_neg, **right_neg}
        self.var_spans = {**self.var_spans, **{k: v for k, v in saved_spans.items() if k in left_pos}}

    def _pattern(self, m) -> None:
        if isinstance(m, A.AtPlace):
            if m.place not in self.c.places:
                self.err(m.span, f"unknown place {m.place}",
                         _did_you_mean(m.place, self.c.places) or "declare it with `place NAME = ...`")
        elif isinstance(m, A.NearPlace):
            self.c._unit(m.distance, "distance") or setattr(self, "ok", False)
            if m.place not in self.c.places:
                self.err(m.span, f"unknown place {m.place}",
                         _did_you_mean(m.place, self.c.places) or "declare it with `place NAME = ...`")
        elif isinstance(m, A.InShape):
            s = m.shape
            if isinstance(s, A.Circle):
                if self.c._unit(s.radius, "distance") and s.radius.value <= 0:
                    self.err(s.radius.span, "a circle's radius must be positive")
                self.c._lonlat(s.lon, s.lat, s.span) or setattr(self, "ok", False)
            elif isinstance(s, A.PolygonShape):
                self.c._polygon("", s, m.span) or setattr(self, "ok", False)
            else:
                self.c._lonlat(s.lon, s.lat, s.span) or setattr(self, "ok", False)
                if s.widen is not None:
                    self.c._unit(s.widen, "distance") or setattr(self, "ok", False)
        elif isinstance(m, A.ClockPattern):
            for t in (m.start, m.end):
                if _clock(t) is None:
                    self.err(m.span, f"`{t}` is not a clock time", "use 24-hour `HH:MM`, e.g. `07:30`")
        elif isinstance(m, A.DatePattern):
            days = []
            for t in (m.start,) if m.single else (m.start, m.end):
                try:
                    days.append(dt.date.fromisoformat(t))
                except ValueError:
                    self.err(m.span, f"`{t}` is not a date", "use `YYYY-MM-DD`")
            if len(days) == 2 and days[0] > days[1]:
                self.err(m.span, f"the range ends ({m.end}) before it starts ({m.start})")

    def _per(self) -> None:
        key = self.p.per
        bound_types = set(self.vars.values()) | set(self.negated.values())
        kinds = {}
        for t in bound_types:
            decl = self.c.events.get(t)
            if decl is None:
                continue
            for a in decl.attrs:
                if a.name == key:
                    kinds[t] = a.type
        if not kinds:
            names = sorted(bound_types)
            self.err(self.p.per_span if self.p.per_span.line else self.p.span,
                     f"`per {key}`: no bound event type has an attribute {key}",
                     f"bound types: {', '.join(names) or 'none'}; `per` needs an attribute they share")
        elif len(set(kinds.values())) > 1:
            self.err(self.p.per_span, f"`per {key}`: {key} has different types in "
                                      + ", ".join(f"{t} ({k})" for t, k in sorted(kinds.items())))

    # ---------------------------------------------------------------- expressions
    def _var_type(self, name: str, span: Span, allow_negated: bool) -> str | None:
        if name in self.vars:
            return self.vars[name]
        if name in self.negated:
            if not allow_negated:
                self.err(span, f"variable {name} is negated (`not`): it is never part of a match",
                         "a negated variable may appear in `where`, as part of the absence condition")
                return None
            return self.negated[name]
        hint = _did_you_mean(name, list(self.vars) + list(self.negated))
        self.err(span, f"variable {name} is used but never bound",
                 hint or "bind it in the match: `BusGPS -> " + name + "`")
        return None

    def _expr(self, e, allow_negated: bool) -> str | None:
        t = self._expr_inner(e, allow_negated)
        if t is not None:
            self.types[e] = t
        return t

    def _expr_inner(self, e, allow_negated: bool) -> str | None:
        if isinstance(e, A.Num):
            return "number"
        if isinstance(e, A.Quantity):
            return e.dimension
        if isinstance(e, A.Str):
            return "str"
        if isinstance(e, A.BoolLit):
            return "bool"
        if isinstance(e, A.TimeLit):
            if _parse_time_literal(e.text, self.c.timezone) is None:
                self.err(e.span, f"`{e.text}` is not a valid date-time")
                return None
            return "time"
        if isinstance(e, A.Var):
            vt = self._var_type(e.name, e.span, allow_negated)
            if vt is None:
                return None
            return "event"
        if isinstance(e, A.Attr):
            vt = self._var_type(e.var, e.span, allow_negated)
            if vt is None:
                return None
            if e.name in STAMP_ATTRS:
                return "time"
            decl = self.c.events.get(vt)
            if decl is None:
                return None
            for a in decl.attrs:
                if a.name == e.name:
                    return "number" if a.type in ("int", "float") else a.type
            self.err(e.span, f"{vt} has no attribute {e.name}",
                     _did_you_mean(e.name, [a.name for a in decl.attrs] + list(STAMP_ATTRS))
                     or f"{vt} has: " + ", ".join([a.name for a in decl.attrs] + list(STAMP_ATTRS)))
            return None
        if isinstance(e, A.Call):
            return self._call(e, allow_negated)
        if isinstance(e, A.UnaryOp):
            t = self._expr(e.operand, allow_negated)
            if t is None:
                return None
            if e.op == "not":
                if t != "bool":
                    self.err(e.span, f"`not` needs a condition, got {TYPE_WORDS.get(t, t)}")
                    return None
                return "bool"
            if t not in NUMERIC + DIMENSIONS:
                self.err(e.span, f"cannot negate {TYPE_WORDS.get(t, t)}")
                return None
            return t
        if isinstance(e, A.BoolOp):
            lt, rt = self._expr(e.left, allow_negated), self._expr(e.right, allow_negated)
            for side, t in ((e.left, lt), (e.right, rt)):
                if t is not None and t != "bool":
                    self.err(side.span, f"`{e.op}` needs conditions on both sides, got {TYPE_WORDS.get(t, t)}")
                    return None
            return "bool" if lt and rt else None
        if isinstance(e, A.BinOp):
            lt, rt = self._expr(e.left, allow_negated), self._expr(e.right, allow_negated)
            if lt is None or rt is None:
                return None
            if e.op in A.COMPARE_OPS:
                return self._compare(e, lt, rt)
            r = arith_type(e.op, lt, rt)
            if r is None:
                self.err(e.span, f"cannot {_OP_VERB[e.op]} {TYPE_WORDS.get(lt, lt)} and {TYPE_WORDS.get(rt, rt)}",
                         unit_hint(lt, rt))
            return r
        return None

    def _compare(self, e: A.BinOp, lt: str, rt: str) -> str | None:
        num = lambda t: "number" if t in NUMERIC else t  # noqa: E731
        a, b = num(lt), num(rt)
        if a != b:
            msg = f"unit mismatch: cannot compare {TYPE_WORDS.get(lt, lt)} with {TYPE_WORDS.get(rt, rt)}"
            self.err(e.span, msg, unit_hint(lt, rt))
            return None
        if a in ("event", "geometry"):
            self.err(e.span, f"cannot compare {TYPE_WORDS[a]}s", "compare their attributes instead")
            return None
        if e.op not in ("==", "!=") and a == "bool":
            self.err(e.span, "truth values can only be compared with `==` or `!=`")
            return None
        return "bool"

    def _call(self, e: A.Call, allow_negated: bool) -> str | None:
        if e.func not in FUNCTIONS:
            self.err(e.span, f"unknown function {e.func}",
                     _did_you_mean(e.func, FUNCTIONS) or "functions: " + ", ".join(FUNCTIONS))
            return None
        arity, result = FUNCTIONS[e.func]
        n = len(e.args)
        if isinstance(arity, int) and n != arity:
            self.err(e.span, f"{e.func} takes {arity} events, got {n}")
            return None
        if isinstance(arity, tuple) and n < arity[0]:
            self.err(e.span, f"{e.func} takes at least {arity[0]} event{'s' if arity[0] > 1 else ''}, got {n}")
            return None
        types = []
        for a in e.args:
            if not isinstance(a, A.Var):
                self.err(a.span, f"the arguments of {e.func} are bound variables, e.g. `{e.func}(A, B)`")
                return None
            vt = self._var_type(a.name, a.span, allow_negated)
            if vt is None:
                return None
            self.types[a] = "event"
            types.append(vt)
        if e.func == "successive":
            names = [a.name for a in e.args]
            if len(set(names)) != len(names):
                self.err(e.span, "successive needs distinct variables")
                return None
            if len(set(types)) > 1:
                self.err(e.span, "successive relates events of one type: "
                                 + ", ".join(f"{a.name} is {t}" for a, t in zip(e.args, types)))
                return None
            if types[0] in self.c.events and self.c.events[types[0]].source is None:
                self.err(e.span, f"successive needs a type with a `source`; {types[0]} has none",
                         "successive means: the next event of the same type and source")
                return None
        if e.func == "speed":
            for a, t in zip(e.args, types):
                if self.c.events.get(t) is not None and self.c.events[t].place is None:
                    self.err(a.span, f"speed needs a location: {t} has no `place` clause")
                    return None
        return result

    # ---------------------------------------------------------------- boundedness
    def _bounds(self) -> int | None:
        """SPEC §4: partial matches must not live forever.

        Returns the largest possible match span in µs (None: unbounded but
        acceptable because every join is bounded otherwise).
        """
        from spatec.frontend.bounds import phrase_bound_problem, span_bound

        problem = phrase_bound_problem(self.p, self.c.events)
        if problem is not None:
            node, why = problem
            self.err(self.p.span if not node else node.span,
                     f"phrase {self.p.name} is unbounded: {why}",
                     "add `within D` (e.g. `within 2 h`), relate the events with `||`, "
                     "or link them with `successive(A, B)`")
            return None
        return span_bound(self.p, self.c.events)


_OP_VERB = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}


def arith_type(op: str, a: str, b: str) -> str | None:
    num = lambda t: "number" if t in NUMERIC else t  # noqa: E731
    a, b = num(a), num(b)
    if op in ("+", "-"):
        if a == b and a in ("number",) + DIMENSIONS:
            return a
        if a == "time" and b == "duration":
            return "time"
        if op == "+" and a == "duration" and b == "time":
            return "time"
        if op == "-" and a == b == "time":
            return "duration"
        return None
    if op == "*":
        if a == "number" and b in ("number",) + DIMENSIONS:
            return b
        if b == "number" and a in DIMENSIONS:
            return a
        if {a, b} == {"speed", "duration"}:
            return "distance"
        if a == b == "distance":
            return "area"
        return None
    if op == "/":
        if b == "number" and a in ("number",) + DIMENSIONS:
            return a
        if a == b and a in DIMENSIONS:
            return "number"
        if a == "distance" and b == "duration":
            return "speed"
        if a == "distance" and b == "speed":
            return "duration"
        if a == "area" and b == "distance":
            return "distance"
        return None
    return None


def unit_hint(a: str, b: str) -> str | None:
    pair = {a, b}
    if pair == {"duration", "distance"}:
        return "a duration (`s`, `min`, `h`, `d`) and a distance (`m`, `km`) do not mix"
    if "number" in pair and pair & set(DIMENSIONS):
        dim = (pair - {"number"}).pop()
        ex = {"duration": "`20 min`", "distance": "`150 m`", "speed": "`12 km/h`", "area": "`1000 m * 1 m`"}[dim]
        return f"give the number a unit, e.g. {ex}"
    if "time" in pair and "duration" in pair:
        return "a time plus or minus a duration is a time; two times differ by a duration"
    return None


def _clock(t: str) -> int | None:
    parts = t.split(":")
    try:
        h, m = int(parts[0]), int(parts[1])
        s = int(parts[2]) if len(parts) > 2 else 0
    except (ValueError, IndexError):
        return None
    if not (0 <= h <= 24 and 0 <= m < 60 and 0 <= s < 60) or (h == 24 and (m or s)):
        return None
    return h * 3600 + m * 60 + s


def _parse_time_literal(text: str, tz: str):
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=zoneinfo.ZoneInfo(tz))
    return t


def clock_seconds(t: str) -> int:
    """Seconds after midnight of a checked clock time ``HH:MM[:SS]``."""
    v = _clock(t)
    assert v is not None
    return v


def time_literal_micros(text: str, tz: str) -> int:
    """Epoch µs of a checked date-time literal (program time zone unless it has an offset)."""
    t = _parse_time_literal(text, tz)
    assert t is not None
    return int(t.timestamp()) * 1_000_000 + t.microsecond

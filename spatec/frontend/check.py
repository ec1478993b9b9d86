"""The checker: names, types, units, bindings and boundedness.

It collects every problem of a program and raises one :class:`CheckError`
with all of them, each positioned ``file:line:col`` with its source line.
On success it returns a :class:`Program` (:mod:`spatec.frontend.program`):
the declarations resolved and, for each phrase, the types of its variables
and expressions and its output schema. Phrases are checked producers first
(SPEC §8: a phrase's composites are events of the type named after it), so
a consumer sees its producer's attributes; the phrases' graph must be
acyclic. This module checks the declarations and orders the phrases;
:mod:`spatec.frontend.check_phrase` checks one phrase.
"""
from __future__ import annotations

import zoneinfo
from pathlib import Path

from spatec.errors import CheckError, Span
from spatec.frontend import ast as A
from spatec.frontend.bounds import stamp_length
from spatec.frontend.check_phrase import PhraseChecker
from spatec.frontend.flow import flow
from spatec.frontend.load import Loaded, PlaceDef, load_program
from spatec.frontend.printer import print_quantity
from spatec.frontend.program import PLACES_FIELD, STANDARD_FIELDS, EventType, FlowGraph, PhraseInfo, Program
from spatec.frontend.typewords import ATTR_TYPES, STAMP_ATTRS, TYPE_WORDS, clock, did_you_mean, parse_time_literal

__all__ = ["STANDARD_FIELDS", "PLACES_FIELD", "PhraseInfo", "Program", "check_file", "check_loaded",
           "clock_seconds", "time_literal_micros"]


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
        self.place_sets: dict = {}
        self.types: dict[str, EventType] = {}   # every name a match can use
        self.timezone = "UTC"
        self.crs = None
        self.bad_events: set[str] = set()  # declared with errors: their stamps cannot be measured
        self.bad_place_sets: set[str] = set()  # declared, their files with errors (reported at their rows)

    def err(self, span: Span, msg: str, hint: str | None = None) -> None:
        self.L.diag(span, msg, hint)

    # ---------------------------------------------------------------- declarations
    def run(self) -> Program:
        tz_decl = None
        phrases: list[A.Phrase] = []
        place_decls: dict = {}      # place or place set name → its declaration
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
                    self.err(_at(d.name_span, d.span), f"event type {d.name} is declared twice",
                             f"first declared at {self.events[d.name].span}")
                    continue
                before = len(self.L.diagnostics)
                self._check_event(d)
                self.events[d.name] = d
                if len(self.L.diagnostics) > before:
                    self.bad_events.add(d.name)
            elif isinstance(d, A.PlaceDecl):
                if self._place_name_taken(d.name, _at(d.name_span, d.span)):
                    continue
                pd = self._place_def(d)
                if pd is not None:
                    self.places[d.name] = pd
                    place_decls[d.name] = d
            elif isinstance(d, A.PlaceSetDecl):
                loaded = self.L.place_sets.get(id(d))
                if loaded is None:
                    self.bad_place_sets.add(d.name)
                elif not self._place_name_taken(d.name, _at(d.name_span, d.span)):
                    self.place_sets[d.name] = loaded
                    place_decls[d.name] = d
            elif isinstance(d, A.Phrase):
                phrases.append(d)
        self._check_swapped(place_decls)
        for name, d in self.events.items():
            self.types[name] = EventType(
                name, {a.name: a.type for a in d.attrs},
                source=d.source.attr if d.source is not None else None, has_place=d.place is not None,
                stamp_length=None if name in self.bad_events else stamp_length(d), span=d.span)
        return self._phrases(phrases)

    def _check_swapped(self, decls: dict) -> None:
        """A place (or a place set's median) far from the program's other places that lies
        beside one of them with its longitude and latitude swapped: an error, not silence."""
        from spatec.spatial.lonlat import program_places, swapped_beside

        refs = program_places(self)
        for name, lon, lat in refs:
            d = decls.get(name)
            if d is None:
                continue
            found = swapped_beside((lon, lat), [r for r in refs if r[0] != name])
            if found is None:
                continue
            other, far, near = found
            what = f"places {name}: the median of its places" if isinstance(d, A.PlaceSetDecl) else f"place {name}"
            hint = ("coordinates are WGS84 longitude first, then latitude: check that `place point(LON, LAT)` "
                    "names the longitude column first and that the file's columns hold what their names say"
                    if isinstance(d, A.PlaceSetDecl) else
                    "coordinates are WGS84 longitude first, then latitude")
            span = d.place.span if isinstance(d, A.PlaceSetDecl) and d.place is not None else d.span
            self.err(span, f"{what} ({lon:g}, {lat:g}) lies {far:,} km from the program's other places; with "
                           f"longitude and latitude swapped it lies {near:g} km from {other}", hint)

    def _place_name_taken(self, name: str, span: Span) -> bool:
        first = self.places.get(name) or self.place_sets.get(name)
        if first is None:
            return False
        self.err(span, f"place {name} is declared twice", f"first declared at {first.span}")
        return True

    # ---------------------------------------------------------------- phrases, producers first
    def _phrases(self, phrases: list[A.Phrase]) -> Program:
        unique: dict[str, A.Phrase] = {}
        for p in phrases:
            if p.name in unique:
                self.err(_at(p.name_span, p.span), f"phrase {p.name} is defined twice",
                         f"first defined at {unique[p.name].span}")
                continue
            if p.name in self.events:
                self.err(_at(p.name_span, p.span), f"phrase {p.name} has the name of an event type",
                         f"its composites are events named {p.name}: rename the phrase or the type "
                         f"(declared at {self.events[p.name].span})")
                continue
            unique[p.name] = p
        order, inputs, cycles = flow(list(unique.values()))
        for cyc in cycles:
            names = " → ".join(cyc.path + (cyc.path[0],))
            if len(cyc.path) == 1:
                self.err(cyc.span, f"phrase {cyc.path[0]} matches its own composites ({names})",
                         "a phrase's composites are events for the other phrases only")
            else:
                self.err(cyc.span, f"phrases {', '.join(cyc.path)} form a cycle: {names}",
                         "each consumes the composites of the next; a phrase cannot match its own "
                         "composites, not even through other phrases")
        # every phrase is an event type from the start; its attributes are known once it checked
        for name, p in unique.items():
            self.types[name] = EventType(name, None, phrase=name, span=p.span)
        infos = []
        for name in order:
            info = PhraseChecker(self, unique[name]).run()
            if info is not None:
                infos.append(info)
                self.types[name] = _derived_type(info, unique[name].span)
        graph = FlowGraph(tuple(order), {n: inputs[n] for n in order})
        return Program(self.L.root, self.timezone, self.crs, self.events, self.places, infos, self.L.texts,
                       place_sets=self.place_sets, event_types=dict(self.types), flow=graph)

    # ---------------------------------------------------------------- declarations in detail
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
                if a.column is not None and not a.column.strip():
                    self.err(a.span, f"attribute {a.name} is read from an empty column name",
                             f"name the input column: `{a.name}: {a.type} from \"VehicleRef\"`")
                attrs[a.name] = a.type  # known, so that its uses below raise no further errors

        def need(name: str, span: Span, types: tuple, role: str) -> None:
            if name not in attrs:
                self.err(span, f"{d.name} has no attribute {name} (used as {role})",
                         did_you_mean(name, attrs) or f"attributes: {', '.join(attrs) or 'none'}")
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
                    units_ok = self.check_unit(b.offset, "duration") and units_ok
            if d.time.widen is not None:
                units_ok = self.check_unit(d.time.widen, "duration") and units_ok
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
                self.check_unit(pc.widen, "distance")
                if pc.widen.value < 0:
                    self.err(pc.widen.span, "a widening must not be negative")

    def check_unit(self, q: A.Quantity, dim: str) -> bool:
        """Report a quantity of another dimension than ``dim``, or too large; True when fine."""
        if q.dimension != dim:
            self.err(q.span, f"expected {TYPE_WORDS[dim]}, got {TYPE_WORDS[q.dimension]} `{print_quantity(q)}`",
                     {"duration": "durations use `s`, `min`, `h` or `d`",
                      "distance": "distances use `m` or `km`"}.get(dim))
            return False
        limit = _LIMITS.get(dim)
        if limit is not None and abs(q.value) * {**A.TIME_UNITS, **A.DIST_UNITS}[q.unit] > limit[0]:
            self.err(q.span, f"`{print_quantity(q)}` is too large for {TYPE_WORDS[dim]}", f"at most {limit[1]}")
            return False
        return True

    def _place_def(self, d: A.PlaceDecl) -> PlaceDef | None:
        s = d.shape
        if isinstance(s, A.Circle):
            if not self.check_unit(s.radius, "distance") or not self.check_lonlat(s.lon, s.lat, s.span):
                return None
            if s.radius.metres() <= 0:
                self.err(s.radius.span, "a circle's radius must be positive")
                return None
            return PlaceDef(d.name, "circle", s.lon, s.lat, s.radius.metres(), span=d.span)
        if isinstance(s, A.PointShape):
            if not self.check_lonlat(s.lon, s.lat, s.span):
                return None
            r = 0.0
            if s.widen is not None:
                if not self.check_unit(s.widen, "distance"):
                    return None
                r = s.widen.metres()
            return PlaceDef(d.name, "circle", s.lon, s.lat, r, span=d.span)
        return self.check_polygon(d.name, s, d.span)

    def check_polygon(self, name: str, s: A.PolygonShape, span: Span) -> PlaceDef | None:
        import shapely
        from shapely.geometry import Polygon

        if len(s.coords) < 3:
            self.err(s.span, "a polygon needs at least 3 corners")
            return None
        for lon, lat in s.coords:
            if not self.check_lonlat(lon, lat, s.span):
                return None
        g = Polygon(s.coords)
        if not g.is_valid:
            self.err(s.span, f"polygon is not valid: {shapely.is_valid_reason(g)}",
                     "corners go round the boundary once, without crossing")
            return None
        return PlaceDef(name, "polygon", wkt=shapely.to_wkt(g, rounding_precision=-1), span=span)

    def check_lonlat(self, lon: float, lat: float, span: Span) -> bool:
        if not (-180 <= lon <= 180 and -90 <= lat <= 90):
            self.err(span, f"({lon}, {lat}) is not a longitude, latitude pair",
                     "coordinates are WGS84 longitude first, then latitude")
            return False
        return True


# Window and offset lengths must fit the runners' 64-bit microsecond clocks;
# radii and distances beyond the Earth's are typing slips.
_LIMITS = {"duration": (1e18, "about 30,000 years"), "distance": (4e7, "40,000 km")}


def _derived_type(info: PhraseInfo, span: Span) -> EventType:
    """Phrase ``info``'s composites as an event type (SPEC §8): its emit fields as attributes;
    with ``as event``, the source fields and a stamp within the composite's (an instant for
    ``time F``)."""
    ae = info.as_event
    length = info.span_bound
    if ae is not None and ae.high is None:
        length = 0
    return EventType(info.name, dict(info.schema), phrase=info.name, stamp_length=length, span=span,
                     source_fields=ae.source if ae is not None else ())


def _at(span: Span, fallback: Span) -> Span:
    """A name token's span, or the construct's when the node was built without one."""
    return span if span.line else fallback


def clock_seconds(t: str) -> int:
    """Seconds after midnight of a checked clock time ``HH:MM[:SS]``."""
    v = clock(t)
    assert v is not None
    return v


def time_literal_micros(text: str, tz: str) -> int:
    """Epoch µs of a checked date-time literal (program time zone unless it has an offset)."""
    t = parse_time_literal(text, tz)
    assert t is not None
    return int(t.timestamp()) * 1_000_000 + t.microsecond

"""The SpaTeC abstract syntax: small frozen dataclasses, one per construct.

The tree mirrors what was written (``A ; not X ; B`` is ``Binary(";",
Binary(";", A, Not(X)), B)``); the checker and the planner give it meaning.
Every node carries the span of its source text in ``span``; spans are ignored
by equality so that two programs that say the same thing compare equal.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from spatec.errors import NO_SPAN, Span


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False)


# --------------------------------------------------------------------------- values

# Units a quantity may carry, by dimension, with their factor to the base unit
# (microseconds for time, metres for distance, metres per second for speed).
TIME_UNITS = {"s": 1_000_000, "min": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}
DIST_UNITS = {"m": 1.0, "km": 1000.0}
SPEED_UNITS = {"m/s": 1.0, "km/h": 1000.0 / 3600.0}
UNIT_DIMENSION = {**{u: "duration" for u in TIME_UNITS}, **{u: "distance" for u in DIST_UNITS},
                  **{u: "speed" for u in SPEED_UNITS}}


@dataclass(frozen=True)
class Quantity:
    """A number with a unit: ``30 s``, ``1.5 km``, ``12 km/h``."""

    value: float
    unit: str
    span: Span = _span()

    @property
    def dimension(self) -> str:
        return UNIT_DIMENSION[self.unit]

    def micros(self) -> int:
        """The duration in microseconds (time units only)."""
        return int(round(self.value * TIME_UNITS[self.unit]))

    def metres(self) -> float:
        return self.value * DIST_UNITS[self.unit]

    def base(self) -> float:
        """Value in the base unit of its dimension (µs, m, m/s)."""
        if self.unit in TIME_UNITS:
            return float(self.micros())
        if self.unit in DIST_UNITS:
            return self.metres()
        return self.value * SPEED_UNITS[self.unit]


# --------------------------------------------------------------------------- shapes

@dataclass(frozen=True)
class Circle:
    """``circle(lon, lat, radius)``."""

    lon: float
    lat: float
    radius: Quantity
    span: Span = _span()


@dataclass(frozen=True)
class PointShape:
    """``point(lon, lat)`` optionally widened: ``point(lon, lat) ± 10 m``."""

    lon: float
    lat: float
    widen: Optional[Quantity] = None
    span: Span = _span()


@dataclass(frozen=True)
class PolygonShape:
    """``polygon((lon, lat), ...)``: one ring, closed implicitly."""

    coords: tuple[tuple[float, float], ...]
    span: Span = _span()


Shape = Union[Circle, PointShape, PolygonShape]


# --------------------------------------------------------------------------- patterns

@dataclass(frozen=True)
class DayPattern:
    """``Monday`` … ``Sunday``, ``weekday``, ``weekend``."""

    name: str
    span: Span = _span()


@dataclass(frozen=True)
class MonthPattern:
    """``January`` … ``December``."""

    name: str
    span: Span = _span()


@dataclass(frozen=True)
class ClockPattern:
    """``between 07:00 and 09:30``: local clock time, every day; may wrap midnight."""

    start: str
    end: str
    span: Span = _span()


@dataclass(frozen=True)
class DatePattern:
    """``on 2026-12-24`` (start == end) or ``from 2026-12-01 to 2026-12-24`` (inclusive days)."""

    start: str
    end: str
    single: bool = False
    span: Span = _span()


@dataclass(frozen=True)
class AtPlace:
    """``at P``: a named place."""

    place: str
    span: Span = _span()


@dataclass(frozen=True)
class InShape:
    """``in circle(...)`` / ``in polygon(...)``."""

    shape: Shape
    span: Span = _span()


@dataclass(frozen=True)
class NearPlace:
    """``within 300 m of P``."""

    distance: Quantity
    place: str
    span: Span = _span()


@dataclass(frozen=True)
class Certainly:
    """``certainly P``: the stamp lies inside the pattern's set."""

    pattern: "Match"
    span: Span = _span()


PATTERN_ATOMS = (DayPattern, MonthPattern, ClockPattern, DatePattern, AtPlace, InShape, NearPlace)


# --------------------------------------------------------------------------- match expressions

@dataclass(frozen=True)
class EventRef:
    """``T`` or ``T -> V``: any event of type T, optionally bound to V."""

    type: str
    var: Optional[str] = None
    span: Span = _span()
    var_span: Span = _span()


@dataclass(frozen=True)
class Binary:
    """``A op B`` for the spatio-temporal operators, ``and`` and ``or``."""

    op: str
    left: "Match"
    right: "Match"
    span: Span = _span()


@dataclass(frozen=True)
class Not:
    """``not X``: pattern complement, or the negated part of an absence form.

    ``within`` is set for ``A ; not X within D`` (absence after A).
    """

    operand: "Match"
    within: Optional[Quantity] = None
    span: Span = _span()


Match = Union[EventRef, Binary, Not, Certainly, DayPattern, MonthPattern, ClockPattern,
              DatePattern, AtPlace, InShape, NearPlace]

ST_OPS = (";", "||", "=", "<>", ";=", ";<>", "||=", "||<>")
SEQ_OPS = (";", ";=", ";<>")
CONC_OPS = ("||", "||=", "||<>")


def op_parts(op: str) -> tuple[str, str]:
    """A join operator as (time relation: ``;``, ``||`` or ``""``, space relation: ``=``,
    ``<>`` or ``""``): ``";="`` → ``(";", "=")``, ``"and"`` → ``("", "")``."""
    if op == "and":
        return "", ""
    time_rel = op.rstrip("=<>")
    return time_rel, op[len(time_rel):]


# --------------------------------------------------------------------------- predicates

@dataclass(frozen=True)
class Num:
    """A plain number."""

    value: float
    span: Span = _span()


@dataclass(frozen=True)
class Str:
    """A string literal."""

    value: str
    span: Span = _span()


@dataclass(frozen=True)
class BoolLit:
    """``true`` / ``false``."""

    value: bool
    span: Span = _span()


@dataclass(frozen=True)
class TimeLit:
    """A date-time literal ``2019-10-01T09:00`` (program time zone unless it has an offset)."""

    text: str
    span: Span = _span()


@dataclass(frozen=True)
class Var:
    """A bound variable used whole: ``A`` in ``duration(A, B)``."""

    name: str
    span: Span = _span()


@dataclass(frozen=True)
class Attr:
    """``A.route``, ``A.t``, ``A.lo``, ``A.hi``."""

    var: str
    name: str
    span: Span = _span()


@dataclass(frozen=True)
class Call:
    """``f(args)``."""

    func: str
    args: tuple["Expr", ...]
    span: Span = _span()


@dataclass(frozen=True)
class BinOp:
    """Arithmetic ``+ - * /`` and comparisons ``== != < <= > >=``."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class BoolOp:
    """``and`` / ``or`` in predicates."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@dataclass(frozen=True)
class UnaryOp:
    """``-x`` or ``not p``."""

    op: str
    operand: "Expr"
    span: Span = _span()


Expr = Union[Num, Quantity, Str, BoolLit, TimeLit, Var, Attr, Call, BinOp, BoolOp, UnaryOp]

COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
ARITH_OPS = ("+", "-", "*", "/")


# --------------------------------------------------------------------------- declarations

@dataclass(frozen=True)
class AttrDecl:
    """``name: type`` in an event declaration."""

    name: str
    type: str
    span: Span = _span()


@dataclass(frozen=True)
class TimeBound:
    """One end of a time clause: an attribute shifted by a signed duration."""

    attr: str
    offset: Optional[Quantity] = None  # signed: value < 0 for ``ts - 30 s``
    span: Span = _span()


@dataclass(frozen=True)
class TimeClause:
    """``time ts``, ``time ts ± 5 s`` or ``time L .. H``."""

    low: TimeBound
    high: Optional[TimeBound] = None  # None: a single point (possibly widened)
    widen: Optional[Quantity] = None
    span: Span = _span()


@dataclass(frozen=True)
class PlaceClause:
    """``place point(lon, lat) ± 15 m`` or ``place area [± d]``."""

    lon: Optional[str] = None
    lat: Optional[str] = None
    geom: Optional[str] = None
    widen: Optional[Quantity] = None
    span: Span = _span()


@dataclass(frozen=True)
class SourceClause:
    """``source vehicle``."""

    attr: str
    span: Span = _span()


@dataclass(frozen=True)
class EventDecl:
    """``event T(attr: type, ...)`` with its ``source``, ``time`` and ``place`` clauses."""

    name: str
    attrs: tuple[AttrDecl, ...]
    source: Optional[SourceClause] = None
    time: Optional[TimeClause] = None
    place: Optional[PlaceClause] = None
    span: Span = _span()


@dataclass(frozen=True)
class PlaceDecl:
    """``place NAME = shape``."""

    name: str
    shape: Shape
    span: Span = _span()


@dataclass(frozen=True)
class PlacesFile:
    """``places "file.geojson"``: every named feature becomes a place."""

    path: str
    span: Span = _span()


@dataclass(frozen=True)
class Include:
    """``include "other.spatec"``."""

    path: str
    span: Span = _span()


@dataclass(frozen=True)
class Timezone:
    """``timezone "Europe/London"``."""

    name: str
    span: Span = _span()


@dataclass(frozen=True)
class CrsDecl:
    """``crs "EPSG:32631"``: the metric CRS for distances (extension; default UTM of the data)."""

    name: str
    span: Span = _span()


@dataclass(frozen=True)
class EmitField:
    """``name = expr`` in ``emit``."""

    name: str
    expr: Expr
    span: Span = _span()


@dataclass(frozen=True)
class Phrase:
    """``phrase NAME [per KEY] = MATCH [where P] [within D] [emit ...]``."""

    name: str
    match: Match
    per: Optional[str] = None
    where: Optional[Expr] = None
    within: Optional[Quantity] = None
    emit: tuple[EmitField, ...] = ()
    span: Span = _span()
    per_span: Span = _span()


Decl = Union[EventDecl, PlaceDecl, PlacesFile, Include, Timezone, CrsDecl, Phrase]


@dataclass(frozen=True)
class Module:
    """One parsed file: its declarations in order."""

    file: str
    decls: tuple[Decl, ...]
    span: Span = _span()


def is_pattern(m: Match) -> bool:
    """True when ``m`` is made only of patterns (no event type anywhere)."""
    if isinstance(m, PATTERN_ATOMS):
        return True
    if isinstance(m, Certainly):
        return True
    if isinstance(m, Not):
        return is_pattern(m.operand)
    if isinstance(m, Binary):
        return m.op in ("and", "or") and is_pattern(m.left) and is_pattern(m.right)
    return False


def walk(node):
    """Every AST node below and including ``node``, depth first, left to right."""
    yield node
    for name in getattr(node, "__dataclass_fields__", {}):
        if name.endswith("span"):
            continue
        value = getattr(node, name)
        if isinstance(value, tuple):
            for v in value:
                if hasattr(v, "__dataclass_fields__"):
                    yield from walk(v)
        elif hasattr(value, "__dataclass_fields__"):
            yield from walk(value)

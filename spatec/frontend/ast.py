"""The SpaTeC abstract syntax: small frozen dataclasses, one per construct.

The tree mirrors what was written (``A ; not X ; B`` is ``Binary(";",
Binary(";", A, Not(X)), B)``); the checker and the planner give it meaning.
Every node carries the span of its source text in ``span`` (and the spans of
the name tokens an error may point at: ``type_span``, ``name_span``, ...);
spans are ignored by equality so that two programs that say the same thing
compare equal.

Chains have no length limit: ``A or B or ...`` with 10,000 terms is a left-deep
tree 10,000 levels deep. Nothing here recurses on the depth of a tree:
equality, hashing and ``repr`` of nodes, :func:`walk` and :func:`is_pattern`
use explicit stacks, and :func:`trampoline` runs a recursive walk written as a
generator (``value = yield child_walk(...)``) without Python recursion, which
the front end's printer and checker use.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Optional, Union

from spatec.errors import NO_SPAN, Span
from spatec.frontend.flatpickle import HEIGHT, FlatPickled


def _span() -> Span:
    return field(default=NO_SPAN, compare=False, repr=False)


# --------------------------------------------------------------------------- nodes without recursion

_HASH = "_hash"   # cached in the instance: subtrees are hashed once, bottom-up
_PATTERN = "_pattern"
_COMPARED: dict = {}
_SHOWN: dict = {}


def _compared(cls) -> tuple:
    names = _COMPARED.get(cls)
    if names is None:
        names = _COMPARED[cls] = tuple(f.name for f in fields(cls) if f.compare)
    return names


def _shown(cls) -> tuple:
    names = _SHOWN.get(cls)
    if names is None:
        names = _SHOWN[cls] = tuple(f.name for f in fields(cls) if f.repr)
    return names


def _nodes_in(value, out: list) -> None:
    """The nodes directly inside a field value (a node, or nodes in nested tuples)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, Node):
            out.append(v)
        elif isinstance(v, tuple):
            stack.extend(v)


def _hash_key(value):
    """A hashable stand-in for a field value whose nodes are already hashed."""
    if isinstance(value, Node):
        return value.__dict__[_HASH]
    if isinstance(value, tuple):
        out, stack = [], [(value, 0, [])]
        while stack:  # tuples nest only a few levels (coordinates); kept iterative anyway
            t, i, acc = stack.pop()
            if i == len(t):
                if stack:
                    stack[-1][2].append(tuple(acc))
                else:
                    out = tuple(acc)
                continue
            stack.append((t, i + 1, acc))
            v = t[i]
            if isinstance(v, tuple):
                stack.append((v, 0, []))
            else:
                acc.append(v.__dict__[_HASH] if isinstance(v, Node) else v)
        return ("tuple", out)
    return value


def node_hash(n: "Node") -> int:
    """Hash of a node from its compared fields; subtrees hashed bottom-up without recursion."""
    h = n.__dict__.get(_HASH)
    if h is not None:
        return h
    stack = [n]
    while stack:
        x = stack[-1]
        if _HASH in x.__dict__:
            stack.pop()
            continue
        kids: list = []
        for name in _compared(type(x)):
            _nodes_in(getattr(x, name), kids)
        pending = [k for k in kids if _HASH not in k.__dict__]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        key = (type(x).__name__,) + tuple(_hash_key(getattr(x, name)) for name in _compared(type(x)))
        object.__setattr__(x, _HASH, hash(key))
    return n.__dict__[_HASH]


def nodes_equal(a, b) -> bool:
    """Structural equality of two values that may hold nodes (spans ignored), without recursion."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if isinstance(x, Node) or isinstance(y, Node):
            if type(x) is not type(y):
                return False
            hx, hy = x.__dict__.get(_HASH), y.__dict__.get(_HASH)
            if hx is not None and hy is not None and hx != hy:
                return False
            stack.extend((getattr(x, f), getattr(y, f)) for f in _compared(type(x)))
        elif isinstance(x, tuple) or isinstance(y, tuple):
            if not (isinstance(x, tuple) and isinstance(y, tuple)) or len(x) != len(y):
                return False
            stack.extend(zip(x, y))
        elif x != y:
            return False
    return True


def trampoline(gen):
    """Run a recursive walk written as generators, without Python recursion.

    A walk yields the generator of each sub-walk it needs and receives that
    sub-walk's return value (``t = yield self._expr(e.left)``); its own
    ``return`` value goes to the walk that yielded it, or out of here.
    """
    stack = [gen]
    value = None
    while True:
        try:
            sub = stack[-1].send(value)
        except StopIteration as stop:
            stack.pop()
            if not stack:
                return stop.value
            value = stop.value
            continue
        stack.append(sub)
        value = None


def _repr_walk(x):
    # the text dataclasses would give (qualified class name, fields shown), built without recursion
    if isinstance(x, Node):
        parts = []
        for name in _shown(type(x)):
            parts.append(f"{name}={(yield _repr_walk(getattr(x, name)))}")
        return f"{type(x).__qualname__}({', '.join(parts)})"
    if isinstance(x, tuple):
        items = []
        for v in x:
            items.append((yield _repr_walk(v)))
        return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    return repr(x)


class Node(FlatPickled):
    """Base of every AST node: equality, hash, repr and pickling that never recurse on the
    depth of a tree (pickling: :mod:`spatec.frontend.flatpickle`)."""

    __slots__ = ()

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        return nodes_equal(self, other)

    def __hash__(self) -> int:
        return node_hash(self)

    def __repr__(self) -> str:
        return trampoline(_repr_walk(self))

    def __getstate__(self):
        # cached hashes depend on the process's string hashing: never pickled (nor other caches)
        return {k: v for k, v in self.__dict__.items() if k not in (_HASH, _PATTERN, HEIGHT)}


def node(cls):
    """Declare an AST node: a frozen dataclass whose equality, hash and repr come from :class:`Node`."""
    return dataclass(frozen=True, eq=False, repr=False)(cls)


# --------------------------------------------------------------------------- values

# Units a quantity may carry, by dimension, with their factor to the base unit
# (microseconds for time, metres for distance, metres per second for speed).
TIME_UNITS = {"s": 1_000_000, "min": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}
DIST_UNITS = {"m": 1.0, "km": 1000.0}
SPEED_UNITS = {"m/s": 1.0, "km/h": 1000.0 / 3600.0}
UNIT_DIMENSION = {**{u: "duration" for u in TIME_UNITS}, **{u: "distance" for u in DIST_UNITS},
                  **{u: "speed" for u in SPEED_UNITS}}


@node
class Quantity(Node):
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

@node
class Circle(Node):
    """``circle(lon, lat, radius)``."""

    lon: float
    lat: float
    radius: Quantity
    span: Span = _span()


@node
class PointShape(Node):
    """``point(lon, lat)`` optionally widened: ``point(lon, lat) ± 10 m``."""

    lon: float
    lat: float
    widen: Optional[Quantity] = None
    span: Span = _span()


@node
class PolygonShape(Node):
    """``polygon((lon, lat), ...)``: one ring, closed implicitly."""

    coords: tuple[tuple[float, float], ...]
    span: Span = _span()


Shape = Union[Circle, PointShape, PolygonShape]


# --------------------------------------------------------------------------- patterns

@node
class DayPattern(Node):
    """``Monday`` … ``Sunday``, ``weekday``, ``weekend``."""

    name: str
    span: Span = _span()


@node
class MonthPattern(Node):
    """``January`` … ``December``."""

    name: str
    span: Span = _span()


@node
class ClockPattern(Node):
    """``between 07:00 and 09:30``: local clock time, every day; may wrap midnight."""

    start: str
    end: str
    span: Span = _span()


@node
class DatePattern(Node):
    """``on 2026-12-24`` (start == end) or ``from 2026-12-01 to 2026-12-24`` (inclusive days)."""

    start: str
    end: str
    single: bool = False
    span: Span = _span()


@node
class AtPlace(Node):
    """``at P``: a named place or a place set; ``at SET -> S`` binds the matching place to S.

    ``place`` is the name as written, unquoted (``at "Hospital Bus Station"``
    and ``at 0500CCITY`` are places whose names are not identifiers).
    """

    place: str
    var: Optional[str] = None
    span: Span = _span()
    place_span: Span = _span()
    var_span: Span = _span()
    #: ``at nearest SET -> S``: of the places that satisfy the pattern, only the one whose
    #: centre is nearest the stamp's centre is bound (ties: the first in the file)
    nearest: bool = False
    nearest_span: Span = _span()


@node
class InShape(Node):
    """``in circle(...)`` / ``in polygon(...)``."""

    shape: Shape
    span: Span = _span()


@node
class NearPlace(Node):
    """``within 300 m of P`` (P a place or a place set: near any of its places)."""

    distance: Quantity
    place: str
    span: Span = _span()
    place_span: Span = _span()


@node
class Certainly(Node):
    """``certainly P``: the stamp lies inside the pattern's set."""

    pattern: "Match"
    span: Span = _span()


PATTERN_ATOMS = (DayPattern, MonthPattern, ClockPattern, DatePattern, AtPlace, InShape, NearPlace)


# --------------------------------------------------------------------------- match expressions

@node
class EventRef(Node):
    """``T`` or ``T -> V``: any event of type T, optionally bound to V.

    T is a declared event type or the name of a phrase, whose composites are
    events for the other phrases (SPEC §8).
    """

    type: str
    var: Optional[str] = None
    span: Span = _span()
    var_span: Span = _span()
    type_span: Span = _span()


@node
class Binary(Node):
    """``A op B`` for the spatio-temporal operators, ``and`` and ``or``."""

    op: str
    left: "Match"
    right: "Match"
    span: Span = _span()


@node
class Not(Node):
    """``not X``: pattern complement, or the negated part of an absence form.

    ``within`` is set for ``A ; not X within D`` (absence after A).
    """

    operand: "Match"
    within: Optional[Quantity] = None
    span: Span = _span()


@node
class Run(Node):
    """``run E -> R [while CONDITION] [gap D]``: one composite per maximal stretch of a
    source's successive events of type E (SPEC §7).

    ``filter`` is the pattern E is restricted by (``run (BusGPS and not at
    centre) -> R``: ``not at centre``), None when E is a bare type.
    ``cond`` is the ``while`` condition over ``R.first``, ``R.prev``, ``R.this``.
    """

    type: str
    var: str
    filter: Optional["Match"] = None
    cond: Optional["Expr"] = None
    gap: Optional[Quantity] = None
    span: Span = _span()
    type_span: Span = _span()
    var_span: Span = _span()


Match = Union[EventRef, Binary, Not, Certainly, Run, DayPattern, MonthPattern, ClockPattern,
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

@node
class Num(Node):
    """A plain number."""

    value: float
    span: Span = _span()


@node
class Str(Node):
    """A string literal."""

    value: str
    span: Span = _span()


@node
class BoolLit(Node):
    """``true`` / ``false``."""

    value: bool
    span: Span = _span()


@node
class TimeLit(Node):
    """A date-time literal ``2019-10-01T09:00`` (program time zone unless it has an offset)."""

    text: str
    span: Span = _span()


@node
class Var(Node):
    """A bound variable used whole: ``A`` in ``duration(A, B)``."""

    name: str
    span: Span = _span()


@node
class Attr(Node):
    """``A.route``, ``A.t``, ``A.lo``, ``A.hi``; ``R.first`` (a run's member event, resolved
    by the checker: see :mod:`spatec.frontend.runs`); ``R.first.t`` (``member`` = "first")."""

    var: str
    name: str
    member: Optional[str] = None
    span: Span = _span()
    var_span: Span = _span()
    name_span: Span = _span()
    member_span: Span = _span()


@node
class Call(Node):
    """``f(args)``."""

    func: str
    args: tuple["Expr", ...]
    span: Span = _span()
    func_span: Span = _span()


@node
class BinOp(Node):
    """Arithmetic ``+ - * /`` and comparisons ``== != < <= > >=``."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@node
class BoolOp(Node):
    """``and`` / ``or`` in predicates."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@node
class UnaryOp(Node):
    """``-x`` or ``not p``."""

    op: str
    operand: "Expr"
    span: Span = _span()


Expr = Union[Num, Quantity, Str, BoolLit, TimeLit, Var, Attr, Call, BinOp, BoolOp, UnaryOp]

COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
ARITH_OPS = ("+", "-", "*", "/")


# --------------------------------------------------------------------------- declarations

@node
class AttrDecl(Node):
    """``name: type [from "COLUMN"]`` in an event declaration: ``column`` is the input column
    it is read from (None: the column of its own name)."""

    name: str
    type: str
    span: Span = _span()
    column: Optional[str] = None

    @property
    def source_column(self) -> str:
        """The name of the input column the attribute is read from."""
        return self.column if self.column is not None else self.name


@node
class TimeBound(Node):
    """One end of a time clause: an attribute shifted by a signed duration."""

    attr: str
    offset: Optional[Quantity] = None  # signed: value < 0 for ``ts - 30 s``
    span: Span = _span()


@node
class TimeClause(Node):
    """``time ts``, ``time ts ± 5 s`` or ``time L .. H``."""

    low: TimeBound
    high: Optional[TimeBound] = None  # None: a single point (possibly widened)
    widen: Optional[Quantity] = None
    span: Span = _span()


@node
class PlaceClause(Node):
    """``place point(lon, lat) ± 15 m`` or ``place area [± d]``: for an event, from its
    attributes; for a place set, from each row's columns (or feature's properties)."""

    lon: Optional[str] = None
    lat: Optional[str] = None
    geom: Optional[str] = None
    widen: Optional[Quantity] = None
    span: Span = _span()


@node
class SourceClause(Node):
    """``source vehicle``; after a phrase's ``as event``, one or more emit fields
    (``source line, direction``: ``more`` holds the names after the first)."""

    attr: str
    span: Span = _span()
    more: tuple[str, ...] = ()

    @property
    def attrs(self) -> tuple[str, ...]:
        return (self.attr,) + self.more


@node
class EventDecl(Node):
    """``event T(attr: type, ...)`` with its ``source``, ``time`` and ``place`` clauses."""

    name: str
    attrs: tuple[AttrDecl, ...]
    source: Optional[SourceClause] = None
    time: Optional[TimeClause] = None
    place: Optional[PlaceClause] = None
    span: Span = _span()
    name_span: Span = _span()


@node
class PlaceDecl(Node):
    """``place NAME = shape``."""

    name: str
    shape: Shape
    span: Span = _span()
    name_span: Span = _span()


@node
class PlacesFile(Node):
    """``places "file.geojson"``: every named feature becomes a place; ``places gtfs "feed.zip"
    routes ± 30 m``: every route of a GTFS feed (``gtfs``: the table) becomes a place."""

    path: str
    span: Span = _span()
    path_span: Span = _span()
    gtfs: Optional[str] = None            # the GTFS table whose rows become places
    widen: Optional[Quantity] = None      # ``± D`` after a GTFS table
    table_span: Span = _span()


@node
class PlaceSetDecl(Node):
    """``places NAME = "FILE" [place EXPR]``: a set of places, one per CSV row or GeoJSON
    feature, matched as a whole by ``at NAME`` (SPEC §9); ``places NAME = gtfs "feed.zip"
    stops ± 40 m``: one place per row of a GTFS feed's table (``gtfs``), whose region the
    table gives (``place`` then holds only the widening)."""

    name: str
    path: str
    place: Optional[PlaceClause] = None
    span: Span = _span()
    name_span: Span = _span()
    path_span: Span = _span()
    gtfs: Optional[str] = None
    table_span: Span = _span()


@node
class Include(Node):
    """``include "other.spatec"``."""

    path: str
    span: Span = _span()
    path_span: Span = _span()


@node
class Timezone(Node):
    """``timezone "Europe/London"``."""

    name: str
    span: Span = _span()


@node
class CrsDecl(Node):
    """``crs "EPSG:32631"``: the metric CRS for distances (extension; default UTM of the data)."""

    name: str
    span: Span = _span()


@node
class EmitField(Node):
    """``name = expr`` in ``emit``."""

    name: str
    expr: Expr
    span: Span = _span()


@node
class AsEvent(Node):
    """``as event [source F, ...] [time ...]`` after a phrase (SPEC §8): its composites, as
    events, have the source and the local time these clauses build from its emit fields."""

    source: Optional[SourceClause] = None
    time: Optional[TimeClause] = None
    span: Span = _span()


@node
class Phrase(Node):
    """``phrase NAME [per KEY] = MATCH [where P] [within D] [emit ...] [as event ...]``."""

    name: str
    match: Match
    per: Optional[str] = None
    where: Optional[Expr] = None
    within: Optional[Quantity] = None
    emit: tuple[EmitField, ...] = ()
    span: Span = _span()
    per_span: Span = _span()
    name_span: Span = _span()
    as_event: Optional[AsEvent] = None


Decl = Union[EventDecl, PlaceDecl, PlacesFile, PlaceSetDecl, Include, Timezone, CrsDecl, Phrase]


@node
class Module(Node):
    """One parsed file: its declarations in order."""

    file: str
    decls: tuple[Decl, ...]
    span: Span = _span()


# --------------------------------------------------------------------------- walks

def literal_type(e) -> str | None:
    """The type word of a literal that needs no context (number, quantity, text, boolean), else None."""
    if isinstance(e, Num):
        return "number"
    if isinstance(e, Quantity):
        return e.dimension
    if isinstance(e, Str):
        return "str"
    if isinstance(e, BoolLit):
        return "bool"
    return None


def is_pattern(m: Match) -> bool:
    """True when ``m`` is made only of patterns (no event type anywhere); cached per node."""
    cached = m.__dict__.get(_PATTERN) if isinstance(m, Node) else None
    if cached is not None:
        return cached
    # post-order over and/or/not/certainly: a node's answer from its operands'
    stack = [m]
    while stack:
        x = stack[-1]
        if _PATTERN in x.__dict__:
            stack.pop()
            continue
        if isinstance(x, Not):
            kids = (x.operand,)
        elif isinstance(x, Binary) and x.op in ("and", "or"):
            kids = (x.left, x.right)
        else:
            kids = ()
        pending = [k for k in kids if _PATTERN not in k.__dict__]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        if isinstance(x, (Certainly,) + PATTERN_ATOMS):
            value = True
        elif kids:
            value = all(k.__dict__[_PATTERN] for k in kids)
        else:
            value = False
        object.__setattr__(x, _PATTERN, value)
    return m.__dict__[_PATTERN]


def children(n) -> list:
    """The nodes directly inside ``n``, left to right."""
    out: list = []
    for name in _compared(type(n)):
        value = getattr(n, name)
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, tuple):
            found: list = []
            _nodes_in(value, found)
            out.extend(reversed(found))  # _nodes_in pops: reverse to keep the written order
    return out


def walk(n):
    """Every AST node below and including ``n``, depth first, left to right (no recursion)."""
    stack = [n]
    while stack:
        x = stack.pop()
        yield x
        if isinstance(x, Node):
            stack.extend(reversed(children(x)))

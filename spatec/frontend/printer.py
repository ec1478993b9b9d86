"""AST → SpaTeC text: the inverse of :mod:`spatec.frontend.parse`.

The printed text parses back to an equal AST. Parentheses appear only where
precedence needs them, so printing also normalises a program's layout.

>>> from spatec.frontend.parse import parse_text
>>> m = parse_text('phrase P = (BusGPS -> A ; not BusGPS -> X) ; BusGPS -> B within 5 min')
>>> print_match(m.decls[0].match)
'BusGPS -> A ; not BusGPS -> X ; BusGPS -> B'
"""
from __future__ import annotations

import math
import re

from spatec.frontend import ast as A

# --------------------------------------------------------------------------- values


def print_number(v: float) -> str:
    """A number as the grammar reads it back exactly: ``52.175``, ``-0.5``, ``30``."""
    if not math.isfinite(v):
        raise ValueError(f"{v} cannot be written in SpaTeC")
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def print_quantity(q: A.Quantity) -> str:
    """``30 s``, ``1.5 km``, ``12 km/h`` (the value must not be negative)."""
    return f"{print_number(q.value)} {q.unit}"


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def print_string(s: str) -> str:
    """A double-quoted string literal; control and unprintable characters escaped."""
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def print_shape(s: A.Shape) -> str:
    if isinstance(s, A.Circle):
        return f"circle({print_number(s.lon)}, {print_number(s.lat)}, {print_quantity(s.radius)})"
    if isinstance(s, A.PointShape):
        text = f"point({print_number(s.lon)}, {print_number(s.lat)})"
        return text + (f" ± {print_quantity(s.widen)}" if s.widen is not None else "")
    coords = ", ".join(f"({print_number(x)}, {print_number(y)})" for x, y in s.coords)
    return f"polygon({coords})"


# --------------------------------------------------------------------------- names

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLACE_ID = re.compile(r"[0-9][A-Za-z0-9_]*")
# words the grammar reads as keywords somewhere: such a place name is printed quoted
KEYWORDS = frozenset((
    "timezone", "crs", "places", "include", "event", "source", "time", "place", "point", "circle",
    "polygon", "phrase", "per", "where", "within", "emit", "or", "and", "not", "certainly", "between",
    "on", "from", "to", "at", "in", "of", "true", "false", "run", "while", "gap", "nearest", "as",
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "weekday", "weekend",
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December", *A.UNIT_DIMENSION))


def print_place_name(name: str) -> str:
    """A place's name as written after `at`: bare when the grammar reads it back as a name, else quoted."""
    if (_IDENT.fullmatch(name) and name not in KEYWORDS) or _PLACE_ID.fullmatch(name):
        return name
    return print_string(name)


# --------------------------------------------------------------------------- match expressions

# Binding strength, loosest first; the grammar's m_or, m_and, m_st, m_unary.
_M_OR, _M_AND, _M_ST, _M_UNARY = 1, 2, 3, 4


def _m_level(m: A.Match) -> int:
    if isinstance(m, A.Binary):
        return {"or": _M_OR, "and": _M_AND}.get(m.op, _M_ST)
    return _M_UNARY


def print_match(m: A.Match) -> str:
    """A match expression with the fewest parentheses that keep its shape."""
    out: list[str] = []
    A.trampoline(_match(m, _M_OR, out, top=True))
    return "".join(out)


def _match(m: A.Match, need: int, out: list, top: bool = False):
    """Writes ``m`` to ``out`` (a walk for :func:`A.trampoline`: chains of any length)."""
    # a run's `while` condition would swallow an `and`/`or` after it: parenthesised unless alone
    paren = _m_level(m) < need or (isinstance(m, A.Run) and m.cond is not None and m.gap is None and not top)
    if paren:
        out.append("(")
    if isinstance(m, A.EventRef):
        out.append(m.type if m.var is None else f"{m.type} -> {m.var}")
    elif isinstance(m, A.Binary):
        if m.op in ("or", "and"):
            level = _m_level(m)
            yield _match(m.left, level, out)
            out.append(f" {m.op} ")
            yield _match(m.right, level + 1, out)
        elif isinstance(m.right, A.Not) and m.right.within is not None:
            # `A ; not X within D`: the window belongs to the absence (grammar rule m_absent_after)
            neg = m.right
            yield _match(m.left, _M_ST, out)
            out.append(f" {m.op} not ")
            yield _match(neg.operand, _M_UNARY, out)
            out.append(f" within {print_quantity(neg.within)}")
        else:
            yield _match(m.left, _M_ST, out)
            out.append(f" {m.op} ")
            yield _match(m.right, _M_UNARY, out)
    elif isinstance(m, A.Not):
        if m.within is not None:  # only reachable as the right operand of an operator
            raise ValueError("`not X within D` stands only after a sequence operator: `A ; not X within D`")
        out.append("not ")
        yield _match(m.operand, _M_UNARY, out)
    elif isinstance(m, A.Certainly):
        out.append("certainly ")
        yield _match(m.pattern, _M_UNARY, out)
    elif isinstance(m, A.Run):
        if m.filter is None:
            out.append(f"run {m.type}")
        else:
            out.append(f"run ({m.type} and ")
            yield _match(m.filter, _M_AND, out)
            out.append(")")
        out.append(f" -> {m.var}")
        if m.cond is not None:
            out.append(" while ")
            yield _expr(m.cond, _E_OR, out)
        if m.gap is not None:
            out.append(f" gap {print_quantity(m.gap)}")
    else:
        out.append(_pattern(m))
    if paren:
        out.append(")")


def _pattern(m) -> str:
    if isinstance(m, (A.DayPattern, A.MonthPattern)):
        return m.name
    if isinstance(m, A.ClockPattern):
        return f"between {m.start} and {m.end}"
    if isinstance(m, A.DatePattern):
        return f"on {m.start}" if m.single else f"from {m.start} to {m.end}"
    if isinstance(m, A.AtPlace):
        text = f"at {'nearest ' if m.nearest else ''}{print_place_name(m.place)}"
        return text if m.var is None else f"{text} -> {m.var}"
    if isinstance(m, A.InShape):
        return f"in {print_shape(m.shape)}"
    if isinstance(m, A.NearPlace):
        return f"within {print_quantity(m.distance)} of {print_place_name(m.place)}"
    raise TypeError(f"not a match expression: {m!r}")


def _ends_in_open_not(m: A.Match) -> bool:
    """True when the printed text ends with `not X`: a `within` after it would join the absence."""
    while True:
        if isinstance(m, A.Binary):
            if isinstance(m.right, A.Not) and m.right.within is not None:
                return False
            m = m.right
        elif isinstance(m, A.Not):
            return True
        elif isinstance(m, A.Certainly):
            m = m.pattern
        else:
            return False


# --------------------------------------------------------------------------- predicates

# The grammar's e_or .. e_atom, loosest first.
_E_OR, _E_AND, _E_NOT, _E_CMP, _E_SUM, _E_PROD, _E_NEG, _E_ATOM = range(1, 9)


def _e_level(e: A.Expr) -> int:
    if isinstance(e, A.BoolOp):
        return _E_OR if e.op == "or" else _E_AND
    if isinstance(e, A.UnaryOp):
        return _E_NOT if e.op == "not" else _E_NEG
    if isinstance(e, A.BinOp):
        if e.op in A.COMPARE_OPS:
            return _E_CMP
        return _E_SUM if e.op in ("+", "-") else _E_PROD
    return _E_ATOM


def print_expr(e: A.Expr) -> str:
    """A predicate or emit expression with the fewest parentheses that keep its shape."""
    out: list[str] = []
    A.trampoline(_expr(e, _E_OR, out))
    return "".join(out)


def _expr(e: A.Expr, need: int, out: list):
    """Writes ``e`` to ``out`` (a walk for :func:`A.trampoline`)."""
    paren = _e_level(e) < need
    if paren:
        out.append("(")
    if isinstance(e, A.BoolOp):
        level = _e_level(e)
        yield _expr(e.left, level, out)
        out.append(f" {e.op} ")
        yield _expr(e.right, level + 1, out)
    elif isinstance(e, A.UnaryOp):
        if e.op == "not":
            out.append("not ")
            yield _expr(e.operand, _E_NOT, out)
        else:
            out.append("-")
            yield _expr(e.operand, _E_NEG, out)
    elif isinstance(e, A.BinOp):
        level = _e_level(e)
        if level == _E_CMP:  # comparisons do not chain
            yield _expr(e.left, _E_SUM, out)
            out.append(f" {e.op} ")
            yield _expr(e.right, _E_SUM, out)
        else:
            yield _expr(e.left, level, out)
            out.append(f" {e.op} ")
            yield _expr(e.right, level + 1, out)
    elif isinstance(e, A.Call):
        out.append(f"{e.func}(")
        for i, a in enumerate(e.args):
            if i:
                out.append(", ")
            yield _expr(a, _E_OR, out)
        out.append(")")
    else:
        out.append(_atom(e))
    if paren:
        out.append(")")


def _atom(e: A.Expr) -> str:
    if isinstance(e, A.Num):
        if e.value < 0:
            raise ValueError("a negative number is written as `-` applied to it (UnaryOp)")
        return print_number(e.value)
    if isinstance(e, A.Quantity):
        return print_quantity(e)
    if isinstance(e, A.Str):
        return print_string(e.value)
    if isinstance(e, A.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, A.TimeLit):
        return e.text
    if isinstance(e, A.Var):
        return e.name
    if isinstance(e, A.Attr):
        return f"{e.var}.{e.name}" if e.member is None else f"{e.var}.{e.member}.{e.name}"
    raise TypeError(f"not an expression: {e!r}")


# --------------------------------------------------------------------------- declarations


def _time_bound(b: A.TimeBound) -> str:
    if b.offset is None:
        return b.attr
    sign = "-" if b.offset.value < 0 else "+"
    return f"{b.attr} {sign} {print_quantity(A.Quantity(abs(b.offset.value), b.offset.unit))}"


def print_event(d: A.EventDecl) -> str:
    attrs = ", ".join(f"{a.name}: {a.type}" + (f" from {print_string(a.column)}" if a.column is not None else "")
                      for a in d.attrs)
    lines = [f"event {d.name}({attrs})"]
    lines += _source_time(d.source, d.time)
    if d.place is not None:
        lines.append(f"    place  {_place_clause(d.place)}")
    return "\n".join(lines)


def _source_time(source: A.SourceClause | None, time: A.TimeClause | None) -> list:
    """The `source` and `time` lines of an event declaration or of a phrase's `as event`."""
    lines = []
    if source is not None:
        lines.append(f"    source {', '.join(source.attrs)}")
    if time is not None:
        text = _time_bound(time.low)
        if time.high is not None:
            text += f" .. {_time_bound(time.high)}"
        elif time.widen is not None:
            text += f" ± {print_quantity(time.widen)}"
        lines.append(f"    time   {text}")
    return lines


def _place_clause(pc: A.PlaceClause) -> str:
    text = pc.geom if pc.geom is not None else f"point({pc.lon}, {pc.lat})"
    if pc.widen is not None:
        text += f" ± {print_quantity(pc.widen)}"
    return text


def print_phrase(p: A.Phrase) -> str:
    head = f"phrase {p.name}" + (f" per {p.per}" if p.per is not None else "") + " ="
    match = print_match(p.match)
    if p.where is None and p.within is not None and _ends_in_open_not(p.match):
        match = f"({match})"  # else the phrase's `within` would become the absence's window
    lines = [head, f"    {match}"]
    if p.where is not None:
        lines.append(f"  where {print_expr(p.where)}")
    if p.within is not None:
        lines.append(f"  within {print_quantity(p.within)}")
    if p.emit:
        lines.append("  emit " + ", ".join(f"{f.name} = {print_expr(f.expr)}" for f in p.emit))
    if p.as_event is not None:
        lines.append("  as event")
        lines += _source_time(p.as_event.source, p.as_event.time)
    return "\n".join(lines)


def print_decl(d: A.Decl) -> str:
    if isinstance(d, A.EventDecl):
        return print_event(d)
    if isinstance(d, A.Phrase):
        return print_phrase(d)
    if isinstance(d, A.PlaceDecl):
        return f"place {d.name} = {print_shape(d.shape)}"
    if isinstance(d, A.Timezone):
        return f"timezone {print_string(d.name)}"
    if isinstance(d, A.CrsDecl):
        return f"crs {print_string(d.name)}"
    if isinstance(d, A.PlacesFile):
        if d.gtfs is not None:
            return (f"places gtfs {print_string(d.path)} {d.gtfs}"
                    + (f" ± {print_quantity(d.widen)}" if d.widen is not None else ""))
        return f"places {print_string(d.path)}"
    if isinstance(d, A.PlaceSetDecl) and d.gtfs is not None:
        widen = d.place.widen if d.place is not None else None
        return (f"places {d.name} = gtfs {print_string(d.path)} {d.gtfs}"
                + (f" ± {print_quantity(widen)}" if widen is not None else ""))
    if isinstance(d, A.PlaceSetDecl):
        text = f"places {d.name} = {print_string(d.path)}"
        return text if d.place is None else f"{text}\n    place {_place_clause(d.place)}"
    if isinstance(d, A.Include):
        return f"include {print_string(d.path)}"
    raise TypeError(f"not a declaration: {d!r}")


def print_module(m: A.Module) -> str:
    """A whole file: declarations in order, one blank line between them."""
    return "\n\n".join(print_decl(d) for d in m.decls) + "\n"

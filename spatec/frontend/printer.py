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


# --------------------------------------------------------------------------- match expressions

# Binding strength, loosest first; the grammar's m_or, m_and, m_st, m_unary.
_M_OR, _M_AND, _M_ST, _M_UNARY = 1, 2, 3, 4


def _m_level(m: A.Match) -> int:
    if isinstance(m, A.Binary):
        return {"or": _M_OR, "and": _M_AND}.get(m.op, _M_ST)
    return _M_UNARY


def print_match(m: A.Match) -> str:
    """A match expression with the fewest parentheses that keep its shape."""
    return _match(m, _M_OR)


def _match(m: A.Match, need: int) -> str:
    text = _match_bare(m)
    return f"({text})" if _m_level(m) < need else text


def _match_bare(m: A.Match) -> str:
    if isinstance(m, A.EventRef):
        return m.type if m.var is None else f"{m.type} -> {m.var}"
    if isinstance(m, A.Binary):
        if m.op in ("or", "and"):
            level = _m_level(m)
            return f"{_match(m.left, level)} {m.op} {_match(m.right, level + 1)}"
        if isinstance(m.right, A.Not) and m.right.within is not None:
            # `A ; not X within D`: the window belongs to the absence (grammar rule m_absent_after)
            neg = m.right
            return (f"{_match(m.left, _M_ST)} {m.op} not {_match(neg.operand, _M_UNARY)} "
                    f"within {print_quantity(neg.within)}")
        return f"{_match(m.left, _M_ST)} {m.op} {_match(m.right, _M_UNARY)}"
    if isinstance(m, A.Not):
        if m.within is not None:  # only reachable as the right operand of an operator
            raise ValueError("`not X within D` stands only after a sequence operator: `A ; not X within D`")
        return f"not {_match(m.operand, _M_UNARY)}"
    if isinstance(m, A.Certainly):
        return f"certainly {_match(m.pattern, _M_UNARY)}"
    return _pattern(m)


def _pattern(m) -> str:
    if isinstance(m, (A.DayPattern, A.MonthPattern)):
        return m.name
    if isinstance(m, A.ClockPattern):
        return f"between {m.start} and {m.end}"
    if isinstance(m, A.DatePattern):
        return f"on {m.start}" if m.single else f"from {m.start} to {m.end}"
    if isinstance(m, A.AtPlace):
        return f"at {m.place}"
    if isinstance(m, A.InShape):
        return f"in {print_shape(m.shape)}"
    if isinstance(m, A.NearPlace):
        return f"within {print_quantity(m.distance)} of {m.place}"
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
    return _expr(e, _E_OR)


def _expr(e: A.Expr, need: int) -> str:
    text = _expr_bare(e)
    return f"({text})" if _e_level(e) < need else text


def _expr_bare(e: A.Expr) -> str:
    if isinstance(e, A.BoolOp):
        level = _e_level(e)
        return f"{_expr(e.left, level)} {e.op} {_expr(e.right, level + 1)}"
    if isinstance(e, A.UnaryOp):
        if e.op == "not":
            return f"not {_expr(e.operand, _E_NOT)}"
        return f"-{_expr(e.operand, _E_NEG)}"
    if isinstance(e, A.BinOp):
        level = _e_level(e)
        if level == _E_CMP:  # comparisons do not chain
            return f"{_expr(e.left, _E_SUM)} {e.op} {_expr(e.right, _E_SUM)}"
        return f"{_expr(e.left, level)} {e.op} {_expr(e.right, level + 1)}"
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
        return f"{e.var}.{e.name}"
    if isinstance(e, A.Call):
        return f"{e.func}({', '.join(print_expr(a) for a in e.args)})"
    raise TypeError(f"not an expression: {e!r}")


# --------------------------------------------------------------------------- declarations


def _time_bound(b: A.TimeBound) -> str:
    if b.offset is None:
        return b.attr
    sign = "-" if b.offset.value < 0 else "+"
    return f"{b.attr} {sign} {print_quantity(A.Quantity(abs(b.offset.value), b.offset.unit))}"


def print_event(d: A.EventDecl) -> str:
    attrs = ", ".join(f"{a.name}: {a.type}" for a in d.attrs)
    lines = [f"event {d.name}({attrs})"]
    if d.source is not None:
        lines.append(f"    source {d.source.attr}")
    if d.time is not None:
        tc = d.time
        text = _time_bound(tc.low)
        if tc.high is not None:
            text += f" .. {_time_bound(tc.high)}"
        elif tc.widen is not None:
            text += f" ± {print_quantity(tc.widen)}"
        lines.append(f"    time   {text}")
    if d.place is not None:
        pc = d.place
        text = pc.geom if pc.geom is not None else f"point({pc.lon}, {pc.lat})"
        if pc.widen is not None:
            text += f" ± {print_quantity(pc.widen)}"
        lines.append(f"    place  {text}")
    return "\n".join(lines)


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
        return f"places {print_string(d.path)}"
    if isinstance(d, A.Include):
        return f"include {print_string(d.path)}"
    raise TypeError(f"not a declaration: {d!r}")


def print_module(m: A.Module) -> str:
    """A whole file: declarations in order, one blank line between them."""
    return "\n\n".join(print_decl(d) for d in m.decls) + "\n"

"""A subscription's ``where``: the language's own predicate over a phrase's output fields.

The text is parsed by the grammar's ``expr`` rule (:func:`spatec.frontend.parse.parse_expr`)
and checked against the phrase's output schema (its advertisement, what ``spatec check
--schema`` prints): a bare name is an output field (``line``, ``metres``, ``lo``); literals
carry units as in a phrase (``minutes > 20``, ``gap > 5 min`` for a duration field). The
checker's own rules for units and comparisons decide what is a type or unit mismatch.

Errors are :class:`FilterError` with the message and the 1-based column in the filter text.
A filter that can never match — a conjunction whose comparisons on one field leave no value
(``metres < 50 and metres > 80``, ``line == "1" and line == "2"``), or a comparison of two
literals that is false — is an error too, at the comparison that empties it.

A checked filter compiles to a Python function of the alert (the JSON dict a sink gets);
its top-level conjunction's simple comparisons (``field op literal``) are also kept as
:class:`Atom` s, for the covering index (:mod:`spatec.service.index`).

>>> from spatec.frontend.check import check_file
>>> prog = check_file('x.spatec', text='''
... event Ping(box: str, n: int, at_: time)
...     source box
...     time at_
... phrase Gap = Ping -> A ; Ping -> B within 1 h
...     emit box = A.box, n = A.n, gap = duration(A, B)''')
>>> f = compile_filter(prog, 'Gap', 'box == "b1" and gap > 10 min')
>>> f.test({"box": "b1", "gap": 900.0}), f.test({"box": "b1", "gap": 60.0})
(True, False)
>>> [a.op for a in f.atoms]
['==', '>']
>>> try:
...     compile_filter(prog, 'Gap', 'gap > 10')
... except FilterError as e:
...     print(e.column, e.message.split(':')[0])
1 unit mismatch
"""
from __future__ import annotations

import datetime as dt
import functools
import math
import operator
from dataclasses import dataclass

from spatec.errors import ParseError, SpatecError
from spatec.frontend import ast as A
from spatec.frontend.check import time_literal_micros
from spatec.frontend.typewords import DIMENSIONS, NUMERIC, TYPE_WORDS, arith_type, did_you_mean, unit_hint
from spatec.frontend.parse import parse_expr

#: fields every alert carries, usable in a filter, with their types
STANDARD = {"phrase": "str", "id": "str", "lo": "time", "hi": "time"}

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
        ">=": operator.ge}
_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class FilterError(SpatecError):
    """A filter that cannot be used: ``message`` and the 1-based ``column`` in its text."""

    def __init__(self, message: str, column: int, hint: str | None = None):
        self.message, self.column, self.hint = message, int(column), hint
        super().__init__(f"column {column}: {message}" + (f" ({hint})" if hint else ""))


@dataclass(frozen=True)
class Atom:
    """``field op value``: one comparison of the filter's top-level conjunction (values in the
    alert's own units: numbers, seconds, metres; times as epoch µs; text)."""

    field: str
    op: str
    value: object
    kind: str        # "num" | "str" | "bool" | "time"


@dataclass
class Filter:
    """A checked filter: ``test(alert)``; ``atoms``: its conjunction's comparisons; ``rest``:
    whether anything else is in it (then ``atoms`` alone do not decide)."""

    text: str
    fn: object
    atoms: tuple
    rest: bool

    def test(self, alert: dict) -> bool:
        try:
            return bool(self.fn(alert))
        except (TypeError, ValueError, KeyError):
            return False       # a null field compares as no match


def field_types(program, phrase: str) -> dict:
    """``{field: type word}`` of a phrase's alerts (the standard fields and its emit fields)."""
    info = program.phrase(phrase)
    return {**STANDARD, **{n: t for n, t in info.schema}}


def compile_filter(program, phrase: str, text: str) -> Filter:
    """Parse and check ``text`` against ``phrase``'s output schema; a :class:`Filter`."""
    if not isinstance(text, str) or not text.strip():
        raise FilterError("an empty filter; leave `where` out to take every alert", 1)
    try:
        node = parse_expr(text, "<where>")
    except ParseError as e:
        d = e.first
        raise FilterError(d.message, d.span.col, d.hint) from None
    c = _Checker(field_types(program, phrase), program.timezone)
    t = c.type(node)
    if t != "bool":
        raise FilterError(f"a filter is a condition; this is {TYPE_WORDS.get(t, t)}", node.span.col)
    atoms, rest = _conjunction(node, c)
    _never(node, c)
    return Filter(text, _compile(node, c), tuple(atoms), rest)


# ------------------------------------------------------------------------------ checking

class _Checker:
    def __init__(self, fields: dict, tz: str):
        self.fields, self.tz = fields, tz
        self.types: dict = {}

    def fail(self, node, msg: str, hint: str | None = None):
        raise FilterError(msg, node.span.col, hint)

    def type(self, e) -> str:
        t = self._type(e)
        self.types[id(e)] = t
        return t

    def _type(self, e) -> str:
        literal = A.literal_type(e)
        if literal is not None:
            return literal
        if isinstance(e, A.TimeLit):
            try:
                time_literal_micros(e.text, self.tz)
            except (AssertionError, ValueError):
                self.fail(e, f"`{e.text}` is not a valid date-time")
            return "time"
        if isinstance(e, A.Var):
            if e.name not in self.fields:
                self.fail(e, f"unknown field {e.name}",
                          did_you_mean(e.name, self.fields) or "fields: " + ", ".join(self.fields))
            t = self.fields[e.name]
            return "number" if t in ("int", "float") else t
        if isinstance(e, A.Attr):
            self.fail(e, f"a filter names the phrase's output fields, not variables: `{e.var}.{e.name}`",
                      "e.g. `line == \"1\"` for an emit field `line`")
        if isinstance(e, A.Call):
            self.fail(e, f"functions are not available in a filter: {e.func}",
                      "filters compare the phrase's output fields")
        if isinstance(e, A.UnaryOp):
            t = self.type(e.operand)
            if e.op == "not":
                if t != "bool":
                    self.fail(e, f"`not` needs a condition, got {TYPE_WORDS.get(t, t)}")
                return "bool"
            if t not in NUMERIC + DIMENSIONS:
                self.fail(e, f"cannot negate {TYPE_WORDS.get(t, t)}")
            return t
        if isinstance(e, A.BoolOp):
            for side in (e.left, e.right):
                t = self.type(side)
                if t != "bool":
                    self.fail(side, f"`{e.op}` needs conditions on both sides, got {TYPE_WORDS.get(t, t)}")
            return "bool"
        if isinstance(e, A.BinOp):
            lt, rt = self.type(e.left), self.type(e.right)
            if e.op in A.COMPARE_OPS:
                num = lambda t: "number" if t in NUMERIC else t  # noqa: E731
                if num(lt) != num(rt):
                    self.fail(e, f"unit mismatch: cannot compare {TYPE_WORDS.get(lt, lt)} with "
                                 f"{TYPE_WORDS.get(rt, rt)}", unit_hint(lt, rt))
                if num(lt) == "geometry":
                    self.fail(e, "cannot compare geometries", "use the subscription's `area`")
                if e.op not in ("==", "!=") and lt == "bool":
                    self.fail(e, "truth values can only be compared with `==` or `!=`")
                return "bool"
            r = arith_type(e.op, lt, rt)
            if r is None:
                self.fail(e, f"cannot combine {TYPE_WORDS.get(lt, lt)} and {TYPE_WORDS.get(rt, rt)} with "
                             f"`{e.op}`", unit_hint(lt, rt))
            return r
        self.fail(e, "not allowed in a filter")
        raise AssertionError


# ------------------------------------------------------------------------------ evaluation

def _literal(e, c: _Checker):
    """The value of a literal in alert units, or None if ``e`` is not one."""
    if isinstance(e, A.Num):
        return e.value
    if isinstance(e, A.Quantity):
        if e.dimension == "duration":
            return e.micros() / 1e6
        return e.base()
    if isinstance(e, A.Str):
        return e.value
    if isinstance(e, A.BoolLit):
        return e.value
    if isinstance(e, A.TimeLit):
        return time_literal_micros(e.text, c.tz)
    if isinstance(e, A.UnaryOp) and e.op == "-":
        v = _literal(e.operand, c)
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    return None


def _time_value(v):
    return None if v is None else time_micros(v)


@functools.lru_cache(maxsize=1 << 16)
def time_micros(text: str) -> int:
    """An alert's ISO 8601 UTC time (``2019-10-01T08:00:35Z``) as epoch µs; alerts repeat the
    same times across subscriptions, hence the cache."""
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        if t.tzinfo is not None:
            return (t - _EPOCH) // dt.timedelta(microseconds=1)
    except ValueError:
        pass
    from spatec.events.timefmt import parse_time

    return parse_time(text)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _compile(e, c: _Checker):
    """A function alert → value."""
    lit = _literal(e, c)
    if lit is not None:
        return lambda a, v=lit: v
    if isinstance(e, A.Var):
        name = e.name
        if c.types[id(e)] == "time":
            return lambda a: _time_value(a.get(name))
        return lambda a: a.get(name)
    if isinstance(e, A.UnaryOp):
        f = _compile(e.operand, c)
        if e.op == "not":
            return lambda a: not f(a)
        return lambda a: -f(a)
    if isinstance(e, A.BoolOp):
        lf, rf = _compile(e.left, c), _compile(e.right, c)
        if e.op == "and":
            return lambda a: bool(lf(a)) and bool(rf(a))
        return lambda a: bool(lf(a)) or bool(rf(a))
    if isinstance(e, A.BinOp):
        lf, rf = _compile(e.left, c), _compile(e.right, c)
        if e.op in _OPS:
            op = _OPS[e.op]
            return lambda a: _cmp(op, lf(a), rf(a))
        lt, rt = c.types[id(e.left)], c.types[id(e.right)]
        scale = 1e6 if {lt, rt} == {"time", "duration"} or (lt == rt == "time") else 1.0
        if e.op == "+":
            if lt == "time" or rt == "time":
                return lambda a: lf(a) + rf(a) * scale if lt == "time" else lf(a) * scale + rf(a)
            return lambda a: lf(a) + rf(a)
        if e.op == "-":
            if lt == "time" and rt == "time":
                return lambda a: (lf(a) - rf(a)) / 1e6
            if lt == "time":
                return lambda a: lf(a) - rf(a) * 1e6
            return lambda a: lf(a) - rf(a)
        if e.op == "*":
            return lambda a: lf(a) * rf(a)
        return lambda a: lf(a) / rf(a)
    raise AssertionError(type(e).__name__)


def _cmp(op, x, y) -> bool:
    if x is None or y is None:
        return False       # a null field matches no comparison
    return op(x, y)


# ------------------------------------------------------------------------------ analysis

def _atom(e, c: _Checker) -> Atom | None:
    """``field op literal`` (either way round) as an :class:`Atom`."""
    if not (isinstance(e, A.BinOp) and e.op in _OPS):
        return None
    for f, lit, op in ((e.left, e.right, e.op), (e.right, e.left, _FLIP[e.op])):
        if isinstance(f, A.Var):
            v = _literal(lit, c)
            if v is None:
                continue
            t = c.types[id(f)]
            kind = "time" if t == "time" else "str" if t == "str" else "bool" if t == "bool" else "num"
            return Atom(f.name, op, v, kind)
    return None


def _conjunction(e, c: _Checker) -> tuple[list, bool]:
    """The atoms of the top-level ``and`` chain, and whether anything else is in it."""
    if isinstance(e, A.BoolOp) and e.op == "and":
        a1, r1 = _conjunction(e.left, c)
        a2, r2 = _conjunction(e.right, c)
        return a1 + a2, r1 or r2
    a = _atom(e, c)
    return ([a], False) if a is not None else ([], True)


class _Range:
    """The values a conjunction leaves for one field."""

    def __init__(self):
        self.lo, self.lo_open, self.hi, self.hi_open = -math.inf, False, math.inf, False
        self.eq = None      # the one value `==` asks for
        self.ne: set = set()

    def add(self, a: Atom) -> bool:
        """Narrow by ``a``; False when nothing is left."""
        v = a.value
        if a.op == "==":
            if self.eq is not None and self.eq != v:
                return False
            self.eq = v
        elif a.op == "!=":
            self.ne.add(v)
        elif a.kind in ("num", "time"):
            if a.op in ("<", "<="):
                if v < self.hi or (v == self.hi and a.op == "<"):
                    self.hi, self.hi_open = v, a.op == "<"
            elif v > self.lo or (v == self.lo and a.op == ">"):
                self.lo, self.lo_open = v, a.op == ">"
        return self.ok()

    def ok(self) -> bool:
        if self.lo > self.hi or (self.lo == self.hi and (self.lo_open or self.hi_open)):
            return False
        if self.eq is not None:
            if self.eq in self.ne:
                return False
            if isinstance(self.eq, (int, float)) and not isinstance(self.eq, bool):
                v = self.eq
                if v < self.lo or v > self.hi or (v == self.lo and self.lo_open) or (v == self.hi and self.hi_open):
                    return False
        return True


def _never(e, c: _Checker) -> None:
    """Raise if the filter can never match (see the module docstring)."""
    if not _possible(e, c):
        raise FilterError("this filter can never match", _blame(e, c), "its comparisons leave no value")


def _possible(e, c: _Checker) -> bool:
    if isinstance(e, A.BoolOp) and e.op == "or":
        return _possible(e.left, c) or _possible(e.right, c)
    if isinstance(e, A.BoolOp) and e.op == "and":
        return _possible(e.left, c) and _possible(e.right, c) and _conj_ok(e, c) is None
    if isinstance(e, A.BinOp) and e.op in _OPS:
        lv, rv = _literal(e.left, c), _literal(e.right, c)
        if lv is not None and rv is not None:
            return bool(_OPS[e.op](lv, rv))
    return True


def _conj_ok(e, c: _Checker):
    """None when the conjunction's atoms leave values for every field, else the atom that
    empties one."""
    ranges: dict = {}
    for node in _and_leaves(e):
        a = _atom(node, c)
        if a is None:
            continue
        if not ranges.setdefault(a.field, _Range()).add(a):
            return node
    return None


def _and_leaves(e):
    if isinstance(e, A.BoolOp) and e.op == "and":
        yield from _and_leaves(e.left)
        yield from _and_leaves(e.right)
    else:
        yield e


def _blame(e, c: _Checker) -> int:
    """The column of the part that makes ``e`` impossible."""
    if isinstance(e, A.BoolOp) and e.op == "and":
        for side in (e.left, e.right):
            if not _possible(side, c):
                return _blame(side, c)
        bad = _conj_ok(e, c)
        if bad is not None:
            return bad.span.col
    if isinstance(e, A.BoolOp) and e.op == "or":
        return _blame(e.right, c)
    return e.span.col

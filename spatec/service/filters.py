"""A subscription's ``where``: the language's own predicate over a phrase's output fields.

One mechanism with the phrases' ``where``: the text is parsed by the grammar's ``expr``
rule (:func:`spatec.frontend.parse.parse_expr`), typed by the phrase checker's rules
(:func:`spatec.frontend.check_fields.check_fields`: a bare name is an output field;
units, comparisons and arithmetic as in a phrase) and evaluated by the automata's own
closures (:func:`spatec.automata.exprs.compile_expr`) over the alert's fields in the
language's units: times and durations in µs, distances in metres. So a filter means
what the same text means in a phrase: a missing field satisfies no comparison, a
division by zero is missing (REFERENCE decision 19), and nothing a filter computes can
raise. Every step is linear in the filter's size and none recurses on its depth.

A filter that can never match — a conjunction whose comparisons on one field leave no
value (``metres < 50 and metres > 80``, ``line == "1" and line == "2"``), or a comparison
of two literals that is false — is refused, at the comparison that empties it. Errors
are :class:`FilterError` with the message and the 1-based column in the filter text.

The top-level conjunction's simple comparisons (``field op literal``, either way round)
are also kept as :class:`Atom` s, for the covering index (:mod:`spatec.service.index`);
their values are in the same units as the evaluation's, so the index and the filter
never disagree.

>>> from spatec.frontend.check import check_file
>>> prog = check_file('x.spatec', text='''
... event Ping(box: str, n: int, at_: time)
...     source box
...     time at_
... phrase Gap = Ping -> A ; Ping -> B within 1 h
...     emit box = A.box, n = A.n, gap = duration(A, B)''')
>>> f = Filters(prog).compile('Gap', 'box == "b1" and gap > 10 min')
>>> types = field_types(prog, 'Gap')
>>> f.test(values({"box": "b1", "gap": 900.0}, types)), f.test(values({"box": "b1", "gap": 60.0}, types))
(True, False)
>>> [(a.field, a.op, a.value) for a in f.atoms]
[('box', '==', 'b1'), ('gap', '>', 600000000)]
>>> try:
...     Filters(prog).compile('Gap', 'gap > 10')
... except FilterError as e:
...     print(e.column, e.message.split(':')[0])
1 unit mismatch
"""
from __future__ import annotations

import datetime as dt
import functools
import math
import operator
import threading
from collections import OrderedDict
from dataclasses import dataclass

from spatec.automata.exprs import compile_expr
from spatec.errors import CheckError, ParseError, SpatecError
from spatec.frontend import ast as A
from spatec.frontend.check import time_literal_micros
from spatec.frontend.check_fields import check_fields
from spatec.frontend.parse import parse_expr
from spatec.frontend.typewords import words

#: fields every alert carries, usable in a filter, with their types
STANDARD = {"phrase": "str", "id": "str", "lo": "time", "hi": "time"}
#: checked filters kept by text (the same question asked by many subscribers is checked once)
CACHE = 65_536

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
    """``field op value``: one comparison of the filter's top-level conjunction (the value in
    the language's units, as :func:`values` gives the field)."""

    field: str
    op: str
    value: object
    kind: str        # "num" | "str" | "bool" | "time"


@dataclass(eq=False)
class Filter:
    """A checked filter: ``test(env)`` over :func:`values` of an alert; ``atoms``: its
    conjunction's comparisons; ``rest``: whether anything else is in it (then ``atoms``
    alone do not decide)."""

    text: str
    fn: object
    atoms: tuple
    rest: bool
    fields: tuple      # the fields it reads

    def test(self, env: dict) -> bool:
        """Whether the filter holds (True, not missing) for an alert's :func:`values`."""
        return self.fn(env, None) is True


def field_types(program, phrase: str) -> dict:
    """``{field: type word}`` of a phrase's alerts (the standard fields and its emit fields)."""
    info = program.phrase(phrase)
    return {**STANDARD, **{n: t for n, t in info.schema}}


def values(alert: dict, types: dict) -> dict:
    """An alert's fields in the language's units (``types``: :func:`field_types`): times and
    durations as µs (an alert writes ISO 8601 UTC and seconds), the rest as written; a
    field missing, null or of the wrong kind is None."""
    out = {}
    for name, t in types.items():
        v = alert.get(name)
        if v is None:
            out[name] = None
        elif t == "time":
            out[name] = time_micros(v) if isinstance(v, str) else None
        elif t == "duration":
            out[name] = round(v * 1e6) if _number(v) and math.isfinite(v) else None
        elif t == "str":
            out[name] = v if isinstance(v, str) else None
        elif t == "bool":
            out[name] = v if isinstance(v, bool) else None
        else:
            out[name] = v if _number(v) else None
    return out


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@functools.lru_cache(maxsize=1 << 16)
def time_micros(text: str) -> int | None:
    """An alert's ISO 8601 time (``2019-10-01T08:00:35Z``) as epoch µs (None: not a time);
    alerts repeat the same times across subscriptions, hence the cache."""
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return (t - _EPOCH) // dt.timedelta(microseconds=1)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


class Filters:
    """The filters of one program, checked once per (phrase, text)."""

    def __init__(self, program):
        self.program = program
        self._cache: OrderedDict = OrderedDict()
        self._lock = threading.Lock()      # requests are checked on threads of their own

    def compile(self, phrase: str, text: str) -> Filter:
        """Parse and check ``text`` against ``phrase``'s output schema; a :class:`Filter`."""
        key = (phrase, text)
        with self._lock:
            got = self._cache.get(key)
            if got is not None:
                self._cache.move_to_end(key)
                return got
        got = compile_filter(self.program, phrase, text)
        with self._lock:
            self._cache[key] = got
            if len(self._cache) > CACHE:
                self._cache.popitem(last=False)
        return got


def compile_filter(program, phrase: str, text: str) -> Filter:
    """Parse and check ``text`` against ``phrase``'s output schema; a :class:`Filter`."""
    if not isinstance(text, str) or not text.strip():
        raise FilterError("an empty filter; leave `where` out to take every alert", 1)
    if "\n" in text or "\r" in text:
        raise FilterError("a filter is one line", text.replace("\r", "\n").index("\n") + 1)
    try:
        node = parse_expr(text, "<where>")
    except ParseError as e:
        d = e.first
        raise FilterError(d.message, d.span.col, d.hint) from None
    types = field_types(program, phrase)
    try:
        t, node_types = check_fields(node, types, program.timezone, text)
    except CheckError as e:
        d = e.first
        raise FilterError(d.message, d.span.col, d.hint) from None
    if t != "bool":
        raise FilterError(f"a filter is a condition; this is {words(t)}", node.span.col)
    tz = program.timezone
    atoms, rest = [], False
    for leaf in _chain(node, "and"):
        a = _atom(leaf, node_types, tz)
        if a is None:
            rest = True
        else:
            atoms.append(a)
    _never(node, node_types, tz)
    used = tuple(dict.fromkeys(n.name for n in A.walk(node) if isinstance(n, A.Var)))
    return Filter(text, compile_expr(node, tz), tuple(atoms), rest, used)


# ------------------------------------------------------------------------------ analysis

def _chain(e, op: str) -> list:
    """The operands of the chain of ``op`` (``and``/``or``) at ``e``, left to right."""
    out, todo = [], [e]
    while todo:
        x = todo.pop()
        if isinstance(x, A.BoolOp) and x.op == op:
            todo += [x.right, x.left]
        else:
            out.append(x)
    return out


def _literal(e, tz: str):
    """The value of a literal in the language's units (as the evaluation has it), or None."""
    if isinstance(e, A.Num):
        return e.value
    if isinstance(e, A.Quantity):
        return int(e.base()) if e.dimension == "duration" else e.base()
    if isinstance(e, (A.Str, A.BoolLit)):
        return e.value
    if isinstance(e, A.TimeLit):
        return time_literal_micros(e.text, tz)
    if isinstance(e, A.UnaryOp) and e.op == "-" and isinstance(e.operand, (A.Num, A.Quantity)):
        return -_literal(e.operand, tz)
    return None


def _kind(t: str) -> str:
    return t if t in ("time", "str", "bool") else "num"


def _atom(e, types: dict, tz: str) -> Atom | None:
    """``field op literal`` (either way round) as an :class:`Atom`."""
    if not (isinstance(e, A.BinOp) and e.op in _OPS):
        return None
    for f, lit, op in ((e.left, e.right, e.op), (e.right, e.left, _FLIP[e.op])):
        if isinstance(f, A.Var):
            v = _literal(lit, tz)
            if v is None:
                continue
            return Atom(f.name, op, v, _kind(types[f]))
    return None


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
            if _number(self.eq):
                v = self.eq
                if v < self.lo or v > self.hi or (v == self.lo and self.lo_open) or (v == self.hi and self.hi_open):
                    return False
        return True


def _emptied(leaves: list, types: dict, tz: str):
    """Of a conjunction's operands, the comparison that leaves one field no value (None)."""
    ranges: dict = {}
    for leaf in leaves:
        a = _atom(leaf, types, tz)
        if a is not None and not ranges.setdefault(a.field, _Range()).add(a):
            return leaf
    return None


def _never(e, types: dict, tz: str) -> None:
    """Raise if the filter can never match (see the module docstring): one pass bottom-up
    over the tree with its ``and``/``or`` chains made n-ary, then one path down to blame."""
    possible: dict = {}
    kids_of: dict = {}
    stack = [(e, False)]
    while stack:
        n, ready = stack.pop()
        if id(n) in possible:
            continue
        if isinstance(n, A.BoolOp):
            kids = kids_of.setdefault(id(n), _chain(n, n.op))
            if not ready:
                stack.append((n, True))
                stack.extend((k, False) for k in kids if id(k) not in possible)
                continue
            if n.op == "or":
                possible[id(n)] = any(possible[id(k)] for k in kids)
            else:
                possible[id(n)] = all(possible[id(k)] for k in kids) and _emptied(kids, types, tz) is None
            continue
        ok = True
        if isinstance(n, A.BinOp) and n.op in _OPS:
            lv, rv = _literal(n.left, tz), _literal(n.right, tz)
            if lv is not None and rv is not None:
                ok = bool(_OPS[n.op](lv, rv))
        possible[id(n)] = ok
    if possible[id(e)]:
        return
    n = e
    while isinstance(n, A.BoolOp):
        kids = kids_of[id(n)]
        if n.op == "or":
            n = kids[-1]
            continue
        bad = next((k for k in kids if not possible[id(k)]), None)
        if bad is None:
            n = _emptied(kids, types, tz)
            break
        n = bad
    raise FilterError("this filter can never match", n.span.col, "its comparisons leave no value")

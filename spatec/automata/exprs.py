"""`where` and `emit` expressions compiled to Python closures ``f(env, ctx)``.

``env`` maps a variable to its event (a run variable to its run, a
:class:`~spatec.automata.runs.RunEv`, or in ``while`` to the growing run; a place
variable to its :class:`~spatec.automata.places.Place`); ``ctx`` gives what some
functions need beyond the events (the successive history). ``runs``: the phrase's
run variables, whose expressions :func:`~spatec.frontend.runs.run_ref` resolves. Values: times and durations are
integer microseconds, distances metres, speeds m/s, areas m². A missing value
is None and propagates: a comparison with None is unknown (None), and a
condition holds only when it is True (SQL's three-valued logic).
"""
from __future__ import annotations

import math
import operator

from spatec.automata import relations as R
from spatec.frontend import ast as A
from spatec.frontend.check import time_literal_micros
from spatec.frontend.runs import run_ref
from spatec.spatial import stamps as S

_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


#: an expression tree higher than this (after ``and``/``or`` chains are made n-ary) is
#: evaluated by :func:`_deep` above this height: closures nested deeper would exhaust
#: Python's stack (REFERENCE decision 29: no depth limits)
DEEP = 48


def compile_expr(e, tz: str, runs=frozenset()):
    """A closure computing ``e``.

    Built bottom-up without recursion: a chain of ``and`` (or ``or``) is one n-ary
    closure that stops at the first False (True); the parts of a tree that are at
    most :data:`DEEP` high are closures, and what is above them is walked by a
    generator on :func:`~spatec.frontend.ast.trampoline`, with the same values."""
    height: dict = {}      # id(node) → height of its (n-ary) tree
    fns: dict = {}         # id(node) → its closure (only for trees at most DEEP high)
    stack = [(e, False)]
    while stack:
        n, ready = stack.pop()
        if id(n) in height:
            continue
        kids = _kids(n, runs)
        if not ready and kids:
            stack.append((n, True))
            stack.extend((k, False) for k in reversed(kids) if id(k) not in height)
            continue
        h = 1 + max((height[id(k)] for k in kids), default=0)
        height[id(n)] = h
        if h <= DEEP:
            fns[id(n)] = _closure(n, [fns[id(k)] for k in kids], tz, runs)
    if id(e) in fns:
        return fns[id(e)]
    return lambda env, ctx: A.trampoline(_deep(e, env, ctx, fns, runs))


def _kids(e, runs) -> list:
    """The operands an expression's closure is built from: ``a and b and c`` has three."""
    if runs and run_ref(e, runs) is not None:
        return []
    if isinstance(e, A.BoolOp):
        out, todo = [], [e.right, e.left]
        while todo:
            x = todo.pop()
            if isinstance(x, A.BoolOp) and x.op == e.op:
                todo += [x.right, x.left]
            else:
                out.append(x)
        return out
    if isinstance(e, A.UnaryOp):
        return [e.operand]
    if isinstance(e, A.BinOp):
        return [e.left, e.right]
    return []


def _closure(e, kids: list, tz: str, runs):
    """The closure of one node, its operands' closures given."""
    if runs:
        ref = run_ref(e, runs)
        if ref is not None:
            return _run_expr(ref)
    if isinstance(e, A.Num):
        v = e.value
        return lambda env, ctx: v
    if isinstance(e, A.Quantity):
        v = e.base()
        if e.dimension == "duration":
            v = int(v)
        return lambda env, ctx: v
    if isinstance(e, (A.Str, A.BoolLit)):
        v = e.value
        return lambda env, ctx: v
    if isinstance(e, A.TimeLit):
        v = time_literal_micros(e.text, tz)
        return lambda env, ctx: v
    if isinstance(e, A.Var):
        name = e.name
        return lambda env, ctx: env.get(name)
    if isinstance(e, A.Attr):
        var, name = e.var, e.name
        if name in ("t", "lo", "hi"):
            def stamp_attr(env, ctx):
                ev = env.get(var)
                return None if ev is None else getattr(ev, name)
            return stamp_attr

        def attr(env, ctx):
            ev = env.get(var)
            return None if ev is None else ev.attrs.get(name)
        return attr
    if isinstance(e, A.UnaryOp):
        (f,) = kids
        if e.op == "not":
            def not_(env, ctx):
                v = f(env, ctx)
                return None if v is None else not v
            return not_

        def neg(env, ctx):
            v = f(env, ctx)
            return None if v is None else -v
        return neg
    if isinstance(e, A.BoolOp):
        return _bool_closure(e.op, kids)
    if isinstance(e, A.BinOp):
        lf, rf = kids
        if e.op in _CMP:
            op = _CMP[e.op]

            def cmp(env, ctx):
                a, b = lf(env, ctx), rf(env, ctx)
                if a is None or b is None:
                    return None
                return op(a, b)
            return cmp
        return _arith(e.op, lf, rf)
    if isinstance(e, A.Call):
        return _call(e, tz, runs)
    raise TypeError(f"cannot compile {type(e).__name__}")


def _bool_closure(op: str, fs: list):
    """``and`` / ``or`` of any number of operands, SQL's three-valued logic, left to right."""
    stop = op != "and"               # the value that decides: False for `and`, True for `or`
    if len(fs) == 2:
        lf, rf = fs
        if op == "and":
            def and_(env, ctx):
                a = lf(env, ctx)
                if a is False:
                    return False
                b = rf(env, ctx)
                if b is False:
                    return False
                return None if a is None or b is None else True
            return and_

        def or_(env, ctx):
            a = lf(env, ctx)
            if a is True:
                return True
            b = rf(env, ctx)
            if b is True:
                return True
            return None if a is None or b is None else False
        return or_

    def many(env, ctx):
        unknown = False
        for f in fs:
            v = f(env, ctx)
            if v is stop:
                return stop
            if v is None:
                unknown = True
        return None if unknown else not stop
    return many


def _deep(e, env, ctx, fns: dict, runs):
    """The value of a tree higher than :data:`DEEP`, as a walk for ``trampoline``: the
    values of :func:`_closure`'s closures, whose subtrees it calls where it has them."""
    kids = _kids(e, runs)
    vals = []
    if isinstance(e, A.BoolOp):
        stop, unknown = e.op != "and", False
        for k in kids:
            f = fns.get(id(k))
            v = f(env, ctx) if f is not None else (yield _deep(k, env, ctx, fns, runs))
            if v is stop:
                return stop
            unknown = unknown or v is None
        return None if unknown else not stop
    for k in kids:
        f = fns.get(id(k))
        vals.append(f(env, ctx) if f is not None else (yield _deep(k, env, ctx, fns, runs)))
    if isinstance(e, A.UnaryOp):
        (v,) = vals
        return None if v is None else (not v if e.op == "not" else -v)
    a, b = vals          # a BinOp (the other nodes are never higher than 1)
    if a is None or b is None:
        return None
    if e.op in _CMP:
        return _CMP[e.op](a, b)
    if e.op == "/":
        return None if b == 0 else a / b
    return _ARITH[e.op](a, b)


_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _arith(op: str, lf, rf):
    if op == "+":
        def add(env, ctx):
            a, b = lf(env, ctx), rf(env, ctx)
            return None if a is None or b is None else a + b
        return add
    if op == "-":
        def sub(env, ctx):
            a, b = lf(env, ctx), rf(env, ctx)
            return None if a is None or b is None else a - b
        return sub
    if op == "*":
        def mul(env, ctx):
            a, b = lf(env, ctx), rf(env, ctx)
            return None if a is None or b is None else a * b
        return mul

    def div(env, ctx):
        a, b = lf(env, ctx), rf(env, ctx)
        if a is None or b is None or b == 0:
            return None
        return a / b
    return div


def _run_expr(ref):
    """A closure for an expression about a run (:class:`~spatec.frontend.runs.RunRef`)."""
    var, kind, member, attr = ref.var, ref.kind, ref.member, ref.attr
    if kind == "run":
        return lambda env, ctx: env.get(var)
    if kind == "member":
        def member_ev(env, ctx):
            r = env.get(var)
            return None if r is None else getattr(r, member)
        return member_ev
    if kind == "stamp":
        def stamp(env, ctx):
            r = env.get(var)
            return None if r is None else getattr(r, attr)
        return stamp
    if kind == "count":
        def count(env, ctx):
            r = env.get(var)
            return None if r is None else r.count
        return count
    if kind == "aggregate":
        key = (member, attr)

        def aggregate(env, ctx):
            r = env.get(var)
            return None if r is None else r.aggs.get(key)
        return aggregate
    stamped = attr in ("t", "lo", "hi")

    def member_attr(env, ctx):
        r = env.get(var)
        if r is None:
            return None
        ev = getattr(r, member)
        return getattr(ev, attr) if stamped else ev.attrs.get(attr)
    return member_attr


def _call_vars(e: A.Call):
    """The common functions of plain variables, read from ``env`` directly (a hot path)."""
    names = tuple(a.name for a in e.args)
    f = e.func
    if f == "duration" and len(names) == 2:
        a, b = names

        def duration(env, ctx):
            return env[b].hi - env[a].lo
        return duration
    if f == "distance":
        a, b = names
        return lambda env, ctx: S.distance(env[a].loc, env[b].loc)
    if f in ("overlap", "disjoint"):
        a, b = names
        if f == "overlap":
            return lambda env, ctx: S.overlap(env[a].loc, env[b].loc)
        return lambda env, ctx: not S.overlap(env[a].loc, env[b].loc)
    return None


def _value(a, runs):
    """A closure giving the event (or run, or place) a function's argument stands for."""
    if runs:
        ref = run_ref(a, runs)
        if ref is not None:
            return _run_expr(ref)
    name = a.name
    return lambda env, ctx: env.get(name)


def _call(e: A.Call, tz: str, runs=frozenset()):
    if all(isinstance(a, A.Var) for a in e.args):
        got = _call_vars(e)
        if got is not None:
            return got
    f = e.func
    args = [_value(a, runs) for a in e.args]
    if f == "duration":
        if len(args) == 1:
            (a,) = args

            def duration1(env, ctx):
                x = a(env, ctx)
                return None if x is None else x.hi - x.lo
            return duration1
        a, b = args

        def duration(env, ctx):
            x, y = a(env, ctx), b(env, ctx)
            return None if x is None or y is None else y.hi - x.lo
        return duration
    if f == "distance":
        a, b = args

        def distance(env, ctx):
            x, y = a(env, ctx), b(env, ctx)
            return None if x is None or y is None else S.distance(x.loc, y.loc)
        return distance
    if f == "speed":
        a, b = args

        def speed(env, ctx):
            ea, eb = a(env, ctx), b(env, ctx)
            if ea is None or eb is None:
                return None
            gap = abs(eb.t - ea.t)
            if gap == 0:
                return None
            (xa, ya), (xb, yb) = S.centroid(ea.loc), S.centroid(eb.loc)
            if not all(map(math.isfinite, (xa, ya, xb, yb))):
                return None
            return math.hypot(xb - xa, yb - ya) / (gap / 1e6)
        return speed
    if f in ("before", "concurrent", "overlap", "disjoint"):
        a, b = args
        rel = {"before": R.ev_before, "concurrent": R.ev_concurrent,
               "overlap": lambda x, y: S.overlap(x.loc, y.loc),
               "disjoint": lambda x, y: not S.overlap(x.loc, y.loc)}[f]

        def relation(env, ctx):
            x, y = a(env, ctx), b(env, ctx)
            return None if x is None or y is None else rel(x, y)
        return relation
    if f == "hull_area":
        def hull_area(env, ctx):
            xs = [a(env, ctx) for a in args]
            return None if any(x is None for x in xs) else S.area(S.hull([x.loc for x in xs]))
        return hull_area
    if f == "successive":
        def successive(env, ctx):
            xs = [a(env, ctx) for a in args]
            return None if any(x is None for x in xs) else ctx.successive(xs)
        return successive
    raise TypeError(f"unknown function {f}")


def compile_condition(exprs, tz: str, runs=frozenset()):
    """A closure that is True when every expression in ``exprs`` is True (None: no condition)."""
    fs = [compile_expr(e, tz, runs) for e in exprs]
    if not fs:
        return None
    if len(fs) == 1:
        f0 = fs[0]
        return lambda env, ctx: f0(env, ctx) is True

    def all_(env, ctx):
        for f in fs:
            if f(env, ctx) is not True:
                return False
        return True
    return all_

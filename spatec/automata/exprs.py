"""`where` and `emit` expressions compiled to Python closures ``f(env, ctx)``.

``env`` maps a variable to its event; ``ctx`` gives what some functions need
beyond the events (the successive history). Values: times and durations are
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
from spatec.spatial import stamps as S

_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


def compile_expr(e, tz: str):
    """A closure computing ``e``."""
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
        f = compile_expr(e.operand, tz)
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
        lf, rf = compile_expr(e.left, tz), compile_expr(e.right, tz)
        if e.op == "and":
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
    if isinstance(e, A.BinOp):
        lf, rf = compile_expr(e.left, tz), compile_expr(e.right, tz)
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
        return _call(e, tz)
    raise TypeError(f"cannot compile {type(e).__name__}")


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


def _call(e: A.Call, tz: str):
    names = tuple(a.name for a in e.args)
    f = e.func
    if f == "duration":
        a, b = names[0], names[-1]     # duration(A) = A.hi - A.lo

        def duration(env, ctx):
            return env[b].hi - env[a].lo
        return duration
    if f == "distance":
        a, b = names
        return lambda env, ctx: S.distance(env[a].loc, env[b].loc)
    if f == "speed":
        a, b = names

        def speed(env, ctx):
            ea, eb = env[a], env[b]
            gap = abs(eb.t - ea.t)
            if gap == 0:
                return None
            (xa, ya), (xb, yb) = S.centroid(ea.loc), S.centroid(eb.loc)
            if not all(map(math.isfinite, (xa, ya, xb, yb))):
                return None
            return math.hypot(xb - xa, yb - ya) / (gap / 1e6)
        return speed
    if f in ("before", "concurrent", "overlap", "disjoint"):
        a, b = names
        rel = {"before": R.ev_before, "concurrent": R.ev_concurrent,
               "overlap": lambda x, y: S.overlap(x.loc, y.loc),
               "disjoint": lambda x, y: not S.overlap(x.loc, y.loc)}[f]
        return lambda env, ctx: rel(env[a], env[b])
    if f == "hull_area":
        return lambda env, ctx: S.area(S.hull([env[n].loc for n in names]))
    if f == "successive":
        def successive(env, ctx):
            return ctx.successive([env[n] for n in names])
        return successive
    raise TypeError(f"unknown function {f}")


def compile_condition(exprs, tz: str):
    """A closure that is True when every expression in ``exprs`` is True (None: no condition)."""
    fs = [compile_expr(e, tz) for e in exprs]
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

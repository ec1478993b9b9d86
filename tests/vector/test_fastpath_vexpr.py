"""The vectorised expressions against the scalar closures of ``exprs``, value by
value and type by type: random expression trees over attributes of every kind
(missing values, integers beyond 2**53, booleans, strings), stamps that are
discs, polygons or nowhere, and the three-valued logic."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import shapely
from fastpath_support import SETTINGS
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from spatec.automata.exprs import compile_condition, compile_expr
from spatec.automata.machine import Context, Ev, RunState
from spatec.frontend import ast as A
from spatec.runtime.events import python_values
from spatec.spatial import stamps as S
from spatec.vector.vexpr import Bound, Columns, Evaluator, source_codes

TZ = "Europe/London"
BIG = 2 ** 53 + 1

ints = st.one_of(st.none(), st.integers(-5, 5), st.just(BIG), st.just(0))
floats = st.one_of(st.none(), st.floats(-5, 5, allow_nan=False), st.just(0.0), st.just(-0.0))
strs = st.one_of(st.none(), st.sampled_from(["a", "b", ""]))
bools = st.one_of(st.none(), st.booleans())


@st.composite
def locs(draw):
    kind = draw(st.sampled_from(["disc", "disc", "disc", "poly", "none"]))
    x, y = draw(st.integers(-4, 4)) * 10.0, draw(st.integers(-4, 4)) * 10.0
    if kind == "disc":
        return S.Loc.disc(x, y, draw(st.sampled_from([0.0, 5.0, 15.0])))
    if kind == "poly":
        return S.Loc.of(shapely.box(x, y, x + 20, y + 10), draw(st.sampled_from([0.0, 5.0])))
    return S.UNIVERSE


@st.composite
def events(draw, n):
    out = []
    for i in range(n):
        t = draw(st.integers(0, 100)) * 1_000_000
        src = draw(st.sampled_from(["s1", "s2", None]))
        out.append(Ev("E", f"E:{i}", src, t, t - draw(st.sampled_from([0, 5, 30])) * 1_000_000, t,
                      draw(locs()), {"x": draw(ints), "y": draw(floats), "s": draw(strs), "f": draw(bools)}))
    return out


PAIRS = st.sampled_from([(A.Var("A"), A.Var("B")), (A.Var("B"), A.Var("A")), (A.Var("A"), A.Var("A"))])
NUM_LEAVES = st.one_of(
    st.builds(A.Num, st.one_of(st.integers(-3, 3), st.floats(-3, 3, allow_nan=False), st.just(BIG))),
    st.builds(A.Quantity, st.sampled_from([1.0, 30.0]), st.sampled_from(["s", "min", "m", "km/h"])),
    st.builds(A.Attr, st.sampled_from(["A", "B"]), st.sampled_from(["x", "y", "t", "lo", "hi"])),
    st.builds(A.Call, st.sampled_from(["duration", "distance", "speed", "hull_area"]), PAIRS),
)
STR_LEAVES = st.one_of(st.builds(A.Str, st.sampled_from(["a", "b"])), st.builds(A.Attr, st.sampled_from(["A", "B"]),
                                                                               st.just("s")))
BOOL_LEAVES = st.one_of(
    st.builds(A.BoolLit, st.booleans()),
    st.builds(A.Attr, st.sampled_from(["A", "B"]), st.just("f")),
    st.builds(A.Call, st.sampled_from(["overlap", "disjoint", "before", "concurrent"]), PAIRS),
)
NUMS = st.recursive(NUM_LEAVES, lambda sub: st.one_of(
    st.builds(A.BinOp, st.sampled_from(["+", "-", "*", "/"]), sub, sub),
    st.builds(A.UnaryOp, st.just("-"), sub)), max_leaves=4)
CMPS = st.one_of(st.builds(A.BinOp, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), NUMS, NUMS),
                 st.builds(A.BinOp, st.sampled_from(["==", "!=", "<"]), STR_LEAVES, STR_LEAVES))
BOOLS = st.recursive(st.one_of(BOOL_LEAVES, CMPS), lambda sub: st.one_of(
    st.builds(A.BoolOp, st.sampled_from(["and", "or"]), sub, sub),
    st.builds(A.UnaryOp, st.just("not"), sub)), max_leaves=4)


def trees():
    return st.one_of(NUMS, BOOLS, STR_LEAVES)


def columns(evs, typed: bool):
    """Columns over ``evs``; ``typed``: attributes as canonical frames hold them (typed pandas columns)."""
    dtypes = {"x": "Int64", "y": "float64", "s": object, "f": "boolean"}

    def values(name, rows=None):
        vals = [e.attrs.get(name) for e in (evs if rows is None else [evs[i] for i in rows.tolist()])]
        if not typed:
            return vals
        if name == "x" and any(v is not None and abs(v) >= 2 ** 53 for v in vals):
            return pd.Series(vals, dtype=object)
        return pd.Series([np.nan if v is None and name == "y" else v for v in vals], dtype=dtypes[name])

    xy = [e.loc._xy for e in evs]
    x = np.array([p[0] if p else np.nan for p in xy])
    y = np.array([p[1] if p else np.nan for p in xy])
    disc = np.array([p is not None for p in xy])
    return Columns(ids=np.array([e.id for e in evs], dtype=object), src_code=source_codes([e.source for e in evs]),
                   t=np.array([e.t for e in evs]), lo=np.array([e.lo for e in evs]), hi=np.array([e.hi for e in evs]),
                   r=np.array([e.loc.r if p else 0.0 for e, p in zip(evs, xy)]),
                   locate=lambda rows: (x, y, disc) if rows is None else (x[rows], y[rows], disc[rows]),
                   attr_values=values, materialise=lambda rows: [evs[i] for i in rows.tolist()])


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@settings(max_examples=300, **SETTINGS)
@given(st.data(), trees(), st.booleans())
def test_values_equal_scalar(data, e, typed):
    n = data.draw(st.integers(1, 6))
    evs = data.draw(events(n))
    pairs = [(data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))) for _ in range(4)]
    if typed:   # the scalar path reads frames through python_values
        for name in ("x", "y", "s", "f"):
            col = columns(evs, True)._attr_values(name, None)
            for ev, v in zip(evs, python_values(col)):
                ev.attrs[name] = v
    ctx = Context(RunState())
    f = compile_expr(e, TZ)
    cond = compile_condition([e], TZ)
    want, truth, emitted = [], [], []
    for i, j in pairs:
        env = {"A": evs[i], "B": evs[j]}
        try:
            v = f(env, ctx)
        except (TypeError, ZeroDivisionError, OverflowError):
            v = "error"
        want.append(v)
        truth.append(v != "error" and cond(env, ctx))
        emitted.append(None if v == "error" else v)
    b = Bound(columns(evs, typed), {"A": np.array([p[0] for p in pairs]), "B": np.array([p[1] for p in pairs])})
    ev = Evaluator(TZ)
    got = ev.emit(e, b)
    assert all(same(g, w) for g, w in zip(got, emitted)), (e, got, emitted)
    assume("error" not in want)       # a condition that fails to evaluate stops the general automaton too
    assert ev.holds([e], b).tolist() == truth, (e, want)

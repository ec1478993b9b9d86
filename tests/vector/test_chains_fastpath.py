"""The fast path ``chains`` (:mod:`spatec.vector.chains`: two chains of one type joined at
the root, Issue 17's TwoStuck) against the general automaton: random traces and random
variants of the shape (each side 1-4 events with its own operators, successive and
overlap conditions and leaf patterns; the root's operator, cross-side conditions,
within, per); both must report the same composites, stamps, hulls, bindings and
emitted fields. And the planner: which shapes take it, and explain says so."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastpath_support import ANCHORS, SETTINGS, check_same, leaf, pair_preds, phrase, traces, unary_preds
from automata_support import compile_text, row  # noqa: I001 (after fastpath_support, which puts it on the path)
from hypothesis import given, settings
from hypothesis import strategies as st

from spatec.plan.explain import explain
from spatec.plan.program import compile_program
from spatec.vector.fastpath import fast_path

N = int(os.environ.get("FASTPATH_EXAMPLES", 50))
REPO = Path(__file__).resolve().parents[2]

#: operators inside a side (a chain: its events consecutive in their source's order)
SIDE_OPS = [";=", ";=", ";", ";", "=", "and", "and", ";<>", "||"]
#: the root's operator; all but ``||`` need ``within``
ROOT_OPS = ["||", "||", "||", "||", "||=", "||<>", ";", "and", "and", "=", ";="]


def side(draw, type_, vs, p_pattern):
    parts = [leaf(draw, type_, v, p_pattern) for v in vs]
    body = parts[0]
    for p in parts[1:]:
        body = f"{body} {draw(st.sampled_from(SIDE_OPS))} {p}"
    where = [f"successive({', '.join(vs)})"] if len(vs) > 1 else []
    if len(vs) >= 3 and draw(st.integers(0, 2)) == 0:
        where.append(f"overlap({vs[0]}, {vs[2]})")
    if len(vs) >= 4 and draw(st.integers(0, 2)) == 0:
        where.append(f"overlap({vs[1]}, {vs[3]})")
    if draw(st.integers(0, 4)) == 0:
        where += unary_preds(draw, draw(st.sampled_from(vs)))[:1]
    return (f"({body})" if len(vs) > 1 else body), where


@st.composite
def chains_phrases(draw, type_):
    k1, k2 = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    if max(k1, k2) < 2:
        k1 = 2
    left_vs, right_vs = list("ABCD"[:k1]), list("EFGH"[:k2])
    left, lw = side(draw, type_, left_vs, 0.2)
    right, rw = side(draw, type_, right_vs, 0.1)
    op = draw(st.sampled_from(ROOT_OPS))
    x, y = draw(st.sampled_from(left_vs)), draw(st.sampled_from(right_vs))
    where = lw + rw
    if draw(st.booleans()):
        where.append(f"distance({x}, {y}) < {draw(st.sampled_from([20, 50, 300, 1000]))} m")
    if draw(st.integers(0, 2)) == 0:
        where.append(draw(st.sampled_from([f"{x}.vehicle < {y}.vehicle", f"{x}.vehicle != {y}.vehicle",
                                           f"{x}.line == {y}.line", f"{y}.vehicle < {x}.vehicle"])))
    if draw(st.integers(0, 3)) == 0:
        where += pair_preds(draw, x, y)[:1]
    # (sides of unbounded length: the checker asks for `within` even under `||`)
    within = draw(st.sampled_from([" within 2 min", " within 10 min", " within 30 min"]))
    per = draw(st.sampled_from(["", "", "", " per vehicle", " per line"]))
    fields = [f"first = {x}.vehicle", f"second = {y}.vehicle", f"since = {left_vs[0]}.t",
              f"d = distance({x}, {y})", f"n = {right_vs[-1]}.line"]
    emit_line = "  emit " + ", ".join(draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3, unique=True)))
    return phrase(f"{left} {op} {right}", where, within, per, emit_line)


@st.composite
def stuck_traces(draw, type_):
    """2-3 sources reporting at once every 5-30 s, each standing still (steps of a few
    metres: its fixes overlap) or moving, near the others or not: TwoStuck's data."""
    out = []
    for src in ["v1", "v2", "v3"][:draw(st.integers(2, 3))]:
        t = draw(st.integers(0, 30))
        x, y = draw(st.sampled_from(ANCHORS[:5]))
        for _ in range(draw(st.integers(2, 8))):
            t += draw(st.sampled_from([5, 10, 20, 20, 30]))
            step = draw(st.sampled_from([2.0, 5.0, 5.0, 40.0]))
            x += draw(st.floats(-step, step))
            y += draw(st.floats(-step, step))
            out.append(row(type_, src, t, x, y, x=draw(st.one_of(st.none(), st.integers(0, 6))),
                           line=draw(st.sampled_from(["a", "b", None]))))
    return out


@settings(max_examples=N, **SETTINGS)
@given(st.data())
def test_chains_equal_automaton(data):
    """Two sources or more, one type (and sometimes another type beside it)."""
    t = data.draw(st.sampled_from(["Bus", "Bus", "Tag"]))
    other = ("Tag",) if t == "Bus" else ("Bus",)
    rows = data.draw(traces(types=(t,) + (other if data.draw(st.booleans()) else ()), max_events=28))
    check_same(data.draw(chains_phrases(t)), rows, "chains")


@settings(max_examples=N, **SETTINGS)
@given(st.data())
def test_chains_equal_automaton_dense(data):
    """Sources reporting at once, standing still or moving: most phrases find composites."""
    t = data.draw(st.sampled_from(["Bus", "Bus", "Tag"]))
    check_same(data.draw(chains_phrases(t)), data.draw(stuck_traces(t)), "chains")


def test_two_stuck_shape_is_chosen_and_explained():
    c = compile_program(REPO / "bench" / "two_stuck.spatec")
    plan = c.plan("TwoStuck")
    fp = fast_path(plan)
    assert fp is not None and fp.shape == "chains"
    assert fp.vars == tuple("ABCDEFGH")
    assert "evaluator: fast path: chains" in explain(c.program, "TwoStuck", fmt="text")


TWO = "(Bus -> A ;= Bus -> B) || (Bus -> E ;= Bus -> F)"


@pytest.mark.parametrize("body, where, taken", [
    # the shape itself, and with one side a single event
    (TWO, "successive(A, B) and successive(E, F) and distance(A, E) < 50 m", True),
    ("(Bus -> A ;= Bus -> B) || Bus -> E", "successive(A, B) and distance(A, E) < 50 m", True),
    # a two-event side without successive is any two events of a source: not a chain
    (TWO, "successive(A, B) and distance(A, E) < 50 m", False),
    # successive across the sides, or over a side out of order: not a chain each
    (TWO, "successive(A, B) and successive(B, E) and successive(E, F)", False),
    (TWO, "successive(B, A) and successive(E, F)", False),
    # a successive condition the sides do not imply, at the root
    (TWO, "successive(A, B) and successive(E, F) and (successive(A, E) or A.x > 1)", False),
])
def test_planner_takes_the_shape_only_when_proven(body, where, taken):
    text = f"phrase Ph =\n    {body}\n  where {where}\n  within 5 min\n"
    c = compile_text(text)
    fp = fast_path(c.plan("Ph"))
    assert (fp is not None and fp.shape == "chains") == taken, text


def test_root_operator_without_bound_is_not_the_shape():
    """``;`` between the sides bounded only by successive within each side: the phrase is
    unbounded (rejected by the checker) or, under within, the shape."""
    text = ("phrase Ph =\n    (Bus -> A ;= Bus -> B) ; (Bus -> E ;= Bus -> F)\n"
                     "  where successive(A, B) and successive(E, F)\n within 5 min\n")
    fp = fast_path(compile_text(text).plan("Ph"))
    assert fp is not None and fp.shape == "chains"


def test_absence_at_the_root_stays_on_the_automaton():
    text = ("phrase Ph per vehicle =\n    (Bus -> A ;= Bus -> B) ; not Bus ; (Bus -> E ;= Bus -> F)\n"
                     "  where successive(A, B) and successive(E, F)\n within 5 min\n")
    fp = fast_path(compile_text(text).plan("Ph"))
    assert fp is None or fp.shape != "chains"

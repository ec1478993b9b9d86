"""Plans from statistics (SPEC §10): the join access the planner chooses (buffers keyed by
source for ``successive``, by grid cell for ``distance(X, Y) < D``) gives exactly the
composites of the plan that scans every buffer, and the brute-force oracle's; random small
traces and phrases of two or three events across every join operator and types of points,
wide points and areas."""
from __future__ import annotations

import os

from automata_support import CRS, both_all, compile_text, frames, row
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_against_oracle import traces

from spatec.automata import codec
from spatec.automata.machine import RunState, build
from spatec.automata.step import step
from spatec.errors import SpatecError
from spatec.plan.program import unordered
from spatec.runners.local import replay_frames
from spatec.runtime.events import to_evs
from spatec.runtime.routing import partitions
from spatec.spatial.crs import Projector

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
EXAMPLES = int(os.environ.get("ORACLE_ORDER_EXAMPLES", 150))
OPS = [";", "||", "=", "<>", ";=", ";<>", "||=", "||<>", "and"]
CONDS = ["successive(A, B)", "successive(B, C)", "successive(A, B, C)", "successive(A, C)",
         "successive(B, A)", "successive(C, A, B)",
         "distance(A, B) < {d} m", "distance(B, A) <= {d} m", "distance(A, C) < {d} m",
         "distance(B, C) < {d} m", "A.vehicle < B.vehicle", "A.x <= C.x"]


@st.composite
def phrases(draw, types):
    n = draw(st.integers(2, 3))
    vs = "ABC"[:n]
    ops = [draw(st.sampled_from(OPS)) for _ in range(n - 1)]
    ev = [f"{draw(st.sampled_from(types))} -> {v}" for v in vs]
    if n == 2:
        match = f"{ev[0]} {ops[0]} {ev[1]}"
    elif draw(st.booleans()):
        match = f"({ev[0]} {ops[0]} {ev[1]}) {ops[1]} {ev[2]}"
    else:
        match = f"{ev[0]} {ops[0]} ({ev[1]} {ops[1]} {ev[2]})"
    conds = [c.format(d=draw(st.sampled_from([10, 40, 120, 400])))
             for c in draw(st.lists(st.sampled_from(CONDS), min_size=1, max_size=3, unique=True))
             if all(v in vs for v in c.replace("distance", "").replace("successive", "") if v.isupper())]
    assume(conds)
    return f"phrase Ph =\n    {match}\n  where {' and '.join(conds)}\n  within 5 min\n  emit a = A.t\n"


def _rows(df):
    return df.to_dict("records")


@settings(max_examples=EXAMPLES, **FAST)
@given(st.data())
def test_ordered_plan_equals_unordered_and_oracle(data):
    rows = data.draw(traces())
    types = sorted({r["type"] for r in rows}) or ["Bus"]
    text = data.draw(phrases(types))
    try:
        c = compile_text(text)
    except SpatecError:
        assume(False)
    fr = frames(rows)
    ordered = replay_frames(c, fr, crs=CRS).frames["Ph"]          # planned from a sample
    scan = replay_frames(unordered(c), fr, crs=CRS, statistics=False).frames["Ph"]
    assert _rows(ordered) == _rows(scan), text
    orc, sut = both_all(c, rows)["Ph"]
    assert sut == orc, text


def test_keyed_access_is_chosen_and_shown():
    c = compile_text("phrase Ph =\n    (Bus -> A ;= Bus -> B) || (Bus -> C ; Cell -> D)\n"
                     "  where successive(A, B) and distance(A, C) < 50 m\n  within 5 min\n")
    joins = {j.kind: j for j in c.plan("Ph").physical.joins}
    assert set(joins) == {"source", "near"}
    assert joins["source"].vars == ("A", "B")
    # Bus stamps are widened by 15 m: two points within 50 m are within 80 m centre to centre
    assert joins["near"].vars == ("A", "C") and joins["near"].cell == 80.0
    assert joins["near"].strict and not joins["source"].reverse
    assert c.plan("Ph").physical.estimates.origin == "defaults"
    # the conjunct's own order is kept for its early check: successive(B, A) across A ; B
    c = compile_text("phrase Ph =\n    Bus -> A ; Bus -> B\n  where successive(B, A)\n"
                     "  within 5 min\n")
    (j,) = c.plan("Ph").physical.joins
    assert (j.kind, j.vars, j.reverse) == ("source", ("A", "B"), True)


def test_keyed_buffers_survive_the_codec_and_equal_the_scan():
    """A state with buffers keyed by source and by grid cell steps on after a round trip as
    the original, and as the scanning plan's state does."""
    c = compile_text("phrase Ph =\n    (Bus -> A ;= Bus -> B) || Bus -> C\n"
                     "  where successive(A, B) and distance(A, C) < 60 m and A.vehicle != C.vehicle\n"
                     "  within 10 min\n")
    trace = [row("Bus", f"V{v}", 20 * i + v, dx=8.0 * (i // 5) + 40 * v) for i in range(40) for v in range(3)]
    proj = Projector(CRS)
    evs = {"Bus": to_evs(frames(trace)["Bus"], c.program, proj)}
    plan = c.plan("Ph")
    found = {}
    for name, p in (("keyed", plan), ("scan", unordered(c).plan("Ph"))):
        am = build(p, c.program, proj)
        (part,) = partitions(p, evs).values()
        half = len(part) // 2
        st = RunState()
        got0, _ = step(am, st, part[:half], ordered=True)
        if name == "keyed":
            assert any(len(k) == 3 and isinstance(k[2], tuple) for k in st.buffers)   # grid cells
            assert any(len(k) == 3 and isinstance(k[2], str) for k in st.buffers)     # sources
        back = codec.decode_state(codec.encode_state(st))
        assert set(back.buffers) == set(st.buffers) and back.lo_sorted == st.lo_sorted
        got1, _ = step(am, st, part[half:], final=True, ordered=True)
        got2, _ = step(am, back, part[half:], final=True, ordered=True)
        assert [x.id for x in got1] == [x.id for x in got2]
        found[name] = sorted(x.id for x in got0 + got1)
    assert found["keyed"] == found["scan"] and found["keyed"]

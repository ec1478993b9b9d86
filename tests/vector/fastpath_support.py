"""Shared by the fast-path tests: random traces (several sources moving between
the test places, random gaps), random phrases of each fast-path shape, and
the comparison of the fast path with the general automaton on the same
events: the local runner's output frames (ids, stamps, hulls, bindings,
emitted fields) and, per partition, the composites of ``run_partition``."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "automata"))

from automata_support import CRS, compile_text, frames, row  # noqa: E402

from spatec.automata.machine import build  # noqa: E402
from spatec.errors import SpatecError  # noqa: E402
from spatec.runners.local import replay_frames  # noqa: E402
from spatec.runtime.batch import run_partition
from spatec.runtime.events import to_evs  # noqa: E402
from spatec.runtime.routing import partitions
from spatec.runtime.rows import output_row
from spatec.spatial.crs import Projector  # noqa: E402
from spatec.vector import chains  # noqa: E402
from spatec.vector.fastpath import fast_path, run_frame  # noqa: E402

SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
settings.register_profile("fastpath", **SETTINGS)

# ------------------------------------------------------------------------------ traces

#: places of the test header: P is a 100 m circle at (0, 0), Q a 150 m square at (200, 0)
ANCHORS = [(0, 0), (20, 5), (90, 10), (150, 0), (200, 0), (240, 60), (-400, 300)]


@st.composite
def cells(draw):
    """Polygon-stamped events without a source (road works, rain cells)."""
    out = []
    for i in range(draw(st.integers(1, 6))):
        x, y = draw(st.sampled_from(ANCHORS))
        out.append(row("Cell", None, draw(st.integers(0, 600)), x + draw(st.floats(-50, 50)), y,
                       x=draw(st.one_of(st.none(), st.integers(0, 6))), dur_s=draw(st.sampled_from([20, 60, 600])),
                       half=draw(st.sampled_from([20.0, 60.0, 150.0])), cell=f"c{i}"))
    return out


@st.composite
def traces(draw, types=("Bus",), max_events=24):
    """Events of ``types`` from 2-4 sources, each source wandering between the anchors
    with small steps (so successive fixes often overlap) and random gaps."""
    rows = []
    sources = ["v1", "v2", "v3", "v4"][:draw(st.integers(2, 4))]
    n_total = draw(st.integers(3, max_events))
    for src in sources:
        t = draw(st.integers(0, 40))
        x, y = draw(st.sampled_from(ANCHORS))
        seen = set()
        for _ in range(max(1, n_total // len(sources) + draw(st.integers(-2, 2)))):
            type_ = draw(st.sampled_from(types))
            t += draw(st.sampled_from([1, 5, 10, 20, 20, 30, 45, 60, 90, 200]))
            if draw(st.integers(0, 5)) == 0:
                x, y = draw(st.sampled_from(ANCHORS))
            x += draw(st.floats(-12, 12))
            y += draw(st.floats(-12, 12))
            if (type_, t) in seen:
                continue
            seen.add((type_, t))
            rows.append(row(type_, src, t, x, y, x=draw(st.one_of(st.none(), st.integers(0, 6))),
                            line=draw(st.sampled_from(["a", "a", "b", "a", "b", None])),
                            dur_s=draw(st.sampled_from([20, 60, 200]))))
    return rows


# ------------------------------------------------------------------------------ phrases

PATTERNS = ["at P", "not at P", "certainly at P", "within 50 m of P", "at Q", "not (at P or at Q)",
            "between 08:00 and 08:05", "(at P and between 08:00 and 08:03)", "weekday", "Tuesday",
            "not between 08:01 and 08:02", "certainly between 07:59 and 08:30", "in circle(0.1403, 52.18, 40 m)",
            "not certainly at P", "(at P or Tuesday)", "on 2020-01-01", "certainly (at P or between 08:00 and 08:02)",
            "within 30 m of Q", "not within 30 m of Q", "(at P and not at Q)", "certainly not at Q"]


def leaf(draw, type_, var, p_pattern=0.4):
    if draw(st.floats(0, 1)) < p_pattern:
        return f"({type_} -> {var} and {draw(st.sampled_from(PATTERNS))})"
    return f"{type_} -> {var}"


def unary_preds(draw, v):
    return draw(st.lists(st.sampled_from([
        f"{v}.x > 2", f"{v}.x * 2 + 1 <= 9", f'{v}.line == "a"', f"{v}.x / ({v}.x - 3) > 0",
        f"not ({v}.x > 4)", f'{v}.x > 4 or {v}.line == "b"', f"{v}.hi - {v}.lo < 1 min",
        f"hull_area({v}) > 100", f"{v}.t > 2024-03-05T08:01", f"{v}.lat > 52.18",
        f'not ({v}.x > 2 and {v}.line == "a")', f"-{v}.x < -2", f"{v}.ts > 2024-03-05T08:01", f"{v}.x + 0.5 > 2",
        f"{v}.x == 2.0", f"{v}.ts - {v}.lo >= 30 s",
    ]), max_size=2))


def pair_preds(draw, a, b):
    return draw(st.lists(st.sampled_from([
        f"distance({a}, {b}) < 40 m", f"{a}.x <= {b}.x", f"duration({a}, {b}) < 2 min", f"overlap({a}, {b})",
        f"not overlap({a}, {b})", f"speed({a}, {b}) < 3 km/h", f"{a}.line == {b}.line",
        f"concurrent({a}, {b})", f"before({a}, {b})", f"hull_area({a}, {b}) < 5000",
    ]), max_size=2))


def emit(draw, vs):
    fields = [f"v = {vs[0]}.vehicle", f"t0 = {vs[0]}.t", f"x0 = {vs[0]}.x"]
    if len(vs) > 1:
        fields += [f"dur = duration({vs[0]}, {vs[-1]}) / 1 min", f"dist = distance({vs[0]}, {vs[-1]})",
                   f"sp = speed({vs[0]}, {vs[-1]})", f"ha = hull_area({vs[0]}, {vs[-1]})"]
    fields += [f"half = {vs[0]}.x / 2", f"q = {vs[0]}.x / ({vs[0]}.x - 3)", f"ts = {vs[0]}.ts",
               f"ln = {vs[-1]}.line", f"neg = -{vs[-1]}.x"]
    return "  emit " + ", ".join(draw(st.lists(st.sampled_from(fields), min_size=1, max_size=4, unique=True)))


def phrase(body, where, within, per, emit_line=""):
    text = f"phrase Ph{per} =\n    {body}\n"
    if where:
        text += "  where " + " and ".join(f"({w})" if " or " in w else w for w in where) + "\n"
    text += within + "\n" + emit_line + "\n"
    return text


@st.composite
def leaf_phrases(draw, type_):
    where = unary_preds(draw, "A")
    within = draw(st.sampled_from(["", " within 40 s", " within 10 min"]))
    per = draw(st.sampled_from(["", " per vehicle", " per line"]))
    return phrase(leaf(draw, type_, "A", 0.7), where, within, per, emit(draw, ["A"]))


CHAIN_OPS = [";", ";=", ";=", ";=", ";=", "=", "=", "and", ";<>", "<>", "||", "||="]


@st.composite
def chain_phrases(draw, type_):
    k = draw(st.integers(2, 4))
    vs = "ABCD"[:k]
    ops = [draw(st.sampled_from(CHAIN_OPS)) for _ in range(k - 1)]
    parts = [leaf(draw, type_, v, 0.15) for v in vs]
    body = parts[0]
    if k == 4 and draw(st.integers(0, 3)) == 0:
        body = f"({parts[0]} {ops[0]} {parts[1]}) {ops[1]} ({parts[2]} {ops[2]} {parts[3]})"
    elif k >= 3 and draw(st.booleans()):
        # right-nested: A op (B op C ...)
        inner = parts[1]
        for op, p in zip(ops[1:], parts[2:]):
            inner = f"{inner} {op} {p}"
        body = f"{parts[0]} {ops[0]} ({inner})"
    else:
        for op, p in zip(ops, parts[1:]):
            body = f"{body} {op} {p}"
    where = [f"successive({', '.join(vs)})"]
    if k >= 3 and draw(st.booleans()):
        where = [f"successive({vs[0]}, {vs[1]})", f"successive({', '.join(vs[1:])})"]
    if k >= 3 and draw(st.booleans()):
        where += [f"overlap({vs[0]}, {vs[2]})"]
    if draw(st.booleans()):
        a, b = draw(st.permutations(vs))[:2]
        where += pair_preds(draw, a, b)[:1]
    if draw(st.booleans()):
        where += unary_preds(draw, draw(st.sampled_from(vs)))[:1]
    within = draw(st.sampled_from(["", "", " within 2 min", " within 10 min"]))
    per = draw(st.sampled_from(["", " per vehicle", " per vehicle", " per line"]))
    return phrase(body, where, within, per, emit(draw, list(vs)))


@st.composite
def after_phrases(draw, type_):
    a = leaf(draw, type_, "A", 0.4)
    space = draw(st.sampled_from([";", ";", ";=", ";<>"]))
    neg = draw(st.sampled_from([type_, f"{type_} -> X", f"({type_} -> X and at P)", f"({type_} and not at Q)",
                                f"(({type_} -> X and at P) or ({type_} -> X and at Q))"]))
    window = draw(st.sampled_from(["10 s", "30 s", "1 min", "2 min", "5 min"]))
    where = unary_preds(draw, "A")
    if "X" in neg:
        where += draw(st.lists(st.sampled_from(["X.x >= A.x", "X.x > 3", "distance(A, X) < 50 m",
                                                 'X.line == "a"', "overlap(A, X)"]), max_size=2))
    within = draw(st.sampled_from(["", "", " within 40 s"]))
    return phrase(f"{a} {space} not {neg} within {window}", where, within, " per vehicle", emit(draw, ["A"]))


@st.composite
def between_phrases(draw, type_, side=None):
    a, b = leaf(draw, type_, "A", 0.7), leaf(draw, type_, "B", 0.7)
    side = side or draw(st.sampled_from(["", "", "A", "B"]))
    s1 = draw(st.sampled_from([";=", ";<>"])) if side == "A" and draw(st.booleans()) else ";"
    s2 = draw(st.sampled_from([";=", ";<>"])) if side == "B" and draw(st.booleans()) else ";"
    neg = draw(st.sampled_from([type_, f"{type_} -> X", f"({type_} -> X and (at P or at Q))",
                                f"({type_} -> X and not at Q)", f"(({type_} -> X and at P) or ({type_} -> X and at Q))"]))
    where = pair_preds(draw, "A", "B") + unary_preds(draw, "B")
    if "X" in neg:
        conds = {"": ["X.x > 3", 'X.line == "b"'], "A": ["X.x >= A.x", "distance(A, X) < 50 m", "X.x > 3"],
                 "B": ["X.x <= B.x", "overlap(X, B)", 'X.line == "b"']}[side]
        where += draw(st.lists(st.sampled_from(conds), max_size=2))
    within = draw(st.sampled_from([" within 2 min", " within 5 min", " within 30 min"]))
    return phrase(f"{a} {s1} not {neg} {s2} {b}", where, within, " per vehicle", emit(draw, ["A", "B"]))


PAIR_OPS = ["||", "||", "||=", "||<>", ";", ";=", ";<>", "=", "<>", "and"]


@st.composite
def pair_phrases(draw, type_):
    """``A op B`` of one type, relating two sources or one (Bunching's shape):
    ``||`` bounds itself, the other operators run under ``within``."""
    op = draw(st.sampled_from(PAIR_OPS))
    a, b = leaf(draw, type_, "A", 0.4), leaf(draw, type_, "B", 0.4)
    where = pair_preds(draw, "A", "B") + unary_preds(draw, draw(st.sampled_from("AB")))[:1]
    if draw(st.booleans()):
        where.append(draw(st.sampled_from(["A.vehicle < B.vehicle", "A.vehicle != B.vehicle",
                                           "A.line == B.line", "A.vehicle == B.vehicle"])))
    within = draw(st.sampled_from(["", " within 2 min"] if op.startswith("||") else
                                  [" within 40 s", " within 2 min", " within 10 min"]))
    per = draw(st.sampled_from(["", "", " per line", " per vehicle"]))
    return phrase(f"{a} {op} {b}", where, within, per, emit(draw, ["A", "B"]))


# ------------------------------------------------------------------------------ comparison

def compiled_or_reject(text):
    try:
        return compile_text(text)
    except SpatecError:
        assume(False)


def check_same(text, rows, shape, name="Ph"):
    """The fast path (taken: asserted) and the general automaton agree, in the local runner
    (every output column) and per partition through ``run_partition``."""
    c = compiled_or_reject(text)
    plan = c.plan(name)
    fp = fast_path(plan)
    assert fp is not None and fp.shape == shape, text
    fr = frames(rows)
    proj = Projector(CRS)
    types = set(c.program.events)
    final_w = max(int(df["_hi"].max()) for t, df in fr.items() if t in types)
    if fp.type in fr:
        run = chains.run_frame if shape == "chains" else run_frame
        got = run(fp, fr[fp.type], c.program, proj, final_w, lambda d: to_evs(d, c.program, proj))
        assert got is not None, "the fast path refused well-formed data"
    fast = replay_frames(c, fr, crs=CRS, fastpath=True).frames[name]
    slow = replay_frames(c, fr, crs=CRS, fastpath=False).frames[name]
    pd.testing.assert_frame_equal(fast, slow, check_dtype=False, obj=text)
    # ids as a Spark task holds them, Arrow text (vexpr.TextColumn): the same output
    arrow_ids = {t: df.assign(_id=pd.array(df["_id"].tolist(), dtype=pd.ArrowDtype(pa.string())))
                 for t, df in fr.items()}
    lazy = replay_frames(c, arrow_ids, crs=CRS, fastpath=True).frames[name]
    pd.testing.assert_frame_equal(lazy, slow, check_dtype=False, obj=text)
    check_partitions(c, fr, name)
    return len(slow)


def check_partitions(c, fr, name):
    """``run_partition`` with and without the fast path, on run-time events."""
    proj = Projector(CRS)
    evs_by_type = {t: to_evs(df, c.program, proj) for t, df in fr.items()}
    final_w = max(e.hi for evs in evs_by_type.values() for e in evs)
    plan = c.plan(name)
    am = build(plan, c.program, proj)
    for key, evs in partitions(plan, evs_by_type).items():
        fast, st_f = run_partition(am, list(evs), final_w, fastpath=True)
        slow, st_s = run_partition(am, list(evs), final_w, fastpath=False)
        a = sorted(_key(am, x, proj, st_f) for x in fast)
        b = sorted(_key(am, x, proj, st_s) for x in slow)
        assert a == b, (key, len(a), len(b))


def _key(am, x, proj, st_):
    r = output_row(am, x, proj, st_)
    return (x.id, x.lo, x.hi, tuple(sorted((v, e.id) for v, e in x.bindings.items())),
            tuple(e.id for e in x.events), repr(sorted(r.items(), key=lambda kv: kv[0])))

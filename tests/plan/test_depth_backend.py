"""No depth limits in the back end (REFERENCE decision 35): 10,000-term `or` and `where`
chains and chains of 10,000 joined events (`;`, `;=`, and `;`/`and`/`||` nested 10,000 deep;
trees ten times deeper than Python's recursion limit) plan, explain (json, text, dot), write
as plan data and read back equal with the same fingerprint, and run, giving the composites
the data is built to have; the same chains, short, agree with the oracle."""
from __future__ import annotations

import dataclasses
import json
import random
import sys
from pathlib import Path

import pandas as pd
import pytest
import shapely

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "automata"))

import oracle  # noqa: E402
from automata_support import frames  # noqa: E402
from test_oracle_spec_examples import stay  # noqa: E402

from spatec.automata import hulls as H  # noqa: E402
from spatec.automata.machine import RunState, build  # noqa: E402
from spatec.automata.step import step  # noqa: E402
from spatec.plan import data  # noqa: E402
from spatec.plan.explain import explain  # noqa: E402
from spatec.plan.nodes import depth, walk_nodes  # noqa: E402
from spatec.plan.program import compile_program  # noqa: E402
from spatec.runners.local import replay_frames  # noqa: E402
from spatec.runtime.events import to_evs  # noqa: E402
from spatec.spatial import stamps as S  # noqa: E402
from spatec.spatial.crs import Projector  # noqa: E402

N = 10_000
BUS = (Path(__file__).resolve().parents[2] / "examples" / "bus.spatec").read_text(encoding="utf-8")
PLACES = ("at hospital", "at station", "at centre")
CHAINS = {
    "or": "phrase P =\n    BusGPS -> A and (" + " or ".join(PLACES[i % 3] for i in range(N)) + ")\n",
    # every term holds: each fix is a composite
    "where": "phrase P =\n    BusGPS -> A\n  where " + " and ".join(f"A.lon > -{i}" for i in range(N)) + "\n",
}
#: three fixes at the centre (bus a) and three 800 m east of it (bus b)
ROWS = stay("a", 0, 3, 0) + stay("b", 0, 3, 800)
EXPECTED = {"or": 3, "where": 6}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CHAINS))
def test_a_10000_term_chain_plans_explains_and_runs(kind):
    assert sys.getrecursionlimit() <= 3000  # nothing raised it
    c = compile_program("chain.spatec", BUS + "\n" + CHAINS[kind])
    plan = c.plans[0]
    for fmt in ("json", "text", "dot"):
        assert "P" in explain(c.program, fmt=fmt)
    back = data.loads(data.dumps(plan))
    assert back == plan
    assert data.fingerprint(back) == data.fingerprint(plan)
    got = replay_frames(c, frames(ROWS), crs="EPSG:32631").frames["P"]
    assert len(got) == EXPECTED[kind]


def join_chain(n: int) -> str:
    return "phrase P per vehicle =\n    " + " ; ".join(f"BusGPS -> A{i}" for i in range(n)) + "\n  within 1 h\n"


# ---- chains of joined events of any depth (REFERENCE decision 35) ----------------------------
# K event types; event i of the chain is the only event with n == i, of type T(i mod K); each
# leaf takes exactly one event (its where-conjunct), so the answer is known: one composite per
# key that has every event, binding A<i> to event i; none for a key that misses one.

K = 100
T0 = 1_700_000_000 * 1_000_000
MIXED = (";", "and", "||")


def chain_text(n: int, ops, nested: bool, k: int = K) -> str:
    """A phrase over a chain of ``n`` events of ``k`` types joined by ``ops`` (cycled): left-deep
    as written (``A0 ; A1 ; A2``), or ``nested``: right-deep in parentheses (``A0 ; (A1 and (A2 ...))``)."""
    decl = 'timezone "UTC"\n' + "".join(
        f"event T{j}(k: str, n: int, lon: float, lat: float, ts: time)\n    source k\n    time ts\n"
        "    place point(lon, lat)\n" for j in range(min(n, k)))
    terms = [f"T{i % k} -> A{i}" for i in range(n)]
    if nested:
        match = "".join(f"{t} {ops[i % len(ops)]} (" for i, t in enumerate(terms[:-1])) + terms[-1] + ")" * (n - 1)
    else:
        match = terms[0] + "".join(f" {ops[(i - 1) % len(ops)]} {t}" for i, t in enumerate(terms) if i)
    where = " and ".join(f"A{i}.n == {i}" for i in range(n))
    return decl + f"phrase P per k =\n    {match}\n  where {where}\n  within 1 d\n"


def chain_times(n: int, ops, nested: bool) -> list[int]:
    """Local times (µs) that make the chain match: one second apart, except that the two
    events either side of `||` share a time (same source: concurrent, SPEC §2)."""
    t, out = T0, []
    for i in range(n):
        if i:
            op = ops[(i - 1) % len(ops)]
            t += 0 if op == "||" and (nested or i == 1) else 1_000_000
        out.append(t)
    return out


def chain_rows(n: int, j: int, keys=("v", "w"), missing=("w", None), k: int = K) -> list:
    """The chain's events of type T<j> as (i, key): each key has every event but key
    ``missing[0]``, which lacks event ``missing[1]`` (the middle one by default)."""
    gone = (missing[0], n // 2 if missing[1] is None else missing[1])
    return [(i, key) for i in range(j, n, k) for key in keys if (key, i) != gone]


def chain_frames(n: int, times, keys=("v", "w"), missing=("w", None), places=None) -> dict:
    """Canonical frames: the chain's events for each key (:func:`chain_rows`); event i at
    ``places[i]`` ``(lon, lat, r)``, by default all at one point."""
    places = places or [(0.1, 52.2, 0.0)] * n
    out = {}
    for j in range(min(n, K)):
        rows = chain_rows(n, j, keys, missing)
        t = [times[i] for i, _ in rows]
        lon, lat, r = ([places[i][c] for i, _ in rows] for c in range(3))
        m = len(rows)
        out[f"T{j}"] = pd.DataFrame({
            "_type": [f"T{j}"] * m, "_id": [f"{k}{i}" for i, k in rows],
            "_source": pd.Series([k for _, k in rows], dtype=object),
            "_t": pd.Series(t, dtype="int64"), "_lo": pd.Series(t, dtype="int64"), "_hi": pd.Series(t, dtype="int64"),
            "_place": ["point"] * m, "_lon": lon, "_lat": lat, "_r": r,
            "_geom": pd.Series([None] * m, dtype=object),
            "k": pd.Series([k for _, k in rows], dtype=object), "n": pd.Series([i for i, _ in rows], dtype="int64"),
            "lon": lon, "lat": lat, "ts": pd.Series(t, dtype="int64")})
    return out


def run_chain(n: int, ops, nested: bool):
    c = compile_program("chain.spatec", chain_text(n, ops, nested))
    got = replay_frames(c, chain_frames(n, chain_times(n, ops, nested)), crs="EPSG:32631",
                        statistics=False).frames["P"]
    return c, got


def copied(root):
    """A copy of an operator tree, node by node (without recursion)."""
    new = {}
    for n in walk_nodes(root):
        kids = {k: new[id(getattr(n, k))] for k in ("left", "right") if hasattr(n, k)}
        new[id(n)] = dataclasses.replace(n, **kids)
    return new[id(root)]


def test_a_match_climbs_a_tree_deeper_than_the_interpreter_stack():
    """1,100 events nested right-deep (``A0 ; (A1 and (A2 || (...)))``): the last event's
    match goes up all 1,100 levels at once (Python's stack holds 1,000 frames); the plan
    compares, hashes and prints without recursion."""
    assert sys.getrecursionlimit() <= 3000  # nothing raised it
    n = 1100
    c = compile_program("chain.spatec", chain_text(n, MIXED, True))
    times = chain_times(n, MIXED, True)
    got = replay_frames(c, chain_frames(n, times), crs="EPSG:32631", statistics=False).frames["P"]
    plan = c.plans[0]
    assert depth(plan.root) == n and len(plan.leaves) == n
    assert len(got) == 1
    r = got.iloc[0]
    assert r.events == {f"A{i}": f"v{i}" for i in range(n)}
    assert (int(r.lo), int(r.hi)) == (times[0], times[-1])
    other = copied(plan.root)
    assert other is not plan.root and other == plan.root and hash(other) == hash(plan.root)
    assert repr(other) == repr(plan.root) and repr(plan.root).startswith("Join(id=")
    assert other != copied(plan.root.right) and dataclasses.replace(other, op="||") != plan.root


@pytest.mark.slow
@pytest.mark.parametrize("ops,nested,n", [((";", ";="), False, N), (MIXED, True, 3000)],
                         ids=["seq-and-same-place-10000", "mixed-nested-3000"])
def test_a_long_event_chain_checks_plans_explains_and_runs(ops, nested, n):
    """10,000 events joined by `;` and `;=` in turn (each `;=` level compares the hull of
    all the events below it with the next event's: made from its halves' hulls,
    spatec.automata.hulls, not from every event, which was n² work: 2,000 took 11 s, 10,000
    did not finish); the nested mixed chain (its last event's match climbs every level at
    once, each level holding its side's events: n² memory; 10,000 ran by hand in 114 s and
    8 GB) shorter, to keep the suite fast. Explained at 10,000 as JSON (flat) and carried as
    plan data; as text and dot at 3,000 (deeper than the interpreter's stack)."""
    assert sys.getrecursionlimit() <= 3000  # nothing raised it
    c, got = run_chain(n, ops, nested)
    plan = c.plans[0]
    assert depth(plan.root) == n
    assert len(got) == 1
    r = got.iloc[0]
    assert r.events == {f"A{i}": f"v{i}" for i in range(n)}
    times = chain_times(n, ops, nested)
    assert (int(r.lo), int(r.hi)) == (times[0], times[-1])
    if not nested:
        tree = json.loads(explain(c.program, fmt="json"))[0]["tree"]
        assert len(tree["nodes"]) == 2 * N - 1
        back = data.loads(data.dumps(plan))
        assert back == plan and data.fingerprint(back) == data.fingerprint(plan)
    if nested:
        text = explain(c.program, fmt="text")
        assert f"T{(n - 1) % K} -> A{n - 1}" in text
        assert explain(c.program, fmt="dot").count(" -> \"P_") == 2 * n - 2


@pytest.mark.parametrize("ops", [(";=",), (";", ";=")])
def test_a_same_place_chain_compares_the_hull_of_all_the_events_below(monkeypatch, ops):
    """A `;=` chain (and one of `;` and `;=` in turn) of 60 fixes scattered over 16 m, of
    radius 5 to 20 m, every join making its matches' stamps from its halves' (hulls.MIN_EVENTS
    lowered to 2): each level's stamp is the hull of all its events, bit for bit; the
    composites are those made with stamps from every event."""
    n = 60
    rnd = random.Random(17)
    places = [(0.1 + rnd.uniform(-8, 8) / 68_000, 52.2 + rnd.uniform(-8, 8) / 111_000, rnd.choice([5.0, 12.0, 15.0, 20.0]))
              for _ in range(n)]
    c = compile_program("chain.spatec", chain_text(n, ops, False))
    proj = Projector("EPSG:32631")
    frames_ = chain_frames(n, chain_times(n, ops, False), keys=("v",), places=places)
    evs = sorted((e for f in frames_.values() for e in to_evs(f, c.program, proj)), key=lambda e: e.hi)

    def run(min_events):
        monkeypatch.setattr(H, "MIN_EVENTS", min_events)
        st = RunState()
        out, _ = step(build(c.plans[0], c.program, proj), st, evs, ordered=True)
        return st, [x.id for x in out]

    st, got = run(2)
    assert (got, len(got)) == (run(10 ** 9)[1], 1)
    matches = [pm for buf in st.buffers.values() for pm in buf if len(pm.events()) > 1]
    assert len(matches) >= n - 2
    from_halves = [pm for pm in matches if pm._hb is not None and len(pm._hb.pairs) < len(pm.events())]
    assert len(from_halves) > n // 2     # the stamps of most levels came from a few events' stamps
    for pm in matches:
        mine, want = H.loc(pm), S.hull([e.loc for e in pm.events()])
        assert (mine.r, shapely.to_wkb(mine.geom)) == (want.r, shapely.to_wkb(want.geom))


@pytest.mark.parametrize("ops,nested", [((";",), False), ((";=",), False), ((";", ";="), False), ((";", "and"), False),
                                        (MIXED, True), (("||", ";="), True)])
def test_short_chains_as_the_tests_make_them_agree_with_the_oracle(ops, nested):
    """The chains the deep tests build, 7 events long over a few keys, against the oracle
    (which shares nothing with the planner)."""
    n = 7
    text = chain_text(n, ops, nested)
    rows = []
    times = chain_times(n, ops, nested)
    for k in ("v", "w", "x"):
        for i in range(n):
            if (k, i) == ("w", 3):
                continue
            t = times[i] + (5_000_000 if k == "x" else 0)
            rows.append({"type": f"T{i % K}", "id": f"{k}{i}", "source": k, "t": t, "lo": t, "hi": t,
                         "place": "point", "lon": 0.1, "lat": 52.2, "r": 0.0, "geom": None,
                         "attrs": {"k": k, "n": i, "lon": 0.1, "lat": 52.2, "ts": t}})
    c = compile_program(f"/tmp/spatec_chain_{'_'.join(map(str, map(len, ops)))}_{nested}.spatec", text)
    proj = Projector("EPSG:32631")
    want = sorted(g[:4] for g in oracle.Oracle(c.program, proj, oracle.oevents(c.program, rows, proj)).phrase("P"))
    frames_ = {}
    for r_ in rows:
        frames_.setdefault(r_["type"], []).append(r_)
    got = replay_frames(c, {t: pd.DataFrame({
        "_type": [r_["type"] for r_ in rs], "_id": [r_["id"] for r_ in rs],
        "_source": pd.Series([r_["source"] for r_ in rs], dtype=object),
        "_t": pd.Series([r_["t"] for r_ in rs], dtype="int64"), "_lo": pd.Series([r_["lo"] for r_ in rs], dtype="int64"),
        "_hi": pd.Series([r_["hi"] for r_ in rs], dtype="int64"), "_place": ["point"] * len(rs),
        "_lon": [0.1] * len(rs), "_lat": [52.2] * len(rs), "_r": [0.0] * len(rs),
        "_geom": pd.Series([None] * len(rs), dtype=object),
        "k": pd.Series([r_["source"] for r_ in rs], dtype=object),
        "n": pd.Series([r_["attrs"]["n"] for r_ in rs], dtype="int64"),
        "lon": [0.1] * len(rs), "lat": [52.2] * len(rs), "ts": pd.Series([r_["t"] for r_ in rs], dtype="int64")})
        for t, rs in frames_.items()}, crs="EPSG:32631").frames["P"]
    sut = sorted((r_.id, int(r_.lo), int(r_.hi), tuple(sorted(r_.events.items()))) for r_ in got.itertuples())
    assert sut == want
    assert len(sut) == 2       # keys v and x (shifted); w misses an event
    assert sorted(dict(s[3])["A0"] for s in sut) == ["v0", "x0"]


def test_explain_writes_deep_trees_flat_in_json():
    """JSON readers stop at about 1,000 levels of nesting: a tree deeper than 100 levels is a
    flat list of nodes (parents first, children by id); a shallow one stays nested."""
    c = compile_program("chain.spatec", BUS + "\n" + join_chain(150))
    tree = json.loads(explain(c.program, fmt="json"))[0]["tree"]
    nodes = {n["node"]: n for n in tree["nodes"]}
    assert len(nodes) == 2 * 150 - 1 and tree["nodes"][0]["node"] == tree["root"]
    seen, todo = [], [tree["root"]]
    while todo:
        n = nodes[todo.pop()]
        seen.append(n["node"])
        todo += [n[k] for k in ("right", "left") if k in n]
    assert seen == [n["node"] for n in tree["nodes"]]       # parents before children, left first
    assert sum(n["kind"] == "event" for n in nodes.values()) == 150
    shallow = json.loads(explain(compile_program("c.spatec", BUS + "\n" + join_chain(3)).program, fmt="json"))
    assert shallow[0]["tree"]["left"]["left"]["kind"] == "event"


def test_plan_data_shares_repeated_syntax_nodes():
    """The checker's types map is keyed by every subexpression: each is written once."""
    where = " and ".join(f"A.lon > -{i}" for i in range(10))
    c = compile_program("c.spatec", BUS + f"\nphrase P =\n    BusGPS -> A\n  where {where}\n")
    plan = c.plans[0]
    text = data.dumps(plan)
    assert '"@r"' in text
    assert data.loads(text) == plan


def chain_inputs(tmp_path: Path, n: int, times, k: int) -> list:
    """The chain's events as CSV files, one per type: ``[(type, path)]`` for the runners."""
    inputs = []
    for j in range(min(n, k)):
        path = tmp_path / f"T{j}.csv"
        path.write_text("k,n,lon,lat,ts\n" + "".join(
            f"{key},{i},0.1,52.2,{times[i] // 1_000_000}\n" for i, key in chain_rows(n, j, k=k)), encoding="utf-8")
        inputs.append((f"T{j}", str(path)))
    return inputs


def test_spark_batch_runs_a_tree_deeper_than_the_interpreter_stack(spark, tmp_path):
    """The Spark runner ships the compiled program to its workers pickled
    (:mod:`spatec.frontend.flatpickle`: without recursion on the tree's depth): 1,100 events
    nested right-deep give the local runner's output file, byte for byte, and the one
    composite the data is built to have."""
    from spatec.events.timefmt import event_id
    from spatec.runners.replay import replay_local
    from spatec.runners.spark.batch import replay_spark

    assert sys.getrecursionlimit() <= 3000  # nothing raised it
    n, k = 1100, 10
    prog = tmp_path / "chain.spatec"
    prog.write_text(chain_text(n, MIXED, True, k), encoding="utf-8")
    c = compile_program(prog)
    assert depth(c.plans[0].root) == n
    times = chain_times(n, MIXED, True)
    inputs = chain_inputs(tmp_path, n, times, k)
    local = replay_local(c, inputs, tmp_path / "local")
    on_spark = replay_spark(c, inputs, tmp_path / "spark", spark=spark)
    assert local.counts["P"] == on_spark.counts["P"] == 1
    r = local.frames["P"].iloc[0]
    assert r.events == {f"A{i}": event_id(f"T{i % k}", "v", times[i]) for i in range(n)}
    a, b = (tmp_path / "local" / "P.jsonl").read_bytes(), (tmp_path / "spark" / "P.jsonl").read_bytes()
    assert a == b and a.count(b"\n") == 1


@pytest.mark.slow
def test_spark_live_runs_trees_deeper_than_it_used_to_ship(spark, tmp_path):
    """Spark live ships the program to its readers and fan-out pickled, and to its state
    processors as plan data in a file of the checkpoint: 500 events nested right-deep (pickle
    used to fail at 400 levels, and the plan data, 1.5 MB, is more than the 1 MiB a function
    Spark sends may carry) over two directory sources alert the one composite the local replay
    finds. (Slow: a Spark live query takes 40 s whatever the depth; 1,100 levels ran by hand.)"""
    from spatec.runners.replay import replay_local
    from spatec.runners.spark.live import run_live_spark
    from spatec.runtime.rows import time_fields
    from spatec.sinks.alerts import alert_json

    n, k = 500, 2
    c = compile_program("chain.spatec", chain_text(n, MIXED, True, k))
    times = chain_times(n, MIXED, True)
    sources = []
    for j in range(k):
        d = tmp_path / f"in{j}"
        d.mkdir()
        (d / "events.csv").write_text("k,n,lon,lat,ts\n" + "".join(
            f"{key},{i},0.1,52.2,{times[i] // 1_000_000}\n" for i, key in chain_rows(n, j, keys=("v",), k=k)),
            encoding="utf-8")
        sources.append(f"T{j}=dir://{d}")
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    counts = run_live_spark(c, sources, [f"jsonl://{sink}"], ck, ck, lateness=3_600_000_000, trigger=0.5,
                            until_idle=2, crs="EPSG:32631", spark=spark)
    assert counts["read"] == counts["used"] == n
    local = replay_local(c, [(t, str(tmp_path / f"in{t[1:]}" / "events.csv")) for t in ("T0", "T1")],
                         tmp_path / "local", crs="EPSG:32631")
    want = alert_json(local.frames["P"].to_dict("records"), time_fields(c.plans[0]))
    got = [json.loads(x) for x in (sink / "P.jsonl").read_text().splitlines() if x.strip()]
    assert len(want) == 1 and got == want

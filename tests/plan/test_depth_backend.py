"""No depth limits in the back end: 10,000-term `or` and `where` chains (left-deep trees ten
times deeper than Python's recursion limit) plan, explain (json, text, dot), write as plan
data and read back equal with the same fingerprint, and run on a small trace. A `;` chain
of as many events as the planner takes (REFERENCE decision 35: 300) plans, explains and
runs; a deeper one (10,000 events) is refused with a clear error naming the phrase."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "automata"))

from automata_support import frames  # noqa: E402
from test_oracle_spec_examples import stay  # noqa: E402

from spatec.errors import UnsupportedError  # noqa: E402
from spatec.plan import data  # noqa: E402
from spatec.plan.explain import explain  # noqa: E402
from spatec.plan.nodes import MAX_DEPTH, depth  # noqa: E402
from spatec.plan.program import compile_program  # noqa: E402
from spatec.runners.local import replay_frames  # noqa: E402

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


def test_a_join_chain_as_deep_as_planned_plans_explains_and_runs():
    """A `;` chain of MAX_DEPTH events (REFERENCE decision 35): the planner's passes,
    explain, plan data and the automaton (its slots found bottom-up, not by recursion)."""
    assert sys.getrecursionlimit() <= 3000  # nothing raised it
    c = compile_program("chain.spatec", BUS + "\n" + join_chain(MAX_DEPTH))
    plan = c.plans[0]
    assert depth(plan.root) == MAX_DEPTH and len(plan.leaves) == MAX_DEPTH
    for fmt in ("json", "text", "dot"):
        assert "P" in explain(c.program, fmt=fmt)
    back = data.loads(data.dumps(plan))
    assert data.fingerprint(back) == data.fingerprint(plan)
    # three fixes of a bus make no chain of 300; a chain of 3 over the same rows does
    assert len(replay_frames(c, frames(ROWS), crs="EPSG:32631").frames["P"]) == 0
    c3 = compile_program("chain.spatec", BUS + "\n" + join_chain(3))
    assert len(replay_frames(c3, frames(ROWS), crs="EPSG:32631").frames["P"]) == 2


def test_a_deeper_join_chain_is_refused_clearly():
    for n in (MAX_DEPTH + 1, N):
        with pytest.raises(UnsupportedError) as e:
            compile_program("chain.spatec", BUS + "\n" + join_chain(n))
        msg = str(e.value)
        assert "chain.spatec:" in msg and "phrase P" in msg, msg
        assert f"{n} levels deep" in msg and f"the {MAX_DEPTH} planned" in msg, msg


def test_plan_data_shares_repeated_syntax_nodes():
    """The checker's types map is keyed by every subexpression: each is written once."""
    where = " and ".join(f"A.lon > -{i}" for i in range(10))
    c = compile_program("c.spatec", BUS + f"\nphrase P =\n    BusGPS -> A\n  where {where}\n")
    plan = c.plans[0]
    text = data.dumps(plan)
    assert '"@r"' in text
    assert data.loads(text) == plan

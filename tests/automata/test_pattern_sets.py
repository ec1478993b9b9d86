"""Combined space patterns are sets, including the empty one (disjoint places)."""
from pathlib import Path

import pytest

from spatec.datasets import synth
from spatec.plan.program import compile_program
from spatec.runners.replay import replay_local

BUS = Path(__file__).resolve().parents[3] / "shared" / "spec" / "examples" / "bus.spatec"
PROGRAM = f'''include "{BUS}"
phrase Nowhere = BusGPS -> A and (at hospital and at station)
phrase Anywhere = BusGPS -> A and not (at hospital and at station)
phrase Surely = BusGPS -> A and certainly not (at hospital and at station)
phrase Either = BusGPS -> A and (at hospital or at station)
phrase Neither = BusGPS -> A and not (at hospital or at station)
'''


@pytest.mark.parametrize("fastpath", ["1", "0"])
def test_empty_intersection_and_its_complement(tmp_path, monkeypatch, fastpath):
    monkeypatch.setenv("SPATEC_FASTPATH", fastpath)
    p = tmp_path / "p.spatec"
    p.write_text(PROGRAM)
    csv = tmp_path / "t.csv"
    df = synth.synthetic_trace(4, 1800, seed=5)
    df.to_csv(csv, index=False)
    r = replay_local(compile_program(p), [("BusGPS", str(csv))], tmp_path / "out")
    n = len(df)
    assert r.counts["Nowhere"] == 0          # hospital and station do not meet
    assert r.counts["Anywhere"] == n         # the complement of nothing is everywhere
    assert r.counts["Surely"] == n
    # a fix is possibly outside the union unless its whole disc is inside a place
    assert 0 < r.counts["Either"] < n
    assert r.counts["Either"] + r.counts["Neither"] >= n

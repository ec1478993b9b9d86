"""The real Cambridge hour: every example phrase that takes a fast path gives
the general automaton's output, row for row, both over all partitions at once
(the local runner) and partition by partition (``run_partition``, as Spark
runs it)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from spatec.automata.machine import build
from spatec.plan.program import compile_program
from spatec.runners.local import replay_frames
from spatec.runtime.batch import run_partition
from spatec.runtime.events import to_evs
from spatec.runtime.routing import partitions
from spatec.runtime.rows import output_row, rows_frame
from spatec.spatial.crs import Projector, choose_crs
from spatec.vector.fastpath import fast_path

REPO = Path(__file__).resolve().parents[2]
HOUR = REPO.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
PROGRAMS = ["stuck", "silent", "hospital_to_station", "centre_to_hospital", "tuesday_to_hospital", "bunching"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HOUR.exists(), reason=f"the Cambridge hour is not at {HOUR}")]


@pytest.fixture(scope="module")
def hour():
    from spatec.events.read import read_events

    c = compile_program(REPO / "examples" / "bus.spatec")
    return read_events(HOUR, c.program.events["BusGPS"], tz=c.program.timezone).events


@pytest.mark.parametrize("name", PROGRAMS)
def test_example_phrases(hour, name):
    c = compile_program(REPO / "examples" / name / f"{name}.spatec")
    if name in ("stuck", "bunching"):
        # the general automaton's slowest here: every other vehicle (every fourth for Stuck,
        # whose automaton keeps each fix's 4-fix windows open)
        vehicles = sorted(hour["vehicle"].unique())[::4 if name == "stuck" else 2]
        hour = hour[hour["vehicle"].isin(vehicles)].reset_index(drop=True)
    frames = {"BusGPS": hour}
    fast = [p for p in c.plans if fast_path(p) is not None]
    assert fast, "every program here has a fast-path phrase"
    names = [p.name for p in fast]
    general = replay_frames(c, frames, phrases=names, fastpath=False).frames
    local = replay_frames(c, frames, phrases=names, fastpath=True).frames
    proj = Projector(choose_crs(c.program, frames))
    evs = {"BusGPS": to_evs(hour, c.program, proj)}
    final_w = int(hour["_hi"].max())
    for plan in fast:
        pd.testing.assert_frame_equal(local[plan.name], general[plan.name], check_dtype=False)
        am = build(plan, c.program, proj)
        rows = []
        for evs_k in partitions(plan, evs).values():
            got, st = run_partition(am, evs_k, final_w, fastpath=True)
            rows += [output_row(am, x, proj, st) for x in got]
        pd.testing.assert_frame_equal(rows_frame(plan, rows), general[plan.name], check_dtype=False)
        assert len(general[plan.name]) > 0 or plan.name == "OtherWeekdayToHospital"   # a Tuesday


@pytest.mark.parametrize("metres", [0.5, 20, 100, 400])
def test_the_grid_of_a_distance_bound_keeps_every_pair(hour, metres, monkeypatch):
    """Pairs of buses of any line within ``metres`` of each other: the candidate pairs
    taken from neighbouring grid cells (``_grid_pairs``) give exactly the composites
    of the time windows alone — none lost at a cell's edge, for cells from 31 m to 431 m
    (two 15 m discs and the bound)."""
    import spatec.vector.fastpath as F

    c = compile_program(REPO / "examples" / "inline.spatec",
                        f'include "bus.spatec"\nphrase Near =\n'
                        f'    BusGPS -> A || BusGPS -> B\n'
                        f'  where A.vehicle < B.vehicle and A.line == B.line and distance(A, B) < {metres} m\n'
                        f'  emit metres = distance(A, B) / 1 m\n')
    frames = {"BusGPS": hour}
    used = []
    grid = F._grid_pairs
    monkeypatch.setattr(F, "_grid_pairs", lambda *a: used.append(1) or grid(*a))
    with_grid = replay_frames(c, frames).frames["Near"]
    assert used
    monkeypatch.setattr(F, "_grid_pairs", lambda *a: None)
    without = replay_frames(c, frames).frames["Near"]
    pd.testing.assert_frame_equal(with_grid, without)
    assert len(without) > (0 if metres < 1 else 100)


SPEC_EXAMPLES = REPO.parent / "shared" / "spec" / "examples"
RUN_PROGRAMS = [REPO / "examples" / "episodes" / "episodes.spatec",
                REPO / "examples" / "dwell_at_stops" / "dwell_at_stops.spatec",
                SPEC_EXAMPLES / "stuck_episodes.spatec", SPEC_EXAMPLES / "dwell_at_stops.spatec"]


@pytest.mark.parametrize("path", RUN_PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_run_examples_fast_path_equals_automaton(hour, path):
    """Golden check of the fast path ``run`` (spatec/vector/runs.py) on the hour, every other
    vehicle: the output frames (ids, stamps, hull texts, bindings, places, emit fields) are
    exactly the automaton's, and the planner chose the fast path for every run phrase."""
    if not path.exists():
        pytest.skip(f"{path} is not there")
    c = compile_program(path)
    vehicles = sorted(hour["vehicle"].unique())[::2]
    frames = {"BusGPS": hour[hour["vehicle"].isin(vehicles)].reset_index(drop=True)}
    runs = [p.name for p in c.plans if p.physical.fast_path == "run"]
    assert runs == [p.name for p in c.plans]
    general = replay_frames(c, frames, fastpath=False).frames
    local = replay_frames(c, frames, fastpath=True).frames
    for name in runs:
        assert len(general[name]) > 0
        pd.testing.assert_frame_equal(local[name], general[name], check_exact=True)


def test_two_stuck_fast_path_equals_automaton(hour):
    """Issue 17's TwoStuck (``bench/two_stuck.spatec``: two chains joined, the ``chains``
    shape) on the hour's first 10 minutes: the fast path's frame is the automaton's."""
    c = compile_program(REPO / "bench" / "two_stuck.spatec")
    assert fast_path(c.plan("TwoStuck")).shape == "chains"
    t0 = int(hour["_t"].quantile(0.001))        # (a few fixes arrive hours late)
    part = hour[hour["_t"] < t0 + 600_000_000].reset_index(drop=True)
    frames = {"BusGPS": part}
    fast = replay_frames(c, frames, fastpath=True).frames["TwoStuck"]
    general = replay_frames(c, frames, fastpath=False).frames["TwoStuck"]
    assert len(general) > 1000
    pd.testing.assert_frame_equal(fast, general, check_exact=True)

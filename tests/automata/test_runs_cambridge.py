"""SPEC's run examples on the real Cambridge hour through ``spatec replay --runner local``:
``stuck_episodes``, ``dwell_at_stops`` and ``dwell_nearest_stop`` (/work/shared/spec/examples)
give the counts the brute-force oracle gives on the whole hour (tests/oracle_counts.py:
StuckEpisode 1,524, DwellAtStop 137, Dwell at the nearest stop 56), and exactly the oracle's composites (ids, stamps, bound stop, emit
values) for a sample of the buses, each composite of a bus being decided by that bus's
fixes alone (``per vehicle``; runs are cut per source)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import oracle
from spatec.cli.main import main
from spatec.events.read import read_events
from spatec.plan.program import compile_program
from spatec.spatial.crs import Projector, choose_crs

SHARED = Path(__file__).resolve().parents[3] / "shared"
HOUR = SHARED / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
SPEC_EXAMPLES = SHARED / "spec" / "examples"
#: the oracle's counts on the whole hour (tests/oracle_counts.py)
CASES = [("stuck_episodes", "StuckEpisode", 1524), ("dwell_at_stops", "DwellAtStop", 137),
         ("dwell_nearest_stop", "Dwell", 56)]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HOUR.exists(), reason=f"the Cambridge hour is not at {HOUR}")]


def oracle_events(df: pd.DataFrame, projector) -> list:
    """Canonical events → the oracle's events."""
    attrs = [c for c in df.columns if not c.startswith("_")]
    rows = []
    for r in df.to_dict("records"):
        rows.append({"type": r["_type"], "id": r["_id"], "source": r["_source"], "t": int(r["_t"]),
                     "lo": int(r["_lo"]), "hi": int(r["_hi"]), "place": r["_place"], "lon": r["_lon"],
                     "lat": r["_lat"], "r": r["_r"], "geom": r.get("_geom"),
                     "attrs": {a: r[a] for a in attrs}})
    return oracle.oevents(None, rows, projector)


def micros(text: str) -> int:
    return int(pd.Timestamp(text).value // 1000)


def sample_of(hour, got, phrase) -> list:
    """The buses compared with the oracle: every fifth; for DwellAtStop (the oracle tests
    every run against each of the 1,388 stops, ~10 s a bus) every 15th bus with a dwell
    and two buses without."""
    buses = sorted(hour["vehicle"].unique())
    if phrase not in ("DwellAtStop", "Dwell"):
        return buses[::5]
    dwelt = sorted({r["vehicle"] for r in got})
    return dwelt[::15] + [b for b in buses if b not in dwelt][:2]


@pytest.mark.parametrize("example,phrase,count", CASES)
def test_replay_gives_the_oracles_composites(tmp_path, example, phrase, count):
    program = SPEC_EXAMPLES / f"{example}.spatec"
    out = tmp_path / "out"
    assert main(["replay", str(program), "--runner", "local", "--events", f"BusGPS={HOUR}",
                 "--out", str(out), "--quiet"]) == 0
    got = [json.loads(line) for line in (out / f"{phrase}.jsonl").read_text().splitlines()]
    assert len(got) == count
    assert len({r["id"] for r in got}) == count

    c = compile_program(program)
    hour = read_events(HOUR, c.program.events["BusGPS"], tz=c.program.timezone).events
    proj = Projector(choose_crs(c.program, {"BusGPS": hour}))
    sample = sample_of(hour, got, phrase)
    part = hour[hour["vehicle"].isin(sample)].reset_index(drop=True)
    o = oracle.Oracle(c.program, proj, oracle_events(part, proj))
    info = c.program.phrase(phrase)
    want = {}
    for x, binds, cid in o.composites(phrase):
        env = dict(x.binds)
        want[cid] = (x.lo, x.hi, dict(binds).get("S"),
                     {f.name: o.where.val(f.expr, env) for f in info.phrase.emit})
    assert want, "the sample has composites"
    mine = {}
    for r in got:
        if r["vehicle"] not in sample:
            continue
        emit = {k: r[k] for k in want[next(iter(want))][3]}
        for k in ("since", "until"):
            emit[k] = micros(emit[k])
        mine[r["id"]] = (micros(r["lo"]), micros(r["hi"]), (r.get("places") or {}).get("S"), emit)
    assert mine == want

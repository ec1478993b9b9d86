"""Phrases over phrases on the real Cambridge hour through ``spatec replay --runner local``:
examples/headway (calls as events with a source and a time of their own, `successive` between
them: 47 headways, the consecutive calls by arrival per line and direction that pandas finds,
tests/automata/test_headway_pandas.py) and examples/stuck_together (three levels) give exactly the brute-force oracle's composites (ids and stamps) of every phrase,
over the whole hour, with the same projection."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_runs_cambridge import HOUR, micros, oracle_events

import oracle
from spatec.cli.main import main
from spatec.events.read import read_events
from spatec.plan.program import compile_program
from spatec.spatial.crs import Projector, choose_crs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CASES = [("headway", ("StationCall", "Headway"), {"StationCall": 71, "Headway": 47}),
         ("stuck_together", ("StuckEpisode", "StuckTogether", "Blockage"),
          {"StuckEpisode": 1524, "StuckTogether": 1116, "Blockage": 837})]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HOUR.exists(), reason=f"the Cambridge hour is not at {HOUR}")]


@pytest.mark.parametrize("example,phrases,counts", CASES, ids=[c[0] for c in CASES])
def test_replay_gives_the_oracles_composites(tmp_path, example, phrases, counts):
    program = EXAMPLES / example / f"{example}.spatec"
    out = tmp_path / "out"
    assert main(["replay", str(program), "--runner", "local", "--events", f"BusGPS={HOUR}",
                 "--out", str(out), "--quiet"]) == 0
    c = compile_program(program)
    hour = read_events(HOUR, c.program.events["BusGPS"], tz=c.program.timezone).events
    proj = Projector(choose_crs(c.program, {"BusGPS": hour}))
    o = oracle.Oracle(c.program, proj, oracle_events(hour, proj))
    for phrase in phrases:
        got = [json.loads(line) for line in (out / f"{phrase}.jsonl").read_text().splitlines()]
        assert len(got) == counts[phrase], phrase
        mine = sorted((r["id"], micros(r["lo"]), micros(r["hi"])) for r in got)
        want = sorted(g[:3] for g in o.phrase(phrase))
        assert mine == want, phrase

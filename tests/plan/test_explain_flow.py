"""`spatec explain` shows the program's flow graph (SPEC §8): each phrase's inputs and
consumers, and what its frontier waits for (a run without gap: each source reporting again)."""
from __future__ import annotations

import json
from pathlib import Path

from spatec.frontend.check import check_file
from spatec.plan.explain import explain

PROGRAM = Path(__file__).resolve().parents[2] / "lang" / "corpus" / "valid" / "derived_events.spatec"


def test_flow_in_json_text_and_dot():
    program = check_file(PROGRAM)
    flows = {d["phrase"]: d["flow"] for d in json.loads(explain(program, fmt="json"))}
    assert flows["Stop"]["inputs"] == [] and flows["Stop"]["consumers"] == ["StoppedTogether", "LongStop"]
    assert any("open run" in w for w in flows["Stop"]["frontier"])      # a run without gap
    assert flows["Convoy"] == {"inputs": ["StoppedTogether"], "consumers": []}
    assert flows["StoppedTogether"]["frontier"][-1] == "Stop's frontier"
    text = explain(program, fmt="text")
    assert "reads the composites of: StoppedTogether" in text
    dot = explain(program, fmt="dot")
    for edge in ('"flow:Stop" -> "flow:StoppedTogether"', '"flow:StoppedTogether" -> "flow:Convoy"',
                 '"flow:Stop" -> "flow:LongStop"'):
        assert edge in dot

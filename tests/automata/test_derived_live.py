"""Phrases over phrases (SPEC §8) live: the local live runner (its micro-batches, housekeeping,
checkpoints and end of input) over random traces in random batches, shuffled within the
lateness, sometimes restarted from its checkpoint between batches, reports exactly the
composites of the brute-force oracle and the rows of a batch replay, each once; and never,
mid-stream, one that the replay does not report."""
from __future__ import annotations

import os
import random

import pandas as pd
from automata_support import CRS, US, compiled_or_reject, frames
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_against_oracle import traces
from test_derived_oracle import programs

import oracle
from spatec.runners.live_local import LocalLive
from spatec.runners.local import replay_frames
from spatec.runtime.rows import time_fields
from spatec.sinks.alerts import DeliveredLog, SinkSet, alert_json
from spatec.spatial.crs import Projector

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                  HealthCheck.function_scoped_fixture])
EXAMPLES = int(os.environ.get("ORACLE_DERIVED_LIVE_EXAMPLES", 120))


class FramesLive(LocalLive):
    """The local live runner given canonical frames as its input items (no feed, no reader):
    everything after the readers is the runner's own; its items are not a source's, so no
    batch log (each "restart" here follows a save)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batch_log = None

    def _ingest(self, items):
        out: dict = {}
        for fr in items:
            for t, df in fr.items():
                out[t] = df if t not in out else pd.concat([out[t], df], ignore_index=True)
        return out, {}


def live_alerts(compiled, rows, lateness, rnd, ck) -> tuple[dict, list]:
    """phrase → alerts of a live run over ``rows`` in random batches; and every composite
    reported before the end of input."""
    def runner():
        return FramesLive(compiled, [], SinkSet([], DeliveredLog(None)), ck, ck, lateness=lateness, crs=CRS,
                          checkpoint_every=0, background=False)

    order = sorted(rows, key=lambda r: (r["hi"] - rnd.uniform(0, lateness), r["id"]))
    live = runner()
    got: list = []
    i = 0
    while i < len(order):
        k = rnd.randint(1, 4)
        got += live.process([frames(order[i:i + k])])
        i += k
        if rnd.random() < 0.3:         # killed after a save; restarted from the checkpoint
            live = runner()
    assert live.state.counts["late"] == 0, "events within the lateness are never late"
    early = list(got)
    got += live.finish()
    out: dict = {}
    for a in got:
        out.setdefault(a["phrase"], []).append(a)
    return out, early


def batch_alerts(compiled, rows) -> dict:
    res = replay_frames(compiled, frames(rows), crs=CRS)
    return {p.name: alert_json(res.frames[p.name].to_dict("records"), time_fields(p)) for p in compiled.plans}


@settings(max_examples=EXAMPLES, **FAST)
@given(st.data())
def test_live_phrases_over_phrases_equal_oracle_and_batch(tmp_path_factory, data):
    rows = data.draw(traces(types=("Bus", "Tag")))
    text = data.draw(programs())
    c = compiled_or_reject(text)
    lateness = data.draw(st.sampled_from([0, 10 * US, 60 * US, 300 * US]))
    rnd = random.Random(data.draw(st.integers(0, 2 ** 16)))
    ck = tmp_path_factory.mktemp("ck")
    got, early = live_alerts(c, rows, lateness, rnd, ck)
    want = batch_alerts(c, rows)
    proj = Projector(CRS)
    o = oracle.Oracle(c.program, proj, oracle.oevents(c.program, rows, proj))
    for p in c.plans:
        ids = [a["id"] for a in got.get(p.name, [])]
        assert len(ids) == len(set(ids)), (p.name, "reported twice", text)
        assert sorted(ids) == sorted(g[0] for g in o.phrase(p.name)), (p.name, text)
        key = lambda a: a["id"]  # noqa: E731
        assert sorted(got.get(p.name, []), key=key) == sorted(want[p.name], key=key), (p.name, text)
    # mid-stream, live never reports what the replay does not
    every = {a["id"] for rows_ in want.values() for a in rows_}
    assert all(a["id"] in every for a in early), text

"""The driver's phrases over phrases of the Spark live runner (REFERENCE decision 38), without
Spark: a producer's composites handed on batch by batch as a query's output rows (``event``
rows, and ``low`` rows with what its buckets hold back) give the replay's composites of the
phrase that reads them, each once; a batch that Spark runs again after a crash (a new driver
on the same checkpoint) is applied once."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spatec.plan.program import compile_program
from spatec.runners.local import replay_frames
from spatec.runners.spark.live_flows import NOTHING, DriverFlows, event_payload
from spatec.runtime.batch import phrase_rows
from spatec.runtime.derived import Produced
from spatec.spatial.crs import Projector, choose_crs

REPO = Path(__file__).resolve().parents[2]
HOUR = REPO.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
HEADWAY = REPO / "examples" / "headway" / "headway.spatec"


@pytest.fixture(scope="module")
def headway():
    from spatec.events.read import read_events

    if not HOUR.exists():
        pytest.skip(f"the Cambridge hour is not at {HOUR}")
    c = compile_program(HEADWAY)
    frames = {"BusGPS": read_events(HOUR, c.program.events["BusGPS"], tz=c.program.timezone).events}
    crs = choose_crs(c.program, frames)
    proj = Projector(crs)
    final_w = int(frames["BusGPS"]["_hi"].max())
    station = next(p for p in c.plans if p.name == "StationCall")
    produced = Produced()
    phrase_rows(station, c.program, frames, proj, final_w, produced=produced)
    want = replay_frames(c, frames, crs=crs).frames["Headway"]
    assert produced.low is not None      # runs still open at the end: they hold the frontier back
    return c, proj, produced, final_w, want


def batches(produced: Produced, n: int, longest: int, final_w: int) -> list:
    """The producer's composites in ``n`` micro-batches by ``hi``: each batch's ``event`` rows
    and one ``low`` row per bucket (two buckets: alternate composites), the least ``lo`` of
    those still to come and, in bucket 0, of what the producer leaves undecided at the end
    (``produced.low``: its state holds it all along); the watermark past the batch's last
    ``hi``. Then a last batch at the end of input: the buckets' final ``low`` rows."""
    evs = sorted(produced.events, key=lambda e: (e.hi, e.id))
    held = NOTHING if produced.low is None else produced.low
    cuts = np.array_split(np.arange(len(evs)), n)
    out = []
    for i, idx in enumerate(cuts):
        rows = [{"kind": "event", "phrase": "StationCall", "id": evs[j].id, "hi": evs[j].hi, "arrived": float(i),
                 "payload": event_payload(evs[j])} for j in idx]
        wm = evs[idx[-1]].hi + longest
        later = range(idx[-1] + 1, len(evs))
        for b in (0, 1):
            low = min([evs[j].lo for j in later if j % 2 == b] + ([held] if b == 0 else []), default=NOTHING)
            rows.append({"kind": "low", "phrase": "StationCall", "id": str(b), "hi": low, "arrived": None,
                         "payload": f"{wm}:0"})
        out.append(rows)
    out.append([{"kind": "low", "phrase": "StationCall", "id": str(b), "hi": held if b == 0 else NOTHING,
                 "arrived": None, "payload": f"{final_w}:1"} for b in (0, 1)])
    return out


def ids(found) -> list:
    return [c.id for _ph, c, _row, _t in found]


def test_handed_on_batch_by_batch_gives_the_replays_composites(headway, tmp_path):
    c, proj, produced, final_w, want = headway
    flows = DriverFlows(c, c.plans, {"StationCall"}, {"Headway"}, proj, tmp_path / "ck")
    got, early = [], 0
    for i, rows in enumerate(batches(produced, 12, flows.longest["StationCall"], final_w)):
        found = flows.batch(i, rows)
        early += len(found)
        got += ids(found)
    got += ids(flows.finish(final_w))
    assert len(want) > 5
    assert sorted(got) == sorted(want["id"]) and len(set(got)) == len(got)
    assert early > 0          # decided while the producer's composites still come, by its frontier
    assert flows.finish(final_w) == []      # the end is decided once


def test_a_batch_run_again_after_a_crash_is_applied_once(headway, tmp_path):
    c, proj, produced, final_w, want = headway
    ck = tmp_path / "ck"
    first = DriverFlows(c, c.plans, {"StationCall"}, {"Headway"}, proj, ck)
    todo = batches(produced, 12, first.longest["StationCall"], final_w)
    got, per_batch = [], {}
    for i, rows in enumerate(todo[:7]):
        per_batch[i] = ids(first.batch(i, rows))
        got += per_batch[i]
    # the driver dies after batch 6 was applied and saved, before Spark committed it: a new
    # driver on the checkpoint is given batch 6 again, then the rest
    again = DriverFlows(c, c.plans, {"StationCall"}, {"Headway"}, proj, ck)
    assert ids(again.batch(6, todo[6])) == per_batch[6]
    for i, rows in enumerate(todo[7:], start=7):
        got += ids(again.batch(i, rows))
    got += ids(again.finish(final_w))
    assert sorted(got) == sorted(want["id"]) and len(set(got)) == len(got)
    assert len(list((ck / "derived").glob("*.pickle"))) <= 2

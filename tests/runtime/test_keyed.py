"""The keyed runtime: a phrase stepped key by key over batches (as the live runners do) gives
the batch replay's composites, whatever the batches; keys due for a decision are stepped
when the watermark reaches it; broadcast events reach keys seen later; empty keys drop."""
from __future__ import annotations

import random

from spatec.automata.machine import NEG_INF
from spatec.runtime.batch import phrase_rows
from spatec.runtime.events import to_evs
from spatec.runtime.keyed import KeyedPhrase, KeyedState, advance
from spatec.runtime.routing import route
from spatec.spatial.crs import Projector
from tests.automata.automata_support import CRS, compile_text, frames, row

PROGRAM = """
phrase Silent per vehicle = Bus -> A ; not Bus -> X within 2 min emit last = A.t
phrase InCell per vehicle = Bus -> A ||= Cell -> C within 10 min
phrase Chain per vehicle = Bus -> A ;= Bus -> B ;= Bus -> C where successive(A, B, C)
"""


def trace(seed):
    rnd = random.Random(seed)
    rows = []
    for v in range(5):
        t = rnd.uniform(0, 30)
        for _ in range(25):
            t += rnd.choice([15, 20, 25, 200])
            rows.append(row("Bus", f"V{v}", t, dx=rnd.uniform(0, 60), dy=rnd.uniform(0, 60)))
    rows += [row("Cell", None, 400 * k, dx=30, dy=30, dur_s=300, cell=f"c{k}") for k in range(12)]
    return rows


def live_ids(c, rows, cuts: int, seed: int, drop_empty: bool) -> dict:
    proj = Projector(CRS)
    fr = frames(rows)
    evs = {t: to_evs(df, c.program, proj) for t, df in fr.items()}
    allev = sorted([e for es in evs.values() for e in es], key=lambda e: (e.hi, e.id))
    rnd = random.Random(seed)
    bounds = sorted(rnd.sample(range(1, len(allev)), cuts))
    batches = [allev[a:b] for a, b in zip([0] + bounds, bounds + [len(allev)])]
    out = {}
    for plan in c.plans:
        ph, ks = KeyedPhrase(plan, c.program, proj), KeyedState(heap=[])
        wm, got = NEG_INF, set()
        for b in batches:
            by_type: dict = {}
            for e in b:
                by_type.setdefault(e.type, []).append(e)
            new_wm = max(wm, max(e.hi for e in b))
            by_key, bnew = route(ph.physical, by_type)
            done = advance(ph, ks, by_key, bnew, new_wm, new_wm != wm, drop_empty=drop_empty)
            assert not done.late
            got |= {cc.id for cc, _ in done.found}
            wm = new_wm
        done = advance(ph, ks, {}, [], wm, True, final=True, drop_empty=drop_empty)
        got |= {cc.id for cc, _ in done.found}
        out[plan.name] = got
    return out


def batch_ids(c, rows) -> dict:
    proj = Projector(CRS)
    fr = frames(rows)
    final = max(int(df["_hi"].max()) for df in fr.values())
    return {p.name: {r["id"] for r in phrase_rows(p, c.program, fr, proj, final, fastpath=False)[0]}
            for p in c.plans}


def test_batches_of_any_cut_give_the_replays_composites():
    c = compile_text(PROGRAM)
    for seed in range(3):
        rows = trace(seed)
        want = batch_ids(c, rows)
        assert all(want.values()), want
        for cuts, drop in ((1, False), (17, True), (60, False)):
            assert live_ids(c, rows, cuts, seed, drop) == want, (seed, cuts)


def test_a_key_waiting_for_an_absence_is_stepped_only_when_due():
    c = compile_text(PROGRAM)
    proj = Projector(CRS)
    plan = c.plan("Silent")
    ph, ks = KeyedPhrase(plan, c.program, proj), KeyedState(heap=[])
    evs = to_evs(frames([row("Bus", "V1", 0)])["Bus"], c.program, proj)
    advance(ph, ks, {("V1",): evs}, [], evs[0].hi, True)
    due = ks.due[("V1",)]
    assert not advance(ph, ks, {}, [], due - 1, True).touched       # not due yet: not stepped
    done = advance(ph, ks, {}, [], due, True)
    assert [cc.id for cc, _ in done.found] and not ks.due


def test_late_texts_are_the_late_records_of_each_event():
    """The late file's lines written a column at a time are each event's :func:`late_record`
    text, with where it came from: ids, a missing source (a keyless type), microseconds,
    attributes (a missing one, a non-ASCII one), the watermark."""
    import json

    import numpy as np

    from spatec.runtime.keyed import late_record, late_text, late_texts

    c = compile_text(PROGRAM)
    rows = [row("Bus", "V\u00e9", 10.000001, x=3), row("Bus", "V2", 40.5, x=None),
            row("Cell", None, 400, dx=30, dy=30, dur_s=300, cell="c\u00e9")]
    proj = Projector(CRS)
    wm = 1_569_916_800_123_456
    for t, df in frames(rows).items():
        df = df.assign(_file=f"{t}.csv", _row=np.arange(len(df), dtype=np.int64) + 7)
        evs = to_evs(df, c.program, proj)
        want = [late_text(late_record(e, wm, {"_file": f"{t}.csv", "_row": i + 7})) for i, e in enumerate(evs)]
        got = late_texts(df, c.program, wm)
        assert got == want
        assert all(json.loads(g)["watermark"] == "2019-10-01T08:00:00.123456Z" for g in got)

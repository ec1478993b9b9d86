"""The local runner's shortcuts give what the general code gives: run-time events made in bulk
(to_evs's discs of GPS fixes against Loc.disc one by one),
hulls written in bulk, and the decision times that tell which waiting keys to step."""
from __future__ import annotations

import random

from spatec.automata.machine import Composite, Ev
from spatec.plan.program import compile_program
from spatec.runtime.events import to_evs
from spatec.runtime.routing import partitions
from spatec.spatial import stamps as S
from spatec.spatial.crs import Projector
from tests.live.conftest import CRS, feed_events, program_of


def _one_by_one(df, program, proj):
    """Run-time events made row by row (Loc.disc per fix): what to_evs's bulk discs must equal."""
    from spatec.runtime.events import attribute_names, is_missing, python_values

    names = attribute_names(program, df["_type"].iloc[0])
    cols = {c: python_values(df[c]) for c in names}
    xs, ys = proj.forward(df["_lon"].to_numpy(float), df["_lat"].to_numpy(float))
    out = []
    for i in range(len(df)):
        row = df.iloc[i]
        src = None if is_missing(row["_source"]) else row["_source"]
        out.append(Ev(row["_type"], row["_id"], src, int(row["_t"]), int(row["_lo"]), int(row["_hi"]),
                      S.Loc.disc(xs[i], ys[i], row["_r"]), {c: cols[c][i] for c in names}))
    return out


def test_fast_events_are_to_evs(tmp_path, polls5):
    _fast_evs = to_evs

    compiled = compile_program(program_of(tmp_path, "silent"))
    df = feed_events(compiled, polls5[:40])
    proj = Projector(CRS)
    fast, ref = _fast_evs(df, compiled.program, proj), _one_by_one(df, compiled.program, proj)
    assert len(fast) == len(ref) > 1000
    for a, b in zip(fast, ref):
        assert type(a) is type(b)
        assert (a.type, a.id, a.source, a.t, a.lo, a.hi, a.attrs) == (b.type, b.id, b.source, b.t, b.lo, b.hi, b.attrs)
        assert a.loc == b.loc and a.loc._xy == b.loc._xy and a.loc.r == b.loc.r


def test_bulk_hulls_are_to_lonlat_wkt(tmp_path, polls5):
    from spatec.sinks.encoding import hulls_wkt, to_lonlat_wkt

    compiled = compile_program(program_of(tmp_path, "silent"))
    proj = Projector(CRS)
    evs = to_evs(feed_events(compiled, polls5[:20]), compiled.program, proj)
    rng = random.Random(3)
    comps = []
    for _ in range(600):
        k = rng.choice([1, 2, 2, 3, 4])
        members = rng.sample(evs, k)
        if rng.random() < 0.1:
            members = [members[0]] * k          # one place: the hull is a disc
        comps.append(Composite("P", "x", 0, 0, None, {}, members))
    # other stamps take the one-by-one path
    comps.append(Composite("P", "y", 0, 0, None, {}, [evs[0], type(evs[1])(*[getattr(evs[1], f) for f in (
        "type", "id", "source", "t", "lo", "hi")], S.Loc.disc(*evs[1].loc._xy, 40.0), evs[1].attrs)]))
    got = hulls_wkt(comps, proj)
    want = [to_lonlat_wkt(S.hull([e.loc for e in c.events]) if len(c.events) > 1 else c.events[0].loc, proj)
            for c in comps]
    assert got == want


def test_decision_time_is_when_a_pending_composite_is_ready(tmp_path, polls5):
    from spatec.automata.machine import RunState, build
    from spatec.automata.step import _ready, decision_time, next_decision, step

    compiled = compile_program(program_of(tmp_path, "silent", "stuck", "hospital"))
    proj = Projector(CRS)
    evs = {"BusGPS": to_evs(feed_events(compiled, polls5), compiled.program, proj)}
    checked = 0
    for plan in compiled.plans:
        am = build(plan, compiled.program, proj)
        for k, part in list(partitions(plan, evs).items())[:60]:
            st = RunState()
            cut = part[len(part) // 2].hi if part else 0
            step(am, st, part, watermark=cut)
            for pm in st.pending:
                d = decision_time(am, pm)
                assert _ready(am, pm, d, False) and not _ready(am, pm, d - 1, False)
                checked += 1
            if st.pending:
                assert next_decision(am, st) == min(decision_time(am, pm) for pm in st.pending)
                got, _ = step(am, st, [], watermark=next_decision(am, st) - 1)
                assert not got
    assert checked > 20


def test_fast_events_with_missing_values_are_to_evs(tmp_path, polls5):
    """Missing attribute values (None, NaN) and a float-NaN source come out as to_evs makes them."""
    import numpy as np

    _fast_evs = to_evs

    compiled = compile_program(program_of(tmp_path, "silent"))
    df = feed_events(compiled, polls5[:3]).head(50).copy()
    df["line"] = df["line"].astype(object)
    df.loc[df.index[::3], "line"] = None
    df.loc[df.index[1::4], "operator"] = np.nan
    proj = Projector(CRS)
    fast, ref = _fast_evs(df, compiled.program, proj), _one_by_one(df, compiled.program, proj)
    assert len(fast) == len(ref) == 50
    assert sum(e.attrs["line"] is None for e in fast) == 17
    assert sum(e.attrs["operator"] is None for e in fast) >= 12
    for a, b in zip(fast, ref):
        assert (a.type, a.id, a.source, a.t, a.lo, a.hi, a.attrs) == (b.type, b.id, b.source, b.t, b.lo, b.hi, b.attrs)
        assert a.loc == b.loc


def test_housekeeping_slices_follow_time_not_batches(tmp_path):
    """A round prunes every key once in HOUSEKEEPING_ROUND seconds whatever the cadence of the
    batches: a batch right after the last prunes HOUSEKEEPING_MIN keys, one 0.05 s later its
    time's share, one long after at most 1/HOUSEKEEPING_SLICES of the round."""
    from spatec.automata.machine import RunState
    from spatec.runners import live_local as L
    from spatec.runtime import keyed as K
    from spatec.sinks.alerts import DeliveredLog, SinkSet

    compiled = compile_program(program_of(tmp_path, "silent"))
    runner = L.LocalLive(compiled, [], SinkSet([], DeliveredLog(None)), None, tmp_path, crs=CRS)
    ph = runner.phrases[0]
    runner.state.keys[ph.name] = {(f"V{i}",): RunState() for i in range(10_000)}
    runner.state.watermark = 10 ** 15
    pruned = []
    real = K.step

    def counting(am, rs, evs, **kw):
        pruned.append(rs)
        return real(am, rs, evs, **kw)

    K.step = counting
    sizes = []
    try:
        for ago in (0.0, 0.05, 10.0):
            runner._hk_last = L.time.monotonic() - ago
            runner._housekeeping([])
            sizes.append(len(pruned) - sum(sizes))
    finally:
        K.step = real
    assert sizes[0] == L.HOUSEKEEPING_MIN
    share = 10_000 * 0.05 / L.HOUSEKEEPING_ROUND         # 10,000 keys × 0.05 s / the round
    assert share <= sizes[1] <= share + 50
    assert sizes[2] == 10_000 // L.HOUSEKEEPING_SLICES


def test_directory_run_collects_only_the_young_generation_and_saves_offsets(tmp_path):
    """During run() only generation 0 is collected automatically (the rest is frozen between
    batches, see LocalLive._gc); the thresholds are given back when it ends. The files done are
    in the checkpoint's offsets, and a restart reads none of them again."""
    import gc

    from spatec.feeds.sources import open_source, parse_source
    from spatec.runners.live_local import LocalLive
    from spatec.runtime.checkpoint import Checkpoint
    from spatec.sinks.alerts import DeliveredLog, SinkSet

    compiled = compile_program(program_of(tmp_path, "stuck"))
    d = tmp_path / "in"
    d.mkdir()
    header = "vehicle,line,operator,direction,lon,lat,ts\n"
    for k in range(3):
        (d / f"{k}.csv").write_text(header + "".join(f"V{v},1,OP,INBOUND,0.1{v},52.1,{1569916778 + 20 * k + v}\n"
                                                      for v in range(5)))
    cols = [a.name for a in compiled.program.events["BusGPS"].attrs]

    def runner():
        src = open_source(parse_source(f"BusGPS=dir://{d}"), tmp_path / "ck" / "spool", cols, settle=0.0)
        return LocalLive(compiled, [src], SinkSet([], DeliveredLog(None)), tmp_path / "ck", tmp_path / "ck",
                         crs=CRS, on_batch=lambda *a: during.append(gc.get_threshold()))

    before = gc.get_threshold()
    during: list = []
    r = runner()
    r.run(trigger=0, until_idle=0.3)
    assert during and all(t[0] == before[0] and t[1:] == (1 << 30, 1 << 30) for t in during)
    assert gc.get_threshold() == before
    assert r.state.counts["read"] == 15
    st = Checkpoint(tmp_path / "ck").load()
    assert sorted(st.offsets[r.sources[0].id]) == ["0.csv", "1.csv", "2.csv"]
    again = runner()
    assert again.poll() == []

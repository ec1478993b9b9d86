"""How fast are the automata, general and fast path, on two million bus fixes?

The Cambridge hour (60k SIRI-VM fixes) is canonicalised once with
``read_events``, then replicated as ``spatec.datasets.synth.replicate`` does with
raw rows: copy k shifted by k hours, each copy clipped to one hour so copies
do not overlap, ids rebuilt from the shifted local times (33 copies: about
1.8 million fixes, 33 hours of one fleet). For each phrase, in this process:

- the fast path (``replay_frames(..., fastpath=True)``) over all of it;
- the general automaton (``fastpath=False``) over the first hours only
  (``--general-hours``; it runs at 2-40 thousand events/s, so the whole input
  would take an hour): its events/s there is extrapolated to the whole input
  (its per-key state stays flat, so its throughput does not fall with length);
- the ratio of the two throughputs;
- peak memory of each run, traced with ``tracemalloc`` in a second, untimed
  run (numpy buffers included);
- the general automaton's state size (``RunState.size()``, summed over keys)
  after 1 h and after 24 h of replayed input, for ``--state-vehicles``
  vehicles: it must stay flat.

Run:

    .venv/bin/python bench/bench_automata.py [--copies 33] [--general-hours 2] [--phrases Stuck,Silent]
"""
from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spatec.automata.machine import RunState, build  # noqa: E402
from spatec.automata.step import step  # noqa: E402
from spatec.events.read import read_events  # noqa: E402
from spatec.events.timefmt import event_id  # noqa: E402
from spatec.plan.program import compile_program
from spatec.runners.local import replay_frames  # noqa: E402
from spatec.runtime.batch import CHUNK
from spatec.runtime.events import to_evs  # noqa: E402
from spatec.runtime.routing import partitions
from spatec.spatial.crs import Projector, choose_crs
from spatec.vector.fastpath import fast_path  # noqa: E402

HOUR = ROOT.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
PHRASES = {"Stuck": "stuck", "Silent": "silent", "HospitalToStation": "hospital_to_station",
           "TuesdayToHospital": "tuesday_to_hospital", "Bunching": "bunching"}
US = 1_000_000


def replicate_events(df: pd.DataFrame, copies: int, shift_s: int = 3600) -> pd.DataFrame:
    """``copies`` copies of canonical BusGPS events, copy k shifted by ``k * shift_s`` (``synth.replicate``'s rule)."""
    shift_us = shift_s * US
    src = df[df["_t"] < df["_t"].min() + shift_us]
    n = len(src)
    out = src.take(np.tile(np.arange(n), copies))
    out.index = pd.RangeIndex(len(out))
    shift = np.repeat(np.arange(copies, dtype=np.int64), n) * shift_us
    for c in ("_t", "_lo", "_hi", "ts"):
        out[c] = out[c].to_numpy() + shift
    out["_id"] = event_id("BusGPS", out["_source"].to_numpy(object), out["_t"].to_numpy())
    return out


def hours(df: pd.DataFrame, h: float) -> pd.DataFrame:
    return df[df["_t"] < df["_t"].min() + int(h * 3600 * US)].reset_index(drop=True)


def timed(fn):
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def traced_peak(fn) -> float:
    """Peak traced memory (MB) of ``fn()``."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def state_sizes(compiled, name: str, df: pd.DataFrame, vehicles: list, n_hours: int = 24) -> list:
    """The general automaton's state, summed over keys, after each hour of input (``vehicles`` only)."""
    sub = hours(df[df["vehicle"].isin(vehicles)].reset_index(drop=True), n_hours)
    proj = Projector(choose_crs(compiled.program, {"BusGPS": sub}))
    plan = compiled.plan(name)
    am = build(plan, compiled.program, proj)
    evs = {"BusGPS": to_evs(sub, compiled.program, proj)}
    t0 = int(sub["_t"].min())
    sizes = [0] * n_hours
    for part in partitions(plan, evs).values():
        st = RunState()
        hour_of = [(e.t - t0) // (3600 * US) for e in part]
        i = 0
        for h in range(n_hours):
            j = i
            while j < len(part) and hour_of[j] <= h:
                j += 1
            for a in range(i, j, CHUNK):
                step(am, st, part[a:min(a + CHUNK, j)], ordered=True)
            sizes[h] += st.size()
            i = j
    return sizes


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=33, help="hours of replicated input (33: ~1.8M fixes)")
    ap.add_argument("--general-hours", type=float, default=2.0, help="hours the general automaton is timed on")
    ap.add_argument("--state-vehicles", type=int, default=25, help="vehicles whose state is followed for 24 h")
    ap.add_argument("--phrases", default=",".join(PHRASES))
    ap.add_argument("--no-memory", action="store_true", help="skip the traced (second) runs")
    args = ap.parse_args(argv)
    names = [n for n in args.phrases.split(",") if n]

    bus = compile_program(ROOT / "examples" / "bus.spatec")
    hour, t_read = timed(lambda: read_events(HOUR, bus.program.events["BusGPS"], tz=bus.program.timezone).events)
    big, t_rep = timed(lambda: replicate_events(hour, args.copies))
    print(f"input: {len(hour):,} fixes read in {t_read:.1f} s; replicated x{args.copies}: {len(big):,} fixes "
          f"({big['vehicle'].nunique()} vehicles, {(big['_t'].max() - big['_t'].min()) / 3600 / US:.1f} h) "
          f"in {t_rep:.1f} s")
    small = hours(big, args.general_hours)
    busiest = big["vehicle"].value_counts().index[:args.state_vehicles].tolist()
    state_in = hours(big, 24)

    rows = []
    for name in names:
        c = compile_program(ROOT / "examples" / PHRASES[name] / f"{PHRASES[name]}.spatec")
        fp = fast_path(c.plan(name))
        row = {"phrase": name, "fast path": fp.shape if fp else "-"}
        general, t_gen = timed(lambda: replay_frames(c, {"BusGPS": small}, phrases=[name], fastpath=False))
        row.update(general_events=len(small), general_eps=len(small) / t_gen, general_s=t_gen,
                   composites_general=general.counts[name])
        if fp is not None:
            fast, t_fast = timed(lambda: replay_frames(c, {"BusGPS": big}, phrases=[name], fastpath=True))
            check, _ = timed(lambda: replay_frames(c, {"BusGPS": small}, phrases=[name], fastpath=True))
            assert check.frames[name].equals(general.frames[name]), f"{name}: fast path differs from general"
            row.update(fast_events=len(big), fast_eps=len(big) / t_fast, fast_s=t_fast,
                       composites_fast=fast.counts[name], ratio=(len(big) / t_fast) / (len(small) / t_gen))
        if not args.no_memory:
            row["general_mb"] = traced_peak(lambda: replay_frames(c, {"BusGPS": small}, phrases=[name],
                                                                   fastpath=False))
            if fp is not None:
                row["fast_mb"] = traced_peak(lambda: replay_frames(c, {"BusGPS": big}, phrases=[name],
                                                                    fastpath=True))
        sizes = state_sizes(c, name, state_in, busiest)
        row["state_1h"], row["state_24h"], row["state_max"] = sizes[0], sizes[-1], max(sizes)
        rows.append(row)
        print(f"  {name}: done", flush=True)

    print()
    print(f"general automaton timed on the first {args.general_hours:g} h ({len(small):,} fixes) and "
          f"extrapolated; fast path on all {len(big):,} fixes. Same process, same input frames.")
    head = (f"{'phrase':<18} {'shape':<8} {'general ev/s':>12} {'fast ev/s':>10} {'fast/gen':>8} "
            f"{'fast s':>7} {'composites':>10} {'gen MB':>7} {'fast MB':>7} {'state 1h':>8} {'state 24h':>9} "
            f"{'max':>5}")
    print(head)
    print("-" * len(head))
    for r in rows:
        def f(key, fmt):
            return format(r[key], fmt) if key in r else "-"
        print(f"{r['phrase']:<18} {r['fast path']:<8} {f('general_eps', ',.0f'):>12} {f('fast_eps', ',.0f'):>10} "
              f"{f('ratio', '.1f'):>8} {f('fast_s', '.1f'):>7} {f('composites_fast', ',d'):>10} "
              f"{f('general_mb', ',.0f'):>7} {f('fast_mb', ',.0f'):>7} {r['state_1h']:>8,} {r['state_24h']:>9,} "
              f"{r['state_max']:>5,}")
    print()
    print(f"state: RunState.size() summed over the keys of the {args.state_vehicles} busiest vehicles after 1 h "
          f"and 24 h of input, and its largest hourly value (general automaton; the copies after midnight are a "
          f"Wednesday, so TuesdayToHospital's A no longer matches). Peak memory: tracemalloc peak of a second run.")
    print(f"process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()

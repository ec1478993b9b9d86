"""Plans from statistics (SPEC §10): TwoStuck (``bench/two_stuck.spatec``, issue 17's
8-variable phrase) on the Cambridge hour with the local runner, with and without the
statistics-based join access, in the same process.

Both runs take the same canonical events (read once, untimed) and run the phrase's
matching and output rows (``replay_frames``): ``ordered`` plans from a sample of the
input (:func:`spatec.plan.program.with_statistics`: joins keyed by source for
``successive``, by grid cell for ``distance``), ``unordered`` has every join scan its
other side (:func:`spatec.plan.program.unordered`, the plan before this pass). The two
must give exactly the same composites (checked: ids, stamps, hulls, emit fields); the
ratio is unordered / ordered time.

``--automaton``: instead, the phrase's fast path ``chains`` (:mod:`spatec.vector.chains`,
the default) against the automaton (``fastpath=False``), both on the ordered plan, in the
same process; frames asserted equal, the ratio is automaton / fast path time.

    .venv/bin/python bench/bench_plan.py                  # the whole hour (unordered: ~5 min)
    .venv/bin/python bench/bench_plan.py --minutes 10     # the hour's first 10 minutes
    .venv/bin/python bench/bench_plan.py --automaton      # fast path vs automaton, the hour
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOUR = HERE.parent.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", default=str(HOUR), help="BusGPS input (default: the Cambridge hour)")
    ap.add_argument("--minutes", type=float, default=None, help="only the input's first MINUTES (from "
                    "its first thousandth of times on)")
    ap.add_argument("--skip-unordered", action="store_true", help="time the ordered plan only")
    ap.add_argument("--automaton", action="store_true", help="compare the fast path (chains) with the "
                    "automaton on the ordered plan instead of ordered with unordered")
    args = ap.parse_args()

    from spatec.events.read import read_events
    from spatec.plan.program import compile_program, unordered, with_statistics
    from spatec.runners.local import replay_frames

    compiled = compile_program(HERE / "two_stuck.spatec")
    program = compiled.program
    res = read_events(args.events, program.events["BusGPS"], tz=program.timezone)
    df = res.events
    if args.minutes is not None:
        # from the first thousandth of the times on (a few fixes arrive hours late)
        df = df[df["_t"] < int(df["_t"].quantile(0.001)) + int(args.minutes * 60e6)].reset_index(drop=True)
    frames = {"BusGPS": df}

    out = {"events": len(df), "load": os.getloadavg()[0]}
    t0 = time.perf_counter()
    ordered_plan = with_statistics(compiled, frames)
    out["plan_s"] = round(time.perf_counter() - t0, 3)
    out["evaluator"] = ordered_plan.plan("TwoStuck").physical.fast_path or "automaton"
    t0 = time.perf_counter()
    got = replay_frames(ordered_plan, frames, statistics=False)
    out["ordered_s"] = round(time.perf_counter() - t0, 2)
    out["composites"] = got.counts["TwoStuck"]
    out["joins"] = [j.describe() for j in ordered_plan.plan("TwoStuck").physical.joins]
    if args.automaton:
        t0 = time.perf_counter()
        base = replay_frames(ordered_plan, frames, statistics=False, fastpath=False)
        out["automaton_s"] = round(time.perf_counter() - t0, 2)
        a, b = got.frames["TwoStuck"], base.frames["TwoStuck"]
        assert a.equals(b), "the fast path's composites differ from the automaton's"
        out["same_composites"] = True
        out["automaton_vs_fast"] = round(out["automaton_s"] / out["ordered_s"], 1)
    elif not args.skip_unordered:
        t0 = time.perf_counter()
        base = replay_frames(unordered(compiled), frames, statistics=False)
        out["unordered_s"] = round(time.perf_counter() - t0, 2)
        a, b = got.frames["TwoStuck"], base.frames["TwoStuck"]
        assert a.equals(b), "the ordered plan's composites differ from the unordered plan's"
        out["same_composites"] = True
        out["ratio"] = round(out["unordered_s"] / out["ordered_s"], 1)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""Phrases over phrases live (SPEC §8, REFERENCE decision 36): ``examples/stuck_together``
(runs → pairs → blockages) over the recorded Cambridge feed, live on the local runner and
as a batch replay of the same events, in the same process.

Both take the events the feed's polls hold (read once; the batch untimed reading). The
batch is ``replay_frames`` over them; the live run is :class:`LocalLive` reading a local
:class:`FeedServer` as fast as it serves (``speed 0``, ``--max-polls`` polls a batch),
10 minutes of lateness (the recording's worst lag is 568 s: nothing is late), to the end of
the feed (``until_idle``), no checkpoint. The ratio is live / batch time; the composites
must be the same (ids of each phrase), and the live run's consumers report while the feed
plays (``early``: alerts delivered before the end of input).

    .venv/bin/python bench/bench_live_derived.py                 # the hour
    .venv/bin/python bench/bench_live_derived.py --minutes 20    # its first 20 minutes
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
POLLS = HERE.parent.parent / "shared" / "datasets" / "cambridge" / "sirivm_polls_2019-10-01.tar.gz"
PROGRAM = HERE.parent / "examples" / "stuck_together" / "stuck_together.spatec"
CRS = "EPSG:32631"


def feed_events(compiled, polls) -> pd.DataFrame:
    """The canonical events a live run reads from the polls (the same duplicate rule)."""
    from spatec.events.canonical import to_events
    from spatec.feeds.sources import feed_batch

    decl = compiled.program.events["BusGPS"]
    seen: set = set()
    out = [to_events([feed_batch("sirivm", p.name, p.data, p.received)], decl, compiled.program.timezone,
                     seen).events for p in polls]
    return pd.concat(out, ignore_index=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=None, help="only the feed's first MINUTES")
    ap.add_argument("--max-polls", type=int, default=20, help="polls a live batch takes at most (default 20)")
    args = ap.parse_args()

    from spatec.feeds.recording import load_recording
    from spatec.feeds.server import FeedServer
    from spatec.plan.program import compile_program
    from spatec.runners.live_local import open_local
    from spatec.runners.local import replay_frames

    compiled = compile_program(PROGRAM)
    polls = load_recording(POLLS)
    if args.minutes is not None:
        polls = [p for p in polls if p.received <= polls[0].received + args.minutes * 60]
    events = feed_events(compiled, polls)
    out = {"polls": len(polls), "events": len(events), "load_before": os.getloadavg()[0]}

    t0 = time.perf_counter()
    res = replay_frames(compiled, {"BusGPS": events}, crs=CRS)
    out["batch_s"] = round(time.perf_counter() - t0, 2)
    want = {name: set(df["id"]) for name, df in res.frames.items()}

    early: dict = {}

    def on_batch(items, delivered, _trig, _t):
        if items:
            for a in delivered:
                early[a["phrase"]] = early.get(a["phrase"], 0) + 1

    with tempfile.TemporaryDirectory() as tmp:
        sink = Path(tmp) / "alerts"
        with FeedServer(polls, speed=0) as srv:
            t0 = time.perf_counter()
            runner = open_local(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], None,
                                out=Path(tmp) / "out", lateness=600_000_000, crs=CRS,
                                max_polls=args.max_polls, on_batch=on_batch)
            runner.run(trigger=0, until_idle=1.0)
            # (less the idle wait that tells the runner the feed is over)
            out["live_s"] = round(time.perf_counter() - t0 - 1.0, 2)
        got = {}
        for name in want:
            f = sink / f"{name}.jsonl"
            got[name] = {json.loads(x)["id"] for x in f.read_text().splitlines()} if f.exists() else set()
    out["batches"] = runner.state.batches
    out["late"] = runner.state.counts["late"]
    out["composites"] = {name: len(ids) for name, ids in want.items()}
    out["early"] = early
    out["same_composites"] = got == want
    out["ratio_live_over_batch"] = round(out["live_s"] / out["batch_s"], 2)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""The matcher's work an alert at city scale, without the service around it.

``--subs`` subscriptions of ``bench/bench_serve.py``'s mix (seeded: buses, lines near a stop,
stops' surroundings, zones, lines, dashboards) in a matcher's index
(:class:`~spatec.service.matcher.Matching`), and ``--alerts`` alerts of the benchmark's
phrase near Cambridge's stops (a hull of about 20 m, a bus and a line drawn at random).
Each is matched as the matcher process matches the alert log: in batches of
:data:`~spatec.service.matcher.BATCH` (``match_batch``: the hulls parsed and projected in one
call, the area tables' pairs tested at once); the baseline is the same alerts one at a time
(``match``). The CPU time of each, best of ``--repeat``, in this process; the groups matched
are checked equal. What the subscriptions made is frozen as the matcher freezes it
(:class:`~spatec.service.matcher.LongLived`; ``--no-freeze``: not), and the collector's full
passes while matching are timed: each holds every alert waiting::

    .venv/bin/python bench/bench_match.py [--subs 100000] [--alerts 3200] [--repeat 5] [--no-freeze]
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from city_matcher import LINES, VEHICLES, city_matcher  # noqa: E402

from spatec.service.matcher import BATCH, LongLived  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--alerts", type=int, default=3200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-freeze", action="store_true", help="leave what the subscriptions made to the collector")
    args = ap.parse_args()

    rng = random.Random(7)
    program, areas, m, subs, stops = city_matcher(args.subs, "EPSG:32630", rng)
    vehicles, lines = VEHICLES, LINES
    if not args.no_freeze:
        LongLived().changed(len(subs), 0, len(m.index.groups), ready=True)
    alerts = []
    for k in range(args.alerts):
        lon, lat = rng.choice(stops)
        lon, lat, d = lon + rng.uniform(-0.003, 0.003), lat + rng.uniform(-0.002, 0.002), 0.0002
        hull = f"POLYGON (({lon} {lat}, {lon + d} {lat}, {lon + d} {lat + d}, {lon} {lat + d}, {lon} {lat}))"
        alerts.append(json.dumps({"phrase": "Standing", "id": f"c{k}", "vehicle": rng.choice(vehicles),
                                  "line": rng.choice(lines), "lo": "2019-10-01T08:00:00Z",
                                  "hi": "2019-10-01T08:00:30Z", "hull": hull}))

    def batched():
        return [r for i in range(0, len(alerts), BATCH) for r in m.match_batch(alerts[i:i + BATCH])]

    def alone():
        return [m.match(a) for a in alerts]

    def best(run):
        times, got = [], None
        for _ in range(args.repeat):
            t = time.process_time()
            got = run()
            times.append(time.process_time() - t)
        return min(times), got

    batched()                                          # (the tables' trees made, caches warm)
    passes, began = [], [0.0]

    def timing(phase, info):
        if info["generation"] == 2:
            if phase == "start":
                began[0] = time.perf_counter()
            else:
                passes.append(time.perf_counter() - began[0])
    gc.callbacks.append(timing)
    t_batch, got_b = best(batched)
    gc.callbacks.remove(timing)
    t_alone, got_a = best(alone)
    assert [sorted(r[2]) for r in got_b] == [sorted(r[2]) for r in got_a]
    per = sum(len(r[2]) for r in got_b) / len(alerts)
    print(f"{args.subs:,} subscriptions, {len(m.index.groups):,} groups; {len(alerts):,} alerts, "
          f"{per:.1f} groups matched an alert")
    print(f"{'':>22} {'ms an alert':>11}")
    print(f"{'batches of ' + str(BATCH):>22} {t_batch / len(alerts) * 1e3:>11.3f}")
    print(f"{'one at a time':>22} {t_alone / len(alerts) * 1e3:>11.3f}")
    print(f"batches: {t_alone / t_batch:.1f}x less CPU than one at a time (the same groups matched)")
    print(f"the collector's full passes while matching in batches ({'not ' if args.no_freeze else ''}frozen): "
          f"{len(passes)}, the longest {max(passes, default=0.0) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()

"""Counts of the run examples on the Cambridge hour by the brute-force oracle (tests/oracle.py),
for the examples' READMEs.

    .venv/bin/python tests/oracle_counts.py [--hour PATH]

Runs are cut by the oracle (SPEC §7, exactly); phrases evaluated by it in full:
StuckEpisode and Crawl (examples/episodes), StationCall and Headway (examples/headway).
DwellAtStop binds one of 1,388 stops: the oracle's runs, then each run's hull tested
against the stops near it (``certainly_in``): the spec's dwell_at_stops (every such stop,
``duration(R) > 3 min``) and examples/dwell_at_stops (the nearest such stop, by centre
distance, ``R.last.t - R.first.t > 3 min``).
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import oracle  # noqa: E402

from spatec.frontend import ast as A  # noqa: E402
from spatec.frontend.check import check_file  # noqa: E402
from spatec.spatial.crs import Projector  # noqa: E402

HOUR = ROOT.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
US = 1_000_000


def hour_events(path: Path, proj: Projector) -> list:
    df = pd.read_csv(path, dtype={"vehicle": str, "line": str, "operator": str, "direction": str})
    df = df.drop_duplicates(["vehicle", "ts"])          # (type, source, t) identifies an event
    xs, ys = proj.forward(df["lon"].to_numpy(), df["lat"].to_numpy())
    out = []
    for r, x, y in zip(df.itertuples(index=False), xs, ys):
        t = int(r.ts) * US
        out.append(oracle.OEv("BusGPS", f"BusGPS:{r.vehicle}:{r.ts}", r.vehicle, t, t - 30 * US, t,
                              oracle.S.Loc.disc(float(x), float(y), 15.0),
                              {"vehicle": r.vehicle, "line": r.line, "operator": r.operator,
                               "direction": None if pd.isna(r.direction) else r.direction, "lon": r.lon,
                               "lat": r.lat, "ts": t}))
    return out


def report(name: str, events: list) -> None:
    buses = len({e.attrs.get("vehicle", e.attrs.get("first")) for e in events})
    print(f"{name}: {len(events)} composites from {buses} buses")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hour", type=Path, default=HOUR)
    args = ap.parse_args()
    proj = Projector("EPSG:32631")
    events = hour_events(args.hour, proj)
    print(f"{len(events)} fixes from {len({e.source for e in events})} buses")
    for program, phrases in (("episodes/episodes.spatec", ("StuckEpisode", "Crawl")),
                             ("headway/headway.spatec", ("StationCall", "Headway"))):
        p = check_file(ROOT / "examples" / program)
        o = oracle.Oracle(p, proj, events)
        for name in phrases:
            t0 = time.perf_counter()
            found = o.derived(name)
            report(f"{name} ({time.perf_counter() - t0:.0f} s)", found)
            if name == "StationCall":
                print(f"  calls per line (top 5): {Counter(e.attrs['line'] for e in found).most_common(5)}")
    # DwellAtStop: the oracle's runs, each tested against the stops near it
    p = check_file(ROOT / "examples" / "dwell_at_stops" / "dwell_at_stops.spatec")
    o = oracle.Oracle(p, proj, events)
    run = next(n for n in A.walk(p.phrase("DwellAtStop").phrase.match) if isinstance(n, A.Run))
    stops = p.place_sets["stops"]
    xy = [proj.forward(s.lon, s.lat) for s in stops.places]
    import math

    import shapely

    tree = shapely.STRtree([shapely.Point(x, y) for x, y in xy])
    every, nearest = [], []
    for r in o.runs(run):
        hull = r.loc
        cx, cy = oracle.S.centroid(hull)
        inside = []
        for i in sorted(tree.query(shapely.Point(cx, cy).buffer(200)).tolist()):
            region = oracle.S.Loc.disc(float(xy[i][0]), float(xy[i][1]), stops.places[i].radius)
            if oracle.S.certainly_in(hull, region):
                inside.append(i)
        if r.hi - r.lo > 3 * 60 * US:                       # duration(R) > 3 min: every stop
            every += [(r.first.source, stops.values[i]["stop_id"]) for i in inside]
        if inside and r.last.t - r.first.t > 3 * 60 * US:   # the nearest stop
            i = min(inside, key=lambda i: (math.hypot(xy[i][0] - cx, xy[i][1] - cy), i))
            nearest.append((r.first.source, stops.values[i]["stop_id"]))
    for name, rows in (("DwellAtStop, every stop (spec dwell_at_stops)", every),
                       ("DwellAtStop, the nearest stop (examples/dwell_at_stops)", nearest)):
        print(f"{name}: {len(rows)} composites from {len({v for v, _ in rows})} buses at "
              f"{len({s for _, s in rows})} stops")


if __name__ == "__main__":
    main()

"""A CRS decided after the subscriptions came: the matcher's areas projected again.

A service that has never seen input holds its areas in a provisional CRS (the zone of the
program's places) and decides the real one from the feed's first 2 minutes (REFERENCE
decision 50); then every subscription's area is measured again while alerts wait. This
makes ``--subs`` subscriptions of ``bench/bench_serve.py``'s mix (seeded: circles around
Cambridge's stops, zones, lines, buses) in a matcher's index, in EPSG:32631, and times
what the matcher does on the change to EPSG:32630 (and back, ``--repeat`` times):

- **tables**: what it does (:meth:`~spatec.service.index.CoveringIndex.prepare` after
  :meth:`~spatec.service.areas.Areas.set_crs`: each area table projects its circles and
  GeoJSON polygons in one call each, and the areas matched one by one are projected);
- **area by area**: the baseline, every group's area made alone in the new CRS
  (:meth:`~spatec.service.areas.Areas.stamp`, what each area's own stamp costs).

Both in this process, on the same subscriptions; the tables' rows are checked equal to the
stamps made alone (centres, radii and polygons, to the bit)::

    .venv/bin/python bench/bench_crs_change.py [--subs 100000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import shapely

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from city_matcher import city_matcher  # noqa: E402

from spatec.service.areas import Areas  # noqa: E402
from spatec.spatial.crs import Projector  # noqa: E402

CRSS = ("EPSG:32630", "EPSG:32631")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="changes timed each way")
    args = ap.parse_args()

    program, areas, m, subs, _ = city_matcher(args.subs, CRSS[1], random.Random(7))
    groups = [g for g in m.index.groups.values() if g.area is not None]
    print(f"{args.subs:,} subscriptions: {len(m.index.groups):,} groups, {len(groups):,} with an area")

    tables, alone = [], []
    for k in range(2 * args.repeat):
        crs = CRSS[k % 2]
        t = time.perf_counter()
        areas.set_crs(crs)
        areas.prepare(m.index.loose_areas())
        m.index.prepare()
        tables.append(time.perf_counter() - t)
        other = Areas(program, Projector(crs))
        t = time.perf_counter()
        stamps = [other.stamp(g.area) for g in groups]
        alone.append(time.perf_counter() - t)
    for table in m.index.tables.values():        # the rows are the stamps made alone (the last CRS)
        want = dict(zip(groups, stamps))
        for i, g in enumerate(table.rows[:table.n]):
            if g is None:
                continue
            s = want[g]
            if s.xy is not None:
                assert (table.x[i], table.y[i], table.r[i]) == (*s.xy, s.r), g.area.spec
            else:
                assert shapely.equals_exact(table.geom[i], s.geom, 0.0), g.area.spec

    med_t, med_a = statistics.median(tables), statistics.median(alone)
    print(f"{'':>14} {'median s':>9} {'min s':>7} {'max s':>7}")
    print(f"{'tables':>14} {med_t:>9.3f} {min(tables):>7.3f} {max(tables):>7.3f}")
    print(f"{'area by area':>14} {med_a:>9.3f} {min(alone):>7.3f} {max(alone):>7.3f}")
    print(f"tables: {med_a / med_t:.1f}x faster than area by area (rows equal to the stamps made alone)")


if __name__ == "__main__":
    main()

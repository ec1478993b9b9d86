"""examples/off_route on the Cambridge hour, with the feed `spatec datasets gtfs` writes: line U's
off-route stretches are those a pandas/shapely computation finds (every fix whose 15 m disc does
not meet the 50 m corridor of route WP-U, cut per bus into stretches as SPEC 7's runs are)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
CAMBRIDGE = ROOT.parent / "shared" / "datasets" / "cambridge"
HOUR = CAMBRIDGE / "sirivm_2019-10-01_0854-1000.csv.gz"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    if not HOUR.is_file():
        pytest.skip(f"{HOUR} is not available")
    from spatec.datasets import gtfsfeed

    tmp = tmp_path_factory.mktemp("off_route")
    (tmp / "off_route").mkdir()
    shutil.copy(ROOT / "examples" / "bus.spatec", tmp / "bus.spatec")
    shutil.copy(ROOT / "examples" / "off_route" / "off_route.spatec", tmp / "off_route" / "off_route.spatec")
    gtfsfeed.build(CAMBRIDGE / "stops.csv", HOUR, tmp / "off_route" / "cambridge_gtfs.zip")
    return tmp / "off_route"


def expected_off_route_u(feed: Path, crs: str) -> set:
    import gtfs_kit
    import shapely
    from pyproj import Transformer

    feed_ = gtfs_kit.read_feed(feed, dist_units="km")
    shape_ids = set(feed_.trips.loc[feed_.trips["route_id"] == "WP-U", "shape_id"])
    to_m = Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    lines = [shapely.transform(g, lambda c: np.column_stack(to_m.transform(c[:, 0], c[:, 1])))
             for s, g in gtfs_kit.build_geometry_by_shape(feed_).items() if s in shape_ids]
    corridor = shapely.union_all(lines)
    fixes = pd.read_csv(HOUR, usecols=["vehicle", "line", "ts", "lon", "lat"], dtype={"line": str})
    last_time = fixes["ts"].max()
    x, y = to_m.transform(fixes["lon"].to_numpy(), fixes["lat"].to_numpy())
    # certainly not at the corridor: the fix's 15 m disc does not meet the line widened by 50 m
    fixes["off"] = shapely.distance(shapely.points(x, y), corridor) > 50 + 15
    out = set()
    for vehicle, f in fixes.sort_values("ts", kind="stable").groupby("vehicle"):
        run: list = []
        rows = list(f.itertuples())
        for i, r in enumerate(rows):
            joins = run and r.off and r.ts - run[-1].ts <= 300      # gap 5 min (the stamps' hi)
            if run and not joins:
                out |= _reported(vehicle, run, complete=True)
                run = []
            if r.off:
                run.append(r)
        if run:   # the last run is complete only when the input goes on more than 5 min after it
            out |= _reported(vehicle, run, complete=last_time - run[-1].ts > 300)
    return out


def _reported(vehicle, run, complete) -> set:
    if not complete or run[0].line != "U" or len(run) < 3 or run[-1].ts - run[0].ts < 60:
        return set()
    return {(vehicle, int(run[0].ts), int(run[-1].ts))}


def test_off_route_u_is_the_brute_force_answer(example):
    import spatec

    out = spatec.compile(example / "off_route.spatec").replay_local({"BusGPS": str(HOUR)})
    got = {(r.vehicle, int(r.since.timestamp()), int(r.until.timestamp())) for r in out["OffRouteU"].itertuples()}
    assert got == expected_off_route_u(example / "cambridge_gtfs.zip", out.crs)
    assert len(got) >= 3
    network = out["OffNetwork"]
    assert len(network) > len(got) and (network["fixes"] >= 3).all()

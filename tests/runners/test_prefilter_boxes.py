"""The leaf pre-filter's candidates (spatec.exec.prefilter.candidates): a box in
lon/lat around each region, so that only the events near a region are projected and
joined. It must keep every event the exact relation keeps, and few others."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import shapely

from spatec.exec import prefilter as P
from spatec.spatial.crs import Projector
from spatec.spatial.stamps import Loc, relate_many

CRS = "EPSG:32631"          # UTM 31N: Cambridge, UK


def _regions(proj):
    x, y = proj.forward(np.array([0.1371]), np.array([52.1756]))       # Addenbrooke's
    sx, sy = proj.forward(np.array([0.1376]), np.array([52.1943]))     # the station
    poly = shapely.Polygon([(sx[0] - 80, sy[0] - 40), (sx[0] + 90, sy[0] - 30), (sx[0], sy[0] + 120)])
    return [("hospital", Loc.disc(float(x[0]), float(y[0]), 150.0)), ("station", Loc.of(poly))]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_candidates_hold_every_event_that_possibly_meets_a_region(seed):
    """Points scattered over a few km around the regions, with radii up to 500 m: every
    point whose disc possibly meets a region (the engine's exact test, on projected
    positions) is a candidate; the points far from both are not; points with no finite
    position and events that are not points always are."""
    proj = Projector(CRS)
    regions = _regions(proj)
    rng = np.random.default_rng(seed)
    n = 200_000
    lon = 0.137 + rng.normal(0, 0.03, n)
    lat = 52.185 + rng.normal(0, 0.02, n)
    r = rng.choice([0.0, 5.0, 30.0, 500.0], n)
    lon[:50] = np.nan
    pts = np.ones(n, dtype=bool)
    pts[50:80] = False
    cand = P.candidates(regions, proj, pts, lon, lat, r)
    xs, ys = proj.forward(lon, lat)
    possibly = np.zeros(n, dtype=bool)
    for _, loc in regions:
        possibly |= relate_many(xs, ys, None, r, loc)[0]
    assert possibly[pts].sum() > 1000                   # (the test has points near the regions)
    assert not (possibly & pts & ~cand).any()
    assert cand[:80].all()
    # the boxes are tight: points 2 km or more from both regions are left out
    d = np.full(n, np.inf)
    ok = np.isfinite(xs)
    for _, loc in regions:
        d[ok] = np.minimum(d[ok], shapely.distance(shapely.points(xs[ok], ys[ok]), loc.geom) - loc.r)
    far = np.isfinite(d) & (d > 2000)
    assert far.sum() > 10_000 and not cand[far & pts].any()


def test_no_box_for_a_region_too_large_or_unbounded():
    """A region wider than BOX_MAX_M, or an event radius that is not finite, gets no box:
    every point is then a candidate."""
    proj = Projector(CRS)
    big = [("county", Loc.disc(300_000.0, 5_780_000.0, 40_000.0))]
    assert P.lonlat_boxes(big, proj, 10.0) is None
    assert P.lonlat_boxes(_regions(proj), proj, float("inf")) is None
    pts = np.ones(3, dtype=bool)
    assert P.candidates(big, proj, pts, np.array([5.0, 6.0, 7.0]), np.array([1.0, 2.0, 3.0]),
                        np.zeros(3)).all()


def test_flag_batch_flags_as_the_engine_does_on_every_event():
    """The flags the pre-filter's batch function gives are those of the engine joined with
    every event of the batch (the candidates change what is projected, not the answer)."""
    proj = Projector(CRS)
    regions = _regions(proj)
    rng = np.random.default_rng(7)
    n = 20_000
    lon = 0.137 + rng.normal(0, 0.01, n)
    lat = 52.185 + rng.normal(0, 0.01, n)
    r = rng.choice([5.0, 30.0, np.nan], n)
    place = np.array(["point"] * n, dtype=object)
    place[:10] = None
    b = pa.RecordBatch.from_pydict({"_place": pa.array(place.tolist(), pa.string()), "_lon": lon, "_lat": lat,
                                    "_r": r, "_geom": pa.array([None] * n, pa.string())})
    flags = ["_in_hospital", "_in_station"]
    got = next(iter(P.flag_fn(regions, flags, CRS, "shapely")(iter([b]))))
    xs, ys = proj.forward(lon, lat)
    xs[:10], ys[:10] = np.nan, np.nan
    rr = np.where(np.isfinite(r), r, 0.0)
    for (name, loc), f in zip(regions, flags):
        want = relate_many(xs, ys, None, rr, loc)[0]
        assert want.sum() > 10
        assert got.column(got.schema.get_field_index(f)).to_numpy(zero_copy_only=False).tolist() == want.tolist()


def test_points_far_from_every_box_are_left_to_the_engine():
    """A point more than BOX_WINDOW_DEG from every box (another continent, where the run's
    projection may not hold) is a candidate: the engine decides on it as it would without
    the boxes. A point just outside the boxes, in the window, is not."""
    proj = Projector(CRS)
    regions = _regions(proj)
    lon = np.array([0.2, 151.2, -74.0, 0.137])
    lat = np.array([52.3, -33.9, 40.7, 52.1756])
    cand = P.candidates(regions, proj, np.ones(4, dtype=bool), lon, lat, np.zeros(4))
    assert cand.tolist() == [False, True, True, True]

"""polygon_wkts: GEOS's WKT (rounding_precision=7, trim=True), byte for byte, from arrays."""
from __future__ import annotations

import doctest
from pathlib import Path

import numpy as np
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.spatial import wkt as W
from spatec.spatial.wkt import polygon_wkts

REPO = Path(__file__).resolve().parents[2]
HOUR = REPO.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"


def geos(xy, offsets):
    """The definition: GEOS's text of the polygons."""
    polys = shapely.from_ragged_array(shapely.GeometryType.POLYGON, np.asarray(xy, dtype=float),
                                      (np.asarray(offsets), np.arange(len(offsets))))
    return shapely.to_wkt(polys, rounding_precision=7, trim=True).tolist()


def texts(xy, offsets):
    """polygon_wkts' texts, the same as Python strings and as Arrow text (``arrow=True``)."""
    got = polygon_wkts(xy, offsets)
    arr = polygon_wkts(xy, offsets, arrow=True)
    assert str(arr.type) == "string" and arr.null_count == 0 and arr.to_pylist() == got
    return got


def rings(values, per):
    """Closed rings of ``per`` points from a flat list of numbers, and their offsets."""
    v = np.asarray(values, dtype=float)
    m = len(v) // (2 * per)
    xy = v[:m * per * 2].reshape(m, per, 2)
    xy = np.concatenate([xy, xy[:, :1]], axis=1).reshape(-1, 2)
    return xy, np.arange(m + 1) * (per + 1)


def test_doctests():
    assert doctest.testmod(W).failed == 0


def test_numbers_geos_writes_its_own_way():
    """Half-way cases of the shortest decimal (GEOS rounds it, not the double), carries,
    negative zero, numbers GEOS writes in scientific notation, and beyond 400 (GEOS's)."""
    values = [0.12345665, 0.12345675, 52.12345665, -0.12345665, 0.99999995, 9.99999995, 399.99999996,
              399.99999994, -0.0, 0.0, 1e-4, np.nextafter(1e-4, 0), 5e-5, -5e-5, 3e-8, -3e-8, 1e-300,
              400.0, -400.0, 1e6, 1e17, -1e17, np.inf, -np.inf, 0.1, 52.0, 1.0, -179.9999999]
    for v in values:
        xy, off = rings([v, 52.1, 0.1, v, v, v], 3)
        assert texts(xy, off) == geos(xy, off), v
    xy, off = rings([0.12345665, 52.0, 0.1, 52.1, -0.0, 52.2], 3)
    assert texts(xy, off) == ["POLYGON ((0.1234566 52, 0.1 52.1, 0 52.2, 0.1234566 52))"]


def _halfway(j):
    """Doubles at and next to the half-way points between 7-decimal numbers."""
    b = (2 * j + 1) / 2e7
    return st.sampled_from([b, np.nextafter(b, np.inf), np.nextafter(b, -np.inf)])


_number = (st.floats(-400, 400)
           | st.floats(-1e-3, 1e-3)
           | st.integers(-4_000_000_000, 3_999_999_999).flatmap(_halfway)
           | st.tuples(st.integers(-4_000_000_000, 4_000_000_000), st.integers(0, 9))
               .map(lambda t: t[0] / 10.0 ** t[1])
           | st.sampled_from([0.0, -0.0, 1e-4, 5e-5, 400.0, 1e17, np.inf, -np.inf, 0.99999995]))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_number, min_size=6, max_size=120), st.integers(3, 7))
def test_same_text_as_geos(values, per):
    xy, off = rings(values, per)
    assert texts(xy, off) == geos(xy, off)


def test_chunks_and_mixed_polygons(monkeypatch):
    """Across chunks, with polygons GEOS writes (a tiny or a large number) among the others."""
    monkeypatch.setattr(W, "_CHUNK", 7)
    rng = np.random.default_rng(5)
    values = rng.uniform(-3.0, 60.0, 40 * 2 * 5)
    values[[13, 101, 333]] = [2e-5, -7e-6, 1234.5]
    xy, off = rings(values, 5)
    assert texts(xy, off) == geos(xy, off)
    assert texts(np.empty((0, 2)), np.array([0])) == []


@pytest.mark.slow
@pytest.mark.skipif(not HOUR.exists(), reason=f"the Cambridge hour is not at {HOUR}")
def test_cambridge_hulls():
    """The hulls of a real hour's fixes, grown and unprojected as output files have them
    (consecutive fixes of a vehicle, 15 m discs): every number, as GEOS writes it."""
    import pandas as pd

    from spatec.spatial import stamps as S
    from spatec.spatial.crs import Projector, data_centre, utm_epsg

    df = pd.read_csv(HOUR).dropna(subset=["lon", "lat"]).sort_values(["vehicle", "ts"])
    lon, lat = df["lon"].to_numpy(float), df["lat"].to_numpy(float)
    p = Projector(utm_epsg(*data_centre(lon, lat)))
    x, y = p.forward(lon, lat)
    n = len(x) // 3 * 3
    hulls = shapely.convex_hull(shapely.multipoints(np.column_stack([x[:n], y[:n]]),
                                                    indices=np.repeat(np.arange(n // 3), 3)))
    coords, offsets, (centres, src, k, ring) = S.grown_convex_parts(hulls, S.wkt_ring(15.0))
    lonlat = S._unproject_grown(coords, src, k, centres, ring, p)
    assert len(lonlat) > 500_000
    assert texts(lonlat, offsets) == geos(lonlat, offsets)

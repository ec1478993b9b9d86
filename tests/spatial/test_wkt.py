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

    from spatec.sinks import encoding as E
    from spatec.spatial import stamps as S
    from spatec.spatial.crs import Projector, data_centre, utm_epsg

    df = pd.read_csv(HOUR).dropna(subset=["lon", "lat"]).sort_values(["vehicle", "ts"])
    lon, lat = df["lon"].to_numpy(float), df["lat"].to_numpy(float)
    p = Projector(utm_epsg(*data_centre(lon, lat)))
    x, y = p.forward(lon, lat)
    n = len(x) // 3 * 3
    hulls = shapely.convex_hull(shapely.multipoints(np.column_stack([x[:n], y[:n]]),
                                                    indices=np.repeat(np.arange(n // 3), 3)))
    coords, offsets, (centres, src, k, ring) = S.grown_convex_parts(hulls, E.wkt_ring(15.0))
    lonlat = E._unproject_grown(coords, src, k, centres, ring, p)
    assert len(lonlat) > 500_000
    assert texts(lonlat, offsets) == geos(lonlat, offsets)


# --- the rounding arithmetic against the comparison it replaced ------------------------------

def _units_by_comparison(v):
    """``_units`` as first written (the comparison with the half-way point for every number)."""
    f = np.floor(v * 1e7)
    b = (2.0 * f + 1.0) / 2e7
    fi = f.astype(np.int64)
    fi += (v > b) | ((v == b) & (fi & 1).astype(bool))
    return np.abs(fi).astype(np.uint32)


def _read_back_by_comparison(v):
    q = _units_by_comparison(v).astype(np.float64) / 1e7
    return np.where(v < 0, -q, q)


def _near_units(j):
    """Numbers at, beside and a few ulps around half-way points and integers of 1e-7."""
    base = st.integers(0, 3_999_999_999).map(lambda i: i / 1e7)
    half = st.integers(0, 3_999_999_998).map(lambda i: (2 * i + 1) / 2e7)
    return st.one_of(base, half).flatmap(
        lambda x: st.integers(-j, j).map(lambda s: float(np.float64(x) + s * np.spacing(np.float64(x)))))


_in_range = st.one_of(
    st.floats(1e-4, 399.9999999), st.floats(1e-4, 1.1e-4), st.floats(399.0, 399.9999999),
    st.sampled_from([0.0, 1e-4, 0.12345665, 0.12345675, 52.12345665, 0.99999995, 399.99999994, 0.0000500]),
    _near_units(3)).filter(lambda x: x == 0 or 1e-4 <= x < 400)
_signed = st.tuples(_in_range, st.booleans()).map(lambda p: -p[0] if p[1] else p[0])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_signed, min_size=1, max_size=200))
def test_units_and_read_back_as_by_the_comparison(values):
    """The rounding (``rint`` of the product, the comparison only near half-way points) gives
    the integers and doubles of the comparison for every number, ties, ±0 and negatives
    included, bit for bit."""
    v = np.array(values + [-0.0, 0.0], dtype=float)
    assert W._units(v).tobytes() == _units_by_comparison(v).tobytes()
    assert W.read_back(v).tobytes() == _read_back_by_comparison(v).tobytes()


def test_units_at_every_tie_of_a_range():
    """Every half-way point (and the doubles beside it) of a stretch near 0.1, 52 and 399."""
    for lo in (1_000_000, 520_000_000, 3_999_990_000):
        mid = (2 * np.arange(lo, lo + 5000) + 1) / 2e7
        v = np.concatenate([mid, np.nextafter(mid, 0), np.nextafter(mid, 1e3), -mid, np.arange(lo, lo + 5000) / 1e7])
        assert W._units(v).tobytes() == _units_by_comparison(v).tobytes()
        assert W.read_back(v).tobytes() == _read_back_by_comparison(v).tobytes()

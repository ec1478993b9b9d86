"""Hulls of three or four points made in numpy (spatec.spatial.smallhull) are GEOS's,
coordinate for coordinate, wherever they claim to be sure; the grown hulls made from
them (stamps.grown_point_hulls) are grown_convex_parts of GEOS's hulls, number for number."""
import numpy as np
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.sinks.encoding import wkt_ring
from spatec.spatial.smallhull import hull_rings
from spatec.spatial.stamps import grown_convex_parts, grown_point_hulls


def geos_hulls(xy):
    """GEOS's convex hull of each set of points, ``xy``: ``(k, n, 2)``."""
    return shapely.convex_hull(shapely.linestrings(xy.transpose(1, 0, 2)))


def point_sets(rng, k, n):
    """Sets in general position, on a small grid (repeated and collinear points, equal
    lowest y), nearly collinear, and projected bus positions a few metres apart."""
    t = rng.random((k, n))
    return {
        "grid": rng.integers(0, 4, (k, n, 2)).astype(float),
        "normal": rng.normal(0, 1, (k, n, 2)),
        "near collinear": np.stack([300000 + 100 * t + rng.normal(0, 1e-9, (k, n)), 5790000 + 50 * t], axis=-1),
        "utm": np.stack([300000 + rng.normal(0, 5, (k, n)), 5790000 + rng.normal(0, 5, (k, n))], axis=-1),
    }


@pytest.mark.parametrize("k", [3, 4])
def test_sure_hulls_are_geos_hulls(k):
    rng = np.random.default_rng(19)
    for name, xy in point_sets(rng, k, 4000).items():
        order, count, sure = hull_rings(xy[:, :, 0], xy[:, :, 1])
        hulls = geos_hulls(xy)
        for i in np.flatnonzero(sure):
            want = shapely.get_coordinates(hulls[i])
            assert shapely.get_type_id(hulls[i]) == 3, name
            got = xy[order[i, :count[i]], i]
            assert np.array_equal(got, want[:-1]), (name, xy[:, i].tolist(), hulls[i].wkt)
        if name == "grid":      # repeated and collinear points are left to GEOS
            assert 0 < sure.mean() < 1
        else:
            assert sure.mean() > 0.99, name


def test_other_sizes_are_refused():
    with pytest.raises(ValueError, match="not 5"):
        hull_rings(np.zeros((5, 2)), np.zeros((5, 2)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 5), st.integers(0, 60), st.floats(0.5, 120), st.integers(0, 2 ** 32 - 1),
       st.sampled_from(["grid", "normal", "utm"]))
def test_grown_point_hulls_are_grown_geos_hulls(k, n, r, seed, kind):
    xy = point_sets(np.random.default_rng(seed), k, n)[kind]
    ring = wkt_ring(r)
    got = grown_point_hulls(xy, ring)
    want = grown_convex_parts(np.asarray(geos_hulls(xy) if n else [], dtype=object), ring)
    for a, b in zip((got[0], got[1], *got[2][:3]), (want[0], want[1], *want[2][:3])):
        assert a.shape == b.shape and (a == b).all()


@pytest.mark.parametrize("sets", [
    [[(0, 0), (0, 0), (0, 0)]],                                   # one point: none sure
    [[(0, 0), (1, 1), (2, 2), (3, 3)], [(5, 5), (5, 5), (6, 5), (5, 6)]],   # collinear, repeated
    [[(0, 0), (1, 1), (2, 2)], [(0, 0), (4, 0), (0, 3)]],       # one of each
])
def test_grown_point_hulls_of_degenerate_sets(sets):
    xy = np.array(sets, dtype=float).transpose(1, 0, 2)
    ring = wkt_ring(15.0)
    got = grown_point_hulls(xy, ring)
    want = grown_convex_parts(np.asarray(geos_hulls(xy), dtype=object), ring)
    for a, b in zip((got[0], got[1], *got[2][:3]), (want[0], want[1], *want[2][:3])):
        assert a.shape == b.shape and (a == b).all()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 5), st.lists(st.sampled_from([0.0, -0.0, 1.0, 2.0, -1.5, 1e-300, 5e6]), min_size=10, max_size=10),
       st.integers(0, 2**32 - 1), st.booleans())
def test_lowest_is_the_stable_sorts_first(k, pool, seed, nan):
    """The lowest point (then leftmost; the first of equal ones) as lexsort's first, ties,
    signed zeros and (sorted by lexsort) missing values included."""
    from spatec.spatial.smallhull import _lowest

    rng = np.random.default_rng(seed)
    x, y = rng.choice(pool, size=(k, 50)), rng.choice(pool, size=(k, 50))
    if nan:
        x[0, 3] = np.nan
    assert (_lowest(x, y) == np.lexsort((x, y), axis=0)[0]).all()

"""Unit tests of location stamps: construction, relations, hull, measures, grown polygons
(their text in lon/lat: tests/sinks/test_encoding.py)."""
import math
import pickle
import warnings

import numpy as np
import pytest
import shapely
from shapely import LineString, MultiPoint, Point, Polygon, box

from spatec.spatial.stamps import (
    TOL_DECIDE,
    UNIVERSE,
    Loc,
    area,
    centroid,
    certainly_in,
    certainly_in_many,
    certainly_in_many_geoms,
    disjoint,
    distance,
    hull,
    overlap,
    possibly_in,
    possibly_in_many,
    possibly_in_many_geoms,
    relate_many,
)

SQUARE = box(0, 0, 100, 100)
DONUT = Polygon([(0, 0), (100, 0), (100, 100), (0, 100)], [[(40, 40), (60, 40), (60, 60), (40, 60)]])


class TestLoc:
    def test_disc(self):
        d = Loc.disc(1, 2, 15)
        assert d.geom.equals(Point(1, 2)) and d.r == 15.0 and isinstance(d.r, float)
        assert d == Loc(Point(1, 2), 15) and hash(d) == hash(Loc(Point(1, 2), 15.0))
        assert not d.is_universe and UNIVERSE.is_universe

    @pytest.mark.parametrize("missing", [None, Polygon(), Point(), LineString()])
    def test_missing_place_is_universe(self, missing):
        assert Loc.of(missing, 5.0) is UNIVERSE

    def test_nan_position_is_universe(self):
        assert Loc.disc(math.nan, 1.0, 15.0) is UNIVERSE
        assert Loc.of(Point(1.0, math.nan), 15.0) is UNIVERSE

    @pytest.mark.parametrize("geom, r, error", [
        (Point(0, 0), -1.0, ValueError),
        (Point(0, 0), math.inf, ValueError),
        (Point(0, 0), math.nan, ValueError),
        (Polygon(), 0.0, ValueError),  # the raw constructor refuses what Loc.of maps to UNIVERSE
        (None, 0.0, ValueError),
        ("POINT (0 0)", 0.0, TypeError),
        ("LINESTRING (0 0, NaN 1)", 0.0, ValueError),
    ])
    def test_constructor_validates(self, geom, r, error):
        if isinstance(geom, str) and "NaN" in geom:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                geom = shapely.from_wkt(geom)
        with pytest.raises(error):
            Loc(geom, r)

    def test_disc_validates_radius(self):
        with pytest.raises(ValueError):
            Loc.disc(0, 0, -0.5)

    def test_pickle_keeps_universe_singleton_and_drops_memo(self):
        assert pickle.loads(pickle.dumps(UNIVERSE)) is UNIVERSE
        region = Loc.of(SQUARE, 10.0)
        certainly_in(Loc.disc(50, 50, 1), region)  # fills the memo
        back = pickle.loads(pickle.dumps(region))
        assert back == region and back._memo is None

    def test_repr(self):
        assert repr(UNIVERSE) == "UNIVERSE"
        assert repr(Loc.disc(1.5, 2.0, 15.0)) == "Loc.disc(1.5, 2.0, 15.0)"
        assert repr(Loc.of(box(0, 0, 1, 1))).startswith("Loc.of(POLYGON")


class TestOverlap:
    def test_touching_discs_overlap(self):
        # distance between centres exactly r1 + r2 = 50
        assert overlap(Loc.disc(0, 0, 20), Loc.disc(30, 40, 30))
        assert overlap(Loc.disc(0, 0, 5.05), Loc.disc(10.1, 0, 5.05))
        assert distance(Loc.disc(0, 0, 20), Loc.disc(30, 40, 30)) == 0.0

    def test_separated_discs(self):
        a, b = Loc.disc(0, 0, 20), Loc.disc(30, 40, 29.999)
        assert not overlap(a, b) and disjoint(a, b)
        assert distance(a, b) == pytest.approx(0.001)

    def test_zero_radius(self):
        assert overlap(Loc.disc(1, 1, 0), Loc.disc(1, 1, 0))
        assert not overlap(Loc.disc(1, 1, 0), Loc.disc(1, 1.0000001, 0))

    def test_symmetric(self):
        a, b = Loc.disc(3, 4, 1), Loc.of(SQUARE, 2.0)
        assert overlap(a, b) == overlap(b, a) and distance(a, b) == distance(b, a)

    def test_universe(self):
        d = Loc.disc(0, 0, 1)
        assert overlap(UNIVERSE, d) and overlap(d, UNIVERSE) and overlap(UNIVERSE, UNIVERSE)
        assert not disjoint(UNIVERSE, d)
        assert distance(UNIVERSE, d) == 0.0 == distance(d, UNIVERSE)

    def test_polygon_and_disc(self):
        sq = Loc.of(SQUARE)
        assert overlap(sq, Loc.disc(115, 50, 15))       # touches the right edge
        assert not overlap(sq, Loc.disc(115.001, 50, 15))
        assert distance(sq, Loc.disc(120, 50, 15)) == 5.0
        corner = Loc.disc(100 + 30, 100 + 40, 50)        # 50 m from the corner (100, 100)
        assert overlap(sq, corner) and not overlap(sq, Loc.disc(130, 140, 49.99))

    def test_hole_is_not_part_of_the_stamp(self):
        d = Loc.of(DONUT)
        assert not overlap(d, Loc.disc(50, 50, 9.99))
        assert overlap(d, Loc.disc(50, 50, 10.0))
        assert distance(d, Loc.disc(50, 50, 4.0)) == 6.0

    def test_grown_polygons(self):
        a, b = Loc.of(box(0, 0, 10, 10), 5.0), Loc.of(box(20, 0, 30, 10), 5.0)
        assert overlap(a, b) and distance(a, b) == 0.0
        assert not overlap(a, Loc.of(box(20.01, 0, 30, 10), 5.0))

    def test_returns_python_types(self):
        a, b = Loc.of(SQUARE), Loc.disc(200, 0, 1)
        assert type(overlap(a, b)) is bool and type(distance(a, b)) is float


class TestHull:
    def test_empty_is_an_error(self):
        with pytest.raises(ValueError):
            hull([])

    def test_universe_absorbs(self):
        assert hull([Loc.disc(0, 0, 1), UNIVERSE]) is UNIVERSE

    def test_single_convex_is_itself_nonconvex_is_hulled(self):
        d = Loc.disc(1, 2, 3)
        assert hull([d]) is d
        h = hull([Loc.of(DONUT)])
        assert h.geom.equals(SQUARE) and h.r == 0.0
        v = Loc.of(Polygon([(0, 0), (10, 0), (5, 2), (5, 10)]))
        assert hull([v]).geom.equals(Polygon([(0, 0), (10, 0), (5, 10)]))

    def test_equal_radii_exact(self):
        locs = [Loc.disc(0, 0, 15), Loc.disc(100, 0, 15), Loc.disc(50, 80, 15), Loc.disc(50, 10, 15)]
        h = hull(locs)
        assert h.r == 15.0
        assert h.geom.equals(Polygon([(0, 0), (100, 0), (50, 80)]))

    def test_same_point_stays_a_disc(self):
        h = hull([Loc.disc(1, 1, 15), Loc.disc(1, 1, 15)])
        assert h == Loc.disc(1, 1, 15) and h._xy == (1.0, 1.0)

    def test_unequal_radii_contain_and_stay_close(self):
        a, b = Loc.disc(0, 0, 15), Loc.disc(100, 0, 40)
        h = hull([a, b])
        assert h.r == 15.0
        # the big disc's far side: exactly 140 m from a's centre along x
        far = max(shapely.get_coordinates(h.geom)[:, 0]) + h.r
        assert 140.0 <= far <= 140.0 + TOL_DECIDE
        assert certainly_in(Loc.disc(0, 0, 15 - 2 * TOL_DECIDE), Loc.of(h.geom, h.r + 0.0))

    def test_polygon_and_disc(self):
        h = hull([Loc.of(SQUARE), Loc.disc(200, 50, 0)])
        assert h.r == 0.0 and h.geom.equals(Polygon([(0, 0), (100, 0), (200, 50), (100, 100), (0, 100)]))


class TestMeasures:
    def test_area_disc_and_steiner(self):
        assert area(Loc.disc(0, 0, 2)) == pytest.approx(4 * math.pi)
        assert area(Loc.disc(0, 0, 0)) == 0.0
        assert area(Loc.of(SQUARE, 1.0)) == pytest.approx(10000 + 400 + math.pi)
        # a stadium: a segment is a convex set with perimeter twice its length
        assert area(hull([Loc.disc(0, 0, 1), Loc.disc(10, 0, 1)])) == pytest.approx(20 + math.pi)
        assert area(UNIVERSE) == math.inf

    def test_area_nonconvex(self):
        assert area(Loc.of(DONUT)) == 10000 - 400
        # the donut grown by 5: outer 110x110 square with round corners, hole shrinks to 10x10
        exact = (10000 + 400 * 5 + math.pi * 25) - 100
        assert area(Loc.of(DONUT, 5.0)) == pytest.approx(exact, abs=0.1)
        # the hole closes once r >= 10
        assert area(Loc.of(DONUT, 10.0)) == pytest.approx(10000 + 4000 + math.pi * 100, abs=0.1)

    def test_centroid(self):
        assert centroid(Loc.disc(3, 4, 15)) == (3.0, 4.0)
        assert centroid(Loc.of(SQUARE)) == (50.0, 50.0)
        x, y = centroid(Loc.of(box(0, 0, 10, 2), 3.0))
        assert x == pytest.approx(5.0, abs=1e-6) and y == pytest.approx(1.0, abs=1e-6)
        assert all(math.isnan(v) for v in centroid(UNIVERSE))


class TestPatterns:
    circle = Loc.disc(0, 0, 200)

    def test_disc_region(self):
        assert possibly_in(Loc.disc(215, 0, 15), self.circle)
        assert not possibly_in(Loc.disc(215.01, 0, 15), self.circle)
        assert certainly_in(Loc.disc(120, 160, 0), self.circle)  # on the circle: closed set
        assert certainly_in(Loc.disc(90, 120, 50), self.circle)  # inner tangent: 150 + 50 = 200
        assert not certainly_in(Loc.disc(90, 120, 50.001), self.circle)
        assert not certainly_in(Loc.disc(0, 0, 201), self.circle)  # too big to fit anywhere

    def test_polygon_in_disc_region_uses_farthest_vertex(self):
        assert certainly_in(Loc.of(box(-100, -100, 100, 100), 200 - 100 * math.sqrt(2)), self.circle)
        a = 200 / math.sqrt(2)  # a corner at (a, a) is 200 m from the centre
        assert certainly_in(Loc.of(box(-10, -10, a - 0.001, a - 0.001)), self.circle)
        assert not certainly_in(Loc.of(box(-10, -10, a + 0.001, a + 0.001)), self.circle)

    def test_polygon_region(self):
        sq = Loc.of(SQUARE)
        assert certainly_in(Loc.disc(15, 50, 15), sq) and not certainly_in(Loc.disc(14.99, 50, 15), sq)
        assert certainly_in(Loc.disc(0, 0, 0), sq)  # a corner, closed set
        assert certainly_in(Loc.of(box(10, 10, 90, 90), 10.0), sq)
        assert not certainly_in(Loc.of(box(10, 10, 90, 90), 10.01), sq)

    def test_polygon_region_with_hole(self):
        d = Loc.of(DONUT)
        assert certainly_in(Loc.disc(20, 50, 20), d)        # touches the outer edge and the hole
        assert not certainly_in(Loc.disc(20, 50, 20.01), d)
        assert not certainly_in(Loc.disc(50, 50, 1), d)     # in the hole
        assert not possibly_in(Loc.disc(50, 50, 1), d)
        assert not certainly_in(Loc.of(box(30, 30, 70, 70)), d)  # covers the hole

    def test_grown_region(self):
        near = Loc.of(SQUARE, 300.0)  # within 300 m of the square
        assert certainly_in(Loc.disc(-285, 50, 15 - 2 * TOL_DECIDE), near)
        assert not certainly_in(Loc.disc(-285, 50, 15.001), near)
        # round corner: the point (100 + 300 cos 45°, 100 + 300 sin 45°) is on the boundary
        c = 100 + 300 / math.sqrt(2)
        assert certainly_in(Loc.disc(c - 10 / math.sqrt(2), c - 10 / math.sqrt(2), 10 - 2 * TOL_DECIDE), near)
        assert not certainly_in(Loc.disc(c - 10 / math.sqrt(2), c - 10 / math.sqrt(2), 10.001), near)

    def test_line_regions(self):
        road = Loc.of(LineString([(0, 0), (100, 0)]))
        assert certainly_in(Loc.disc(50, 0, 0), road)
        assert not certainly_in(Loc.disc(50, 0, 0.001), road)  # a disc never fits in a line
        assert possibly_in(Loc.disc(50, 10, 10), road)
        corridor = Loc.of(LineString([(0, 0), (100, 0)]), 20.0)
        assert certainly_in(Loc.disc(50, 5, 15 - 2 * TOL_DECIDE), corridor)
        assert not certainly_in(Loc.disc(50, 5, 15.001), corridor)

    def test_universe(self):
        assert possibly_in(UNIVERSE, self.circle) and not certainly_in(UNIVERSE, self.circle)
        with pytest.raises(ValueError, match="UNIVERSE is not a region"):
            possibly_in(Loc.disc(0, 0, 1), UNIVERSE)
        with pytest.raises(ValueError):
            certainly_in(Loc.disc(0, 0, 1), UNIVERSE)

    def test_mixed_collection_region_is_refused(self):
        mixed = Loc.of(shapely.GeometryCollection([box(0, 0, 1, 1), LineString([(5, 5), (6, 6)])]))
        with pytest.raises(ValueError, match="split it"):
            certainly_in(Loc.disc(0.5, 0.5, 0.1), mixed)

    def test_returns_python_bools(self):
        assert type(certainly_in(Loc.disc(50, 50, 1), Loc.of(SQUARE))) is bool


class TestMany:
    regions = [
        Loc.disc(0, 0, 200), Loc.of(SQUARE), Loc.of(DONUT, 3.0), Loc.of(LineString([(0, 0), (300, 50)]), 25.0),
        Loc.of(LineString([(0, 0), (300, 0)])), Loc.of(MultiPoint([(0, 0), (150, 0)]), 60.0),
    ]

    def test_discs_match_scalar_exactly(self):
        rng = np.random.default_rng(7)
        n = 3000
        xs, ys = rng.uniform(-300, 400, n), rng.uniform(-300, 300, n)
        rs = rng.choice([0.0, 5.0, 15.0, 50.0], n)
        xs[:3] = [215.0, 30.0, np.nan]  # a touching disc, a touching-inside disc, an unknown
        ys[:3] = [0.0, 40.0, 1.0]
        rs[:3] = [15.0, 150.0, 15.0]
        for region in self.regions:
            p, c = relate_many(xs, ys, None, rs, region)
            assert p.dtype == bool and c.dtype == bool
            locs = [Loc.disc(x, y, r) for x, y, r in zip(xs, ys, rs)]
            assert p.tolist() == [possibly_in(a, region) for a in locs]
            assert c.tolist() == [certainly_in(a, region) for a in locs]
            assert (possibly_in_many(xs, ys, rs, region) == p).all()
            assert (certainly_in_many(xs, ys, rs, region) == c).all()
            assert p.any() and not p.all()
            assert c.any() == (region.r > 0 or region.geom.geom_type != "LineString")
        p, c = relate_many(xs[:2], ys[:2], None, rs[:2], self.regions[0])
        assert p.tolist() == [True, True] and c.tolist() == [False, True]

    def test_geoms_match_scalar_exactly(self):
        rng = np.random.default_rng(8)
        geoms, rs = [], []
        for i in range(600):
            x, y = rng.uniform(-300, 400), rng.uniform(-300, 300)
            kind = i % 5
            if kind == 0:
                g = box(x, y, x + rng.uniform(1, 80), y + rng.uniform(1, 80))
            elif kind == 1:
                g = Point(x, y)
            elif kind == 2:
                g = LineString([(x, y), (x + rng.uniform(-50, 50), y + rng.uniform(-50, 50))])
            elif kind == 3:
                g = shapely.convex_hull(MultiPoint(rng.uniform(-40, 40, (5, 2)) + [x, y]))
            else:
                g = None if i % 10 == 4 else Polygon()
            geoms.append(g)
            rs.append(float(rng.choice([0.0, 10.0, 30.0])))
        geoms = np.array(geoms, dtype=object)
        rs = np.array(rs)
        for region in self.regions:
            p = possibly_in_many_geoms(geoms, rs, region)
            c = certainly_in_many_geoms(geoms, rs, region)
            locs = [Loc.of(g, r) for g, r in zip(geoms, rs)]
            assert p.tolist() == [possibly_in(a, region) for a in locs]
            assert c.tolist() == [certainly_in(a, region) for a in locs]

    def test_empty_inputs(self):
        for region in self.regions:
            p, c = relate_many([], [], None, [], region)
            assert p.shape == c.shape == (0,)
            assert possibly_in_many_geoms([], [], region).shape == (0,)

    def test_bad_inputs(self):
        with pytest.raises(ValueError, match="same length"):
            possibly_in_many([0.0], [0.0, 1.0], [1.0], self.regions[0])
        with pytest.raises(ValueError, match="radii"):
            possibly_in_many([0.0], [0.0], [-1.0], self.regions[0])
        with pytest.raises(ValueError, match="UNIVERSE is not a region"):
            possibly_in_many([0.0], [0.0], [1.0], UNIVERSE)


    def test_parts_inner_and_outer_discs_decide_only_clear_discs(self):
        """Three stations as one region: a disc deep in a part or clear of every
        part is decided by the parts' inner and outer discs; one within
        BOX_SLACK of an answer's limit is left to GEOS (neither yes nor no)."""
        from spatec.spatial.stamps import BOX_SLACK, _by_part_discs, _part_discs

        region = Loc.of(shapely.union_all([Point(0, 0).buffer(100), Point(500, 0).buffer(50), box(0, 300, 100, 400)]))
        discs = _part_discs(region, "region", region.geom)
        assert len(discs[0]) == 3
        xs = np.array([10.0, 480.0, 250.0, 0.0, 50.0, 100.0 - BOX_SLACK / 2])
        ys = np.array([0.0, 0.0, 0.0, 190.0, 390.0, 0.0])
        rs = np.array([5.0, 10.0, 20.0, 89.5, 40.0, 0.0])
        rows = np.ones(len(xs), dtype=bool)
        meets, misses = _by_part_discs(xs, ys, rs, rows, discs, room=False)
        inside, outside = _by_part_discs(xs, ys, rs, rows, discs, room=True)
        # deep in a part, deep in another, clear of all, 0.5 m clear of the first circle,
        # in the box but 10 m from its edge (r = 40), half a slack inside the first circle's rim
        assert meets.tolist() == [True, True, False, False, True, False]
        assert misses.tolist() == [False, False, True, False, False, False]
        assert inside.tolist() == [True, True, False, False, False, False]
        assert outside.tolist() == [False, False, True, True, False, False]
        assert not (meets & misses).any() and not (inside & outside).any()
        p, c = relate_many(xs, ys, None, rs, region)
        assert (p[meets] & ~p[misses]).all() and (c[inside].all() and not c[outside].any())
        assert p.tolist() == [possibly_in(Loc.disc(x, y, r), region) for x, y, r in zip(xs, ys, rs)]
        assert c.tolist() == [certainly_in(Loc.disc(x, y, r), region) for x, y, r in zip(xs, ys, rs)]


# --- grown_convex: the Minkowski sum built directly --------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spatec.spatial.approx import disc_offsets, ngon_sides  # noqa: E402
from spatec.spatial.stamps import grown_convex, grown_convex_coords, grown_convex_parts  # noqa: E402


def _geos_grown(geoms, ring):
    """The definition: GEOS's convex hull of every vertex grown by every offset."""
    c, idx = shapely.get_coordinates(geoms, return_index=True)
    pts = (c[:, None, :] + ring[None, :, :]).reshape(-1, 2)
    return shapely.convex_hull(shapely.multipoints(pts, indices=np.repeat(idx, len(ring))))


_coord = st.floats(-50, 50, allow_nan=False).map(lambda v: 500_000.0 + v)


@settings(max_examples=300, deadline=None)
@given(pts=st.lists(st.tuples(_coord, _coord), min_size=1, max_size=7),
       r=st.sampled_from([0.5, 15.0, 40.0]), flip=st.booleans())
def test_grown_convex_is_the_hull_of_the_grown_vertices(pts, r, flip):
    """Points, segments, and polygons of either orientation (collinear points
    and repeated ones included): the same region as GEOS's hull of every grown
    vertex, a valid counter-clockwise polygon, closed, with no vertex GEOS drops
    other than points on a straight edge."""
    g = shapely.convex_hull(shapely.multipoints(np.array(pts)))
    if flip and shapely.get_type_id(g) == 3:
        g = shapely.Polygon(shapely.get_coordinates(g)[::-1])
    ring = disc_offsets(r, ngon_sides(r, 0.05, outer=True), outer=True)
    got = grown_convex(np.array([g], dtype=object), ring)[0]
    want = _geos_grown(np.array([g], dtype=object), ring)[0]
    _assert_parts(np.array([g], dtype=object), ring)
    assert got.is_valid and shapely.is_ccw(got.exterior)
    assert got.symmetric_difference(want).area <= 1e-9 * want.area
    assert set(map(tuple, shapely.get_coordinates(want))) <= set(map(tuple, shapely.get_coordinates(got)))


def _assert_parts(geoms, ring):
    """grown_convex_parts: grown_convex_coords's rings, each coordinate (but for GEOS's
    rings) computed as its centre plus its offset, to the bit."""
    coords, offsets, (centres, src, k, ring_) = grown_convex_parts(geoms, ring)
    want, want_offsets = grown_convex_coords(geoms, ring)
    assert ring_ is ring and np.array_equal(offsets, want_offsets)
    assert np.array_equal(coords.view(np.int64), want.view(np.int64))
    known = src >= 0
    assert np.array_equal((centres[src[known]] + ring[k[known]]).view(np.int64), coords[known].view(np.int64))
    assert np.array_equal(known, k >= 0)


def test_grown_convex_straight_edges_and_fallbacks():
    ring = disc_offsets(10.0, ngon_sides(10.0, 0.05, outer=True), outer=True)
    geoms = np.array([
        Polygon([(0, 0), (10, 0), (20, 0), (20, 10), (0, 10)]),   # a vertex on a straight edge
        Polygon([(0, 0), (0, 10), (20, 10), (20, 0)]),            # clockwise
        LineString([(0, 0), (5, 5)]),
        Point(3, 4),
        LineString([(0, 0), (1, 1), (2, 2)]),                     # not as GEOS's hull gives it: GEOS's way
        Polygon([(0, 0), (1e-9, 0), (2e-9, 1e-18)]),              # orientation not certain: GEOS's way
    ], dtype=object)
    got = grown_convex(geoms, ring)
    want = _geos_grown(geoms, ring)
    for a, b in zip(got, want):
        assert a.symmetric_difference(b).area <= 1e-9 * b.area
        assert shapely.is_ccw(a.exterior)            # GEOS's way too (its hulls run clockwise)
    coords, offsets = grown_convex_coords(geoms, ring)
    assert len(offsets) == len(geoms) + 1 and offsets[-1] == len(coords)
    _assert_parts(geoms, ring)
    _assert_parts(geoms[[3, 0, 3]], ring)
    # a disc's ring starts at its first offset, on the x axis, as Loc.disc's polygon
    assert got[3].equals_exact(Polygon(np.array([3.0, 4.0]) + ring), 0)
    assert grown_convex(np.array([], dtype=object), ring).shape == (0,)

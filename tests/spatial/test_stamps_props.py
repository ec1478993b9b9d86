"""Property tests: the exact relations against a very fine polygon model.

The reference builds ``G ⊕ r`` as the union of ``G`` and each edge and
vertex of ``G`` buffered by GEOS with 64 segments per quarter circle (error
below 1 cm for the radii used; a single segment or point has no concavity,
so GEOS's input simplification does not apply). It lies inside the true
stamp. Wherever the true margin exceeds 0.1 m, the stamp functions must give
the reference's answer.
"""
import math

import numpy as np
import shapely
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from shapely import LineString, Point, Polygon

from spatec.spatial.stamps import (
    TOL_DECIDE,
    Loc,
    area,
    certainly_in,
    distance,
    hull,
    overlap,
    possibly_in,
    relate_many,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MARGIN = 0.1
QUAD = 64  # error r (1 - cos(pi / 256)) <= 9 mm for r <= 120 m: well inside MARGIN

coord = st.floats(-300, 300, allow_nan=False, allow_infinity=False, allow_subnormal=False)
radius = st.one_of(st.just(0.0), st.floats(0.5, 120))


@st.composite
def geometries(draw, allow_lines=True):
    kind = draw(st.sampled_from(["point", "convex", "star", "holed", "line"] if allow_lines
                                else ["point", "convex", "star", "holed"]))
    cx, cy = draw(coord), draw(coord)
    if kind == "point":
        return Point(cx, cy)
    if kind == "line":
        pts = draw(st.lists(st.tuples(coord, coord), min_size=2, max_size=4, unique=True))
        return LineString(pts)
    n = draw(st.integers(3, 8))
    angles = np.sort(np.array(draw(st.lists(st.floats(0, 2 * math.pi, exclude_max=True),
                                            min_size=n, max_size=n, unique=True))))
    if np.min(np.diff(np.append(angles, angles[0] + 2 * math.pi))) < 0.05:
        angles = np.linspace(0, 2 * math.pi, n, endpoint=False)
    if kind == "convex":
        rad = np.full(n, draw(st.floats(5, 150)))
    else:
        rad = np.array(draw(st.lists(st.floats(20, 150), min_size=n, max_size=n)))
    shell = np.column_stack([cx + rad * np.cos(angles), cy + rad * np.sin(angles)])
    poly = Polygon(shell)
    assume(poly.is_valid)  # sorted angles can still cross when a gap exceeds pi
    if kind == "holed":
        # A star polygon is simple; a hole well inside the centre's clearance keeps it valid.
        room = shapely.distance(Point(cx, cy), poly.exterior) if poly.contains(Point(cx, cy)) else 0.0
        if room > 2:
            h = room / 2
            return Polygon(shell, [[(cx - h, cy - h), (cx + h, cy - h), (cx + h, cy + h), (cx - h, cy + h)]])
    return poly


@st.composite
def stamps(draw, allow_lines=True):
    return Loc.of(draw(geometries(allow_lines)), draw(radius))


def reference(loc: Loc, grow: float = 0.0):
    """A very fine polygon inside ``G ⊕ (r + grow)``."""
    g, r = loc.geom, loc.r + grow
    if r == 0:
        return g
    pieces = [Point(c).buffer(r, quad_segs=QUAD) for c in shapely.get_coordinates(g)]
    for part in shapely.get_parts(g):
        rings = [part.exterior, *part.interiors] if part.geom_type == "Polygon" else [part]
        for ring in rings:
            c = shapely.get_coordinates(ring)
            pieces += [LineString(c[i:i + 2]).buffer(r, quad_segs=QUAD) for i in range(len(c) - 1)]
        if part.geom_type == "Polygon":
            pieces.append(part)
    return shapely.union_all(pieces)


@SETTINGS
@given(stamps(), stamps())
def test_overlap_and_distance_agree_with_reference(a, b):
    ra, rb = reference(a), reference(b)
    ref_distance = shapely.distance(ra, rb)
    if shapely.intersects(ra, rb):
        assert overlap(a, b) and distance(a, b) == 0.0
    elif ref_distance > MARGIN:
        assert not overlap(a, b)
    assert abs(distance(a, b) - ref_distance) <= MARGIN
    assert overlap(a, b) == overlap(b, a) == (distance(a, b) == 0.0)


@SETTINGS
@given(stamps(), stamps())
def test_certainly_in_agrees_with_reference(a, region):
    outer_a = reference(a, MARGIN)          # contains a, by about 0.1 m
    inner_region = reference(region)        # inside the region
    if shapely.covered_by(outer_a, inner_region):
        assert certainly_in(a, region)
    if not shapely.covered_by(reference(a), reference(region, MARGIN)):
        assert not certainly_in(a, region)
    if certainly_in(a, region):
        assert possibly_in(a, region)


@SETTINGS
@given(st.lists(stamps(), min_size=2, max_size=6), stamps())
def test_many_equals_scalar(locs, region):
    geoms = np.array([loc.geom for loc in locs], dtype=object)
    rs = np.array([loc.r for loc in locs])
    p, c = relate_many(None, None, geoms, rs, region)
    assert p.tolist() == [possibly_in(loc, region) for loc in locs]
    assert c.tolist() == [certainly_in(loc, region) for loc in locs]


def support(loc: Loc, u: np.ndarray) -> np.ndarray:
    """Support function of ``G ⊕ r`` in directions ``u`` (k, 2)."""
    return (shapely.get_coordinates(loc.geom) @ u.T).max(axis=0) + loc.r


DIRECTIONS = np.column_stack([np.cos(a := np.linspace(0, 2 * math.pi, 720, endpoint=False)), np.sin(a)])


@SETTINGS
@given(st.lists(stamps(), min_size=1, max_size=5))
def test_hull_contains_every_stamp_and_is_tight(locs):
    h = hull(locs)
    hs = support(h, DIRECTIONS)
    truth = np.max([support(loc, DIRECTIONS) for loc in locs], axis=0)
    # contains each stamp (a convex set contains S iff its support dominates S's) ...
    assert (hs >= truth - 1e-9).all()
    # ... and exceeds the true hull by at most the approximation bound
    assert (hs <= truth + TOL_DECIDE + 1e-9).all()


@SETTINGS
@given(st.lists(st.tuples(coord, coord), min_size=1, max_size=8), st.floats(0, 100))
def test_hull_of_equal_discs_is_exact(centres, r):
    h = hull([Loc.disc(x, y, r) for x, y in centres])
    assert h.r == r
    assert shapely.equals(h.geom, shapely.convex_hull(shapely.multipoints(centres)))


@SETTINGS
@given(stamps(allow_lines=True))
def test_area_agrees_with_reference(loc):
    ref = reference(loc).area
    perimeter = loc.geom.length + (2 * math.pi * loc.r)
    # the reference is inside, within 1 cm; area() is within 1 mm outside
    assert ref - 1e-9 <= area(loc) + 1e-6 * max(1.0, ref)
    assert area(loc) <= ref + 0.011 * max(perimeter, 1.0) + 1e-6 * max(1.0, ref)


# Random stamps are rarely within a metre of touching; these tests place them
# there on purpose, with the true margin at least 0.1 m either way.
delta = st.one_of(st.floats(MARGIN + 0.01, 2.0), st.floats(-2.0, -MARGIN - 0.01))


@SETTINGS
@given(stamps(), geometries(), delta)
def test_overlap_near_touching(a, gb, d):
    rb = shapely.distance(a.geom, gb) - a.r + d
    assume(rb >= 0)
    b = Loc.of(gb, rb)
    ra, rb_ = reference(a), reference(b)
    if d > 0:  # true gap d < 0 ... the stamps overlap by d
        assert shapely.intersects(reference(a, MARGIN / 2), rb_) and overlap(a, b)
    else:
        assert not shapely.intersects(ra, rb_) and not overlap(a, b)
        assert abs(distance(a, b) - (-d)) <= MARGIN


@SETTINGS
@given(stamps(allow_lines=True), coord, coord, delta)
def test_certainly_in_disc_region_near_the_rim(a, cx, cy, d):
    far = shapely.hausdorff_distance(Point(cx, cy), a.geom)  # farthest vertex, for a point
    assume(far + a.r + d >= 0)
    region = Loc.disc(cx, cy, far + a.r + d)
    inside = shapely.covered_by(reference(a, MARGIN / 2 if d > 0 else 0), reference(region))
    assert certainly_in(a, region) == (d > 0)
    if d > 0:
        assert inside
    else:
        assert not shapely.covered_by(reference(a), reference(region, MARGIN / 2))


@SETTINGS
@given(geometries(allow_lines=False), st.floats(0, 1), st.floats(0, 0.95), delta, st.sampled_from([0.0, 40.0]))
def test_certainly_in_polygon_region_near_the_edge(poly, u, t, d, grow):
    assume(poly.geom_type == "Polygon")
    region = Loc.of(poly, grow)
    # a point between an interior point and a boundary point
    a, b = poly.point_on_surface(), poly.exterior.interpolate(u, normalized=True)
    p = Point(a.x + t * (b.x - a.x), a.y + t * (b.y - a.y))
    assume(poly.contains(p))
    edge = poly.boundary if grow == 0 else reference(region).boundary  # within 1 cm
    r = shapely.distance(p, edge) - d
    assume(r >= 0)
    assert certainly_in(Loc.of(p, r), region) == (d > 0)


@st.composite
def multi_regions(draw):
    """A region of several parts (a multi-polygon, or the same parts as a collection),
    as places joined by ``or`` make."""
    polys = draw(st.lists(geometries(allow_lines=False), min_size=2, max_size=4))
    g = shapely.union_all([p for p in polys if p.geom_type == "Polygon"] or polys[:1])
    if draw(st.booleans()):
        g = shapely.GeometryCollection(list(shapely.get_parts(g)))
    assume(shapely.get_num_geometries(g) > 1)
    return Loc.of(g, draw(radius))


@SETTINGS
@given(st.lists(stamps(), min_size=1, max_size=8), st.lists(st.tuples(coord, coord), min_size=1, max_size=8),
       st.floats(0, 60), multi_regions())
def test_many_equals_scalar_on_regions_of_several_parts(locs, centres, r, region):
    """relate_many measures a region of several parts part by part, near parts only:
    the answers stay the scalar ones, for discs and for other stamps."""
    geoms = np.array([loc.geom for loc in locs], dtype=object)
    rs = np.array([loc.r for loc in locs])
    p, c = relate_many(None, None, geoms, rs, region)
    assert p.tolist() == [possibly_in(loc, region) for loc in locs]
    assert c.tolist() == [certainly_in(loc, region) for loc in locs]
    xs, ys = np.array(centres).T
    p, c = relate_many(xs, ys, None, np.full(len(xs), r), region)
    discs = [Loc.disc(x, y, r) for x, y in centres]
    assert p.tolist() == [possibly_in(d, region) for d in discs]
    assert c.tolist() == [certainly_in(d, region) for d in discs]


@SETTINGS
@given(st.lists(st.tuples(coord, coord), min_size=1, max_size=12), multi_regions(), st.floats(0, 200))
def test_distance_within_is_the_distance_up_to_reach(centres, region, reach):
    """Part by part, the distance wherever it is within reach (the very number
    shapely gives for the whole), above reach elsewhere; with the reach set to a
    row's own distance, the test at the threshold still holds exactly."""
    from spatec.spatial.stamps import _distance_within

    pts = shapely.points(np.array(centres))
    box = shapely.bounds(pts)
    true = shapely.distance(pts, region.geom)
    for reaches in (np.full(len(pts), reach), true.copy()):
        got = _distance_within(pts, box, region.geom, reaches)
        within = true <= reaches
        assert (got[within] == true[within]).all()
        assert (got[~within] > reaches[~within]).all()


@SETTINGS
@given(multi_regions(), st.lists(st.tuples(st.floats(0, 2 * math.pi), st.floats(-3, 3)), min_size=1, max_size=12),
       st.one_of(st.just(0.0), st.floats(0, 3)))
def test_many_equals_scalar_for_discs_at_a_parts_edge(region, spots, r):
    """Discs whose centres lie within a few metres of a part's boundary (where
    the parts' inner and outer discs must leave the answer to GEOS) and the
    same discs shrunk to points: relate_many's answers are the scalar ones."""
    parts = shapely.get_parts(region.geom)
    xs, ys = [], []
    for i, (a, off) in enumerate(spots):
        part = parts[i % len(parts)]
        c = part.centroid
        ray = LineString([(c.x, c.y), (c.x + 1000 * math.cos(a), c.y + 1000 * math.sin(a))])
        hit = shapely.get_coordinates(ray.intersection(part.exterior))
        if not len(hit):
            continue
        x, y = hit[0]
        xs.append(x + off * math.cos(a))
        ys.append(y + off * math.sin(a))
    assume(xs)
    xs, ys = np.array(xs), np.array(ys)
    for rad in (r, 0.0):
        p, c = relate_many(xs, ys, None, np.full(len(xs), rad), region)
        discs = [Loc.disc(x, y, rad) for x, y in zip(xs, ys)]
        assert p.tolist() == [possibly_in(d, region) for d in discs]
        assert c.tolist() == [certainly_in(d, region) for d in discs]


@SETTINGS
@given(st.lists(st.tuples(coord, coord, coord, coord, st.booleans()), max_size=12), st.floats(0.5, 120))
def test_grown_segments_are_the_grown_hulls_of_point_pairs(pairs, r):
    """grown_segments (no geometry made) gives grown_convex_parts of GEOS's hull of each
    pair, number for number: the line between them, or the point where they are one."""
    from spatec.sinks.encoding import wkt_ring
    from spatec.spatial.stamps import grown_convex_parts, grown_segments

    ring = wkt_ring(r)
    p = np.array([(a, b) for a, b, _, _, _ in pairs], dtype=float).reshape(-1, 2)
    q = np.array([(a, b) if same else (c, d) for a, b, c, d, same in pairs], dtype=float).reshape(-1, 2)
    hulls = shapely.convex_hull(shapely.linestrings(np.stack([p, q], axis=1))) if len(p) else \
        np.zeros(0, dtype=object)
    got, want = grown_segments(p, q, ring), grown_convex_parts(np.asarray(hulls, dtype=object), ring)
    for a, b in zip((got[0], got[1], *got[2][:3]), (want[0], want[1], *want[2][:3])):
        assert a.shape == b.shape and (a == b).all()

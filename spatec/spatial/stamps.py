"""Location stamps and the exact relations between them (SPEC §1–3).

A location stamp is ``G ⊕ disc(r)``: a geometry ``G`` in projected metres,
grown by ``r >= 0`` metres. A GPS fix is a disc (a point grown by its error),
a rain cell a polygon (``r = 0``), ``within 300 m of P`` is P's stamp grown by
300 m. :data:`UNIVERSE` is the stamp of an event with no place: it overlaps
everything and is certainly inside nothing.

Relations are decided on ``G`` and ``r`` directly, never on polygons standing
in for circles, so they are exact up to floating point:

- ``overlap(a, b)``  ⟺ ``dist(Ga, Gb) <= ra + rb`` (closed sets: touching
  stamps overlap). Two discs compare squared distances,
  ``dx*dx + dy*dy <= (ra + rb)**2``: plain IEEE arithmetic that Python,
  numpy, Spark SQL and DataFusion all evaluate to the same bits, so every
  runner and engine draws the boundary in the same place (``math.hypot`` and
  ``numpy.hypot`` differ in the last bit for about 0.5 % of inputs).
- ``certainly_in(a, region)``: the whole stamp lies inside the region.

Where the exact answer is not a polygon (the hull of discs of different radii,
a region grown from a polygon) a polygon within :data:`TOL_DECIDE` metres of
it is used, on the side that keeps answers sound; see :mod:`.approx`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import shapely

from spatec.spatial.approx import disc_offsets, minkowski, ngon_sides
from spatec.spatial.smallhull import SMALL as SMALL_HULL
from spatec.spatial.smallhull import hull_rings

__all__ = [
    "Loc", "UNIVERSE", "TOL_DECIDE", "TOL_MEASURE",
    "overlap", "disjoint", "distance", "hull", "hull_support", "area", "centroid",
    "possibly_in", "certainly_in", "relate_many", "relate_discs", "overlap_many",
    "possibly_in_many", "certainly_in_many", "possibly_in_many_geoms", "certainly_in_many_geoms",
    "grown", "is_convex", "are_convex", "grown_convex", "grown_convex_coords", "grown_convex_parts",
    "grown_segments", "grown_point_hulls",
]

#: Largest error, metres, of an approximation that takes part in a decision
#: (hulls of unequal discs, containment in a grown polygon). SPEC allows 0.1 m.
TOL_DECIDE = 0.01
#: Error bound, metres, of the polygons behind ``area`` and ``centroid`` of
#: non-convex stamps.
TOL_MEASURE = 0.001
#: Bounding boxes used to skip far-away pairs are grown by this many metres so
#: that rounding in the box test can never skip a pair that relates.
BOX_SLACK = 1.0

_POINT, _POLYGON, _MULTIPOLYGON = 0, 3, 6


@dataclass(frozen=True, slots=True, repr=False)
class Loc:
    """A location stamp: geometry ``geom`` (projected metres) grown by ``r``.

    Parameters
    ----------
    geom : shapely.Geometry or None
        A non-empty geometry with finite coordinates; ``None`` only for
        :data:`UNIVERSE` (with ``r = inf``).
    r : float
        Growth radius in metres, finite and ``>= 0``.

    Notes
    -----
    Use :meth:`disc` and :meth:`of` to build stamps from data: they map a
    missing place (``None``, an empty geometry, a NaN position) to
    :data:`UNIVERSE`. The constructor itself refuses them, so a bug cannot
    silently turn into "unknown location".

    Examples
    --------
    >>> Loc.disc(0.0, 0.0, 15.0)
    Loc.disc(0.0, 0.0, 15.0)
    >>> Loc.of(None) is UNIVERSE
    True
    >>> Loc.disc(float("nan"), 0.0, 15.0) is UNIVERSE
    True
    >>> from shapely import Polygon
    >>> Loc.of(Polygon([(0, 0), (1, 0), (1, 1)]))
    Loc.of(POLYGON ((0 0, 1 0, 1 1, 0 0)), r=0.0)
    """

    geom: object
    r: float
    _xy: tuple | None = field(default=None, init=False, compare=False)
    _memo: dict | None = field(default=None, init=False, compare=False)

    def __post_init__(self):
        g, r = self.geom, float(self.r)
        object.__setattr__(self, "r", r)
        if g is None:
            if r != math.inf:
                raise ValueError("a Loc without a geometry is UNIVERSE; use spatec.spatial.stamps.UNIVERSE")
            return
        if not isinstance(g, shapely.Geometry):
            raise TypeError(f"Loc.geom must be a shapely geometry, not {type(g).__name__}")
        if not (0.0 <= r < math.inf):
            raise ValueError(f"Loc radius must be finite and >= 0, got {r}")
        if g.is_empty:
            raise ValueError("an empty geometry is no place; Loc.of() maps it to UNIVERSE")
        if shapely.get_type_id(g) == _POINT:
            xy = (float(shapely.get_x(g)), float(shapely.get_y(g)))
            if not (math.isfinite(xy[0]) and math.isfinite(xy[1])):
                raise ValueError(f"point coordinates must be finite, got {xy}")
            object.__setattr__(self, "_xy", xy)
        elif not np.isfinite(shapely.get_coordinates(g)).all():
            raise ValueError("geometry coordinates must be finite")

    @property
    def xy(self) -> tuple | None:
        """The disc's centre ``(x, y)`` when the stamp is a point grown by ``r``, else None."""
        return self._xy

    @classmethod
    def disc(cls, x: float, y: float, r: float) -> "Loc":
        """The disc of radius ``r`` around ``(x, y)``; UNIVERSE if x or y is NaN."""
        x, y = float(x), float(y)
        if not (math.isfinite(x) and math.isfinite(y)):
            return UNIVERSE
        # Built without __post_init__: discs are made once per GPS fix, and
        # their coordinates are already checked here.
        r = float(r)
        if not (0.0 <= r < math.inf):
            raise ValueError(f"Loc radius must be finite and >= 0, got {r}")
        loc = object.__new__(cls)
        object.__setattr__(loc, "geom", shapely.Point(x, y))
        object.__setattr__(loc, "r", r)
        object.__setattr__(loc, "_xy", (x, y))
        object.__setattr__(loc, "_memo", None)
        return loc

    @classmethod
    def discs(cls, xs, ys, rs) -> list | None:
        """:meth:`disc` of every ``(x, y, r)``, the points made in one call; None unless
        every coordinate is finite and every radius valid (then make them one by one)."""
        xs, ys, rs = (np.asarray(a, dtype=float).reshape(-1) for a in (xs, ys, rs))
        if not (np.isfinite(xs).all() and np.isfinite(ys).all() and ((rs >= 0) & (rs < math.inf)).all()):
            return None
        new, put = object.__new__, object.__setattr__
        out = []
        for x, y, r, g in zip(xs.tolist(), ys.tolist(), rs.tolist(), shapely.points(xs, ys).tolist()):
            loc = new(cls)
            put(loc, "geom", g)
            put(loc, "r", r)
            put(loc, "_xy", (x, y))
            put(loc, "_memo", None)
            out.append(loc)
        return out

    @classmethod
    def of(cls, geom, r: float = 0.0) -> "Loc":
        """The stamp ``geom ⊕ r``; UNIVERSE for a missing or empty geometry
        or a point with a NaN coordinate."""
        if geom is None or geom.is_empty:
            return UNIVERSE
        if shapely.get_type_id(geom) == _POINT:
            return cls.disc(shapely.get_x(geom), shapely.get_y(geom), r)
        return cls(geom, r)

    @property
    def is_universe(self) -> bool:
        """True for the stamp of an event with no place."""
        return self.geom is None

    def _memoised(self, key, make):
        """Cache ``make()`` on this (immutable) stamp."""
        memo = self._memo
        if memo is None:
            memo = {}
            object.__setattr__(self, "_memo", memo)
        try:
            return memo[key]
        except KeyError:
            value = memo[key] = make()
            return value

    def __reduce__(self):
        # Unpickling must give back the UNIVERSE singleton, and must not carry
        # the memo (prepared GEOS geometries, approximations) to executors.
        if self.geom is None:
            return (_universe, ())
        return (Loc, (self.geom, self.r))

    def __repr__(self):
        if self.geom is None:
            return "UNIVERSE"
        if self._xy is not None:
            return f"Loc.disc({self._xy[0]!r}, {self._xy[1]!r}, {self.r!r})"
        wkt = shapely.to_wkt(self.geom, rounding_precision=3, trim=True)
        if len(wkt) > 120:  # hull polygons have hundreds of vertices
            wkt = wkt[:100] + " ..."
        return f"Loc.of({wkt}, r={self.r!r})"


UNIVERSE = Loc(None, math.inf)


def _universe():
    return UNIVERSE


# --- relations between stamps ---------------------------------------------


def overlap(a: Loc, b: Loc) -> bool:
    """Whether two stamps intersect (closed sets: touching counts).

    Examples
    --------
    >>> overlap(Loc.disc(0, 0, 20), Loc.disc(30, 40, 30))   # centres 50 m apart
    True
    >>> overlap(Loc.disc(0, 0, 20), Loc.disc(30, 40, 29.99))
    False
    >>> overlap(UNIVERSE, Loc.disc(0, 0, 1))
    True
    """
    axy, bxy = a._xy, b._xy
    if axy is not None and bxy is not None:
        dx = axy[0] - bxy[0]
        dy = axy[1] - bxy[1]
        s = a.r + b.r
        return dx * dx + dy * dy <= s * s
    if a.geom is None or b.geom is None:
        return True
    return float(shapely.distance(a.geom, b.geom)) <= a.r + b.r


def disjoint(a: Loc, b: Loc) -> bool:
    """``not overlap(a, b)``: certainly different places."""
    return not overlap(a, b)


def distance(a: Loc, b: Loc) -> float:
    """Metres between two stamps: ``max(0, dist(Ga, Gb) - ra - rb)``.

    0 when either is UNIVERSE, and 0 whenever the stamps overlap.

    Examples
    --------
    >>> distance(Loc.disc(0, 0, 15), Loc.disc(100, 0, 15))
    70.0
    >>> distance(Loc.disc(0, 0, 15), UNIVERSE)
    0.0
    """
    axy, bxy = a._xy, b._xy
    if axy is not None and bxy is not None:
        dx = axy[0] - bxy[0]
        dy = axy[1] - bxy[1]
        s = a.r + b.r
        if dx * dx + dy * dy <= s * s:  # the overlap test, so the two never disagree
            return 0.0
        return max(0.0, math.hypot(dx, dy) - s)
    if a.geom is None or b.geom is None:
        return 0.0
    return max(0.0, float(shapely.distance(a.geom, b.geom)) - (a.r + b.r))


# --- the hull of a composite ------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _outer_ring(radius: float) -> np.ndarray:
    """A circumscribed n-gon around the origin within TOL_DECIDE of the circle."""
    return disc_offsets(radius, ngon_sides(radius, TOL_DECIDE, outer=True), outer=True)


def _coords(loc: Loc) -> np.ndarray:
    if loc._xy is not None:
        return np.array([loc._xy])
    return loc._memoised("coords", lambda: shapely.get_coordinates(loc.geom))


def is_convex(loc: Loc) -> bool:
    """Whether ``G`` is a convex set (then ``G ⊕ r`` is too)."""
    if loc._xy is not None:
        return True
    return loc._memoised("convex", lambda: bool(shapely.covers(loc.geom, shapely.convex_hull(loc.geom))))


def are_convex(locs: Sequence[Loc]) -> list[bool]:
    """:func:`is_convex` of each stamp (none UNIVERSE), those not yet known tested in one GEOS call."""
    test = [loc for loc in locs if loc._xy is None and "convex" not in (loc._memo or {})]
    if test:
        geoms = np.empty(len(test), dtype=object)
        geoms[:] = [loc.geom for loc in test]
        for loc, ok in zip(test, shapely.covers(geoms, shapely.convex_hull(geoms)).tolist()):
            loc._memoised("convex", lambda ok=ok: bool(ok))
    return [is_convex(loc) for loc in locs]


def hull(locs: Iterable[Loc]) -> Loc:
    """The convex hull of the union of stamps: a composite's location stamp.

    With equal radii the result is exact: ``conv(∪ Gi) ⊕ r``. With unequal
    radii the true hull is not a polygon grown by a disc; it is represented
    as ``conv(∪ (Gi ⊕ (ri - rmin))) ⊕ rmin`` with each ``Gi ⊕ (ri - rmin)``
    replaced by its vertices grown by a circumscribed n-gon. That polygon
    contains the true hull (so the hull still certainly contains every
    constituent) and exceeds it by at most :data:`TOL_DECIDE` metres.

    Parameters
    ----------
    locs : iterable of Loc
        At least one stamp. Any UNIVERSE makes the result UNIVERSE.

    Examples
    --------
    >>> h = hull([Loc.disc(0, 0, 15), Loc.disc(100, 0, 15)])
    >>> h.geom.wkt, h.r
    ('LINESTRING (0 0, 100 0)', 15.0)
    >>> hull([Loc.disc(0, 0, 15), UNIVERSE]) is UNIVERSE
    True
    >>> hull([Loc.disc(5, 5, 15)])
    Loc.disc(5.0, 5.0, 15.0)
    """
    locs = tuple(locs)
    if not locs:
        raise ValueError("the hull of no stamps is undefined")
    if any(loc.geom is None for loc in locs):
        return UNIVERSE
    if len(locs) == 1 and is_convex(locs[0]):
        return locs[0]
    rmin = min(loc.r for loc in locs)
    g = shapely.convex_hull(shapely.multipoints(np.concatenate([_hull_points(loc, rmin) for loc in locs])))
    out = Loc.of(g, rmin)
    if out._xy is None:
        out._memoised("convex", lambda: True)
    return out


def _hull_points(loc: Loc, rmin: float) -> np.ndarray:
    """The points :func:`hull` takes for ``loc`` in a hull of least radius ``rmin``."""
    c = _coords(loc)
    grow = loc.r - rmin
    if grow > 0:
        c = (c[:, None, :] + _outer_ring(grow)[None, :, :]).reshape(-1, 2)
    return c


def hull_support(locs: Sequence[Loc], h: Loc) -> list[int]:
    """The stamps among ``locs`` that make their hull ``h = hull(locs)``: the indices, in
    order, of those with a point (as :func:`hull` takes it, grown to ``h.r``) that is neither
    strictly inside ``h`` nor a point of an earlier stamp, and of the first of least radius
    (which gives ``h`` its radius). ``locs``: at least two, none UNIVERSE.

    With any further stamps ``more`` of radius ``>= h.r``, ``hull(kept + more)`` is ``hull(locs
    + more)`` bit for bit, the stamps in the same relative order (what lets a partial match
    make its stamp from its halves', :mod:`spatec.automata.hulls`). GEOS's convex hull
    (``ConvexHull.cpp``) drops repeated points and sorts the rest around the lowest one, so
    its ring depends only on the set of points, and a point strictly inside the hull of
    some of them is strictly inside the hull of all and never on the ring; a hull of two
    distinct points is a line in the order they first come (kept: the first stamp with
    each point stays). Points on ``h``'s boundary stay (a Graham scan keeps collinear points
    on some edges), and every point when ``h`` is a point or a line (its relative interior
    may be the boundary of a larger hull)."""
    rmin = h.r
    pts = [_hull_points(loc, rmin) for loc in locs]
    if shapely.get_type_id(h.geom) == _POLYGON:
        allp = np.concatenate(pts)
        inside = shapely.contains_xy(h.geom, allp[:, 0], allp[:, 1]).tolist()
    else:
        inside = None
    seen: set = set()
    keep = []
    at = 0
    least = False       # a stamp of the least radius is kept (it sets the radius of the hull)
    for i, c in enumerate(pts):
        new = False
        for j, xy in enumerate(map(tuple, c.tolist())):
            if (inside is None or not inside[at + j]) and xy not in seen:
                seen.add(xy)
                new = True
        at += len(c)
        if new or (not least and locs[i].r == rmin):
            keep.append(i)
            least = least or locs[i].r == rmin
    return keep


# --- measures ---------------------------------------------------------------


def area(loc: Loc) -> float:
    """Area of a stamp in square metres (``hull_area`` in the language).

    Exact for convex ``G`` by Steiner's formula,
    ``area(G) + perimeter(G) r + pi r**2`` (a segment's perimeter as a convex
    set is twice its length); otherwise the area of a polygon within
    :data:`TOL_MEASURE` m of the stamp. UNIVERSE has infinite area.

    Examples
    --------
    >>> round(area(Loc.disc(0, 0, 1.0)), 6)
    3.141593
    >>> from shapely import box
    >>> round(area(Loc.of(box(0, 0, 10, 10), 1.0)), 6)   # 100 + 40 + pi
    143.141593
    >>> area(UNIVERSE)
    inf
    """
    if loc.geom is None:
        return math.inf
    r = loc.r
    if r == 0:
        return float(loc.geom.area)
    if is_convex(loc):
        h = shapely.convex_hull(loc.geom)
        dim = shapely.get_dimensions(h)
        perimeter = h.length if dim == 2 else 2.0 * h.length if dim == 1 else 0.0
        return float(h.area + perimeter * r + math.pi * r * r)
    return float(minkowski(loc.geom, r, TOL_MEASURE, outer=True).area)


def centroid(loc: Loc) -> tuple[float, float]:
    """Centroid ``(x, y)`` of a stamp; ``(nan, nan)`` for UNIVERSE.

    A disc's centroid is its centre; a stamp with ``r = 0`` has ``G``'s
    centroid; otherwise the centroid of a polygon within :data:`TOL_MEASURE`
    m of the stamp.

    Examples
    --------
    >>> centroid(Loc.disc(3.0, 4.0, 15.0))
    (3.0, 4.0)
    >>> x, y = centroid(hull([Loc.disc(0, 0, 15), Loc.disc(100, 0, 15)]))
    >>> round(x, 6), abs(round(y, 6))
    (50.0, 0.0)
    """
    if loc.geom is None:
        return (math.nan, math.nan)
    if loc._xy is not None:
        return loc._xy
    g = loc.geom if loc.r == 0 else grown(loc, TOL_MEASURE)
    c = shapely.centroid(g)
    return (float(shapely.get_x(c)), float(shapely.get_y(c)))


def grown(loc: Loc, tol: float):
    """A polygon containing ``G ⊕ r`` and within ``tol`` of it."""
    if loc.r == 0:
        return loc.geom
    ring = disc_offsets(loc.r, ngon_sides(loc.r, tol, outer=True), outer=True)
    if loc._xy is not None:
        return shapely.Polygon(np.asarray(loc._xy) + ring)
    if is_convex(loc):
        return grown_convex(np.array([loc.geom], dtype=object), ring)[0]
    return minkowski(loc.geom, loc.r, tol, outer=True)


def grown_convex(geoms: np.ndarray, ring: np.ndarray) -> np.ndarray:
    """Polygons ``G ⊕ R`` of convex geometries ``G`` and the circumscribed
    n-gon ``R`` (:func:`~spatec.spatial.approx.disc_offsets`, first vertex
    on the x axis): the convex hull of ``G``'s vertices each grown by ``R``.

    Built directly as a Minkowski sum of two convex polygons: going round
    ``G`` counter-clockwise, each vertex ``v`` contributes ``v + R[k]`` for
    the offsets ``k`` whose normal cone (the directions in which ``R[k]`` is
    the farthest point of ``R``) overlaps ``v``'s. Points, two-point lines
    and convex polygons (as GEOS's convex hull gives them) take this way;
    anything else, or a polygon whose orientation or convexity is not
    certain in floating point, takes GEOS's convex hull of every grown
    vertex. Each ring starts at its lowest offset of its first vertex and
    runs counter-clockwise, so the same ``G`` always gives the same polygon.
    """
    coords, offsets = grown_convex_coords(geoms, ring)
    return shapely.from_ragged_array(shapely.GeometryType.POLYGON, coords, (offsets, np.arange(len(geoms) + 1)))


def grown_convex_coords(geoms: np.ndarray, ring: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`grown_convex` as ragged arrays: the closed rings' coordinates one
    after another, and where each ring starts (``len(geoms) + 1`` offsets)."""
    return grown_convex_parts(geoms, ring)[:2]


def grown_convex_parts(geoms: np.ndarray, ring: np.ndarray) -> tuple:
    """:func:`grown_convex_coords` and where each coordinate comes from:
    ``(coords, offsets, (centres, src, k, ring))`` with ``coords[i]`` computed as
    ``centres[src[i]] + ring[k[i]]`` (a vertex of ``G`` and an offset), or
    ``src[i] = k[i] = -1`` for the rings GEOS's convex hull makes. What
    :func:`spatec.sinks.encoding.lonlat_wkts` needs to unproject a grown ring from its few centres."""
    if len(geoms) == 0:
        return _no_parts(ring)
    v, vid, point, line, poly, c, idx = _vertices(geoms)
    return _grown_vertices(v, vid, point, line, poly, ring, c, idx)


def _vertices(geoms: np.ndarray) -> tuple:
    """What :func:`_grown_vertices` reads of geometries: ``(v, vid, point, line, poly, c, idx)``."""
    m = len(geoms)
    c, idx = shapely.get_coordinates(geoms, return_index=True)
    tid = shapely.get_type_id(geoms)
    nc = np.bincount(idx, minlength=m)
    holes = np.zeros(m, dtype=bool)
    holes[tid == 3] = shapely.get_num_interior_rings(geoms[tid == 3]) > 0
    point = (tid == 0) & (nc == 1)
    line = (tid == 1) & (nc == 2)
    poly = (tid == 3) & ~holes & (nc >= 4)
    # a polygon's vertices: its shell without the closing coordinate
    first = np.r_[0, np.cumsum(nc)[:-1]]
    keep = np.zeros(len(c), dtype=bool)
    keep[concat_ranges(first, np.where(poly, nc - 1, np.where(point | line, nc, 0)))] = True
    return c[keep], idx[keep], point, line, poly, c, idx


def grown_point_hulls(xy: np.ndarray, ring: np.ndarray, coords: bool = True) -> tuple:
    """:func:`grown_convex_parts` of GEOS's convex hulls of ``n`` sets of ``k`` points
    (``xy``: shape ``(k, n, 2)``), the hulls of 3 or 4 points in general position made
    without GEOS (:func:`spatec.spatial.smallhull.hull_rings`: the same polygons,
    coordinate for coordinate), the others by GEOS. The same vertices go through the
    same arithmetic, so the same numbers. ``coords=False``: the coordinates left out
    (None) where every ring is a centre plus offsets (:func:`spatec.sinks.encoding.lonlat_wkts`
    needs no more)."""
    k, n = xy.shape[0], xy.shape[1]
    if n == 0:
        return _no_parts(ring)
    if k not in SMALL_HULL:
        return grown_convex_parts(_point_hulls(xy), ring)
    order, count, sure = hull_rings(xy[:, :, 0], xy[:, :, 1])
    ok = np.flatnonzero(sure)
    # the polygons' vertices, row after row, and their shells (the first vertex again)
    cnt = count[ok]
    pick = order[ok][np.arange(order.shape[1])[None, :] < cnt[:, None]]
    rows = np.repeat(ok, cnt)
    v = xy[pick, rows]

    def shells():
        first = np.cumsum(cnt) - cnt
        shell = np.insert(np.arange(len(v)), first[1:].tolist() + [len(v)], first)
        return v[shell], np.repeat(ok, cnt + 1)

    other = np.flatnonzero(~sure)
    # (the shells made only if GEOS makes a hull: of these, or of a grown one _grown_vertices cannot make)
    parts = [(v, rows, *shells())] if len(other) else [(v, rows, shells, None)]
    point, line, poly = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    poly[ok] = True
    if len(other):
        gv, gvid, gpoint, gline, gpoly, gc, gidx = _vertices(_point_hulls(xy[:, other]))
        point[other], line[other], poly[other] = gpoint, gline, gpoly
        parts.append((gv, other[gvid], gc, other[gidx]))
        by_v = np.argsort(np.concatenate([p[1] for p in parts]), kind="stable")
        by_c = np.argsort(np.concatenate([p[3] for p in parts]), kind="stable")
        v, vid = np.concatenate([p[0] for p in parts])[by_v], np.concatenate([p[1] for p in parts])[by_v]
        c, idx = np.concatenate([p[2] for p in parts])[by_c], np.concatenate([p[3] for p in parts])[by_c]
    else:
        _, vid, c, idx = parts[0]
    return _grown_vertices(v, vid, point, line, poly, ring, c, idx, coords)


def _point_hulls(xy: np.ndarray) -> np.ndarray:
    """GEOS's convex hulls of ``n`` sets of ``k >= 2`` points (``xy``: ``(k, n, 2)``),
    each handed to GEOS as a line string (its hull reads only the coordinates)."""
    k, n = xy.shape[0], xy.shape[1]
    lines = shapely.from_ragged_array(shapely.GeometryType.LINESTRING,
                                      np.ascontiguousarray(xy.transpose(1, 0, 2).reshape(-1, 2)),
                                      (np.arange(0, k * n + 1, k, dtype=np.int64),))
    return shapely.convex_hull(lines)


def grown_segments(p: np.ndarray, q: np.ndarray, ring: np.ndarray, coords: bool = True) -> tuple:
    """:func:`grown_convex_parts` of the convex hulls of point pairs ``p[i], q[i]``
    (``(m, 2)`` each) without making them: the hull of two points is, as GEOS
    makes it, the line from ``p`` to ``q``, or the point where they are one.
    The same vertices go through the same arithmetic, so the same numbers.
    ``coords``: as :func:`grown_point_hulls`'s."""
    m = len(p)
    if m == 0:
        return _no_parts(ring)
    same = (p[:, 0] == q[:, 0]) & (p[:, 1] == q[:, 1])
    n = np.where(same, 1, 2)
    at = np.r_[0, np.cumsum(n)[:-1]]
    v = np.empty((int(n.sum()), 2))
    v[at] = p
    two = np.flatnonzero(~same)
    v[at[two] + 1] = q[two]
    vid = np.repeat(np.arange(m), n)
    return _grown_vertices(v, vid, same, ~same, np.zeros(m, dtype=bool), ring, v, vid, coords)


def _no_parts(ring: np.ndarray) -> tuple:
    none = np.zeros(0, dtype=np.int64)
    return np.empty((0, 2)), np.zeros(1, dtype=np.int64), (np.empty((0, 2)), none, none, ring)


def _grown_vertices(v: np.ndarray, vid: np.ndarray, point: np.ndarray, line: np.ndarray, poly: np.ndarray,
                    ring: np.ndarray, c: np.ndarray, idx: np.ndarray, coords: bool = True) -> tuple:
    """:func:`grown_convex_parts` from the geometries' vertices ``v`` (their ids
    ``vid``, in order) and kinds (a point, a two-point line, a polygon of its
    shell's vertices, or other); ``c, idx``: every coordinate and its id, of
    which the other geometries' hulls are made (``c`` may be a function giving both,
    called only if there is such a geometry). ``coords=False``: the coordinates
    None where every ring is made of offsets (no GEOS ring)."""
    m, n = len(point), len(ring)
    nv = np.bincount(vid, minlength=m)
    vfirst = np.repeat(np.r_[0, np.cumsum(nv)[:-1]], nv)
    pos = np.arange(len(v)) - vfirst
    nvr = np.repeat(nv, nv)
    nxt, prv = vfirst + (pos + 1) % nvr, vfirst + (pos - 1) % nvr     # the next vertex, the previous
    # counter-clockwise: a clockwise ring is read backwards (x and y apart: the same arithmetic)
    vx, vy = np.ascontiguousarray(v[:, 0]), np.ascontiguousarray(v[:, 1])
    relx, rely = vx - vx.take(vfirst), vy - vy.take(vfirst)              # exact enough for nearby points
    cross = relx * rely.take(nxt) - relx.take(nxt) * rely
    area = np.bincount(vid, weights=cross, minlength=m)
    sure = np.abs(area) > 1e-9 * np.bincount(vid, weights=np.abs(cross), minlength=m)
    ccw = np.where(poly, area > 0, True)
    order = np.where(ccw[vid], np.arange(len(v)), vfirst + (nvr - 1 - pos))
    v = v[order]
    vx, vy = vx.take(order), vy.take(order)
    ex, ey = vx.take(nxt) - vx, vy.take(nxt) - vy                        # each vertex's outgoing edge
    a_in = np.arctan2(-ex.take(prv), ey.take(prv))                       # outward normals (counter-clockwise ring)
    a_out = np.arctan2(-ex, ey)
    width = np.mod(a_out - a_in, 2 * np.pi)
    width[width > 2 * np.pi - 1e-12] = 0.0               # a vertex on a straight edge
    total = np.bincount(vid, weights=width, minlength=m)
    bad = np.bincount(vid, weights=((width > np.pi + 1e-9) | ~(np.hypot(ex, ey) > 0)).astype(float),
                      minlength=m) > 0
    direct = point | ((line | (poly & sure)) & ~bad & (np.abs(total - 2 * np.pi) < 1e-6))
    # offset k's normal cone is [theta_k - step/2, theta_k + step/2]; keep the k whose cone
    # overlaps the vertex's [a_in, a_in + width] by more than eps (a cone that only touches
    # adds a point on a straight edge)
    step, eps = 2 * np.pi / n, 1e-9
    k0 = np.ceil((a_in - step / 2 + eps) / step).astype(np.int64)
    k1 = np.floor((a_in + width + step / 2 - eps) / step).astype(np.int64)
    count = np.clip(k1 - k0 + 1, 0, n)
    # each ring's coordinates in runs (a vertex and its offsets k0, k0 + 1, ... mod n): a direct
    # ring's vertices' in order, a point's ring its n offsets, GEOS's ring one run of its own
    # coordinates (src = k = -1); then, closing a ring of ours, its first coordinate again
    run = np.flatnonzero(direct[vid] & ~point[vid] & (count > 0))
    runs = [(run, k0[run] % n, count[run], vid[run])]
    if point.any():
        pv = np.flatnonzero(point[vid])
        runs.append((pv, np.zeros(len(pv), dtype=np.int64), np.full(len(pv), n, dtype=np.int64), vid[pv]))
    other = np.flatnonzero(~direct)
    hc, hid = np.empty((0, 2)), np.zeros(0, dtype=np.int64)
    if len(other):
        if callable(c):
            c, idx = c()
        pts = (c[:, None, :] + ring[None, :, :]).reshape(-1, 2)
        pid = np.repeat(idx, n)
        sel = np.isin(pid, other)
        hulls = shapely.convex_hull(shapely.multipoints(pts[sel], indices=np.searchsorted(other, pid[sel])))
        hulls = shapely.orient_polygons(hulls, exterior_cw=False)
        hc, hidx = shapely.get_coordinates(hulls, return_index=True)
        hid = other[hidx]
        nhull = np.bincount(hid, minlength=m)
        g = np.flatnonzero(nhull)
        runs.append((np.full(len(g), -1, dtype=np.int64), np.full(len(g), 2 * n, dtype=np.int64), nhull[g], g))
    return _runs(runs, m, v, ring, hc, len(runs) > 1, coords)


def _runs(runs: list, m: int, v: np.ndarray, ring: np.ndarray, hc: np.ndarray, mixed: bool, coords: bool) -> tuple:
    """:func:`_grown_vertices`'s rings from their runs ``(src, k0, count, ring id)`` (each
    kind's in ring order; ``src = -1``, ``k0 = 2 n``: GEOS's coordinates ``hc``)."""
    n = len(ring)
    src, k0, count, rid = (np.concatenate(p) for p in zip(*runs)) if mixed else runs[0]
    if mixed:
        by = np.argsort(rid, kind="stable")
        src, k0, count, rid = src[by], k0[by], count[by], rid[by]
    # a ring of ours closed by its first run's first coordinate again
    first = np.flatnonzero(np.r_[True, rid[1:] != rid[:-1]]) if len(rid) else np.zeros(0, dtype=np.int64)
    first = first[src[first] >= 0]
    last = _run_ends(rid, first) if mixed else np.r_[first[1:], len(rid)] if len(first) else first
    src, k0, rid = (np.insert(a, last, a[first]) for a in (src, k0, rid))
    count = np.insert(count, last, 1)
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(rid, weights=count, minlength=m).astype(np.int64), out=offsets[1:])
    total = int(offsets[-1])
    start = np.cumsum(count) - count
    table = np.r_[np.arange(n), np.arange(n), np.full(max(int(count.max()) if len(count) else 0, 1), -1)]
    k = table.take(np.repeat(k0 - start, count) + np.arange(total))
    src = np.repeat(src, count)
    if not len(hc):
        xy = np.take(v, src, axis=0) + np.take(ring, k, axis=0) if coords else None
    else:
        known = src >= 0
        xy = np.empty((total, 2))
        xy[known] = np.take(v, src[known], axis=0) + np.take(ring, k[known], axis=0)
        xy[~known] = hc
    return xy, offsets, (v, src, k, ring)


def _run_ends(rid: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Where the rings whose runs start at ``first`` end (their last run's index + 1)."""
    ends = np.r_[np.flatnonzero(rid[1:] != rid[:-1]) + 1, len(rid)]
    return ends[np.searchsorted(ends, first, side="right")]


def concat_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + k) for s, k in zip(starts, counts)])``, without a loop."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + (np.arange(total) - offs)


# --- space patterns: an event's stamp against a region ----------------------


def _check_region(region: Loc) -> None:
    if region.geom is None:
        raise ValueError("a region (place) must have a geometry; UNIVERSE is not a region")


def containment(region: Loc):
    """``(Q, boundary(Q), areal)``: the polygon a stamp must lie in to be
    certainly in a non-disc region.

    ``Q`` is the region itself when ``r = 0``, else an inscribed
    approximation of ``G ⊕ r`` within :data:`TOL_DECIDE` m (inside the true
    region, so "certainly" is never claimed wrongly). Shared by every engine.
    """

    def make():
        g = region.geom
        if region.r == 0 and shapely.get_type_id(g) == 7:  # a collection: merge its parts
            g = shapely.union_all(shapely.get_parts(g))
        q = g if region.r == 0 else minkowski(g, region.r, TOL_DECIDE, outer=False)
        tid = shapely.get_type_id(q)
        if tid == 7:
            raise ValueError("a region mixing polygons with lines or points is not supported; split it into places")
        if not shapely.is_valid(q):
            raise ValueError(f"region geometry is not valid: {shapely.is_valid_reason(q)}")
        shapely.prepare(q)
        b = shapely.boundary(q)
        return q, b, tid in (_POLYGON, _MULTIPOLYGON)

    return region._memoised("containment", make)


def _max_distance(cx: float, cy: float, coords: np.ndarray) -> float:
    # The farthest point of a polygon or line from a point is a vertex.
    dx = coords[:, 0] - cx
    dy = coords[:, 1] - cy
    return float(np.sqrt(dx * dx + dy * dy).max())


def possibly_in(loc: Loc, region: Loc) -> bool:
    """Whether a stamp meets a region (``at P``, ``in circle(...)``): overlap.

    Examples
    --------
    >>> place = Loc.disc(0, 0, 200)        # circle(lon, lat, 200 m)
    >>> possibly_in(Loc.disc(210, 0, 15), place)
    True
    >>> possibly_in(UNIVERSE, place)
    True
    """
    _check_region(region)
    return overlap(loc, region)


def certainly_in(loc: Loc, region: Loc) -> bool:
    """Whether the whole stamp lies inside a region (closed sets).

    Exact for a disc region (centre ``c``, radius ``R``):
    ``max dist(c, G) + r <= R``, and for a polygon region ``P`` with
    ``R = 0``: ``G`` covered by ``P`` and ``dist(G, boundary(P)) >= r``.
    A region grown from a polygon or line is replaced by a polygon inside it
    within :data:`TOL_DECIDE` m. UNIVERSE is certainly in nothing.

    Examples
    --------
    >>> place = Loc.disc(0, 0, 200)
    >>> certainly_in(Loc.disc(185, 0, 15), place), certainly_in(Loc.disc(186, 0, 15), place)
    (True, False)
    >>> from shapely import box
    >>> field = Loc.of(box(0, 0, 100, 100))
    >>> certainly_in(Loc.disc(15, 50, 15), field), certainly_in(Loc.disc(14, 50, 15), field)
    (True, False)
    >>> certainly_in(UNIVERSE, field)
    False
    """
    _check_region(region)
    if loc.geom is None:
        return False
    cxy = region._xy
    if cxy is not None:
        if loc._xy is not None:
            room = region.r - loc.r
            dx = loc._xy[0] - cxy[0]
            dy = loc._xy[1] - cxy[1]
            return room >= 0 and dx * dx + dy * dy <= room * room
        return _max_distance(cxy[0], cxy[1], _coords(loc)) + loc.r <= region.r
    q, boundary, areal = containment(region)
    if not shapely.covered_by(loc.geom, q):
        return False
    if loc.r == 0:
        return True
    return areal and float(shapely.distance(loc.geom, boundary)) >= loc.r


# --- the same tests over many events at once --------------------------------


def _classify(xs, ys, geoms, rs):
    """Normalise mixed rows to ``(xs, ys, geoms, rs, disc, unknown)``.

    A row is a disc when it has no geometry (then ``xs, ys`` hold its centre)
    or its geometry is a point; unknown (UNIVERSE) when its geometry is empty
    or it has no finite centre.
    """
    rs = np.asarray(rs, dtype=float)
    n = rs.shape[0]
    xs = np.full(n, np.nan) if xs is None else np.array(xs, dtype=float)
    ys = np.full(n, np.nan) if ys is None else np.array(ys, dtype=float)
    if not (xs.shape == ys.shape == rs.shape):
        raise ValueError("xs, ys and rs must have the same length")
    if not np.all((rs >= 0) & np.isfinite(rs)):
        raise ValueError("radii must be finite and >= 0")
    if geoms is None:                      # discs only: no geometry to look at
        disc = np.isfinite(xs) & np.isfinite(ys)
        return xs, ys, None, rs, disc, ~disc
    geoms = np.asarray(geoms, dtype=object)
    if geoms.shape != rs.shape:
        raise ValueError("geoms and rs must have the same length")
    given = ~shapely.is_missing(geoms)
    has = given & ~shapely.is_empty(geoms)
    pt = has & (shapely.get_type_id(geoms) == _POINT)
    xs[pt] = shapely.get_x(geoms[pt])
    ys[pt] = shapely.get_y(geoms[pt])
    other = has & ~pt
    disc = (pt | ~given) & np.isfinite(xs) & np.isfinite(ys)
    unknown = ~other & ~disc  # as Loc.of: an empty geometry, or no finite position
    return xs, ys, geoms, rs, disc, unknown


def _boxes(xs, ys, geoms, disc):
    """Bounding boxes ``(n, 4)`` of each row's ``G`` (``geoms`` None: discs only)."""
    if geoms is None:
        return np.column_stack([xs, ys, xs, ys])
    b = shapely.bounds(geoms)
    b[disc] = np.column_stack([xs[disc], ys[disc], xs[disc], ys[disc]])
    return b


def relate_many(xs, ys, geoms, rs, region: Loc) -> tuple[np.ndarray, np.ndarray]:
    """``(possibly, certainly)`` for many stamps against one region.

    Row ``i`` is the stamp ``geoms[i] ⊕ rs[i]`` when ``geoms[i]`` is a
    geometry, else the disc ``(xs[i], ys[i]) ⊕ rs[i]``; a row with neither a
    finite centre nor a non-empty geometry is UNIVERSE. The answers equal
    :func:`possibly_in` and :func:`certainly_in` bit for bit: the same
    arithmetic and the same GEOS calls, only vectorised.

    Parameters
    ----------
    xs, ys : array_like of float or None
        Disc centres (NaN where absent); None if every row has a geometry.
    geoms : array_like of shapely.Geometry or None
        Geometries (None where absent); None if every row is a disc.
    rs : array_like of float
        Radii, ``>= 0``.
    region : Loc
        The region; not UNIVERSE.

    Examples
    --------
    >>> p, c = relate_many([0.0, 190.0, 400.0, float("nan")], [0.0] * 4, None,
    ...                    [15.0] * 4, Loc.disc(0, 0, 200))
    >>> p.tolist(), c.tolist()
    ([True, True, False, True], [True, False, False, False])
    """
    _check_region(region)
    xs, ys, geoms, rs, disc, unknown = _classify(xs, ys, geoms, rs)
    n = rs.shape[0]
    possibly = unknown.copy()
    certainly = np.zeros(n, dtype=bool)
    other = ~disc & ~unknown
    cxy, big_r = region._xy, region.r

    if cxy is not None:
        m = disc
        dx = xs[m] - cxy[0]
        dy = ys[m] - cxy[1]
        d2 = dx * dx + dy * dy
        s = rs[m] + big_r
        room = big_r - rs[m]
        possibly[m] = d2 <= s * s
        certainly[m] = (room >= 0) & (d2 <= room * room)
        if other.any():
            g = geoms[other]
            possibly[other] = shapely.distance(g, region.geom) <= rs[other] + big_r
            coords, idx = shapely.get_coordinates(g, return_index=True)
            ddx = coords[:, 0] - cxy[0]
            ddy = coords[:, 1] - cxy[1]
            far = np.full(g.shape[0], -np.inf)
            np.maximum.at(far, idx, np.sqrt(ddx * ddx + ddy * ddy))
            certainly[other] = far + rs[other] <= big_r
        return possibly, certainly

    # Skip rows whose box is clear of the region's box, and discs that the region's
    # parts' inner and outer discs decide: the exact tests below cost a GEOS call each.
    box = _boxes(xs, ys, geoms, disc)
    rx0, ry0, rx1, ry1 = shapely.bounds(region.geom)
    reach = rs + big_r + BOX_SLACK
    near = (~unknown & (box[:, 0] - reach <= rx1) & (box[:, 2] + reach >= rx0)
            & (box[:, 1] - reach <= ry1) & (box[:, 3] + reach >= ry0))
    q, boundary, areal = containment(region)
    qx0, qy0, qx1, qy1 = shapely.bounds(q)
    inside_box = (~unknown & (box[:, 0] >= qx0 - BOX_SLACK) & (box[:, 2] <= qx1 + BOX_SLACK)
                  & (box[:, 1] >= qy0 - BOX_SLACK) & (box[:, 3] <= qy1 + BOX_SLACK))
    meets, misses = _by_part_discs(xs, ys, rs + big_r, disc & near, _part_discs(region, "region", region.geom),
                                   room=False)
    possibly |= meets
    near &= ~(meets | misses)
    inside, outside = _by_part_discs(xs, ys, rs, disc & inside_box, _part_discs(region, "containment", q) if areal
                                     else None, room=True)
    certainly |= inside
    inside_box &= ~(inside | outside)
    g = np.full(n, None, dtype=object) if geoms is None else geoms.copy()
    make = disc & (near | inside_box)
    g[make] = shapely.points(xs[make], ys[make])
    possibly[near] = _distance_within(g[near], box[near], region.geom, rs[near] + big_r) <= rs[near] + big_r
    covered = np.zeros(n, dtype=bool)
    covered[inside_box] = shapely.covered_by(g[inside_box], q)
    certainly |= covered & (rs == 0)
    if areal:
        check = covered & (rs > 0)
        if check.any():
            certainly[check] = _distance_within(g[check], box[check], boundary, rs[check]) >= rs[check]
    return possibly, certainly


def _part_discs(region: Loc, key: str, geom):
    """``(cx, cy, inner, outer)`` for each polygon of ``geom`` (one of
    ``region``'s, memoised under ``key``): the disc of radius ``inner`` about
    ``(cx, cy)`` lies inside the polygon (-inf when the centre is not inside it)
    and the disc of radius ``outer`` contains it. None when ``geom`` is not
    polygonal or has more than :data:`PARTS_APART` parts."""

    def make():
        parts = shapely.get_parts(geom)
        tid = shapely.get_type_id(parts)
        if not len(parts) or len(parts) > PARTS_APART or not (tid == _POLYGON).all():
            return None
        b = shapely.bounds(parts)
        cx, cy = (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2
        coords, idx = shapely.get_coordinates(parts, return_index=True)
        outer = np.zeros(len(parts))
        np.maximum.at(outer, idx, np.hypot(coords[:, 0] - cx[idx], coords[:, 1] - cy[idx]))
        centres = shapely.points(cx, cy)
        inner = np.where(shapely.covered_by(centres, parts),
                         shapely.distance(centres, shapely.boundary(parts)), -np.inf)
        return cx, cy, inner, outer

    return region._memoised(f"part_discs_{key}", make)


def _by_part_discs(xs, ys, reach, rows, discs, room: bool) -> tuple[np.ndarray, np.ndarray]:
    """Discs ``(xs, ys) ⊕ reach`` (where ``rows``) that a region's parts'
    inner and outer discs (:func:`_part_discs`) decide, :data:`BOX_SLACK` away
    from the limit so that GEOS's exact test could not answer otherwise:
    ``(yes, no)``. ``room=False`` asks whether the disc meets the region: yes
    if it meets an inner disc, no if it misses every outer disc. ``room=True``
    asks whether it lies inside the region at ``reach`` or more from its
    boundary: yes if it lies so inside an inner disc, no if its centre is
    outside every outer disc (not covered)."""
    n = len(reach)
    yes, no = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    if discs is None or not rows.any():
        return yes, no
    at = np.flatnonzero(rows)
    x, y, r = xs[at], ys[at], reach[at]
    y_at, n_at = np.zeros(len(at), dtype=bool), np.ones(len(at), dtype=bool)
    for cx, cy, inner, outer in zip(*discs):
        d = np.hypot(x - cx, y - cy)
        if room:
            y_at |= d + r <= inner - BOX_SLACK
            n_at &= d >= outer + BOX_SLACK
        else:
            y_at |= d <= inner + r - BOX_SLACK
            n_at &= d >= outer + r + BOX_SLACK
    yes[at], no[at] = y_at, n_at
    return yes, no


#: A region of at most this many parts is measured part by part (:func:`_distance_within`).
PARTS_APART = 64


def _distance_within(g: np.ndarray, box: np.ndarray, region, reach: np.ndarray) -> np.ndarray:
    """``shapely.distance(g, region)`` wherever it is at most ``reach``, and a number
    above ``reach`` elsewhere: exactly what a test ``<= reach`` or ``>= reach`` of the
    distance needs (``box``: the rows' bounding boxes).

    GEOS measures a point's distance to a multi-part geometry as the least of the
    same point-to-segment distances over every part's segments, so the least of the
    distances to the parts is the same number. A part whose box is farther than
    ``reach`` (and :data:`BOX_SLACK`) from a row's box cannot be the nearest one
    when the distance is within ``reach``: only the near parts are measured, each
    against the rows near it. A place set of three stations is measured against
    one station per bus rather than against all three, most buses against none."""
    parts = shapely.get_parts(region) if shapely.get_num_geometries(region) > 1 else None
    if parts is None or len(parts) > PARTS_APART or not len(g):
        return shapely.distance(g, region)
    out = np.full(len(g), np.inf)
    slack = reach + BOX_SLACK
    for part, (x0, y0, x1, y1) in zip(parts, shapely.bounds(parts)):
        near = ((box[:, 0] - slack <= x1) & (box[:, 2] + slack >= x0)
                & (box[:, 1] - slack <= y1) & (box[:, 3] + slack >= y0))
        if near.any():
            out[near] = np.fmin(out[near], shapely.distance(g[near], part))
    return out


def relate_discs(loc: Loc, xs, ys, rs, points=None) -> tuple[np.ndarray, np.ndarray]:
    """``(possibly, certainly)`` for one stamp against many disc regions ``(xs[i], ys[i]) ⊕
    rs[i]`` (the other way round from :func:`relate_many`: a composite's hull against the
    circle areas of many subscriptions), equal to :func:`possibly_in` and
    :func:`certainly_in` bit for bit: the same arithmetic, vectorised. ``points``: the
    centres as shapely points already made (the discs' own ``geom``), if there are.

    Examples
    --------
    >>> p, c = relate_discs(Loc.disc(0, 0, 15), [0.0, 190.0, 400.0], [0.0] * 3, [200.0] * 3)
    >>> p.tolist(), c.tolist()
    ([True, True, False], [True, False, False])
    """
    xs, ys, rs = (np.asarray(a, dtype=float).reshape(-1) for a in (xs, ys, rs))
    n = xs.shape[0]
    if loc.geom is None:
        return np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
    if loc._xy is not None:
        dx = loc._xy[0] - xs
        dy = loc._xy[1] - ys
        d2 = dx * dx + dy * dy
        s = loc.r + rs
        room = rs - loc.r
        return d2 <= s * s, (room >= 0) & (d2 <= room * room)
    pts = shapely.points(xs, ys) if points is None else np.asarray(points, dtype=object)
    possibly = shapely.distance(loc.geom, pts) <= loc.r + rs
    c = _coords(loc)
    ddx = c[None, :, 0] - xs[:, None]
    ddy = c[None, :, 1] - ys[:, None]
    far = np.sqrt(ddx * ddx + ddy * ddy).max(axis=1)
    return possibly, far + loc.r <= rs


def overlap_many(loc: Loc, regions) -> np.ndarray:
    """:func:`possibly_in` of one stamp in each of many regions (a composite's hull against
    the polygon areas of many subscriptions), bit for bit: the same distances, one call.

    Examples
    --------
    >>> from shapely import box
    >>> overlap_many(Loc.disc(0, 0, 15), [Loc.of(box(10, 0, 20, 5)), Loc.of(box(16, 0, 20, 5)),
    ...                                   Loc.disc(40, 0, 25)]).tolist()
    [True, False, True]
    """
    for region in regions:
        _check_region(region)
    n = len(regions)
    if loc.geom is None:
        return np.ones(n, dtype=bool)
    out = np.empty(n, dtype=bool)
    axy = loc._xy
    far = []
    for i, region in enumerate(regions):
        bxy = region._xy
        if axy is not None and bxy is not None:     # two discs: overlap's arithmetic
            dx = axy[0] - bxy[0]
            dy = axy[1] - bxy[1]
            s = loc.r + region.r
            out[i] = dx * dx + dy * dy <= s * s
        else:
            far.append(i)
    if far:
        geoms = np.array([regions[i].geom for i in far], dtype=object)
        rs = np.array([loc.r + regions[i].r for i in far], dtype=float)
        out[far] = shapely.distance(loc.geom, geoms) <= rs
    return out


def possibly_in_many(xs, ys, rs, region: Loc) -> np.ndarray:
    """:func:`possibly_in` for many discs ``(xs[i], ys[i]) ⊕ rs[i]`` (NaN: UNIVERSE).

    Examples
    --------
    >>> possibly_in_many([0.0, 300.0], [0.0, 0.0], [15.0, 15.0], Loc.disc(0, 0, 200)).tolist()
    [True, False]
    """
    return relate_many(xs, ys, None, rs, region)[0]


def certainly_in_many(xs, ys, rs, region: Loc) -> np.ndarray:
    """:func:`certainly_in` for many discs ``(xs[i], ys[i]) ⊕ rs[i]`` (NaN: UNIVERSE)."""
    return relate_many(xs, ys, None, rs, region)[1]


def possibly_in_many_geoms(geoms, rs, region: Loc) -> np.ndarray:
    """:func:`possibly_in` for many stamps ``geoms[i] ⊕ rs[i]`` (None/empty: UNIVERSE)."""
    return relate_many(None, None, geoms, rs, region)[0]


def certainly_in_many_geoms(geoms, rs, region: Loc) -> np.ndarray:
    """:func:`certainly_in` for many stamps ``geoms[i] ⊕ rs[i]`` (None/empty: UNIVERSE)."""
    return relate_many(None, None, geoms, rs, region)[1]

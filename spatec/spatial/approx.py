"""Polygonal approximations of discs and of Minkowski sums, with bounded error.

SPEC §1 allows a polygon in place of a disc only where it cannot change a
result by more than 0.1 m, so every approximation here is sized from its
radius and a tolerance, and says on which side of the true shape it lies:

- an *inner* n-gon has its vertices on the circle (it is inscribed): it lies
  inside the disc and its edges are at most ``R (1 - cos(pi/n))`` inside;
- an *outer* n-gon has its edges tangent to the circle (circumscribed): it
  contains the disc and its vertices are ``R (1/cos(pi/n) - 1)`` outside.

GEOS's own ``buffer`` is not used where the error must be bounded: it
simplifies its input by up to 1 % of the buffer distance (JTS's default
``simplifyFactor``), which for a 300 m buffer can move the result by 3 m.
:func:`minkowski` builds ``G ⊕ r`` instead as the union of ``G``, one exact
rectangle per edge of ``G`` and one n-gon per vertex, so only the vertex
discs are approximated.
"""
from __future__ import annotations

import math

import numpy as np
import shapely

__all__ = ["disc_offsets", "minkowski", "ngon_sides"]

_MIN_SIDES = 8


def ngon_sides(radius: float, tol: float, outer: bool) -> int:
    """Return the fewest sides of an n-gon within ``tol`` of a circle.

    Parameters
    ----------
    radius : float
        Circle radius, metres.
    tol : float
        Largest allowed distance between the n-gon's boundary and the circle.
    outer : bool
        Circumscribed (True) or inscribed (False) n-gon.

    Examples
    --------
    >>> ngon_sides(15.0, 0.01, outer=True)
    88
    >>> ngon_sides(300.0, 0.01, outer=False)
    388
    >>> ngon_sides(0.001, 0.01, outer=True)
    8
    """
    if radius <= tol:
        return _MIN_SIDES

    def error(n: int) -> float:
        c = math.cos(math.pi / n)
        return radius * (1.0 / c - 1.0) if outer else radius * (1.0 - c)

    ratio = radius / (radius + tol) if outer else 1.0 - tol / radius
    n = max(_MIN_SIDES, math.ceil(math.pi / math.acos(ratio)))
    while error(n) > tol:  # guard the closed form against rounding
        n += 1
    # A multiple of 4 keeps the n-gon symmetric about both axes, so symmetric
    # stamps keep their exact centroid.
    return -(-n // 4) * 4


def disc_offsets(radius: float, n: int, outer: bool) -> np.ndarray:
    """Vertex offsets ``(n, 2)`` of an n-gon around the origin.

    The first vertex is on the positive x axis, so the same disc always gives
    the same polygon (output files must be deterministic).

    Examples
    --------
    >>> disc_offsets(1.0, 4, outer=False).round(12).tolist()
    [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [-0.0, -1.0]]
    """
    k = np.arange(n)
    a = 2.0 * math.pi * k / n
    rr = radius / math.cos(math.pi / n) if outer else radius
    return np.column_stack([rr * np.cos(a), rr * np.sin(a)])


def _line_segments(geom) -> np.ndarray:
    """Edges of the polygons' rings and of the lines in ``geom``."""
    segs = []
    for part in shapely.get_parts(geom):
        tid = shapely.get_type_id(part)
        if tid == 3:  # Polygon: its rings
            rings = [part.exterior, *part.interiors]
        elif tid in (1, 2):  # LineString, LinearRing
            rings = [part]
        else:
            continue
        for ring in rings:
            c = shapely.get_coordinates(ring)
            if len(c) >= 2:
                segs.append(np.stack([c[:-1], c[1:]], axis=1))
    return np.concatenate(segs) if segs else np.empty((0, 2, 2))


def minkowski(geom, r: float, tol: float, outer: bool):
    """Approximate ``geom ⊕ disc(r)`` by a polygon within ``tol`` of it.

    Parameters
    ----------
    geom : shapely.Geometry
        Any non-empty geometry (collections are flattened).
    r : float
        Disc radius, ``>= 0``; 0 returns ``geom`` unchanged.
    tol : float
        Hausdorff bound between the result and the true sum.
    outer : bool
        True: the result contains the true sum. False: it lies inside it.

    Returns
    -------
    shapely.Polygon or shapely.MultiPolygon

    Examples
    --------
    >>> from shapely import Polygon
    >>> sq = Polygon([(0, 0), (10, 0), (10, 10), (0, 10)])
    >>> inner = minkowski(sq, 1.0, 0.001, outer=False)
    >>> outer = minkowski(sq, 1.0, 0.001, outer=True)
    >>> exact = 100 + 40 * 1.0 + math.pi
    >>> inner.area <= exact <= outer.area, round(outer.area - inner.area, 3)
    (True, 0.006)
    """
    if r == 0:
        return geom
    parts = shapely.get_parts(geom)
    while np.any(shapely.get_type_id(parts) >= 4):  # flatten multi-parts and collections
        parts = shapely.get_parts(parts)
    n = ngon_sides(r, tol, outer)
    ring = disc_offsets(r, n, outer)
    verts = np.unique(shapely.get_coordinates(parts), axis=0)
    pieces = [parts[shapely.get_type_id(parts) == 3]]
    pieces.append(shapely.polygons(verts[:, None, :] + ring[None, :, :]))
    segs = _line_segments(parts)
    if len(segs):
        d = segs[:, 1] - segs[:, 0]
        length = np.hypot(d[:, 0], d[:, 1])
        keep = length > 0
        segs, d, length = segs[keep], d[keep], length[keep]
        nrm = np.column_stack([-d[:, 1], d[:, 0]]) / length[:, None] * r
        a, b = segs[:, 0], segs[:, 1]
        quads = np.stack([a + nrm, b + nrm, b - nrm, a - nrm], axis=1)
        pieces.append(shapely.polygons(quads))
    return shapely.union_all(np.concatenate(pieces))

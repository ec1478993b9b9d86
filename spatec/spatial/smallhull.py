"""Convex hulls of three or four points made in numpy, vertex for vertex as GEOS
makes them, without a geometry each.

GEOS's convex hull (``ConvexHull``: a Graham scan) of a few points in general
position is the polygon of the hull's vertices starting at the lowest point
(least y, then least x) and going clockwise; the points inside are left out.
When no three of the points are collinear that is decided by signs of
orientations alone, and a sign computed in doubles is the exact sign when the
determinant is clear of its rounding error (the same filter as GEOS's
``orientationIndexFilter``, whose bound this module uses). So for such points
this module's polygon is GEOS's, coordinate for coordinate; rows it is not sure
of (a repeated point, three collinear or nearly so, a sign inside the filter's
bound) are left to GEOS by the caller (:func:`hull_rings`'s ``sure``).

For Stuck's 240,000 windows of four fixes a bus-day, GEOS's hulls (a line
string built per window, its hull, its coordinates read back) took 2 of the
phrase's 12 s of matching; this takes a few hundredths.
"""
from __future__ import annotations

import numpy as np

__all__ = ["SMALL", "hull_rings"]

#: How many points a hull is made of here.
SMALL = (3, 4)
#: GEOS's ``DP_SAFE_EPSILON``: an orientation's determinant larger than this times
#: the sum of its two products' magnitudes has the exact determinant's sign.
SAFE_EPSILON = 1e-15


def _orientation(ax, ay, bx, by, cx, cy) -> np.ndarray:
    """Sign of the turn ``a -> b -> c`` (1 counter-clockwise, -1 clockwise) where it
    is sure, 0 where it is not (collinear, or too close to it to tell in doubles)."""
    left = (ax - cx) * (by - cy)
    right = (ay - cy) * (bx - cx)
    det = left - right
    sign = np.sign(det).astype(np.int8)
    sign[np.abs(det) <= SAFE_EPSILON * (np.abs(left) + np.abs(right))] = 0
    return sign


def _lowest(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per column of ``x, y`` (shape ``(k, n)``) the first row of least ``y``, then least
    ``x``: ``np.lexsort((x, y), axis=0)[0]`` (a stable sort's first) without sorting."""
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return np.lexsort((x, y), axis=0)[0]
    best = np.zeros(x.shape[1], dtype=np.int64)
    bx, by = x[0].copy(), y[0].copy()
    for j in range(1, x.shape[0]):
        better = (y[j] < by) | ((y[j] == by) & (x[j] < bx))
        best[better] = j
        bx[better], by[better] = x[j][better], y[j][better]
    return best


def hull_rings(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The convex hulls of ``n`` sets of ``k`` points (``x``, ``y``: shape ``(k, n)``,
    ``k`` in :data:`SMALL`): ``(vertices, count, sure)``, ``vertices[i, :count[i]]``
    the indices (``0 .. k-1``) of set ``i``'s hull vertices in GEOS's order (its
    shell less the closing coordinate), ``sure[i]`` whether that is certain. Sets not
    ``sure`` have arbitrary entries: their hulls are GEOS's to make."""
    k, n = x.shape
    if k not in SMALL:
        raise ValueError(f"hull_rings makes hulls of {SMALL} points, not {k}")
    cols = np.arange(n)
    start = _lowest(x, y)                                 # the lowest point, then the leftmost
    rest = np.array([[j for j in range(k) if j != i] for i in range(k)], dtype=np.int64)[start].T   # (k - 1, n)
    ox, oy = x[start, cols], y[start, cols]
    qx, qy = x[rest, cols], y[rest, cols]
    m = k - 1
    sure = np.ones(n, dtype=bool)
    # the others by their angle about the start (all within [0, pi) of it): a rank each
    rank = np.zeros((m, n), dtype=np.int64)
    for i in range(m):
        for j in range(i + 1, m):
            s = _orientation(ox, oy, qx[i], qy[i], qx[j], qy[j])
            sure &= s != 0
            rank[j] += s > 0
            rank[i] += s < 0
    if m == 3:
        sure &= _orientation(qx[0], qy[0], qx[1], qy[1], qx[2], qy[2]) != 0
    # where sure, the ranks are 0 .. m-1: each point put at its rank (elsewhere any index)
    order = np.zeros((m, n), dtype=np.int64)
    order[rank, cols] = np.arange(m)[:, None]
    ccw = rest[order, cols]                               # counter-clockwise from the start
    vertices = np.full((n, k), -1, dtype=np.int64)
    vertices[:, 0] = start
    if k == 3:
        vertices[:, 1], vertices[:, 2] = ccw[1], ccw[0]
        return vertices, np.full(n, 3, dtype=np.int64), sure
    a, b, c = ccw
    # the middle one is a vertex when a -> b -> c turns left; clockwise: start, c, (b), a
    middle = _orientation(x[a, cols], y[a, cols], x[b, cols], y[b, cols], x[c, cols], y[c, cols])
    sure &= middle != 0
    inner = middle > 0
    vertices[:, 1] = c
    vertices[:, 2] = np.where(inner, b, a)
    vertices[:, 3] = np.where(inner, a, -1)
    return vertices, np.where(inner, 4, 3), sure

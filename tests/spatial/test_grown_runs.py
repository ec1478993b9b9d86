"""stamps._grown_vertices's rings built from runs (a vertex and its consecutive offsets)
give, number for number, the rings as first built (each coordinate put in its place)."""
from __future__ import annotations

import numpy as np
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.sinks.encoding import wkt_ring
from spatec.spatial import stamps as S


def _grown_vertices_before(v: np.ndarray, vid: np.ndarray, point: np.ndarray, line: np.ndarray, poly: np.ndarray,
                    ring: np.ndarray, c: np.ndarray, idx: np.ndarray) -> tuple:
    """:func:`grown_convex_parts` from the geometries' vertices ``v`` (their ids
    ``vid``, in order) and kinds (a point, a two-point line, a polygon of its
    shell's vertices, or other); ``c, idx``: every coordinate and its id, of
    which the other geometries' hulls are made."""
    m, n = len(point), len(ring)
    nv = np.bincount(vid, minlength=m)
    vfirst = np.repeat(np.r_[0, np.cumsum(nv)[:-1]], nv)
    pos = np.arange(len(v)) - vfirst
    nvr = np.repeat(nv, nv)
    # counter-clockwise: a clockwise ring is read backwards
    rel = v - v[vfirst]                                  # exact enough for nearby points
    reln = rel[vfirst + (pos + 1) % nvr]
    cross = rel[:, 0] * reln[:, 1] - reln[:, 0] * rel[:, 1]
    area = np.bincount(vid, weights=cross, minlength=m)
    sure = np.abs(area) > 1e-9 * np.bincount(vid, weights=np.abs(cross), minlength=m)
    ccw = np.where(poly, area > 0, True)
    order = np.where(ccw[vid], np.arange(len(v)), vfirst + (nvr - 1 - pos))
    v = v[order]
    e = v[vfirst + (pos + 1) % nvr] - v                  # each vertex's outgoing edge
    ein = e[vfirst + (pos - 1) % nvr]
    a_in = np.arctan2(-ein[:, 0], ein[:, 1])             # outward normals (counter-clockwise ring)
    a_out = np.arctan2(-e[:, 0], e[:, 1])
    width = np.mod(a_out - a_in, 2 * np.pi)
    width[width > 2 * np.pi - 1e-12] = 0.0               # a vertex on a straight edge
    total = np.bincount(vid, weights=width, minlength=m)
    bad = np.bincount(vid, weights=((width > np.pi + 1e-9) | ~(np.hypot(e[:, 0], e[:, 1]) > 0)).astype(float),
                      minlength=m) > 0
    direct = point | ((line | (poly & sure)) & ~bad & (np.abs(total - 2 * np.pi) < 1e-6))
    # offset k's normal cone is [theta_k - step/2, theta_k + step/2]; keep the k whose cone
    # overlaps the vertex's [a_in, a_in + width] by more than eps (a cone that only touches
    # adds a point on a straight edge)
    step, eps = 2 * np.pi / n, 1e-9
    k0 = np.ceil((a_in - step / 2 + eps) / step).astype(np.int64)
    k1 = np.floor((a_in + width + step / 2 - eps) / step).astype(np.int64)
    count = np.clip(k1 - k0 + 1, 0, n)
    dv = direct[vid] & ~point[vid]
    k0, count = k0[dv], count[dv]
    which = np.repeat(np.flatnonzero(dv), count)
    ks = (np.repeat(k0 - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))) % n   # k0, k0 + 1, ...
    # each ring's coordinates as (vertex, offset) and their place in the ring: a direct ring's
    # vertices' offsets in order (rings are in id order), a point's ring its n offsets
    rid = vid[which]
    nbody = np.bincount(rid, minlength=m)
    pieces = [(which, ks, rid, np.arange(len(which)) - np.r_[0, np.cumsum(nbody)[:-1]][rid])]
    if point.any():
        pv = np.flatnonzero(point[vid])
        pk = np.tile(np.arange(n), len(pv))
        pieces.append((np.repeat(pv, n), pk, np.repeat(vid[pv], n), pk))
        nbody[vid[pv]] = n
    other = np.flatnonzero(~direct)
    hc, hid = np.empty((0, 2)), np.zeros(0, dtype=np.int64)
    if len(other):
        pts = (c[:, None, :] + ring[None, :, :]).reshape(-1, 2)
        pid = np.repeat(idx, n)
        sel = np.isin(pid, other)
        hulls = shapely.convex_hull(shapely.multipoints(pts[sel], indices=np.searchsorted(other, pid[sel])))
        hulls = shapely.orient_polygons(hulls, exterior_cw=False)
        hc, hidx = shapely.get_coordinates(hulls, return_index=True)
        hid = other[hidx]
    # each ring: a direct ring's coordinates then its first again (closing it), or GEOS's ring
    nhull = np.bincount(hid, minlength=m)
    offsets = np.r_[0, np.cumsum(nbody + (nbody > 0) + nhull)].astype(np.int64)
    src = np.empty(offsets[-1], dtype=np.int64)
    k = np.empty(offsets[-1], dtype=np.int64)
    for p_src, p_k, p_rid, p_rank in pieces:
        put = offsets[:-1][p_rid] + p_rank
        src[put], k[put] = p_src, p_k
    closed = np.flatnonzero(nbody > 0)
    src[offsets[closed + 1] - 1], k[offsets[closed + 1] - 1] = src[offsets[closed]], k[offsets[closed]]
    if not len(hid):
        coords = np.take(v, src, axis=0) + np.take(ring, k, axis=0)
    else:
        hat = np.arange(len(hid)) + (offsets[:-1] - np.r_[0, np.cumsum(nhull)[:-1]])[hid]
        src[hat], k[hat] = -1, -1
        known = src >= 0
        coords = np.empty((offsets[-1], 2))
        coords[known] = np.take(v, src[known], axis=0) + np.take(ring, k[known], axis=0)
        coords[hat] = hc
    return coords, offsets, (v, src, k, ring)


_coord = st.floats(-40, 40, allow_nan=False).map(lambda v: 500_000.0 + v)
_points = st.lists(st.tuples(_coord, _coord), min_size=1, max_size=6)


@st.composite
def _geometry(draw):
    pts = np.array(draw(_points))
    kind = draw(st.sampled_from(["hull", "flipped", "line", "points", "holed"]))
    if kind == "line":
        return shapely.LineString(np.vstack([pts[:1], pts[-1:] + draw(st.sampled_from([0.0, 3.0]))]))
    if kind == "points":
        return shapely.multipoints(pts)
    g = shapely.convex_hull(shapely.multipoints(pts))
    if kind == "flipped" and shapely.get_type_id(g) == 3:
        g = shapely.Polygon(shapely.get_coordinates(g)[::-1])
    if kind == "holed":
        g = shapely.Polygon([(500_000.0 - 30, -30), (500_030.0, -30), (500_030.0, 30), (500_000.0 - 30, 30)],
                            [[(500_000.0 - 1, -1), (500_001.0, -1), (500_001.0, 1)]])
    return g


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_geometry(), max_size=8), st.sampled_from([0.5, 15.0, 40.0]))
def test_rings_from_runs_are_the_rings_as_first_built(geoms, r):
    geoms = np.array(geoms, dtype=object)
    ring = wkt_ring(r)
    if not len(geoms):
        return
    parts = S._vertices(geoms)
    got = S._grown_vertices(*parts[:5], ring, *parts[5:])
    want = _grown_vertices_before(*parts[:5], ring, *parts[5:])
    assert got[0].shape == want[0].shape and got[0].tobytes() == want[0].tobytes()
    for a, b in zip((got[1], *got[2][:3]), (want[1], *want[2][:3])):
        assert a.dtype == b.dtype and a.shape == b.shape and (a == b).all()
    # the coordinates of the geometries GEOS grows given as a function (called only for them)
    late = S._grown_vertices(*parts[:5], ring, lambda: parts[5:], None)
    assert late[0].tobytes() == got[0].tobytes() and (late[2][1] == got[2][1]).all()
    # without the coordinates (where every ring is ours): the same rest
    lazy = S._grown_vertices(*parts[:5], ring, *parts[5:], coords=False)
    if (got[2][1] >= 0).all():
        assert lazy[0] is None
    else:
        assert lazy[0].tobytes() == got[0].tobytes()
    for a, b in zip((lazy[1], *lazy[2][:3]), (got[1], *got[2][:3])):
        assert a.shape == b.shape and (a == b).all()

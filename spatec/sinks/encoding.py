"""Output encoding: composites' location stamps and values as the text the sinks write.

This module owns how a stamp becomes its output text: WKT in WGS84 lon/lat
(:func:`to_lonlat_wkt`; many at once, :func:`to_lonlat_wkts` and
:func:`lonlat_wkts`), the hulls of composites (:func:`hulls_wkt`) and of the fast
path's matches computed for all at once (:func:`matches_hulls_wkt`: texts, an Arrow
string array, or a hull column of their WKB for GeoParquet). Every way gives a
stamp the same text, byte for byte, whatever it is written with. And values as JSON
text: which columns of text the writers put between quotes as they are
(:func:`json_verbatim`).

The output rows (:mod:`spatec.runtime.rows`, :mod:`spatec.runtime.batch`), the live
runners and the JSON lines writer (:mod:`spatec.sinks.files`) call it; evaluation
never does (:mod:`spatec.spatial`, :mod:`spatec.vector` and :mod:`spatec.events` do
not import the sinks). What it builds on stays below: the geometry it writes (hulls,
grown polygons) is :mod:`spatec.spatial.stamps`', GEOS's WKT from arrays
:mod:`spatec.spatial.wkt`'s, and the test of text JSON writes as it is
(:func:`~spatec.events.columns.json_plain_text`) is shared with the composite ids.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import shapely

from spatec.automata.machine import Composite
from spatec.events.columns import json_plain_text
from spatec.spatial import stamps as S
from spatec.spatial.approx import disc_offsets, ngon_sides
from spatec.spatial.crs import Projector
from spatec.spatial.hullcol import HULL, text_hulls
from spatec.spatial.wkt import polygon_wkts
from spatec.vector.fastpath import Matches

#: Error bound, metres, of the polygon written by :func:`to_lonlat_wkt`, before
#: unprojection (TOL_UNPROJECT) and rounding to 7 decimals of a degree (at
#: most 0.8 cm) are added.
TOL_WKT = 0.05
#: Longest edge, metres, of a polygon written in lon/lat: a straight UTM edge
#: bends in lon/lat space by about ``L**2 tan(lat) / 8 R_earth``: 6 mm here.
WKT_MAX_EDGE = 500.0
#: Error bound, metres, of the lon/lat of a written polygon's vertex
#: (:func:`_unproject_grown`), before rounding to 7 decimals.
TOL_UNPROJECT = 0.01
#: Largest offset, metres, from a centre for which a grown polygon's vertices
#: are unprojected from the centre's derivatives (error within TOL_UNPROJECT).
UNPROJECT_MAX_OFFSET = 100.0


# --------------------------------------------------------------------------- stamps as WKT in lon/lat

def to_lonlat_wkt(loc: S.Loc, projector) -> str | None:
    """WKT of a stamp in WGS84 lon/lat, for output files and maps.

    A point with ``r = 0`` stays a POINT; otherwise ``G ⊕ r`` becomes a
    polygon that contains the stamp and whose boundary is within 0.1 m of the
    true boundary (:data:`TOL_WKT`, the unprojection's :data:`TOL_UNPROJECT`
    and rounding to 7 decimals, about 1 cm). Edges are split to at most
    :data:`WKT_MAX_EDGE` metres so they stay straight after unprojection.
    The same stamp always gives the same text. UNIVERSE has no shape and
    gives ``None``.

    Examples
    --------
    >>> from spatec.spatial.crs import Projector
    >>> from spatec.spatial.stamps import Loc
    >>> p = Projector("EPSG:32631")
    >>> x, y = p.forward(0.1404, 52.1751)
    >>> to_lonlat_wkt(Loc.disc(x, y, 0.0), p)
    'POINT (0.1404 52.1751)'
    >>> to_lonlat_wkt(Loc.disc(x, y, 15.0), p).startswith("POLYGON ((0.1406")
    True
    """
    if loc.geom is None:
        return None
    if loc.r > 0 and (loc.xy is not None or S.is_convex(loc)):
        # as stamps.grown makes it, with where each vertex comes from (as the fast path's hulls)
        parts = S.grown_convex_parts(np.array([loc.geom], dtype=object), wkt_ring(loc.r))
        return lonlat_wkts(None, projector, coords=parts)[0]
    return lonlat_wkts(np.array([S.grown(loc, TOL_WKT)], dtype=object), projector)[0]


def to_lonlat_wkts(locs: list, projector) -> list:
    """:func:`to_lonlat_wkt` of many stamps, the same texts: those it grows as convex parts
    (discs, convex shapes) grown and written together, per radius — which way a polygon
    takes depends on it alone — and their convexity tested in one GEOS call."""
    out: list = [None] * len(locs)
    geoms = np.empty(len(locs), dtype=object)
    geoms[:] = [loc.geom for loc in locs]
    grow = [i for i, loc in enumerate(locs) if loc.geom is not None and loc.r > 0]
    groups: dict = {}
    for i, convex in zip(grow, S.are_convex([locs[i] for i in grow])):
        if convex:
            groups.setdefault(locs[i].r, []).append(i)
    for r, idx in groups.items():
        parts = S.grown_convex_parts(geoms[idx], wkt_ring(r))
        for i, text in zip(idx, lonlat_wkts(None, projector, coords=parts)):
            out[i] = text
    done = {i for idx in groups.values() for i in idx}
    for i, loc in enumerate(locs):
        if i not in done and loc.geom is not None:
            out[i] = to_lonlat_wkt(loc, projector)
    return out


@functools.lru_cache(maxsize=256)
def wkt_ring(radius: float) -> np.ndarray:
    """The circumscribed n-gon (offsets) of a disc written by :func:`to_lonlat_wkt` (shared: read-only)."""
    ring = disc_offsets(radius, ngon_sides(radius, TOL_WKT, outer=True), outer=True)
    ring.setflags(write=False)
    return ring


def lonlat_wkts(shapes: np.ndarray, projector, coords: tuple | None = None, arrow: bool = False):
    """The WKT in lon/lat of projected ``shapes`` (as :func:`to_lonlat_wkt`
    writes them): rings counter-clockwise, edges split to :data:`WKT_MAX_EDGE`,
    unprojected, 7 decimals.

    ``coords``, instead of ``shapes``: grown convex polygons as
    :func:`~spatec.spatial.stamps.grown_convex_parts` gives them (counter-clockwise already). Those
    with no edge to split are unprojected from their centres
    (:func:`_unproject_grown`) and written from their coordinates
    (:func:`~spatec.spatial.wkt.polygon_wkts`: GEOS's text, byte for byte),
    never built as polygons; the others take the way of ``shapes``. Which way
    a polygon takes depends on it alone, so a stamp gets the same text
    whatever it is written with. ``arrow``: the texts as an Arrow string array
    (:func:`~spatec.spatial.wkt.polygon_wkts`). Coordinates None (``coords=False`` of
    :func:`~spatec.spatial.stamps.grown_point_hulls`): computed only if a ring may not be small (:func:`_surely_small`)."""
    def unproject(xy):
        lon, lat = projector.inverse(xy[:, 0], xy[:, 1])
        return np.column_stack([lon, lat])

    def polygons(xy, offsets):
        return shapely.from_ragged_array(shapely.GeometryType.POLYGON, xy, (offsets, np.arange(len(offsets))))

    def split(shapes):
        shapes = shapely.segmentize(shapely.orient_polygons(shapes, exterior_cw=False), WKT_MAX_EDGE)
        return shapely.to_wkt(shapely.transform(shapes, unproject), rounding_precision=7, trim=True).tolist()

    def texts(values: list):
        if not arrow:
            return values
        return pa.array(values, pa.string())

    if coords is None:
        return texts(split(shapes))
    xy, offsets, (centres, src, k, ring) = coords
    if xy is None:
        if _surely_small(offsets, centres, src, ring):
            return polygon_wkts(_unproject_grown(None, src, k, centres, ring, projector), offsets, arrow=arrow)
        xy = _grown_xy(centres, src, k, ring)
    if not len(xy):                                                       # no polygon, or empty ones
        return texts(shapely.to_wkt(polygons(xy, offsets), rounding_precision=7, trim=True).tolist())
    lo = np.minimum.reduceat(xy, offsets[:-1])
    hi = np.maximum.reduceat(xy, offsets[:-1])
    small = np.hypot(*(hi - lo).T) < WKT_MAX_EDGE - 1.0              # no edge to split
    if small.all():
        return polygon_wkts(_unproject_grown(xy, src, k, centres, ring, projector), offsets, arrow=arrow)
    counts = np.diff(offsets)
    keep = np.repeat(small, counts)
    out = np.empty(len(small), dtype=object)
    out[~small] = split(polygons(xy[~keep], np.r_[0, np.cumsum(counts[~small])]))
    if small.any():
        lonlat = _unproject_grown(xy[keep], src[keep], k[keep], centres, ring, projector)
        out[small] = polygon_wkts(lonlat, np.r_[0, np.cumsum(counts[small])])
    return texts(out.tolist())


def _surely_small(offsets: np.ndarray, centres: np.ndarray, src: np.ndarray, ring: np.ndarray) -> bool:
    """Whether every grown ring (every coordinate ``centres[src] + ring[k]``, ``src >= 0``,
    each ring's centres a run of ``centres`` in order, as :func:`~spatec.spatial.stamps.grown_convex_parts` makes
    them) is certainly :func:`lonlat_wkts`'s small (``hypot`` of its extent below
    ``WKT_MAX_EDGE - 1``), from its centres' extent and the offsets': each coordinate,
    a sum rounded once, is within its rounding error of the exact sum."""
    m = len(offsets) - 1
    if not m or not len(centres) or (offsets[1:] <= offsets[:-1]).any():
        return False
    starts = src[offsets[:-1]]
    if (starts[1:] <= starts[:-1]).any():
        return False
    # (the centres from a ring's first to the next one's: its own, and maybe some it skips)
    ext = np.maximum.reduceat(centres, starts) - np.minimum.reduceat(centres, starts)
    ext += ring.max(axis=0) - ring.min(axis=0)
    margin = 1e-6 + 16 * float(np.spacing(np.abs(centres).max() + np.abs(ring).max()))
    ext += margin
    return bool((np.hypot(ext[:, 0], ext[:, 1]) < WKT_MAX_EDGE - 1.0 - margin).all())


def _grown_xy(centres: np.ndarray, src: np.ndarray, k: np.ndarray, ring: np.ndarray) -> np.ndarray:
    """The coordinates ``centres[src] + ring[k]`` (as :func:`~spatec.spatial.stamps.grown_convex_parts` computes them)."""
    return np.take(centres, src, axis=0) + np.take(ring, k, axis=0)


def _unproject_grown(xy: np.ndarray | None, src: np.ndarray, k: np.ndarray, centres: np.ndarray, ring: np.ndarray,
                     projector) -> np.ndarray:
    """lon/lat of the vertices ``xy = centres[src] + ring[k]`` of grown polygons.

    A vertex is its centre's lon/lat plus the offset mapped by the inverse
    projection's derivatives at the centre (forward differences over 1 m):
    three PROJ calls per centre rather than one per vertex (a grown hull has a
    few centres and ~45 vertices). The error is the second order term, in a
    Transverse Mercator projection mostly the meridians' convergence, about
    ``|R|**2 tan(lat) / 2 R_earth``: under :data:`TOL_UNPROJECT` (8.2 mm at
    84°) for offsets up to :data:`UNPROJECT_MAX_OFFSET` m within UTM's
    latitudes, |lat| <= 84°. Other vertices (no centre, larger rings, other
    projections, higher latitudes) are unprojected one by one. Every number is
    computed the same way whatever the batch (PROJ works point by point,
    numpy's arithmetic is exact IEEE), so a stamp's text does not depend on
    what it is written with. ``xy`` None: every vertex a centre plus an offset
    (:func:`_grown_xy`)."""
    near = src >= 0
    if not (near.any() and len(ring) and np.hypot(ring[:, 0], ring[:, 1]).max() <= UNPROJECT_MAX_OFFSET
            and getattr(projector, "is_transverse_mercator", False)):
        if xy is None:
            xy = _grown_xy(centres, src, k, ring)
        lon, lat = projector.inverse(xy[:, 0], xy[:, 1])
        return np.column_stack([lon, lat])
    distinct, back = _distinct_points(centres)
    cx, cy = distinct[:, 0], distinct[:, 1]
    lon, lat = projector.inverse(np.concatenate([cx, cx + 1.0, cx]), np.concatenate([cy, cy, cy + 1.0]))
    if back is not None:
        d = len(distinct)
        at = np.concatenate([back, back + d, back + 2 * d])
        lon, lat = lon.take(at), lat.take(at)
    c = len(centres)
    lon0, lat0 = lon[:c], lat[:c]
    near &= (np.abs(lat0) <= 84.0).take(src)               # (src -1 takes the last: not near anyway)
    every = near.all()
    s, kk = (src, k) if every else (src[near], k[near])
    rx, ry = np.ascontiguousarray(ring[:, 0]).take(kk), np.ascontiguousarray(ring[:, 1]).take(kk)
    near_lon = lon0.take(s) + ((lon[c:2 * c] - lon0).take(s) * rx + (lon[2 * c:] - lon0).take(s) * ry)
    near_lat = lat0.take(s) + ((lat[c:2 * c] - lat0).take(s) * rx + (lat[2 * c:] - lat0).take(s) * ry)
    if every:
        return np.column_stack([near_lon, near_lat])
    lonlat = np.empty((len(src), 2))
    lonlat[near, 0], lonlat[near, 1] = near_lon, near_lat
    far = xy[~near] if xy is not None else _grown_xy(centres, src[~near], k[~near], ring)
    lon, lat = projector.inverse(far[:, 0], far[:, 1])
    lonlat[~near, 0], lonlat[~near, 1] = lon, lat
    return lonlat


def _distinct_points(xy: np.ndarray) -> tuple:
    """``xy``'s distinct points and where each point is among them (None: all
    distinct, or not looked for). The centres of the grown hulls of
    overlapping composites repeat (a fix is a vertex of the hulls of every
    window it is in: 2.6 times in Stuck on the Cambridge hour), and PROJ, point by
    point, gives a repeated point the same lon/lat whether it is unprojected
    once or each time: fewer PROJ calls, the same numbers. Points are equal
    by value (a hash table, ``pd.factorize``), so points with a zero coordinate
    (0.0 and -0.0 are equal, their lon/lat may differ in sign) or one not
    finite (a missing value there) are not looked for."""
    if len(xy) < 2 or not (np.isfinite(xy) & (xy != 0)).all():
        return xy, None
    codes, uniques = pd.factorize(np.ascontiguousarray(xy, dtype=np.float64).view(np.complex128).ravel())
    if len(uniques) == len(xy):
        return xy, None
    return np.ascontiguousarray(uniques).view(np.float64).reshape(-1, 2), codes


# --------------------------------------------------------------------------- composites' hulls

class _Cols:
    """Disc centres and radii laid out for :func:`matches_hulls_wkt`."""

    def __init__(self, x, y, r):
        self.x, self.y, self.r = x, y, r
        self.disc = np.ones(len(x), dtype=bool)

    def centres(self, rows):
        return self.x[rows], self.y[rows], self.disc[rows]


class _Vars:
    def __init__(self, k: int):
        self.vars = tuple(str(i) for i in range(k))


def hulls_wkt(composites: Sequence[Composite], proj: Projector) -> list:
    """:func:`to_lonlat_wkt` of each composite's stamp (the hull of its
    events' stamps, in the order of ``events``). Composites of equal discs are done together,
    by the fast path's vectorised hulls; the others one by one."""
    out: list = [None] * len(composites)
    groups: dict = {}
    single = []
    for i, c in enumerate(composites):
        evs = c.events
        locs = [e.loc for e in evs]
        r = locs[0].r if locs else None
        if c._loc is not None or not locs or any(l.xy is None or l.r != r for l in locs):
            single.append(i)        # (a run's hull, a polygon: written together below)
            continue
        groups.setdefault((len(locs), r), []).append(i)
    for i, w in zip(single, to_lonlat_wkts([composites[i].loc for i in single], proj)):
        out[i] = w
    for (k, r), idx in groups.items():
        n = len(idx)
        xy = np.array([[composites[i].events[v].loc.xy for i in idx] for v in range(k)], dtype=float)
        cols = _Cols(xy[:, :, 0].reshape(-1), xy[:, :, 1].reshape(-1), np.full(k * n, r))
        rows = {str(v): np.arange(v * n, (v + 1) * n, dtype=np.int64) for v in range(k)}
        z = np.zeros(n, dtype=np.int64)
        for i, w in zip(idx, matches_hulls_wkt(Matches(_Vars(k), cols, rows, z, z), proj)):
            out[i] = w
    return out


# --------------------------------------------------------------------------- the fast path's matches' hulls

def matches_hulls_wkt(m: Matches, projector, chunk: int = 4096, arrow: bool | str = False):
    """:func:`to_lonlat_wkt` of every match's hull, in chunks of ``chunk`` matches
    (a grown hull is ~100 points): each chunk's arrays, a few MB, are then taken from and
    given back to malloc's heap, where chunks of 50,000 were mapped afresh and faulted in
    each time (Stuck's tasks: 7.0 -> 6.3 s of CPU for a bus-day, a third less kernel time).
    ``arrow``: the texts as one Arrow string array, no Python string each; ``"wkb"``: a
    hull column (:mod:`spatec.spatial.hullcol`) of their WKB, for GeoParquet."""
    out = []
    for a in range(0, len(m), chunk):
        part = Matches(m.fp, m.cols, {v: r[a:a + chunk] for v, r in m.rows.items()}, m.lo[a:a + chunk],
                       m.hi[a:a + chunk])
        got = _chunk_hulls_wkt(part, projector, arrow)
        out += [got] if arrow else got
    if arrow == "wkb":
        out = [g if g.type == HULL else text_hulls(g) for g in out]
        return _concat(out, HULL)
    if arrow:
        return _concat(out, pa.string())
    return out


def _concat(arrays: list, type_):
    """One Arrow array of ``arrays`` (all of ``type_``), empty if none."""
    return pa.concat_arrays(arrays) if arrays else pa.array([], type_)


def _chunk_hulls_wkt(m: Matches, projector, arrow: bool | str = False):
    """:func:`to_lonlat_wkt` of every match's hull, computed for all at once.

    The same GEOS, numpy and pyproj calls on the same coordinates as the
    scalar path (:func:`stamps.hull`, then :func:`stamps.grown_convex_parts`
    and :func:`lonlat_wkts`), so the same text; matches of stamps other
    than equal discs take the scalar path. Point sets are handed to GEOS's
    convex hull as line strings rather than multipoints: the hull reads only
    the coordinate sequence (so the result is the same), and a line string
    is one array where a multipoint is a geometry per point (60 times slower
    to build).
    """
    n = len(m)
    if n == 0:
        return [] if not arrow else _text([])
    cols = m.cols
    rows = [m.rows[v] for v in m.fp.vars]
    k = len(rows)
    every = np.concatenate(rows)
    ex, ey, edisc = cols.centres(every)
    if not edisc.all() or not np.all(cols.r[every] == cols.r[every[0]]):
        got = [to_lonlat_wkt(c.loc, projector) for c in m.composites()]
        return _text(got) if arrow else got
    r = float(cols.r[every[0]])
    ex, ey = ex.reshape(k, n), ey.reshape(k, n)
    if k == 2 and r > 0:
        # the grown hull of two discs, from their centres: no GEOS geometry made (Bunching)
        ring = wkt_ring(r)
        return lonlat_wkts(None, projector, coords=S.grown_segments(np.column_stack([ex[0], ey[0]]),
                                                                    np.column_stack([ex[1], ey[1]]), ring,
                                                                    coords=False),
                           arrow=arrow)
    if k > 2 and r > 0:
        # hulls of 3 or 4 centres made in numpy where GEOS's are certain (Stuck), GEOS's otherwise
        # (the grown coordinates left out: lonlat_wkts unprojects them from their centres)
        return lonlat_wkts(None, projector, arrow=arrow,
                           coords=S.grown_point_hulls(np.stack([ex, ey], axis=-1), wkt_ring(r), coords=False))
    if k == 1:
        hull = shapely.points(ex[0], ey[0])
    elif k == 2:
        # GEOS's hull of two points is the line between them, as given, or the point when
        # they are one: made so, without asking GEOS (Bunching: 1.6 -> 0.7 us a match)
        same = (ex[0] == ex[1]) & (ey[0] == ey[1])
        hull = np.empty(n, dtype=object)
        two = np.flatnonzero(~same)
        if len(two):
            xy = np.stack([ex[:, two].T, ey[:, two].T], axis=-1).reshape(-1, 2)
            hull[two] = shapely.from_ragged_array(shapely.GeometryType.LINESTRING, xy,
                                                  (np.arange(0, 2 * len(two) + 1, 2, dtype=np.int64),))
        if len(two) < n:
            hull[same] = shapely.points(ex[0][same], ey[0][same])
    else:
        coords = np.stack([ex, ey], axis=-1).transpose(1, 0, 2)
        hull = _hulls(coords.reshape(-1, 2), np.full(n, k))   # a point where every centre is the same
    if r == 0:
        return lonlat_wkts(hull, projector, arrow=arrow)
    return lonlat_wkts(None, projector, coords=S.grown_convex_parts(hull, wkt_ring(r)), arrow=arrow)


def _text(values: list):
    """Texts (or None) as an Arrow string array."""
    return pa.array(values, pa.string())


def _hulls(coords: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Convex hulls of consecutive runs of ``counts`` points (each at least 2)."""
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    lines = shapely.from_ragged_array(shapely.GeometryType.LINESTRING, np.ascontiguousarray(coords), (offsets,))
    return shapely.convex_hull(lines)


# --------------------------------------------------------------------------- values as JSON text

def json_verbatim(values: list) -> pa.Array | None:
    """``values`` as an Arrow string array when every one is a str that JSON writes as it
    is, in quotes (:func:`~spatec.events.columns.json_plain_text`: no quote, backslash or
    control character); else None. The JSON lines writer puts such a column between
    quotes as it is (:mod:`spatec.sinks.files`)."""
    if not values or set(map(type, values)) != {str}:
        return pa.array([], pa.string()) if not values else None
    arr = pa.array(values, pa.string())
    return arr if json_plain_text(arr) else None

"""Output encoding: composites' location stamps and values as the text the sinks write.

Owns the hulls in WGS84 lon/lat: a composite's stamp as WKT (:func:`hulls_wkt`, one
composite at a time or many), the fast path's matches' hulls computed for all at once
(:func:`matches_hulls_wkt`: a list of texts, an Arrow string array, or a hull column of
their WKB for GeoParquet). Every way gives a stamp the same text, byte for byte.
The writers (:mod:`spatec.sinks.files`), the output rows
(:mod:`spatec.runtime.rows`) and the runners call it; evaluation never does.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import shapely

from spatec.automata.machine import Composite
from spatec.spatial import stamps as S
from spatec.spatial.crs import Projector
from spatec.spatial.hullcol import HULL, text_hulls
from spatec.vector.fastpath import Matches


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
    """:func:`spatec.spatial.stamps.to_lonlat_wkt` of each composite's stamp (the hull of its
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
    for i, w in zip(single, S.to_lonlat_wkts([composites[i].loc for i in single], proj)):
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
    """:func:`stamps.to_lonlat_wkt` of every match's hull, in chunks of ``chunk`` matches
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
    """:func:`stamps.to_lonlat_wkt` of every match's hull, computed for all at once.

    The same GEOS, numpy and pyproj calls on the same coordinates as the
    scalar path (:func:`stamps.hull`, then :func:`stamps.grown_convex_parts`
    and :func:`stamps.lonlat_wkts`), so the same text; matches of stamps other
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
        got = [S.to_lonlat_wkt(c.loc, projector) for c in m.composites()]
        return _text(got) if arrow else got
    r = float(cols.r[every[0]])
    ex, ey = ex.reshape(k, n), ey.reshape(k, n)
    if k == 2 and r > 0:
        # the grown hull of two discs, from their centres: no GEOS geometry made (Bunching)
        ring = S.wkt_ring(r)
        return S.lonlat_wkts(None, projector, coords=S.grown_segments(np.column_stack([ex[0], ey[0]]),
                                                                      np.column_stack([ex[1], ey[1]]), ring,
                                                                      coords=False),
                             arrow=arrow)
    if k > 2 and r > 0:
        # hulls of 3 or 4 centres made in numpy where GEOS's are certain (Stuck), GEOS's otherwise
        # (the grown coordinates left out: lonlat_wkts unprojects them from their centres)
        return S.lonlat_wkts(None, projector, arrow=arrow,
                             coords=S.grown_point_hulls(np.stack([ex, ey], axis=-1), S.wkt_ring(r), coords=False))
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
        return S.lonlat_wkts(hull, projector, arrow=arrow)
    return S.lonlat_wkts(None, projector, coords=S.grown_convex_parts(hull, S.wkt_ring(r)), arrow=arrow)


def _text(values: list):
    """Texts (or None) as an Arrow string array."""
    return pa.array(values, pa.string())


def _hulls(coords: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Convex hulls of consecutive runs of ``counts`` points (each at least 2)."""
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    lines = shapely.from_ragged_array(shapely.GeometryType.LINESTRING, np.ascontiguousarray(coords), (offsets,))
    return shapely.convex_hull(lines)

"""The metric coordinate system that distances and areas are measured in.

Input coordinates are WGS84 longitude/latitude; every spatial relation is
computed in a local projected CRS in metres (SPEC §1). The default is the UTM
zone of the data's centre (:func:`choose_crs`), where the centre is the median
of the events' positions (:func:`median_centre`), not the middle of their
bounding box: one stray fix on the other side of the world cannot move it.
Positions are summarised as counts per cell of a 0.1° grid
(:func:`position_cells`): a summary that chunks ingested apart (Spark tasks)
merge exactly, so every runner chooses the same CRS.

Positions where the chosen CRS cannot measure 100 m to within 0.1 m
(:data:`TOLERANCE`; SPEC §1's 0.1 m, over the order of a fix's disc and of the
distances phrases compare) are reported by :func:`crs_warning`, which
:func:`choose_crs` logs (logger ``spatec.crs``).

A :class:`Projector` is shipped to Spark executors by pickling, so it carries
only its CRS string; the pyproj transformers are rebuilt lazily, once per
thread (pyproj transformers must not be shared between threads).
"""
from __future__ import annotations

import functools
import logging
import math
import threading

import numpy as np
import pyproj
import shapely
from shapely import wkt as shp_wkt

__all__ = ["Projector", "choose_crs", "crs_warning", "data_centre", "event_extents", "extent_cells",
           "far_positions", "median_centre", "merge_cells", "metric_crs", "position_cells", "utm_epsg"]

_WGS84 = "EPSG:4326"
log = logging.getLogger("spatec.crs")

#: Cells per degree of the position summary (0.1° cells: a UTM zone's 6° is 60 of them,
#: so every cell lies in one zone and one hemisphere).
CELLS_PER_DEGREE = 10
#: Largest error, in metres, of a 100 m distance measured in the CRS at a position
#: before the position counts as too far from the CRS (:func:`far_positions`).
TOLERANCE = 0.1
YARDSTICK = 100.0


def utm_epsg(lon: float, lat: float) -> str:
    """Return the EPSG code of the UTM zone that contains a point.

    The zone is ``floor((lon + 180) / 6) + 1``; latitudes at or above the
    equator use the northern code ``EPSG:326NN``, others ``EPSG:327NN``. The
    Norway and Svalbard exceptions to the regular zone grid are ignored: the
    projection only has to be metric and locally accurate, and a zone one off
    its official neighbour still is. Longitude 180 belongs to zone 60.

    Parameters
    ----------
    lon, lat : float
        WGS84 degrees, ``-180 <= lon <= 180`` and ``-90 <= lat <= 90``.

    Returns
    -------
    str
        ``"EPSG:326NN"`` or ``"EPSG:327NN"``.

    Raises
    ------
    ValueError
        If a coordinate is not finite or out of range.

    Examples
    --------
    >>> utm_epsg(0.1404, 52.1751)   # Cambridge, UK
    'EPSG:32631'
    >>> utm_epsg(-0.1276, 51.5072)  # London, just west of Greenwich
    'EPSG:32630'
    >>> utm_epsg(151.2093, -33.8688)  # Sydney
    'EPSG:32756'
    >>> utm_epsg(180.0, 0.0)
    'EPSG:32660'
    """
    lon, lat = float(lon), float(lat)
    if not (math.isfinite(lon) and math.isfinite(lat)) or abs(lon) > 180 or abs(lat) > 90:
        raise ValueError(f"not a WGS84 longitude/latitude: ({lon}, {lat})")
    zone = min(int(math.floor((lon + 180.0) / 6.0)) + 1, 60)
    return f"EPSG:{(32600 if lat >= 0 else 32700) + zone}"


def data_centre(lons, lats) -> tuple[float, float]:
    """Return the centre of the bounding box of the finite coordinates.

    Not what the CRS is chosen by (one far position moves it: see
    :func:`median_centre`); it is the middle of a region's extent. Non-finite
    values (missing positions) are ignored. Data that straddles the
    antimeridian is not handled specially.

    Parameters
    ----------
    lons, lats : array_like
        WGS84 degrees.

    Returns
    -------
    (float, float)
        ``(lon, lat)`` of the centre.

    Raises
    ------
    ValueError
        If there is no finite longitude or no finite latitude.

    Examples
    --------
    >>> data_centre([0.0, 1.0, float("nan")], [52.0, 53.0, 52.5])
    (0.5, 52.5)
    """
    out = []
    for values, what in ((lons, "longitude"), (lats, "latitude")):
        a = np.asarray(values, dtype=float).ravel()
        a = a[np.isfinite(a)]
        if a.size == 0:
            raise ValueError(f"no finite {what} to centre the projection on")
        out.append((float(a.min()) + float(a.max())) / 2.0)
    return out[0], out[1]


_local = threading.local()


def _transformers(crs: str) -> tuple[pyproj.Transformer, pyproj.Transformer]:
    """The (forward, inverse) transformers for ``crs``, cached per thread."""
    cache = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = {}
    pair = cache.get(crs)
    if pair is None:
        pair = (
            pyproj.Transformer.from_crs(_WGS84, crs, always_xy=True),
            pyproj.Transformer.from_crs(crs, _WGS84, always_xy=True),
        )
        cache[crs] = pair
    return pair


def metric_crs(crs: str) -> str:
    """``crs`` if it is a projected CRS in metres that pyproj knows; ValueError saying
    why not otherwise (an unknown code, degrees, feet).

    >>> metric_crs("EPSG:27700")
    'EPSG:27700'
    >>> metric_crs("EPSG:4326")
    Traceback (most recent call last):
    ...
    ValueError: CRS 'EPSG:4326' is not a projected CRS in metres (units: ['degree'])
    """
    try:
        parsed = pyproj.CRS.from_user_input(crs)
    except pyproj.exceptions.CRSError as exc:
        raise ValueError(f"unknown CRS {crs!r}: {exc}") from None
    units = {axis.unit_name for axis in parsed.axis_info}
    if not parsed.is_projected or units != {"metre"}:
        raise ValueError(f"CRS {crs!r} is not a projected CRS in metres (units: {sorted(units)})")
    return str(crs)


@functools.lru_cache(maxsize=64)
def _transverse_mercator(crs: str) -> bool:
    op = pyproj.CRS.from_user_input(crs).coordinate_operation
    return op is not None and op.method_name == "Transverse Mercator"


def _out(a):
    """Return plain floats for scalar input, arrays otherwise."""
    return float(a) if np.ndim(a) == 0 else a


class Projector:
    """Projects WGS84 lon/lat to a metric CRS and back.

    Parameters
    ----------
    crs : str
        Any projected CRS in metres that pyproj understands, e.g.
        ``"EPSG:32631"``.

    Examples
    --------
    >>> p = Projector("EPSG:32631")
    >>> x, y = p.forward(3.0, 0.0)   # the central meridian at the equator
    >>> round(x, 3), round(y, 3)
    (500000.0, 0.0)
    >>> lon, lat = p.inverse(x, y)
    >>> round(lon, 9), round(lat, 9)
    (3.0, 0.0)
    >>> import pickle
    >>> pickle.loads(pickle.dumps(p)) == p
    True
    """

    __slots__ = ("crs",)

    def __init__(self, crs: str):
        self.crs = metric_crs(crs)

    def forward(self, lon, lat):
        """Project lon/lat (scalars or arrays) to ``(x, y)`` metres."""
        x, y = _transformers(self.crs)[0].transform(np.asarray(lon, float), np.asarray(lat, float))
        return _out(x), _out(y)

    def inverse(self, x, y):
        """Unproject ``(x, y)`` metres (scalars or arrays) to ``(lon, lat)``."""
        lon, lat = _transformers(self.crs)[1].transform(np.asarray(x, float), np.asarray(y, float))
        return _out(lon), _out(lat)

    @property
    def is_transverse_mercator(self) -> bool:
        """Whether the CRS is a Transverse Mercator projection (UTM, the British
        National Grid, ...), whose distortion over a few metres is known and small."""
        return _transverse_mercator(self.crs)

    # Only the CRS string travels: transformers hold PROJ contexts that cannot
    # be pickled and must not be shared across threads anyway.
    def __getstate__(self):
        return {"crs": self.crs}

    def __setstate__(self, state):
        self.crs = state["crs"]

    def __eq__(self, other):
        return isinstance(other, Projector) and other.crs == self.crs

    def __hash__(self):
        return hash(("Projector", self.crs))

    def __repr__(self):
        return f"Projector({self.crs!r})"


# ------------------------------------------------------------------------------ positions

def event_extents(ev) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each canonical event's longitude and latitude extent ``(x0, x1, y0, y1)``: a
    point's position twice, a geometry's bounds; NaN for an event without a place."""
    kinds = ev["_place"].to_numpy()
    lon = np.where(kinds == "point", ev["_lon"].to_numpy(float), np.nan)
    lat = np.where(kinds == "point", ev["_lat"].to_numpy(float), np.nan)
    x0, x1, y0, y1 = lon, lon.copy(), lat, lat.copy()
    geo = np.flatnonzero(kinds == "geom")
    if len(geo):
        b = shapely.bounds(shapely.from_wkt(ev["_geom"].to_numpy()[geo]))
        x0[geo], y0[geo], x1[geo], y1[geo] = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    return x0, x1, y0, y1


def position_cells(lons, lats) -> dict:
    """How many positions lie in each cell of the 0.1° grid: ``{(i, j): count}``, cell
    ``(i, j)`` spanning longitudes ``[i, i + 1) / 10`` and latitudes ``[j, j + 1) / 10``.
    Non-finite positions are left out. Summaries of parts of the data add up
    (:func:`merge_cells`) to the summary of the whole, whatever the parts.

    >>> position_cells([0.12, 0.15, -0.05, float("nan")], [52.2, 52.21, 52.2, 1.0])
    {(-1, 522): 1, (1, 522): 2}
    """
    lon = np.asarray(lons, dtype=float).ravel()
    lat = np.asarray(lats, dtype=float).ravel()
    ok = np.isfinite(lon) & np.isfinite(lat)
    if not ok.any():
        return {}
    i = np.floor(lon[ok] * CELLS_PER_DEGREE).astype(np.int64)
    j = np.floor(lat[ok] * CELLS_PER_DEGREE).astype(np.int64)
    i0, j0 = int(i.min()), int(j.min())
    ni, nj = int(i.max()) - i0 + 1, int(j.max()) - j0 + 1
    if ni * nj <= _DENSE_CELLS:
        # cells numbered in order of (i, j) and counted in one pass (data of a region: a few
        # cells): what the sort of np.unique(axis=0) gave, 1.7 s for a bus-day, in 10 ms
        counts = np.bincount((i - i0) * nj + (j - j0), minlength=ni * nj)
        keys = np.flatnonzero(counts)
        return {(i0 + int(a) // nj, j0 + int(a) % nj): int(counts[a]) for a in keys}
    keys, counts = np.unique(np.stack([i, j], axis=1), axis=0, return_counts=True)
    return {(int(a), int(b)): int(c) for (a, b), c in zip(keys, counts)}


#: Grids of up to this many cells are counted with a bincount (:func:`position_cells`).
_DENSE_CELLS = 1 << 20


def extent_cells(x0, x1, y0, y1) -> dict:
    """:func:`position_cells` of events' extents (:func:`event_extents`): a point once,
    a geometry by the two corners of its bounds."""
    x0, x1, y0, y1 = (np.asarray(a, dtype=float) for a in (x0, x1, y0, y1))
    other = (x1 != x0) | (y1 != y0)
    return position_cells(np.concatenate([x0, x1[other]]), np.concatenate([y0, y1[other]]))


def merge_cells(parts) -> dict:
    """The sum of several :func:`position_cells` summaries."""
    out: dict = {}
    for part in parts:
        for k, n in (part or {}).items():
            out[k] = out.get(k, 0) + n
    return out


def frame_cells(frames: dict) -> dict:
    """:func:`position_cells` of every located event of canonical frames (type → frame)."""
    return merge_cells(extent_cells(*event_extents(df)) for df in frames.values() if len(df))


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The lower weighted median: the first value (in order) with half the weight at or below it."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, cum[-1] / 2.0)])


def median_centre(cells: dict) -> tuple[float, float]:
    """The median longitude and the median latitude of the positions a summary counts
    (each to its cell's centre): half the positions lie on each side, so positions
    far from the rest cannot move it beyond the data's middle cells.

    >>> median_centre(position_cells([0.12, 0.13, 0.14, 179.5], [52.2, 52.2, 52.3, -60.0]))
    (0.15, 52.25)
    """
    if not cells:
        raise ValueError("no positions to centre the projection on")
    keys = np.array(list(cells), dtype=float)
    w = np.array(list(cells.values()), dtype=float)
    return ((_weighted_median(keys[:, 0], w) + 0.5) / CELLS_PER_DEGREE,
            (_weighted_median(keys[:, 1], w) + 0.5) / CELLS_PER_DEGREE)


_GEOD = pyproj.Geod(ellps="WGS84")


def far_positions(crs: str, cells: dict) -> tuple[int, tuple[float, float] | None, float]:
    """Positions the CRS cannot measure within :data:`TOLERANCE`: how many, the corner of
    the worst cell, and the worst error (metres over :data:`YARDSTICK` metres).

    At each corner of each cell, a step of 100 m east and one north (on the
    ellipsoid, pyproj's ``Geod``) are projected and measured in the CRS; a
    cell is too far when either is off by more than the tolerance, or the
    projection does not map the corner there and back. Every position of the
    cell counts then (the test is made at the corners, so it errs on the side
    of warning).

    >>> far_positions("EPSG:32631", position_cells([0.12, 100.0], [52.2, 10.0]))[:2]
    (1, (100.0, 10.0))
    """
    if not cells:
        return 0, None, 0.0
    keys = np.array(list(cells), dtype=float)
    counts = np.array(list(cells.values()), dtype=np.int64)
    d = 1.0 / CELLS_PER_DEGREE
    corners = [(0, 0), (1, 0), (0, 1), (1, 1)]
    lon = np.concatenate([keys[:, 0] * d + a * d for a, _ in corners])
    lat = np.concatenate([keys[:, 1] * d + b * d for _, b in corners])
    lon, lat = np.clip(lon, -180.0, 180.0), np.clip(lat, -89.9, 89.9)
    forward, inverse = _transformers(crs)
    with np.errstate(all="ignore"):
        x, y = forward.transform(lon, lat, errcheck=False)
        back_lon, back_lat = inverse.transform(x, y, errcheck=False)
        error = np.zeros(len(lon))
        for azimuth in (90.0, 0.0):
            lon2, lat2, _ = _GEOD.fwd(lon, lat, np.full(len(lon), azimuth), np.full(len(lon), YARDSTICK))
            x2, y2 = forward.transform(lon2, lat2, errcheck=False)
            error = np.fmax(error, np.abs(np.hypot(x2 - x, y2 - y) - YARDSTICK))
        wrapped = np.abs((back_lon - lon + 180.0) % 360.0 - 180.0)
        broken = ~np.isfinite(error) | ~(wrapped < 1e-6) | ~(np.abs(back_lat - lat) < 1e-6)
    error = np.where(broken, np.inf, error).reshape(len(corners), -1).max(axis=0)
    far = error > TOLERANCE
    if not far.any():
        return 0, None, float(error.max())
    worst = int(np.argmax(error))
    return int(counts[far].sum()), (float(keys[worst, 0] * d), float(keys[worst, 1] * d)), float(error[worst])


def crs_warning(crs: str, cells: dict) -> str | None:
    """What to tell the user when some positions lie too far from ``crs`` to be measured
    within :data:`TOLERANCE` (None when all are near enough)."""
    n, worst, error = far_positions(crs, cells)
    if not n:
        return None
    total = sum(cells.values())
    how = "cannot be projected there" if not math.isfinite(error) else \
        f"{error:.2f} m off over {YARDSTICK:.0f} m"
    return (f"{n:,} of {total:,} positions lie too far from {crs} to be measured within {TOLERANCE} m "
            f"(the worst near lon {worst[0]:.1f}, lat {worst[1]:.1f}: {how}); distances and overlaps "
            f"there are distorted: give a CRS that covers them (--crs, or `crs` in the program), "
            f"or replay each region apart")


def choose_crs(program, frames: dict, override: str | None = None, cells: dict | None = None) -> str:
    """The metric CRS: ``override``, the program's ``crs``, else the UTM zone of the median
    position of every event (:func:`median_centre`; SPEC §1). ``cells``: more events'
    positions (:func:`position_cells` of chunks ingested elsewhere). Positions too far
    from the CRS to be measured within :data:`TOLERANCE` are logged as a warning."""
    found = merge_cells([frame_cells(frames), cells or {}])
    if override or program.crs:
        crs = override or program.crs
    elif found:
        crs = utm_epsg(*median_centre(found))
    else:
        crs = utm_epsg(*median_centre(_place_cells(program))) if program.places else "EPSG:32631"
    warning = crs_warning(crs, found)
    if warning:
        log.warning("%s", warning)
    if found and not override:
        swapped = swapped_warning(program, median_centre(found))
        if swapped:
            log.warning("%s", swapped)
    return crs


def swapped_warning(program, centre: tuple) -> str | None:
    """A warning when the input's positions (their median ``centre``, lon/lat) lie far from
    every place of the program and, with longitude and latitude swapped, beside one."""
    from spatec.spatial.lonlat import program_places, swapped_beside

    found = swapped_beside(centre, program_places(program))
    if found is None:
        return None
    name, far, near = found
    return (f"the input's positions lie {far:,} km from every place of the program (their median is "
            f"longitude {centre[0]:g}, latitude {centre[1]:g}); with longitude and latitude swapped they "
            f"lie {near:g} km from {name}: are the input's longitude and latitude columns swapped? "
            "(`place point(LON, LAT)` takes the longitude first)")


def _place_cells(program) -> dict:
    """No located events: the program's places (a circle's centre, a polygon's bounds)."""
    lons, lats = [], []
    for pd_ in program.places.values():
        if pd_.kind == "circle":
            lons.append(pd_.lon)
            lats.append(pd_.lat)
        else:
            b = shp_wkt.loads(pd_.wkt).bounds
            lons += [b[0], b[2]]
            lats += [b[1], b[3]]
    return position_cells(lons, lats)

"""The metric coordinate system that distances and areas are measured in.

Input coordinates are WGS84 longitude/latitude; every spatial relation is
computed in a local projected CRS in metres (SPEC §1). The default is the UTM
zone of the data's centre, chosen by :func:`data_centre` and :func:`utm_epsg`.

A :class:`Projector` is shipped to Spark executors by pickling, so it carries
only its CRS string; the pyproj transformers are rebuilt lazily, once per
thread (pyproj transformers must not be shared between threads).
"""
from __future__ import annotations

import functools
import math
import threading

import numpy as np
import pyproj
import shapely
from shapely import wkt as shp_wkt

__all__ = ["Projector", "choose_crs", "data_centre", "utm_epsg"]

_WGS84 = "EPSG:4326"


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

    The bounding-box centre rather than a mean: it needs only a min/max
    aggregation, which every runner (pandas, Spark, streaming) computes to the
    same bits whatever the partitioning, so all of them choose the same CRS.
    Non-finite values (missing positions) are ignored. Data that straddles
    the antimeridian is not handled specially.

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


def _check_metric(crs: str) -> None:
    """Refuse a CRS whose coordinates are not metres on a plane."""
    try:
        parsed = pyproj.CRS.from_user_input(crs)
    except pyproj.exceptions.CRSError as exc:
        raise ValueError(f"unknown CRS {crs!r}: {exc}") from None
    units = {axis.unit_name for axis in parsed.axis_info}
    if not parsed.is_projected or units != {"metre"}:
        raise ValueError(f"CRS {crs!r} is not a projected CRS in metres (units: {sorted(units)})")


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
        _check_metric(crs)
        self.crs = str(crs)

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


def choose_crs(program, frames: dict, override: str | None = None, bounds=()) -> str:
    """The metric CRS: ``override``, the program's ``crs``, else the UTM zone of the
    centre of the bounding box of every event's location (SPEC §1). ``bounds``:
    more events' extents, as ``(lon min, lon max, lat min, lat max)`` (chunks of
    events ingested elsewhere)."""
    if override:
        return override
    if program.crs:
        return program.crs
    lons = [np.array([b[0], b[1]]) for b in bounds]
    lats = [np.array([b[2], b[3]]) for b in bounds]
    for df in frames.values():
        if len(df) == 0:
            continue
        pts = df["_place"] == "point"
        if pts.any():
            lons.append(df.loc[pts, "_lon"].to_numpy(float))
            lats.append(df.loc[pts, "_lat"].to_numpy(float))
        geo = df["_place"] == "geom"
        if geo.any():
            b = shapely.bounds(shapely.from_wkt(df.loc[geo, "_geom"].to_numpy()))
            lons.append(b[:, [0, 2]].ravel())
            lats.append(b[:, [1, 3]].ravel())
    if not lons:
        # no located events: fall back to the program's places
        for pd_ in program.places.values():
            if pd_.kind == "circle":
                lons.append(np.array([pd_.lon]))
                lats.append(np.array([pd_.lat]))
            else:
                b = shp_wkt.loads(pd_.wkt).bounds
                lons.append(np.array([b[0], b[2]]))
                lats.append(np.array([b[1], b[3]]))
    if not lons:
        return "EPSG:32631"
    lon, lat = data_centre(np.concatenate(lons), np.concatenate(lats))
    return utm_epsg(lon, lat)

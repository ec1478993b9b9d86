"""Longitude and latitude swapped: positions far from everything else that lie beside it
once their two coordinates are exchanged (a file whose `lat` column holds longitudes, a
`place point(lat, lon)`), found so that they do not pass silently.

>>> refs = [("hospital", 0.14491, 52.17590)]
>>> swapped_beside((52.205, 0.124), refs)            # (lon, lat) = (52.2, 0.12): latitude first?
('hospital', 7533, 3.5)
>>> swapped_beside((0.124, 52.205), refs) is None    # beside the hospital as written
True
"""
from __future__ import annotations

import math

#: positions farther than this from every reference are suspect ...
FAR_KM = 500.0
#: ... when, swapped, they lie this near to one
NEAR_KM = 50.0


def km(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Great-circle distance in km (a sphere of 6,371 km: a test of hundreds of km)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371.0 * math.asin(min(1.0, math.sqrt(a)))


def swapped_beside(point: tuple, refs: list) -> tuple | None:
    """``(name, km as written, km swapped)`` when ``point`` (lon, lat) is farther than
    :data:`FAR_KM` from every reference ``(name, lon, lat)`` and, its coordinates exchanged,
    nearer than :data:`NEAR_KM` to one (that one's name); else None."""
    lon, lat = point
    if not refs or not (-90 <= lon <= 90) or not all(map(math.isfinite, point)):
        return None
    near = min(km(lon, lat, r_lon, r_lat) for _n, r_lon, r_lat in refs)
    if near <= FAR_KM:
        return None
    name, r_lon, r_lat = min(refs, key=lambda r: km(lat, lon, r[1], r[2]))
    swapped = km(lat, lon, r_lon, r_lat)
    if swapped >= NEAR_KM:
        return None
    return name, round(near), round(swapped, 1)


def median_point(points: list) -> tuple:
    """The median longitude and the median latitude of ``(lon, lat)`` points."""
    lons = sorted(p[0] for p in points)
    lats = sorted(p[1] for p in points)
    mid = len(points) // 2
    if len(points) % 2:
        return lons[mid], lats[mid]
    return (lons[mid - 1] + lons[mid]) / 2, (lats[mid - 1] + lats[mid]) / 2


def place_point(pd) -> tuple:
    """A place's position (lon, lat): a circle's centre, a polygon's centroid (WKT in lon/lat)."""
    if pd.kind == "circle":
        return pd.lon, pd.lat
    import shapely

    c = shapely.from_wkt(pd.wkt).centroid
    return c.x, c.y


def program_places(program) -> list:
    """``(name, lon, lat)`` of a program's single places and of the median of each place set."""
    out = [(name, *place_point(pd)) for name, pd in program.places.items()]
    for name, ps in getattr(program, "place_sets", {}).items():
        if ps.places:
            out.append((name, *median_point([place_point(p) for p in ps.places])))
    return out

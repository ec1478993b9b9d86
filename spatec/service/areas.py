"""A subscription's ``area``: a place of the program, a GeoJSON geometry or a circle.

``"centre"`` (a place the program declares, or one of its ``places`` files),
``{"type": "Polygon", "coordinates": ...}`` (GeoJSON, WGS84 lon/lat) or
``{"circle": [lon, lat, metres]}``. An alert matches when its hull *possibly* meets
the area (the stamps' overlap: SPEC §3's plain ``at``), or with ``certainly`` when the
hull lies inside it — the same relations the automata use
(:func:`spatec.spatial.stamps.possibly_in` / ``certainly_in``), in the service's
metric CRS.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import shapely
from shapely import wkt as shp_wkt

from spatec.automata.patterns import PatternCompiler
from spatec.errors import SpatecError
from spatec.spatial import stamps as S
from spatec.spatial.crs import Projector, utm_epsg

#: degrees a lon/lat bounding box is grown by for the spatial index (the exact test follows)
BOX_SLACK = 1e-4


class AreaError(SpatecError):
    """An ``area`` that names no place or is no geometry."""


@dataclass
class Area:
    """An area: the region as a stamp in metres (``loc``), its lon/lat box, how to match."""

    spec: object
    loc: S.Loc
    box: tuple            # (minlon, minlat, maxlon, maxlat), grown by BOX_SLACK
    certainly: bool = False

    def test(self, hull: S.Loc) -> bool:
        return S.certainly_in(hull, self.loc) if self.certainly else S.possibly_in(hull, self.loc)


def service_crs(program) -> str:
    """The metric CRS of the service: the program's, else the UTM zone of its places'
    centre, else of Cambridge's (the project's data)."""
    if program.crs:
        return program.crs
    pts = [(p.lon, p.lat) for p in program.places.values() if p.kind == "circle"]
    if not pts:
        for p in program.places.values():
            c = shp_wkt.loads(p.wkt).centroid
            pts.append((c.x, c.y))
    if not pts:
        return utm_epsg(0.12, 52.2)
    return utm_epsg(sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts))


class Areas:
    """Builds :class:`Area` s and hull stamps for one program and projection."""

    def __init__(self, program, proj: Projector):
        self.program, self.proj = program, proj
        self.patterns = PatternCompiler(program.places, program.timezone, proj)

    def area(self, spec, certainly: bool = False) -> Area:
        if isinstance(spec, str):
            if spec not in self.program.places:
                known = ", ".join(sorted(self.program.places)[:20]) or "none"
                raise AreaError(f"area {spec!r}: the program has no place of that name (places: {known})")
            loc = self.patterns.region(spec)
        elif isinstance(spec, dict) and "circle" in spec:
            c = spec["circle"]
            if (not isinstance(c, (list, tuple)) or len(c) != 3
                    or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in c) or c[2] < 0):
                raise AreaError('area {"circle": [lon, lat, metres]} needs three numbers, metres >= 0')
            _lonlat(c[0], c[1])
            x, y = self.proj.forward(c[0], c[1])
            loc = S.Loc.disc(float(x), float(y), float(c[2]))
        elif isinstance(spec, dict) and "type" in spec:
            try:
                g = shapely.from_geojson(_json(spec))
            except Exception as e:  # noqa: BLE001 - shapely raises several kinds for bad GeoJSON
                raise AreaError(f"area: not a GeoJSON geometry ({e})") from None
            if g is None or g.is_empty:
                raise AreaError("area: an empty geometry")
            xy = shapely.get_coordinates(g)
            for lon, lat in xy.tolist():
                _lonlat(lon, lat)
            loc = S.Loc.of(shapely.transform(g, lambda c: _fwd(self.proj, c)))
        else:
            raise AreaError('area: a place name, a GeoJSON geometry or {"circle": [lon, lat, metres]}')
        return Area(spec, loc, self.box(loc), bool(certainly))

    def box(self, loc: S.Loc) -> tuple:
        """The lon/lat box of a stamp (its geometry grown by its radius)."""
        g = loc.geom if loc.r == 0 else shapely.buffer(loc.geom, loc.r, quad_segs=8)
        x0, y0, x1, y1 = shapely.bounds(g).tolist()
        xs, ys = [x0, x1, x0, x1], [y0, y0, y1, y1]
        lon, lat = self.proj.inverse(xs, ys)
        lon, lat = list(map(float, lon)), list(map(float, lat))
        return (min(lon) - BOX_SLACK, min(lat) - BOX_SLACK, max(lon) + BOX_SLACK, max(lat) + BOX_SLACK)

    def hull(self, wkt: str | None) -> S.Loc:
        """An alert's hull (WKT lon/lat) as a stamp in metres."""
        if not wkt:
            return S.UNIVERSE
        g = shapely.from_wkt(wkt)
        return S.Loc.of(shapely.transform(g, lambda c: _fwd(self.proj, c)))

    def place_names(self, hull: S.Loc) -> list[str]:
        """The program's places the hull possibly meets (an alert's "where", for people)."""
        if hull.is_universe:
            return []
        return [n for n in self.program.places if S.possibly_in(hull, self.patterns.region(n))]


def _fwd(proj: Projector, coords):
    x, y = proj.forward(coords[:, 0], coords[:, 1])
    return np.column_stack([x, y])


def _lonlat(lon, lat) -> None:
    if not (-180 <= lon <= 180 and -90 <= lat <= 90):
        raise AreaError(f"area: ({lon}, {lat}) is not a WGS84 longitude, latitude")


def _json(spec) -> str:
    return json.dumps(spec)

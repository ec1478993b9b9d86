"""A subscription's ``area``: a place of the program, a GeoJSON geometry or a circle.

``"centre"`` (a single place the program declares), ``{"type": "Polygon", "coordinates":
...}`` (GeoJSON Polygon or MultiPolygon, WGS84 lon/lat) or ``{"circle": [lon, lat,
metres]}``. An alert matches when its hull *possibly* meets the area (the stamps' overlap:
SPEC §3's plain ``at``), or with ``certainly`` when the hull lies inside it — the same
relations the automata use (:func:`spatec.spatial.stamps.possibly_in` / ``certainly_in``),
in the metric CRS the composites were measured in.

What is refused, with the reason (``AreaError``): a name that is no single place; a
circle that is not three numbers (``true`` is no number) with a radius of at most
:data:`MAX_RADIUS`; a geometry that is not a GeoJSON Polygon or MultiPolygon, has a
position outside WGS84, an unclosed ring, more than :data:`MAX_VERTICES` vertices, or is
not valid (a ring crossing itself: it is never repaired — ``make_valid`` would answer
another question than the one asked).

An area's lon/lat box is known from its text alone (the covering index files it by
that); its stamp in metres is made when first tested, and again if the service's CRS is
set later (:meth:`Areas.set_crs`).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import shapely

from spatec.automata.patterns import PatternCompiler
from spatec.errors import SpatecError
from spatec.spatial import stamps as S
from spatec.spatial.crs import Projector

#: degrees a lon/lat bounding box is grown by for the spatial index (the exact test follows)
BOX_SLACK = 1e-4
#: most vertices of a GeoJSON area
MAX_VERTICES = 10_000
#: largest circle radius, metres
MAX_RADIUS = 100_000.0
#: distinct areas kept made (the same text gives the same area, its stamp made once)
INTERNED = 200_000
_M_PER_DEG = 111_320.0


class AreaError(SpatecError):
    """An ``area`` that names no place or is no usable geometry."""


@dataclass(eq=False)
class Area:
    """An area: its text (``spec``), how to match, its lon/lat box and its stamp in metres."""

    spec: object
    certainly: bool
    box: tuple                      # (minlon, minlat, maxlon, maxlat), grown by BOX_SLACK
    owner: "Areas" = field(repr=False)
    shape: object = field(repr=False, default=None)    # lon/lat geometry, or (lon, lat, r) of a circle
    _loc: S.Loc | None = field(default=None, repr=False)
    _crs: str | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        """The area's text, the same for the same area (subscriptions with it are merged)."""
        k = self.__dict__.get("_key")
        if k is None:
            k = self.__dict__["_key"] = json.dumps(self.spec, sort_keys=True, separators=(",", ":"))
        return k

    @property
    def loc(self) -> S.Loc:
        """The area's stamp in the service's CRS (made once per CRS)."""
        crs = self.owner.proj.crs
        if self._loc is None or self._crs != crs:
            self._loc, self._crs = self.owner.stamp(self), crs
        return self._loc

    def __post_init__(self):
        # a disc (a circle, a circle place) is tested with many others at once
        # (:func:`spatec.spatial.stamps.relate_discs`)
        self.is_disc = isinstance(self.shape, tuple)

    def disc(self) -> tuple:
        """``(x, y, r, centre point)`` in metres of a disc area (made once per CRS)."""
        got = self.__dict__.get("_disc")
        proj = self.owner.proj
        if got is None or got[5] is not proj:       # (a CRS decided since: a new projector)
            loc = self.loc
            got = self.__dict__["_disc"] = (loc.xy[0], loc.xy[1], loc.r, loc.geom, loc, proj)
        return got

    def test(self, hull: S.Loc) -> bool:
        return S.certainly_in(hull, self.loc) if self.certainly else S.possibly_in(hull, self.loc)

    def inside(self) -> tuple:
        """``(polygon, its boundary, whether areal)`` a hull must lie in to be certainly in this
        (non-disc) area (:func:`spatec.spatial.stamps.containment`: what ``test`` uses)."""
        return S.containment(self.loc)


class Areas:
    """Builds :class:`Area` s and hull stamps for one program, in one metric CRS."""

    def __init__(self, program, proj: Projector):
        self.program = program
        self.set_crs(proj.crs)

    def set_crs(self, crs: str) -> None:
        """Measure in ``crs`` from now on (areas are projected again when next tested)."""
        self.proj = Projector(crs)
        if not hasattr(self, "_interned"):
            self._interned: dict = {}
        self.patterns = PatternCompiler(self.program.places, self.program.timezone, self.proj)

    def area(self, spec, certainly: bool = False) -> Area:
        """The :class:`Area` a request's ``area`` names (the same object for the same text:
        subscriptions that share an area share its stamp); :class:`AreaError` if it is unusable."""
        try:
            key = (_circle_key(spec) or json.dumps(spec, sort_keys=True, separators=(",", ":")), bool(certainly))
        except (TypeError, ValueError):
            raise AreaError('area: a place name, a GeoJSON Polygon or MultiPolygon, or {"circle": [lon, lat, '
                            'metres]}') from None
        got = self._interned.get(key)
        if got is None:
            got = self._make(spec, bool(certainly))
            got.__dict__["_key"] = key[0]
            if len(self._interned) >= INTERNED:
                self._interned.pop(next(iter(self._interned)))
            self._interned[key] = got
        return got

    def prepare(self, areas) -> None:
        """Project many circle and GeoJSON areas at once (a start with thousands of
        subscriptions): their stamps made as :meth:`stamp` makes them, one projection call
        for all (one that fails is left to be made, and fail, alone)."""
        crs = self.proj.crs
        todo = [a for a in areas if a is not None and isinstance(a.spec, dict) and (a._loc is None or a._crs != crs)]
        discs = [a for a in todo if isinstance(a.shape, tuple)]
        polys = [a for a in todo if not isinstance(a.shape, tuple)]
        if discs:
            lon = np.array([a.shape[0] for a in discs])
            lat = np.array([a.shape[1] for a in discs])
            x, y = self.proj.forward(lon, lat)
            locs = S.Loc.discs(np.atleast_1d(x), np.atleast_1d(y), [a.shape[2] for a in discs])
            if locs is not None:     # else a coordinate that does not project: each is made (and fails) alone
                for a, loc in zip(discs, locs):
                    a._loc, a._crs = loc, crs
        if polys:
            try:
                made = project(self.proj, np.array([a.shape for a in polys], dtype=object))
                valid = shapely.is_valid(made).tolist()
            except Exception:  # noqa: BLE001 - each is made (and fails) alone
                return
            for a, g, ok in zip(polys, made.tolist(), valid):
                if ok:
                    try:
                        a._loc, a._crs = S.Loc.of(g), crs
                    except Exception:  # noqa: BLE001 - made (and failing) alone
                        pass

    def _make(self, spec, certainly: bool) -> Area:
        if isinstance(spec, str):
            pd = self.program.places.get(spec)
            if pd is None:
                known = ", ".join(sorted(self.program.places)[:20]) or "none"
                raise AreaError(f"area {spec!r}: the program has no place of that name (places: {known})")
            if pd.kind == "circle":
                return Area(spec, certainly, _disc_box(pd.lon, pd.lat, pd.radius), self, (pd.lon, pd.lat, pd.radius))
            g = shapely.from_wkt(pd.wkt)
            if pd.widen:
                return Area(spec, certainly, _grown(_box(g), pd.widen), self, g)
            return Area(spec, certainly, _box(g), self, g)
        if isinstance(spec, dict) and set(spec) == {"circle"}:
            c = spec["circle"]
            if not (isinstance(c, list) and len(c) == 3 and all(_number(v) for v in c)):
                raise AreaError('area {"circle": [lon, lat, metres]} needs exactly three numbers')
            lon, lat, r = (float(v) for v in c)
            _lonlat(lon, lat)
            if not 0 <= r <= MAX_RADIUS:
                raise AreaError(f"area: a circle's radius is between 0 and {MAX_RADIUS:,.0f} m, not {r:g}")
            return Area(spec, certainly, _disc_box(lon, lat, r), self, (lon, lat, r))
        if isinstance(spec, dict) and "type" in spec:
            g = _geojson(spec)
            return Area(spec, certainly, _box(g), self, g)
        raise AreaError('area: a place name, a GeoJSON Polygon or MultiPolygon, or {"circle": [lon, lat, metres]}')

    def stamp(self, area: Area) -> S.Loc:
        """An area's stamp in metres, in the current CRS."""
        if isinstance(area.spec, str):
            return self.patterns.region(area.spec)
        if isinstance(area.shape, tuple):
            lon, lat, r = area.shape
            x, y = self.proj.forward(lon, lat)
            return S.Loc.disc(float(x), float(y), r)
        g = project(self.proj, area.shape)
        if not shapely.is_valid(g):
            raise AreaError(f"area: not valid once projected to {self.proj.crs}: {shapely.is_valid_reason(g)}")
        return S.Loc.of(g)

    def hull(self, wkt: str | None) -> S.Loc:
        """An alert's hull (WKT lon/lat) as a stamp in metres."""
        return self.hull_of(shapely.from_wkt(wkt) if wkt else None)

    def hull_of(self, g) -> S.Loc:
        """An alert's hull (a lon/lat geometry, parsed once) as a stamp in metres."""
        if g is None or g.is_empty:
            return S.UNIVERSE
        return S.Loc.of(project(self.proj, g))

    def hulls_of(self, geoms: list) -> list:
        """:meth:`hull_of` of many hulls, projected in one call: per hull its stamp, or the
        exception making it raised."""
        out: list = [S.UNIVERSE] * len(geoms)
        todo = [i for i, g in enumerate(geoms) if g is not None and not g.is_empty]
        if not todo:
            return out
        try:
            made = project(self.proj, np.array([geoms[i] for i in todo], dtype=object)).tolist()
        except Exception:  # noqa: BLE001 - one of them: each alone
            made = None
        for k, i in enumerate(todo):
            try:
                out[i] = S.Loc.of(made[k]) if made is not None else self.hull_of(geoms[i])
            except Exception as e:  # noqa: BLE001 - that hull's own
                out[i] = e
        return out

    def place_names(self, hull: S.Loc) -> list[str]:
        """The program's places the hull possibly meets (an alert's "where", for people)."""
        if hull.is_universe:
            return []
        return [n for n in self.program.places if S.possibly_in(hull, self.patterns.region(n))]


def _circle_key(spec) -> str | None:
    """A circle's text as ``json.dumps(spec, sort_keys=True, separators=(",", ":"))`` gives it,
    made without the encoder (a start takes in 100,000 areas); None for anything else.

    >>> _circle_key({"circle": [0.12, 52.2, 300]}) == json.dumps({"circle": [0.12, 52.2, 300]}, separators=(",", ":"))
    True
    """
    if type(spec) is not dict or len(spec) != 1:
        return None
    c = spec.get("circle")
    if type(c) is not list or len(c) != 3 or not all(type(v) in (int, float) and math.isfinite(v) for v in c):
        return None
    return '{"circle":[' + ",".join([repr(v) for v in c]) + "]}"


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _lonlat(lon, lat) -> None:
    if not (-180 <= lon <= 180 and -90 <= lat <= 90):
        raise AreaError(f"area: ({lon}, {lat}) is not a WGS84 longitude, latitude")


def _disc_box(lon: float, lat: float, r: float) -> tuple:
    dlat = r / _M_PER_DEG
    dlon = r / (_M_PER_DEG * max(math.cos(math.radians(min(abs(lat) + dlat, 89.9))), 1e-3))
    s = BOX_SLACK + 0.01 * (dlat + dlon)          # the projection's scale differs from a sphere's
    return (lon - dlon - s, lat - dlat - s, lon + dlon + s, lat + dlat + s)


def _grown(box: tuple, metres: float) -> tuple:
    d = metres / (_M_PER_DEG * max(math.cos(math.radians(min(abs(box[1]) + 1, 89.9))), 1e-3)) * 1.02
    return (box[0] - d, box[1] - d, box[2] + d, box[3] + d)


def _box(g) -> tuple:
    x0, y0, x1, y1 = shapely.bounds(g).tolist()
    return (x0 - BOX_SLACK, y0 - BOX_SLACK, x1 + BOX_SLACK, y1 + BOX_SLACK)


def project(proj: Projector, geoms):
    """lon/lat geometries (one or an array) in ``proj``'s metres, every vertex projected."""
    return shapely.transform(geoms, lambda c: _fwd(proj, c))


def _fwd(proj: Projector, coords):
    x, y = proj.forward(coords[:, 0], coords[:, 1])
    return np.column_stack([x, y])


def _geojson(spec: dict):
    """A GeoJSON Polygon or MultiPolygon, checked part by part before shapely reads it."""
    kind = spec.get("type")
    extra = set(spec) - {"type", "coordinates", "bbox"}
    if extra:
        raise AreaError(f"area: a GeoJSON geometry has `type` and `coordinates`, not {', '.join(sorted(extra))}")
    if kind not in ("Polygon", "MultiPolygon"):
        raise AreaError(f"area: a GeoJSON Polygon or MultiPolygon, not {kind!r}")
    coords = spec.get("coordinates")
    if not isinstance(coords, list) or not coords:
        raise AreaError(f"area: a {kind}'s coordinates are a non-empty list")
    polys = [coords] if kind == "Polygon" else coords
    if not isinstance(polys, list) or not polys:
        raise AreaError(f"area: a {kind}'s coordinates are a non-empty list")
    n = 0
    for poly in polys:
        if not isinstance(poly, list) or not poly:
            raise AreaError("area: a polygon is a list of rings (the outer ring first)")
        for ring in poly:
            if not isinstance(ring, list) or len(ring) < 4:
                raise AreaError("area: a ring is a list of at least 4 positions, the last equal to the first")
            n += len(ring)
            if n > MAX_VERTICES:
                raise AreaError(f"area: more than {MAX_VERTICES:,} vertices; simplify it")
            for p in ring:
                if not (isinstance(p, list) and len(p) in (2, 3) and all(_number(v) for v in p)):
                    raise AreaError(f"area: a position is [lon, lat] (two numbers), not {json.dumps(p)[:60]}")
                _lonlat(p[0], p[1])
            if ring[0][:2] != ring[-1][:2]:
                raise AreaError("area: a ring must end where it starts (its last position equal to its first)")
    g = shapely.from_geojson(json.dumps({"type": kind, "coordinates": coords}))
    if g is None or g.is_empty:
        raise AreaError("area: an empty geometry")
    if not shapely.is_valid(g):
        raise AreaError(f"area: not a valid {kind}: {shapely.is_valid_reason(g)}; it is not repaired: send the "
                        "polygon you mean (rings that do not cross themselves or each other)")
    return shapely.force_2d(g)

"""Output encoding (:mod:`spatec.sinks.encoding`): stamps as WKT in lon/lat, within
0.1 m of the stamp, counter-clockwise, the same text however they are written."""
import doctest

import numpy as np
import pytest
import shapely
from shapely import LineString, Point, Polygon, box

from spatec.sinks import encoding as E
from spatec.sinks.encoding import to_lonlat_wkt
from spatec.spatial.crs import Projector, utm_epsg
from spatec.spatial.stamps import UNIVERSE, Loc, grown_convex_parts, hull

SQUARE = box(0, 0, 100, 100)
DONUT = Polygon([(0, 0), (100, 0), (100, 100), (0, 100)], [[(40, 40), (60, 40), (60, 60), (40, 60)]])


def test_docstring_examples():
    result = doctest.testmod(E, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


class TestWkt:
    proj = Projector(utm_epsg(0.1404, 52.1751))

    def test_point_and_universe(self):
        x, y = self.proj.forward(0.1404, 52.1751)
        assert to_lonlat_wkt(Loc.disc(x, y, 0), self.proj) == "POINT (0.1404 52.1751)"
        assert to_lonlat_wkt(UNIVERSE, self.proj) is None

    def _back(self, wkt):
        """The written polygon's vertices, projected back to metres."""
        coords = shapely.get_coordinates(shapely.from_wkt(wkt) if isinstance(wkt, str) else wkt)
        px, py = self.proj.forward(coords[:, 0], coords[:, 1])
        return np.column_stack([px, py])

    @staticmethod
    def assert_within_tenth(ring_xy, core, r):
        # Every point of the written boundary is within 0.1 m of the true
        # boundary of core ⊕ r: its distance to core lies in [r - 0.1, r + 0.1]
        # (the largest is at a vertex, the smallest anywhere on the ring).
        ring = shapely.LinearRing(ring_xy)
        assert shapely.distance(shapely.points(ring_xy), core).max() <= r + 0.1
        assert shapely.distance(core, ring) >= r - 0.1
        # ... and it contains the stamp, up to the 7-decimal rounding.
        assert shapely.distance(core, ring) >= r - 0.02

    @pytest.mark.parametrize("r", [15.0, 200.0, 3000.0])
    def test_disc_within_tenth_of_a_metre(self, r):
        x, y = self.proj.forward(0.1404, 52.1751)
        wkt = to_lonlat_wkt(Loc.disc(x, y, r), self.proj)
        assert wkt.startswith("POLYGON ((") and wkt == to_lonlat_wkt(Loc.disc(x, y, r), self.proj)
        assert all(len(c.split(".")[-1]) <= 7 for c in wkt[10:-2].replace(",", " ").split())
        self.assert_within_tenth(self._back(wkt), Point(x, y), r)

    def test_polygon_and_hull(self):
        x, y = self.proj.forward(0.1404, 52.1751)
        sq = Loc.of(shapely.affinity.translate(SQUARE, x, y), 0.0)
        wkt = to_lonlat_wkt(sq, self.proj)
        assert wkt.startswith("POLYGON") and len(shapely.get_coordinates(shapely.from_wkt(wkt))) == 5
        h = hull([Loc.disc(x, y, 15), Loc.disc(x + 2000, y + 500, 15)])
        self.assert_within_tenth(self._back(to_lonlat_wkt(h, self.proj)), h.geom, 15.0)
        # edges are split so they stay straight in lon/lat: none is longer than 500 m
        back = self._back(to_lonlat_wkt(h, self.proj))
        assert np.hypot(*np.diff(back, axis=0).T).max() <= 500.0 + 0.1

    def test_nonconvex_grown(self):
        x, y = self.proj.forward(0.1404, 52.1751)
        g = shapely.affinity.translate(DONUT, x, y)
        back = shapely.from_wkt(to_lonlat_wkt(Loc.of(g, 5.0), self.proj))
        assert back.geom_type == "Polygon" and len(back.interiors) == 1
        self.assert_within_tenth(self._back(back.exterior), g, 5.0)


def test_written_rings_run_counter_clockwise():
    """Every polygon written (RFC 7946's orientation): discs, hulls of discs, and a hull
    of points with no radius, which GEOS gives clockwise."""
    p = Projector("EPSG:32631")
    x, y = p.forward(np.array([0.12, 0.1203, 0.1201]), np.array([52.2, 52.2, 52.2004]))
    for stamp in (Loc.disc(x[0], y[0], 15.0),
                  hull([Loc.disc(a, b, 15.0) for a, b in zip(x, y)]),
                  hull([Loc.disc(a, b, 0.0) for a, b in zip(x, y)])):
        g = shapely.from_wkt(to_lonlat_wkt(stamp, p))
        assert g.geom_type == "Polygon" and shapely.is_ccw(g.exterior)


# --- writing grown polygons: unprojected from their centres -------------------

@pytest.mark.parametrize("lat", [-80.0, -45.0, 0.0, 30.0, 52.2, 70.0, 84.0])
@pytest.mark.parametrize("r", [5.0, 15.0, 40.0, 97.0])
def test_unprojected_from_centres_within_tolerance(lat, r):
    """Vertices unprojected from their centre's derivatives are within TOL_UNPROJECT of
    PROJ's unprojection, across a UTM zone (and beyond it) at every UTM latitude, for
    offsets up to UNPROJECT_MAX_OFFSET."""
    p = Projector(utm_epsg(3.0, lat))
    rng = np.random.default_rng(int(abs(lat) * 10 + r))
    cx, cy = p.forward(rng.uniform(-6.0, 12.0, 50), np.clip(lat + rng.uniform(-0.5, 0.5, 50), -84, 84))
    centres = np.column_stack([cx, cy])
    ring = E.wkt_ring(r)
    src, k = np.repeat(np.arange(50), len(ring)), np.tile(np.arange(len(ring)), 50)
    xy = centres[src] + ring[k]
    lonlat = E._unproject_grown(xy, src, k, centres, ring, p)
    bx, by = p.forward(lonlat[:, 0], lonlat[:, 1])
    assert np.hypot(bx - xy[:, 0], by - xy[:, 1]).max() <= E.TOL_UNPROJECT
    lon, lat_ = p.inverse(xy[:, 0], xy[:, 1])
    assert not np.array_equal(lonlat, np.column_stack([lon, lat_]))        # not PROJ's own


@pytest.mark.parametrize("crs, lat, r", [("EPSG:2154", 46.5, 15.0), ("EPSG:32631", 86.0, 15.0),
                                         ("EPSG:32631", 52.2, 150.0)])
def test_unprojected_one_by_one_elsewhere(crs, lat, r):
    """Other projections, latitudes beyond UTM's and rings wider than UNPROJECT_MAX_OFFSET:
    PROJ's unprojection of every vertex, as before."""
    p = Projector(crs)
    x, y = p.forward(3.0, lat)
    parts = grown_convex_parts(np.array([Point(x, y), Point(x + 30.0, y)], dtype=object), E.wkt_ring(r))
    xy, _, (centres, src, k, ring) = parts
    lon, lat_ = p.inverse(xy[:, 0], xy[:, 1])
    assert np.array_equal(E._unproject_grown(xy, src, k, centres, ring, p), np.column_stack([lon, lat_]))


def test_grown_polygons_are_written_alone_as_in_a_batch():
    """Which way a polygon is unprojected depends on it alone: written in a batch with a
    polygon that has edges to split (and one GEOS's hull makes), each gets the text it gets
    alone, and what to_lonlat_wkt writes."""
    p = Projector(utm_epsg(0.1404, 52.1751))
    x, y = p.forward(np.array([0.1404, 0.1406, 0.17]), np.array([52.1751, 52.1752, 52.19]))
    stamps = [Loc.disc(x[0], y[0], 15.0), hull([Loc.disc(x[0], y[0], 15.0), Loc.disc(x[1], y[1], 15.0)]),
              hull([Loc.disc(x[0], y[0], 15.0), Loc.disc(x[2], y[2], 15.0)]),           # 2.7 km: split
              Loc.of(LineString([(x[0], y[0]), (x[0] + 10, y[0] + 5), (x[0] + 20, y[0] + 10)]), 15.0)]   # GEOS's
    geoms = np.array([s.geom for s in stamps], dtype=object)
    ring = E.wkt_ring(15.0)
    batch = E.lonlat_wkts(None, p, coords=grown_convex_parts(geoms, ring))
    alone = [E.lonlat_wkts(None, p, coords=grown_convex_parts(geoms[i:i + 1], ring))[0] for i in range(len(geoms))]
    assert batch == alone == [to_lonlat_wkt(s, p) for s in stamps]
    assert grown_convex_parts(geoms[3:], ring)[2][1].min() == -1
    # as Arrow text (the Spark tasks' JSON lines): the same texts, with a split edge or without
    for some in (geoms, geoms[:2], geoms[:0]):
        arrow = E.lonlat_wkts(None, p, coords=grown_convex_parts(some, ring), arrow=True)
        assert str(arrow.type) == "string" and arrow.to_pylist() == E.lonlat_wkts(None, p, coords=grown_convex_parts(some, ring))
    assert E.lonlat_wkts(geoms[:2], p, arrow=True).to_pylist() == E.lonlat_wkts(geoms[:2], p)
    assert len(shapely.get_coordinates(shapely.from_wkt(batch[2]))) > len(shapely.get_coordinates(shapely.from_wkt(batch[1]))) + 5


@pytest.mark.parametrize("lon, lat", [(0.1404, 52.1751), (-70.0, -33.4), (20.0, 69.6), (10.0, 84.0)])
@pytest.mark.parametrize("r", [15.0, 97.0])
def test_written_disc_within_tenth_everywhere(lon, lat, r):
    """The contract (lang/REFERENCE.md): the written polygon contains the disc but for
    rounding and lies within 0.1 m of it, at every UTM latitude."""
    p = Projector(utm_epsg(lon, lat))
    x, y = p.forward(lon, lat)
    wkt = to_lonlat_wkt(Loc.disc(x, y, r), p)
    c = shapely.get_coordinates(shapely.from_wkt(wkt))
    bx, by = p.forward(c[:, 0], c[:, 1])
    TestWkt.assert_within_tenth(np.column_stack([bx, by]), Point(x, y), r)


def test_many_stamps_written_as_one_by_one():
    """to_lonlat_wkts: the texts to_lonlat_wkt writes of each stamp (discs, points, convex and
    non-convex polygons, hulls, UNIVERSE, one stamp twice), their convexity tested together."""
    import pickle

    p = Projector(utm_epsg(0.1404, 52.1751))
    x, y = p.forward(0.1404, 52.1751)
    donut = Loc.of(shapely.affinity.translate(DONUT, x, y), 5.0)
    stamps = [Loc.disc(x, y, 15.0), UNIVERSE, Loc.disc(x, y, 0.0), Loc.of(shapely.affinity.translate(SQUARE, x, y), 5.0),
              donut, donut, hull([Loc.disc(x, y, 15.0), Loc.disc(x + 40, y + 10, 15.0)]),
              Loc.of(LineString([(x, y), (x + 10, y + 5), (x + 20, y + 10)]), 15.0)]
    fresh = pickle.loads(pickle.dumps(stamps))          # (no memo: each tested on its own)
    assert E.to_lonlat_wkts(stamps, p) == [to_lonlat_wkt(s, p) for s in fresh]

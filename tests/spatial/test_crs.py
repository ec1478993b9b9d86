import math
import pickle

import numpy as np
import pytest

from spatec.spatial.crs import Projector, data_centre, utm_epsg


class TestUtmEpsg:
    @pytest.mark.parametrize("lon, lat, code", [
        (-180.0, 10.0, "EPSG:32601"),
        (-177.0001, 10.0, "EPSG:32601"),
        (-174.0, 10.0, "EPSG:32602"),   # a zone's western edge belongs to it
        (0.0, 0.0, "EPSG:32631"),       # the equator is north
        (2.9999, -0.0001, "EPSG:32731"),
        (179.9999, 80.0, "EPSG:32660"),
        (180.0, -80.0, "EPSG:32760"),
        (10.0, 60.0, "EPSG:32632"),     # Norway's exception is ignored (it would be 32)
    ])
    def test_zones(self, lon, lat, code):
        assert utm_epsg(lon, lat) == code

    @pytest.mark.parametrize("lon, lat", [(math.nan, 0.0), (0.0, math.inf), (181.0, 0.0), (0.0, -91.0)])
    def test_rejects_bad_coordinates(self, lon, lat):
        with pytest.raises(ValueError):
            utm_epsg(lon, lat)


class TestDataCentre:
    def test_bbox_centre_ignores_non_finite(self):
        assert data_centre(np.array([0.0, 0.2, np.nan, 0.1]), [52.0, np.inf, 52.4, 52.2]) == (0.1, 52.2)

    def test_order_does_not_matter(self):
        rng = np.random.default_rng(3)
        lons, lats = rng.uniform(-1, 1, 1000), rng.uniform(51, 53, 1000)
        p = rng.permutation(1000)
        assert data_centre(lons, lats) == data_centre(lons[p], lats[p])

    @pytest.mark.parametrize("lons, lats", [([], []), ([np.nan], [1.0]), ([1.0], [np.nan])])
    def test_empty_is_an_error(self, lons, lats):
        with pytest.raises(ValueError, match="no finite"):
            data_centre(lons, lats)


class TestProjector:
    def test_round_trip_arrays_and_scalars(self):
        p = Projector(utm_epsg(0.14, 52.2))
        lon = np.array([0.10, 0.14, 0.20])
        lat = np.array([52.15, 52.20, 52.25])
        x, y = p.forward(lon, lat)
        assert isinstance(x, np.ndarray) and x.shape == (3,)
        lon2, lat2 = p.inverse(x, y)
        np.testing.assert_allclose(lon2, lon, atol=1e-9)
        np.testing.assert_allclose(lat2, lat, atol=1e-9)
        xs, ys = p.forward(0.14, 52.20)
        assert isinstance(xs, float) and (xs, ys) == (x[1], y[1])

    def test_metres(self):
        # 1/1000 degree of latitude is about 111 m anywhere.
        p = Projector("EPSG:32631")
        _, y0 = p.forward(0.14, 52.2)
        _, y1 = p.forward(0.14, 52.201)
        assert 110.0 < y1 - y0 < 112.0

    def test_pickles_to_just_its_crs(self):
        p = Projector("EPSG:32630")
        p.forward(0.0, 51.0)  # builds transformers, which must not travel
        data = pickle.dumps(p)
        assert len(data) < 200
        q = pickle.loads(data)
        assert q == p and hash(q) == hash(p) and q.crs == "EPSG:32630"
        assert q.forward(0.0, 51.0) == p.forward(0.0, 51.0)

    def test_transformers_are_per_thread(self):
        import threading

        p = Projector("EPSG:32631")
        out = []
        ts = [threading.Thread(target=lambda: out.append(p.forward(0.1, 52.0))) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(set(out)) == 1 and out[0] == p.forward(0.1, 52.0)

    @pytest.mark.parametrize("crs", ["EPSG:4326", "not a crs"])
    def test_rejects_non_metric(self, crs):
        with pytest.raises(ValueError):
            Projector(crs)

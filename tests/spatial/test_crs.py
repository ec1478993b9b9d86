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


# ------------------------------------------------------------------------------ choosing the CRS

import logging  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import pandas as pd  # noqa: E402

from spatec.spatial.crs import (  # noqa: E402
    choose_crs,
    crs_warning,
    far_positions,
    median_centre,
    merge_cells,
    metric_crs,
    position_cells,
)


def _frame(lons, lats):
    """Canonical point events (only the columns the CRS choice reads)."""
    return pd.DataFrame({"_place": "point", "_lon": np.asarray(lons, float), "_lat": np.asarray(lats, float),
                         "_geom": None})


def _cambridge(n=500, seed=1):
    rng = np.random.default_rng(seed)
    return rng.uniform(-0.2, 0.6, n), rng.uniform(52.0, 52.4, n)


NO_PROGRAM = SimpleNamespace(crs=None, places={})


class TestChooseCrs:
    def test_an_outlier_cannot_move_it(self, caplog):
        lons, lats = _cambridge()
        alone = choose_crs(NO_PROGRAM, {"BusGPS": _frame(lons, lats)})
        # the stray fix: its bounding box centre would be in EPSG:32745
        with_far = choose_crs(NO_PROGRAM, {"BusGPS": _frame([*lons, 179.5], [*lats, -60.0])})
        assert alone == with_far == "EPSG:32631"
        # a handful of them, anywhere, neither
        more = choose_crs(NO_PROGRAM, {"BusGPS": _frame([*lons, 179.5, -170, 100], [*lats, -60, 80, 10])})
        assert more == alone

    def test_median_not_bounding_box(self):
        # most of the fleet west of Greenwich (zone 30), a long tail east into zone 31
        lons = np.r_[np.full(60, -0.5), np.linspace(0.1, 8.0, 40)]
        lats = np.full(100, 52.2)
        assert choose_crs(NO_PROGRAM, {"T": _frame(lons, lats)}) == "EPSG:32630"

    def test_far_positions_warn(self, caplog):
        lons, lats = _cambridge()
        with caplog.at_level(logging.WARNING, logger="spatec.crs"):
            crs = choose_crs(NO_PROGRAM, {"BusGPS": _frame([*lons, 100.0, 100.01], [*lats, 10.0, 10.0])})
        assert crs == "EPSG:32631"
        [record] = [r for r in caplog.records if r.name == "spatec.crs"]
        assert "2 of 502 positions lie too far from EPSG:32631 to be measured within 0.1 m" in record.message
        assert "lon 100.0, lat 10.0" in record.message

    def test_near_positions_do_not_warn(self, caplog):
        lons, lats = _cambridge()
        with caplog.at_level(logging.WARNING, logger="spatec.crs"):
            choose_crs(NO_PROGRAM, {"BusGPS": _frame(lons, lats)})
        assert not [r for r in caplog.records if r.name == "spatec.crs"]

    def test_an_override_is_checked_too(self, caplog):
        lons, lats = _cambridge()
        with caplog.at_level(logging.WARNING, logger="spatec.crs"):
            # Sydney's zone for Cambridge data: every position is far from it
            assert choose_crs(NO_PROGRAM, {"BusGPS": _frame(lons, lats)}, "EPSG:32756") == "EPSG:32756"
        assert "500 of 500 positions" in caplog.records[-1].message

    def test_the_scale_error_decides(self):
        # transverse Mercator is accurate near its central meridian's great circle, which
        # runs through the antimeridian too: 179.5 E, 60 S is measurable in zone 31
        assert far_positions("EPSG:32631", position_cells([179.5], [-60.0]))[0] == 0
        # 5 degrees off the zone's meridian at the equator is not (scale error ~0.4 %)
        n, _, err = far_positions("EPSG:32631", position_cells([8.0], [0.0]))
        assert n == 1 and 0.1 < err < 1.0
        assert far_positions("EPSG:32631", position_cells([3.5], [0.0]))[0] == 0

    def test_chunks_merge_to_the_whole(self):
        rng = np.random.default_rng(5)
        lons, lats = rng.uniform(-10, 30, 3000), rng.uniform(35, 60, 3000)
        whole = position_cells(lons, lats)
        parts = [position_cells(lons[i::3], lats[i::3]) for i in range(3)]
        assert merge_cells(parts) == whole
        assert median_centre(merge_cells(reversed(parts))) == median_centre(whole)
        # the Spark ingest passes chunks' cells: the same CRS as from the frames
        assert choose_crs(NO_PROGRAM, {}, cells=merge_cells(parts)) == choose_crs(NO_PROGRAM, {"T": _frame(lons, lats)})

    def test_program_crs_and_places(self):
        prog = SimpleNamespace(crs="EPSG:27700", places={})
        assert choose_crs(prog, {"T": _frame(*_cambridge())}) == "EPSG:27700"
        place = SimpleNamespace(kind="circle", lon=151.2, lat=-33.9)
        assert choose_crs(SimpleNamespace(crs=None, places={"opera": place}), {}) == "EPSG:32756"

    def test_warning_text_without_far_positions(self):
        assert crs_warning("EPSG:32631", position_cells(*_cambridge())) is None

    @pytest.mark.parametrize("crs, why", [("EPSG:4326", "not a projected CRS in metres"),
                                          ("EPSG:2263", "not a projected CRS in metres"),   # US feet
                                          ("EPSG:99999", "unknown CRS")])
    def test_metric_crs(self, crs, why):
        with pytest.raises(ValueError, match=why):
            metric_crs(crs)

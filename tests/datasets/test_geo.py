"""geo/: the named places and road zones, and that build.py reproduces them."""
import importlib.util
import json
from pathlib import Path

import pytest
from pyproj import Geod
from shapely.geometry import Point, shape

from spatec.datasets import registry as datasets
from spatec.errors import DataError

GEO = Path(__file__).resolve().parents[2] / "geo"
GEOD = Geod(ellps="WGS84")
REQUIRED = {"hospital", "station", "centre", "park_and_ride_trumpington",
            "park_and_ride_madingley", "cambridge_north"}


def load(name):
    return json.loads((GEO / name).read_text(encoding="utf-8"))


def test_named_places_are_circles_around_their_stops():
    doc = load("cambridge.geojson")
    assert doc["type"] == "FeatureCollection"
    feats = {f["properties"]["name"]: f for f in doc["features"]}
    assert REQUIRED <= set(feats)
    for name, f in feats.items():
        props, ring = f["properties"], f["geometry"]["coordinates"][0]
        assert f["geometry"]["type"] == "Polygon"
        assert ring[0] == ring[-1] and len(ring) == props["vertices"] + 1 == 65
        lon, lat = props["center"]
        radii = [GEOD.inv(lon, lat, x, y)[2] for x, y in ring]
        assert max(abs(r - props["radius_m"]) for r in radii) < 0.05, name
        assert props["radius_m"] >= props["farthest_stop_m"] + 50 - 1e-9
        assert shape(f["geometry"]).is_valid
        assert "tfc_web" in props["source"]


def test_places_agree_with_bus_spatec():
    feats = {f["properties"]["name"]: f["properties"] for f in load("cambridge.geojson")["features"]}
    spatec_places = {"hospital": (0.14491, 52.17590, 150), "station": (0.13610, 52.19300, 200),
                     "centre": (0.12415, 52.20520, 120)}
    for name, (lon, lat, r) in spatec_places.items():
        assert GEOD.inv(lon, lat, *feats[name]["center"])[2] < 30
        assert feats[name]["radius_m"] >= r


def test_zones_are_valid_polygons_with_their_lines():
    doc = load("zones.geojson")
    assert len(doc["features"]) == 86
    for f in doc["features"]:
        p = f["properties"]
        poly = shape(f["geometry"])
        assert poly.is_valid and poly.area > 0, p["name"]
        assert len(p["start_line"]) == 2 and len(p["finish_line"]) == 2
        for x, y in p["start_line"] + p["finish_line"]:
            assert poly.exterior.distance(Point(x, y)) < 1e-9


def test_build_reproduces_the_committed_files(tmp_path):
    try:
        stops = datasets.resolve("cambridge-stops", download=False)
        zones = datasets.resolve("cambridge-zones", download=False)
    except DataError:
        pytest.skip("stops.csv / zones.json not available")
    spec = importlib.util.spec_from_file_location("geo_build", GEO / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    for name, text in build.build(stops, zones).items():
        assert (GEO / name).read_text(encoding="utf-8") == text, f"{name} is stale: run geo/build.py"

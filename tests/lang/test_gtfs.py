"""GTFS static feeds as places: ``places NAME = gtfs "feed.zip" stops|shapes|routes [± D]`` and
``places gtfs "feed.zip" TABLE`` (lang/REFERENCE.md, *Places from a GTFS feed*), read with
gtfs-kit; the feed the tests use is built from the Cambridge stops and hour
(:mod:`spatec.datasets.gtfsfeed`), and small feeds written here show each error."""
from __future__ import annotations

import csv
import zipfile

import pytest
from lang_support import SHARED, at, check_text, diagnostics, one

from spatec.frontend.parse import parse_text
from spatec.frontend.printer import print_module

CAMBRIDGE = SHARED / "datasets" / "cambridge"


@pytest.fixture(scope="module")
def cambridge_feed(tmp_path_factory):
    """The feed built from stops.csv and the SIRI-VM hour (never part of the repository)."""
    if not (CAMBRIDGE / "stops.csv").is_file():
        pytest.skip(f"{CAMBRIDGE} is not available")
    from spatec.datasets import gtfsfeed

    path = tmp_path_factory.mktemp("gtfs") / "cambridge.zip"
    counts = gtfsfeed.build(CAMBRIDGE / "stops.csv", CAMBRIDGE / "sirivm_2019-10-01_0854-1000.csv.gz", path)
    return path, counts


def write_feed(folder, **tables):
    """A feed folder: each keyword a table, its value the CSV text."""
    folder.mkdir(parents=True, exist_ok=True)
    base = {
        "agency": "agency_id,agency_name,agency_url,agency_timezone\nA,Agency,https://x.org/,Europe/London\n",
        "stops": "stop_id,stop_name,stop_lat,stop_lon\nS1,Station,52.19300,0.13610\nS2,Centre,52.20520,0.12415\n",
        "routes": "route_id,agency_id,route_short_name,route_type\nR1,A,U,3\n",
        "trips": "route_id,service_id,trip_id,direction_id,shape_id\nR1,D,T1,0,SH1\n",
        "shapes": ("shape_id,shape_pt_lat,shape_pt_lon,shape_pt_sequence\n"
                   "SH1,52.1930,0.1300,1\nSH1,52.1930,0.1400,2\n"),
    }
    base.update(tables)
    for name, text in base.items():
        if text is not None:
            (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    return folder


def zipped(folder, path):
    with zipfile.ZipFile(path, "w") as z:
        for p in sorted(folder.iterdir()):
            z.write(p, p.name)
    return path


class TestTheCambridgeFeed:
    def test_gtfs_kit_reads_it_and_its_stops_are_the_data_sets(self, cambridge_feed):
        import gtfs_kit

        path, counts = cambridge_feed
        feed = gtfs_kit.read_feed(path, dist_units="km")
        with open(CAMBRIDGE / "stops.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        assert len(feed.stops) == len(rows) == counts["stops"] == 1388
        assert list(feed.stops["stop_id"]) == [r["stop_id"] for r in rows]
        assert feed.stops["stop_lat"].iloc[0] == pytest.approx(float(rows[0]["lat"]))
        # one route per operator and line, one trip and shape per direction
        assert counts["routes"] == len(feed.routes) and counts["trips"] == len(feed.trips) == len(feed.shapes
                                                                                                 .shape_id.unique())
        assert set(feed.trips["direction_id"]) == {0, 1}
        assert feed.stop_times.groupby("trip_id")["stop_sequence"].apply(
            lambda s: list(s) == list(range(1, len(s) + 1))).all()

    def test_stops_as_a_place_set_are_the_csv_sets_places(self, cambridge_feed, tmp_path):
        path, _ = cambridge_feed
        program = check_text(f'places gstops = gtfs "{path}" stops ± 40 m\n'
                             f'places cstops = "{CAMBRIDGE / "stops.csv"}"\n    place point(lon, lat) ± 40 m\n',
                             tmp_path)
        g, c = program.place_sets["gstops"], program.place_sets["cstops"]
        assert len(g) == len(c) == 1388
        flat = [x for p in g.places for x in (p.lon, p.lat, p.radius)]
        assert flat == pytest.approx([x for p in c.places for x in (p.lon, p.lat, p.radius)], abs=1e-9)
        assert g.attrs["stop_id"] == "str" and g.attrs["stop_name"] == "str"
        assert g.values[0]["stop_id"] == c.values[0]["stop_id"] and g.values[0]["stop_name"] == c.values[0]["name"]

    def test_shapes_are_corridors_with_their_route_and_direction(self, cambridge_feed, tmp_path):
        path, counts = cambridge_feed
        program = check_text(f'places corridors = gtfs "{path}" shapes ± 30 m\n', tmp_path)
        s = program.place_sets["corridors"]
        assert len(s) == counts["shapes"]
        assert {p.kind for p in s.places} == {"line"} and {p.widen for p in s.places} == {30.0}
        assert {"shape_id", "route_id", "route_short_name", "direction_id"} <= set(s.attrs)
        assert s.attrs["direction_id"] == "int"
        one_ = s.values[[v["shape_id"] for v in s.values].index("SCCM-1-0")]
        assert (one_["route_id"], one_["route_short_name"], one_["direction_id"]) == ("SCCM-1", "1", 0)


class TestMatching:
    """A corridor is the shape's line widened: a fix on it is at it, one 100 m off is not."""

    PROGRAM = """
places corridors = gtfs "feed" shapes ± 30 m
places stops = gtfs "feed" stops ± 40 m
places gtfs "feed" routes ± 30 m

phrase OnCorridor per vehicle =
    BusGPS -> A and certainly at corridors -> S
  emit shape = S.shape_id, line = S.route_short_name

phrase OffR1 per vehicle =
    BusGPS -> A and certainly not at R1
  emit vehicle = A.vehicle

phrase AtStop per vehicle =
    BusGPS -> A and at stops -> S
  emit stop = S.stop_id, name = S.stop_name
"""

    def replay(self, tmp_path, spark=None):
        import spatec

        write_feed(tmp_path / "feed")
        (tmp_path / "p.spatec").write_text('include "bus.spatec"\n' + self.PROGRAM, encoding="utf-8")
        from lang_support import BUS

        (tmp_path / "bus.spatec").write_text(BUS, encoding="utf-8")
        # on the line at 0.135 (the corridor is 30 m each side; a disc of 15 m inside it), 100 m north
        # of it, and at the station stop (52.19300, 0.13610: on the line too)
        rows = [("v1", "U", "SCCM", "INBOUND", 0.1350, 52.19300, 1569916800),
                ("v1", "U", "SCCM", "INBOUND", 0.1350, 52.19390, 1569916830),
                ("v2", "U", "SCCM", "INBOUND", 0.13610, 52.19300, 1569916800)]
        csv_path = tmp_path / "fixes.csv"
        csv_path.write_text("vehicle,line,operator,direction,lon,lat,ts\n" + "".join(",".join(map(str, r)) + "\n" for r in rows),
                            encoding="utf-8")
        prog = spatec.compile(tmp_path / "p.spatec")
        if spark is not None:
            return prog.replay_spark({"BusGPS": str(csv_path)}, spark=spark)
        return prog.replay_local({"BusGPS": str(csv_path)})

    @pytest.mark.slow
    def test_spark_gives_the_same_composites(self, tmp_path, spark):
        local, on_spark = self.replay(tmp_path), self.replay(tmp_path, spark)
        for phrase in ("OnCorridor", "OffR1", "AtStop"):
            assert sorted(local[phrase]["id"]) == sorted(on_spark[phrase]["id"]) and len(local[phrase])

    def test_on_off_and_at_a_stop(self, tmp_path):
        out = self.replay(tmp_path)
        on = out["OnCorridor"]
        assert list(on["shape"]) == ["SH1", "SH1"] and list(on["line"]) == ["U", "U"]
        assert sorted(out["OffR1"]["vehicle"]) == ["v1"]
        at_stop = out["AtStop"]
        assert list(at_stop["stop"]) == ["S1"] and list(at_stop["name"]) == ["Station"]


class TestDeclaration:
    def test_it_prints_and_parses_back(self):
        text = ('places stops = gtfs "feed.zip" stops ± 40 m\n\nplaces gtfs "feed.zip" routes ± 30 m\n\n'
                'places corridors = gtfs "feed.zip" shapes ± 30 m\n')
        m = parse_text(text, "x.spatec")
        assert print_module(m) == text
        assert [d.gtfs for d in m.decls] == ["stops", "routes", "shapes"]

    def test_a_zip_and_a_folder_are_one_feed(self, tmp_path):
        folder = write_feed(tmp_path / "feed")
        zipped(folder, tmp_path / "feed.zip")
        a = check_text('places s = gtfs "feed" stops\nplaces z = gtfs "feed.zip" stops\n', tmp_path)
        assert a.place_sets["s"].values == a.place_sets["z"].values

    def test_named_places_of_a_feed(self, tmp_path):
        write_feed(tmp_path / "feed", routes="route_id,agency_id,route_short_name,route_type\nR1,A,U,3\n")
        program = check_text('places gtfs "feed" routes ± 30 m\nphrase P = BusGPS -> A and at R1\n', tmp_path)
        assert program.places["R1"].kind == "line" and program.places["R1"].widen == 30.0


class TestErrors:
    def test_no_such_feed(self, tmp_path):
        d = one('places stops = gtfs "nowhere.zip" stops ± 40 m\n', tmp_path)
        assert "cannot read GTFS feed \"nowhere.zip\": no such file" in d.message
        assert at(d, "places stops", '"nowhere.zip"')

    def test_not_a_zip(self, tmp_path):
        (tmp_path / "feed.zip").write_text("stop_id\n", encoding="utf-8")
        d = one('places stops = gtfs "feed.zip" stops\n', tmp_path)
        assert "not a GTFS feed (not a zip file)" in d.message

    def test_an_unknown_table_has_a_did_you_mean(self, tmp_path):
        write_feed(tmp_path / "feed")
        d = one('places stops = gtfs "feed" stop ± 40 m\n', tmp_path)
        assert d.message == "places stops: a GTFS feed has no table stop to make places of"
        assert d.hint == "did you mean `stops`?" and at(d, "places stops", "stop", after='"feed"')

    def test_a_corridor_needs_a_width(self, tmp_path):
        write_feed(tmp_path / "feed")
        d = one('places corridors = gtfs "feed" shapes\n', tmp_path)
        assert "a line needs a width to be a corridor" in d.message and "± 30 m" in d.hint

    def test_a_stop_out_of_range_is_shown_at_its_row(self, tmp_path):
        write_feed(tmp_path / "feed", stops="stop_id,stop_name,stop_lat,stop_lon\nS1,A,52.19,0.136\nS2,B,0.12,152.2\n"
                                            "S3,C,95.0,0.1\n")
        d = one('places stops = gtfs "feed" stops\n', tmp_path)
        assert d.message == "places stops: stop S3: stop_lat 95 is not a latitude"
        assert d.span.file.endswith("feed/stops.txt") and d.span.line == 4 and d.source_line == "S3,C,95.0,0.1"

    def test_a_feed_without_the_table(self, tmp_path):
        write_feed(tmp_path / "feed", shapes=None)
        d = one('places corridors = gtfs "feed" shapes ± 30 m\n', tmp_path)
        assert "the feed has no shapes.txt" in d.message

    def test_routes_without_a_shape_are_named(self, tmp_path):
        write_feed(tmp_path / "feed", routes="route_id,agency_id,route_short_name,route_type\nR1,A,U,3\nR2,A,2,3\n")
        d = one('places lines = gtfs "feed" routes ± 30 m\n', tmp_path)
        assert "1 route has no shape (R2)" in d.message and "match `shapes` instead" in d.hint

    def test_a_place_clause_after_a_feed_is_refused(self, tmp_path):
        write_feed(tmp_path / "feed")
        ds = diagnostics('places stops = gtfs "feed" stops\n    place point(stop_lon, stop_lat) ± 40 m\n', tmp_path)
        assert ds[0].message == "places stops: a GTFS table brings its own regions"
        assert "places stops = gtfs" in ds[0].hint

    def test_named_places_must_be_unique(self, tmp_path):
        write_feed(tmp_path / "feed", stops="stop_id,stop_name,stop_lat,stop_lon\nS1,A,52.19,0.136\nS1,B,52.2,0.12\n")
        d = one('places gtfs "feed" stops\n', tmp_path)
        assert '1 name is used twice ("S1")' in d.message

    def test_a_widening_must_be_a_distance(self, tmp_path):
        write_feed(tmp_path / "feed")
        d = one('places stops = gtfs "feed" stops ± 5 min\n', tmp_path)
        assert "expected a distance, got a duration `5 min`" in d.message
        d = one('places gtfs "feed" routes ± 5 min\n', tmp_path)
        assert "a widening must be a distance" in d.message

    def test_the_feed_is_never_fetched(self, tmp_path, monkeypatch):
        """gtfs-kit reads a path that does not exist as a URL: spatec never lets it."""
        import gtfs_kit

        def no(*a, **k):
            raise AssertionError("gtfs-kit was asked to read a feed that is not there")
        monkeypatch.setattr(gtfs_kit.feed, "_read_feed_from_url", no)
        d = one('places stops = gtfs "https://example.org/feed.zip" stops\n', tmp_path)
        assert "no such file" in d.message

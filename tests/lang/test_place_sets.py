"""Place sets (SPEC §9) in the front end: reading CSV and GeoJSON sets, their rows'
errors (file:line:col in the data file), quoted and digit-first place names,
bound places and what the back end gets."""
from __future__ import annotations

import random
import shutil

import pytest
from lang_support import CORPUS, SHARED, at, check_text, diagnostics, messages, one

from spatec.frontend import ast as A
from spatec.frontend.parse import parse_text
from spatec.frontend.places import MAX_BAD_ROWS
from spatec.frontend.printer import print_match
from spatec.frontend.schema import json_schema


@pytest.fixture
def here(tmp_path):
    """A folder with the corpus's stops.csv and named_stops.geojson."""
    for name in ("stops.csv", "named_stops.geojson", "stops.geojson"):
        shutil.copy(CORPUS / name, tmp_path / name)
    return tmp_path


STOPS = 'places stops = "stops.csv"\n    place point(lon, lat) ± 40 m\n'


class TestReading:
    def test_a_csv_set(self, here):
        program = check_text(STOPS, here)
        s = program.place_sets["stops"]
        assert len(s) == 4 and s.place_id(0) == "stops:1"
        assert s.attrs == {"stop_id": "str", "name": "str", "lat": "float", "lon": "float", "bays": "int",
                           "shelter": "str"}
        assert s.values[3] == {"stop_id": "9100TEST004", "name": "Parker's Piece, north", "lat": 52.204,
                               "lon": 0.131, "bays": 1, "shelter": None}
        first = s.places[0]
        assert (first.kind, first.lon, first.lat, first.radius) == ("circle", 0.12415, 52.2052, 40.0)

    def test_ids_with_leading_zeros_stay_text(self, here):
        (here / "codes.csv").write_text("code,lon,lat\n0123,0.1,52.2\n0456,0.1,52.3\n", encoding="utf-8")
        program = check_text('places codes = "codes.csv"\n    place point(lon, lat)\n', here)
        assert program.place_sets["codes"].attrs["code"] == "str"
        assert program.place_sets["codes"].values[0]["code"] == "0123"

    def test_a_geojson_set_with_properties(self, here):
        program = check_text('places named = "named_stops.geojson"\n', here)
        s = program.place_sets["named"]
        assert s.attrs == {"name": "str", "radius_m": "int", "bays": "int"}
        assert [p.kind for p in s.places] == ["circle", "circle", "polygon"]
        assert s.places[0].radius == 60.0  # a point feature's radius_m, as for `places "FILE"`

    def test_a_geojson_set_placed_from_properties(self, here):
        (here / "pts.geojson").write_text(
            '{"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": null, '
            '"properties": {"x": 0.12, "y": 52.2, "ref": "a"}}]}', encoding="utf-8")
        program = check_text('places pts = "pts.geojson"\n    place point(x, y) ± 10 m\n', here)
        p = program.place_sets["pts"].places[0]
        assert (p.lon, p.lat, p.radius) == (0.12, 52.2, 10.0)

    def test_a_set_of_100000_places(self, tmp_path):
        rng = random.Random(7)
        rows = ["id,lon,lat,kind"] + [f"z{i},{0.0 + rng.random():.6f},{52.0 + rng.random():.6f},{i % 7}"
                                      for i in range(100_000)]
        (tmp_path / "zones.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        program = check_text('places zones = "zones.csv"\n    place point(lon, lat) ± 25 m\n\n'
                             'phrase InZone = BusGPS -> A and certainly at zones -> Z\n'
                             '  where Z.kind == 3\n  emit zone = Z.id\n', tmp_path)
        assert len(program.place_sets["zones"]) == 100_000
        assert program.phrase("InZone").places["Z"].attrs["kind"] == "int"

    def test_the_cambridge_stops(self):
        spec = SHARED / "spec" / "examples" / "dwell_at_stops.spatec"
        if not spec.is_file() or not (SHARED / "datasets" / "cambridge" / "stops.csv").is_file():
            pytest.skip("the shared spec examples or the Cambridge stops are not available")
        from spatec.frontend.check import check_file

        program = check_file(spec)
        assert len(program.place_sets["stops"]) == 1388
        info = program.phrase("DwellAtStop")
        assert info.places["S"].certainly and info.places["S"].attrs["stop_id"] == "str"
        assert info.constructs == {"runs", "place sets", "bound places"}


class TestBadRows:
    def test_each_bad_row_at_its_line_and_field(self, tmp_path):
        (tmp_path / "s.csv").write_text(
            "stop_id,name,lat,lon\nA,ok,52.2,0.12\nB,no lon,52.2,\nC,\"far, away\",152.2,0.1\nD,short,52.2\n"
            "E,nan,52.2,east\n", encoding="utf-8")
        ds = diagnostics('places s = "s.csv"\n    place point(lon, lat)\n', tmp_path)
        rows = [(d.span.file.rsplit("/", 1)[-1], d.span.line, d.span.col, d.message, d.source_line) for d in ds]
        assert rows == [
            ("s.csv", 3, 15, "places s: `lon` is empty, not a number", "B,no lon,52.2,"),
            ("s.csv", 4, 15, "places s: 152.2 is not a latitude", 'C,"far, away",152.2,0.1'),
            ("s.csv", 5, 1, "places s: the row has 3 fields, the header 4", "D,short,52.2"),
            ("s.csv", 6, 12, 'places s: `lon` is "east", not a number', "E,nan,52.2,east"),
        ]
        assert ds[0].render().startswith(f"{tmp_path / 's.csv'}:3:15: places s: `lon` is empty")
        assert ds[3].render().splitlines()[1:] == ["    E,nan,52.2,east", "               ^^^^"]

    def test_many_bad_rows_are_counted_not_all_listed(self, tmp_path):
        (tmp_path / "s.csv").write_text("id,lon,lat\n" + "".join(f"x{i},?,52\n" for i in range(25)),
                                        encoding="utf-8")
        ds = diagnostics('places s = "s.csv"\n    place point(lon, lat)\n', tmp_path)
        assert len(ds) == MAX_BAD_ROWS + 1
        assert ds[0].message == f"places s: {25 - MAX_BAD_ROWS} more bad rows in \"s.csv\""
        assert at(ds[0], "places s", '"s.csv"')

    def test_a_missing_column_points_at_the_clause(self, here):
        d = one('places stops = "stops.csv"\n    place point(lng, lat)\n', here)
        assert d.message == '"stops.csv" has no column lng' and d.hint == "did you mean `lon`?"
        assert d.source_line == "    place point(lng, lat)"

    def test_a_missing_file_points_at_the_file_string(self, here):
        d = one('places stops = "nope.csv"\n    place point(lon, lat)\n', here)
        assert d.message.startswith('cannot read places "nope.csv": no such file')
        assert at(d, "places stops", '"nope.csv"')

    def test_duplicate_names_in_a_places_file_are_one_error(self, tmp_path):
        feats = ",".join('{"type": "Feature", "properties": {"name": "Hills Road"}, '
                         f'"geometry": {{"type": "Point", "coordinates": [0.1{i}, 52.2]}}}}' for i in range(5))
        (tmp_path / "dup.geojson").write_text(f'{{"type": "FeatureCollection", "features": [{feats}]}}',
                                              encoding="utf-8")
        d = one('places "dup.geojson"\n', tmp_path)
        assert d.message == 'places "dup.geojson": 4 feature names are used twice ("Hills Road", "Hills Road", ' \
                            '"Hills Road", ...)'
        assert "places NAME = \"dup.geojson\"" in d.hint


class TestNames:
    def test_quoted_names_and_stop_ids(self, here):
        program = check_text('places "named_stops.geojson"\n\nphrase P =\n    BusGPS -> A and '
                             '(at "Hospital Bus Station" or at 0500CCITY423 or within 50 m of "Parker\'s Piece")\n',
                             here)
        assert {"Hospital Bus Station", "0500CCITY423", "Parker's Piece"} <= set(program.places)

    @pytest.mark.parametrize("text, name", [
        ('at "Hospital Bus Station"', "Hospital Bus Station"), ("at 0500CCITY423", "0500CCITY423"),
        ("at 12", "12"), ('at "at"', "at"), ('at "Monday"', "Monday"),
    ])
    def test_printed_back(self, text, name):
        m = parse_text(f"phrase P = {text}").decls[0].match
        assert m == A.AtPlace(name)
        assert print_match(m) == text

    def test_the_unknown_place_name_itself(self, here):
        d = one(STOPS + "\nphrase P = BusGPS -> A and certainly at stopz -> S\n", here)
        assert d.message == "unknown place stopz" and d.hint == "did you mean `stops`?"
        assert at(d, "certainly", "stopz")


class TestBoundPlaces:
    def test_binding(self, here):
        program = check_text(STOPS + "\nphrase P = BusGPS -> A and certainly at stops -> S\n"
                                     "  where S.bays > 2 and distance(A, S) < 10 m and overlap(A, S)\n"
                                     "  emit stop = S.stop_id, bays = S.bays\n", here)
        info = program.phrase("P")
        b = info.places["S"]
        assert (b.var, b.place, b.certainly) == ("S", "stops", True)
        assert info.vars == {"A": "BusGPS"} and "S" not in info.vars
        assert info.schema == [("stop", "str"), ("bays", "number")]
        assert info.constructs == {"place sets", "bound places"}
        schema = json_schema(program, info)
        assert schema["properties"]["places"]["required"] == ["S"] and "places" in schema["required"]

    def test_a_single_place_bound_has_a_name(self):
        info = check_text("phrase P = BusGPS -> A and at hospital -> H\n  emit h = H.name\n").phrase("P")
        assert info.places["H"].attrs == {"name": "str"} and not info.places["H"].certainly

    @pytest.mark.parametrize("use, message, token", [
        ("S.stop_name", "the places of stops have no attribute stop_name", "stop_name"),
        ("S.t", "S is a place: it has no time stamp (S.t)", "t"),
        ("speed(A, S)", "S is a place: speed needs events", "S"),
        ("duration(A, S)", "S is a place: duration needs events", "S"),
        ("S", "emit an attribute of the place (`S.name`), not the place itself", "S"),
    ])
    def test_misuses(self, here, use, message, token):
        d = one(STOPS + f"\nphrase P = BusGPS -> A and at stops -> S\n  emit x = {use}\n", here)
        assert d.message == message
        assert at(d, "emit", token, after="x = ")

    @pytest.mark.parametrize("match", [
        "BusGPS -> A and (at stops -> S or at centre)",
        "BusGPS -> A and not at stops -> S",
        "BusGPS -> A ; not (BusGPS -> X and at stops -> S) within 5 min",
        "run (BusGPS and at stops -> S) -> R",
    ])
    def test_only_beside_an_event(self, here, match):
        assert any(m.startswith("a place can be bound only beside an event") for m in
                   messages(STOPS + f"\nphrase P per vehicle = {match}\n", here))

"""The messages a new analyst met (issue 32), each with what it says now: a unit slip that no
longer hides the errors after it, a clock time in a condition, a place used as a variable,
a bad place-file row reported once, an unclosed quote, longitude and latitude swapped, and
a missing input column with the one it may have meant and the declaration that reads it."""
from __future__ import annotations

import logging

import pandas as pd
import pytest
from lang_support import BUS, at, check_text, diagnostics, one

from spatec.errors import DataError
from spatec.events.read import read_events
from spatec.frontend.check import check_file
from spatec.spatial.crs import choose_crs

HOUR = "/work/shared/datasets/cambridge/sirivm_2019-10-01_0854-1000.csv.gz"


class TestUnitSlips:
    def test_within_90_mins_says_min_and_the_errors_after_it_are_reported(self):
        ds = diagnostics("phrase Slow per vehicle =\n    BusGPS -> A ; BusGPS -> B\n  within 90 mins\n"
                         "  emit minutes = duration(A, B) / 1 min\n\n"
                         "phrase Other =\n    BusGPS -> C and at nowhere\n")
        assert [d.message for d in ds] == ["unknown unit `mins`; did you mean `min`?", "unknown place nowhere"]
        assert at(ds[0], "within", "mins")

    @pytest.mark.parametrize("slip, unit", [("5 minutes", "min"), ("30 secs", "s"), ("2 hours", "h"),
                                            ("150 metres", "m"), ("1.5 kms", "km"), ("40 kph", "km/h"),
                                            ("1 day", "d")])
    def test_other_spellings(self, slip, unit):
        d = one(f"phrase P = BusGPS -> A ; BusGPS -> B\n  where speed(A, B) < 1 km/h or duration(A, B) > 1 h\n"
                f"  within 1 h\n  emit x = {slip} / 1 {unit}\n")
        assert d.message == f"unknown unit `{slip.split()[1]}`; did you mean `{unit}`?"

    def test_a_unit_written_right_is_no_slip(self):
        check_text("phrase P = BusGPS -> A ; BusGPS -> B\n  within 90 min\n")

    def test_a_missing_unit_still_says_so(self):
        d = diagnostics("phrase P = BusGPS -> A ; BusGPS -> B\n  within 90\n")[0]
        assert d.hint == "durations and distances need a unit: `30 s`, `20 min`, `150 m`, `12 km/h`"


class TestClockInCondition:
    def test_a_time_of_day_says_how_to_compare_it(self):
        d = diagnostics("phrase Morning =\n    BusGPS -> A\n  where A.t > 09:00\n")[0]
        assert d.message.startswith("`09:00` is a time of day: a condition compares instants")
        assert "between 09:00 and" in d.hint and "A.t > 2019-10-01T09:00" in d.hint
        assert "need a unit" not in d.hint
        assert at(d, "where", "09:00")


class TestPlaceAsVariable:
    def test_distance_to_a_place_suggests_binding_it(self):
        d = one("phrase Near =\n    BusGPS -> A\n  where distance(A, hospital) < 100 m\n")
        assert d.message == "hospital is a place, not a variable"
        assert "at hospital -> P" in d.hint and "distance(A, P)" in d.hint and "BusGPS -> hospital" not in d.hint
        assert at(d, "where", "hospital")

    def test_a_place_set_suggests_its_nearest_place(self, tmp_path):
        (tmp_path / "stops.csv").write_text("stop_id,lon,lat\nS1,0.12,52.2\n", encoding="utf-8")
        d = one('places stops = "stops.csv"\n    place point(lon, lat) ± 40 m\n\n'
                "phrase Near =\n    BusGPS -> A\n  where distance(A, stops) < 100 m\n", tmp_path)
        assert d.message == "stops is a place set, not a variable"
        assert "at nearest stops -> P" in d.hint

    def test_an_unbound_variable_is_still_one(self):
        d = one("phrase Near =\n    BusGPS -> A\n  where distance(A, B) < 100 m\n")
        assert d.message == "variable B is used but never bound"


STOPS_BODY = ('places stops = "stops.csv"\n    place point(lon, lat) ± 40 m\n\n'
              "phrase AtStop =\n    BusGPS -> A and at stops -> S\n  where S.name != \"x\"\n  emit stop = S.stop_id\n")


class TestPlaceFiles:
    def test_a_bad_row_is_reported_once_without_a_cascade(self, tmp_path):
        (tmp_path / "stops.csv").write_text("stop_id,name,lat,lon\nS1,First,52.2,0.12\nS2,Second,north,0.13\n",
                                            encoding="utf-8")
        d = one(STOPS_BODY, tmp_path)
        assert d.message == 'places stops: `lat` is "north", not a number'
        assert d.span.file.endswith("stops.csv") and d.span.line == 3

    def test_a_misspelt_set_is_one_error_too(self, tmp_path):
        (tmp_path / "stops.csv").write_text("stop_id,name,lat,lon\nS1,First,52.2,0.12\n", encoding="utf-8")
        d = one(STOPS_BODY.replace("at stops -> S", "at stopz -> S"), tmp_path)
        assert d.message == "unknown place stopz" and d.hint == "did you mean `stops`?"

    def test_an_unclosed_quote_says_so_and_where(self, tmp_path):
        (tmp_path / "stops.csv").write_text('stop_id,name,lat,lon\nS1,"First,52.2,0.12\nS2,Second,52.21,0.13\n',
                                            encoding="utf-8")
        d = one(STOPS_BODY, tmp_path)
        assert d.message.startswith('places stops: an unclosed quote: the field at column 4 has no closing `"`')
        assert "line 3" in d.message
        assert (d.span.line, d.span.col) == (2, 4)

    def test_a_quote_doubled_inside_a_field_is_no_problem(self, tmp_path):
        (tmp_path / "stops.csv").write_text('stop_id,name,lat,lon\nS1,"The ""First"", Bay 1",52.2,0.12\n',
                                            encoding="utf-8")
        check_text(STOPS_BODY, tmp_path)

    def test_latitude_and_longitude_swapped_in_a_place_file(self, tmp_path):
        (tmp_path / "stops.csv").write_text("stop_id,name,lat,lon\nS1,First,0.12,52.2\nS2,Second,0.13,52.21\n",
                                            encoding="utf-8")
        d = one(STOPS_BODY, tmp_path)
        assert d.message.startswith("places stops: the median of its places (52.205, 0.125) lies 7,")
        assert "with longitude and latitude swapped it lies" in d.message
        assert "longitude first" in d.hint
        assert at(d, "place point", "place point(lon, lat) ± 40 m")

    def test_a_place_swapped_beside_the_others(self):
        d = one("place depot = circle(52.21, 0.17, 50 m)\n\nphrase AtDepot =\n    BusGPS -> A and at depot\n")
        assert d.message.startswith("place depot (52.21, 0.17) lies ")

    def test_places_far_apart_are_not_swapped(self):
        check_text("place paris = circle(2.35, 48.86, 500 m)\n\nphrase InParis =\n    BusGPS -> A and at paris\n")


class TestInput:
    @pytest.fixture
    def program(self, tmp_path):
        path = tmp_path / "p.spatec"
        path.write_text(BUS + "\nphrase AtStation =\n    BusGPS -> A and at station\n", encoding="utf-8")
        return path

    def test_input_positions_swapped_warn(self, program, tmp_path, caplog):
        df = pd.read_csv(HOUR, nrows=500).rename(columns={"lon": "lat", "lat": "lon"})
        df.to_csv(tmp_path / "swapped.csv", index=False)
        c = check_file(program)
        frames = {"BusGPS": read_events(tmp_path / "swapped.csv", c.events["BusGPS"], tz=c.timezone).events}
        with caplog.at_level(logging.WARNING, logger="spatec.crs"):
            choose_crs(c, frames)
        text = caplog.text
        assert "with longitude and latitude swapped they lie" in text and "from centre" in text

    def test_input_positions_as_written_do_not_warn(self, program, caplog):
        c = check_file(program)
        frames = {"BusGPS": read_events(HOUR, c.events["BusGPS"], tz=c.timezone).events}
        with caplog.at_level(logging.WARNING, logger="spatec.crs"):
            choose_crs(c, frames)
        assert "swapped" not in caplog.text

    def test_a_latitude_out_of_range_asks_if_it_is_a_longitude(self, program, tmp_path):
        df = pd.read_csv(HOUR, nrows=5)
        df["lat"] = 100.5
        df.to_csv(tmp_path / "bad.csv", index=False)
        c = check_file(program)
        got = read_events(tmp_path / "bad.csv", c.events["BusGPS"], tz=c.timezone)
        assert got.rejected == 5
        assert all("(a longitude? `place point(lon, lat)` takes the longitude first)" in r
                   for r in got.rejects["reason"])

    def test_a_missing_column_has_a_did_you_mean_and_can_be_mapped(self, tmp_path):
        df = pd.read_csv(HOUR, nrows=300).rename(columns={"vehicle": "VehicleRef", "lon": "Longitude"})
        df.to_csv(tmp_path / "renamed.csv", index=False)
        plain = check_file(tmp_path / "a.spatec", BUS + "\nphrase P = BusGPS -> A\n")
        with pytest.raises(DataError) as e:
            read_events(tmp_path / "renamed.csv", plain.events["BusGPS"], tz=plain.timezone)
        text = str(e.value)
        assert "BusGPS declares vehicle, lon but the file has no such columns" in text
        assert 'did you mean `VehicleRef`? Read it with `vehicle: str from "VehicleRef"`' in text
        assert 'did you mean `Longitude`? Read it with `lon: float from "Longitude"`' in text
        mapped = BUS.replace("vehicle: str,", 'vehicle: str from "VehicleRef",').replace(
            "lon: float", 'lon: float from "Longitude"')
        c = check_file(tmp_path / "b.spatec", mapped + "\nphrase P = BusGPS -> A\n")
        got = read_events(tmp_path / "renamed.csv", c.events["BusGPS"], tz=c.timezone)
        want = read_events(HOUR, plain.events["BusGPS"], tz=plain.timezone).events.head(300)
        assert got.used == 300
        pd.testing.assert_series_equal(got.events["vehicle"], want["vehicle"], check_names=False)
        pd.testing.assert_series_equal(got.events["_lon"], want["_lon"], check_names=False)
        assert got.events["_id"].tolist() == want["_id"].tolist()

    def test_a_mapped_column_that_is_missing_names_both(self, tmp_path):
        c = check_file(tmp_path / "b.spatec", BUS.replace("vehicle: str,", 'vehicle: str from "Vehicle_Ref",')
                       + "\nphrase P = BusGPS -> A\n")
        df = pd.read_csv(HOUR, nrows=3).rename(columns={"vehicle": "VehicleRef"})
        df.to_csv(tmp_path / "renamed.csv", index=False)
        with pytest.raises(DataError) as e:
            read_events(tmp_path / "renamed.csv", c.events["BusGPS"], tz=c.timezone)
        assert 'declares vehicle (from "Vehicle_Ref")' in str(e.value)
        assert "did you mean `VehicleRef`?" in str(e.value)

"""TIDES out (`spatec replay --tides DIR --tides-visits PHRASE`): vehicle_locations from the
input, stop_visits from a phrase's dwells, validated with frictionless against the TIDES table
schemas (tides_spec.py: written out from the specification, with the commit it was read at)."""
from __future__ import annotations

import csv
import gzip
import json
import os
import re
from pathlib import Path

import pytest
import tides_spec

from spatec.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CAMBRIDGE = ROOT.parent / "shared" / "datasets" / "cambridge"
HOUR = CAMBRIDGE / "sirivm_2019-10-01_0854-1000.csv.gz"

PROGRAM = """include "bus.spatec"

places stops = "stops.csv"
    place point(lon, lat) ± 40 m

phrase Dwell per vehicle =
    (run BusGPS -> R while overlap(R.first, R.this)) and certainly at stops -> S
  where R.last.t - R.first.t > 1 min
  emit vehicle = R.vehicle, line = R.line, stop = S.stop_id, arrived = R.first.t, left = R.last.t

phrase Swapped per vehicle =
    (run BusGPS -> R while overlap(R.first, R.this)) and certainly at stops -> S
  where R.last.t - R.first.t > 1 min
  emit vehicle = R.vehicle, stop = S.stop_id, arrived = R.last.t, left = R.first.t

phrase Never per vehicle =
    (run BusGPS -> R while overlap(R.first, R.this)) and certainly at stops -> S
  where R.last.t - R.first.t > 10 h
  emit vehicle = R.vehicle, stop = S.stop_id, arrived = R.first.t, left = R.last.t

phrase NoStop per vehicle =
    run BusGPS -> R while overlap(R.first, R.this)
  emit vehicle = R.vehicle, arrived = R.first.t, left = R.last.t
"""


def frictionless_schema(spec: dict):
    from frictionless import Schema

    return Schema.from_descriptor({k: v for k, v in spec.items() if k != "foreignReferences"})


def validate(csv_path: Path, spec: dict):
    from frictionless import Resource

    # (a relative path and its folder: frictionless refuses absolute paths as unsafe)
    return Resource(csv_path.name, basepath=str(csv_path.parent), schema=frictionless_schema(spec)).validate()


def errors(report) -> list:
    return [e for task in report.tasks for e in task.errors]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A replay of the first 4,000 rows of the Cambridge hour with --tides."""
    if not HOUR.is_file():
        pytest.skip(f"{HOUR} is not available")
    tmp = tmp_path_factory.mktemp("tides")
    (tmp / "bus.spatec").write_text((ROOT / "examples" / "bus.spatec").read_text(), encoding="utf-8")
    (tmp / "stops.csv").write_bytes((CAMBRIDGE / "stops.csv").read_bytes())
    (tmp / "p.spatec").write_text(PROGRAM, encoding="utf-8")
    with gzip.open(HOUR, "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(4001)]
    (tmp / "fixes.csv").write_text("".join(lines), encoding="utf-8")
    code = main(["replay", str(tmp / "p.spatec"), "--runner", "local", "--quiet", "--phrase", "Dwell",
                 "--events", f"BusGPS={tmp / 'fixes.csv'}", "--out", str(tmp / "out"),
                 "--tides", str(tmp / "tides"), "--tides-visits", "Dwell"])
    assert code == 0
    return tmp


def rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


class TestTheTablesPassTheSchemas:
    def test_vehicle_locations(self, run):
        report = validate(run / "tides" / "vehicle_locations.csv", tides_spec.VEHICLE_LOCATIONS)
        assert report.valid, [e.message for e in errors(report)][:5]

    def test_stop_visits(self, run):
        report = validate(run / "tides" / "stop_visits.csv", tides_spec.STOP_VISITS)
        assert report.valid, [e.message for e in errors(report)][:5]

    def test_the_header_is_the_tables_every_column_in_order(self, run):
        for name, spec in (("vehicle_locations", tides_spec.VEHICLE_LOCATIONS),
                           ("stop_visits", tides_spec.STOP_VISITS)):
            header = (run / "tides" / f"{name}.csv").read_text(encoding="utf-8").splitlines()[0]
            assert header.split(",") == [f["name"] for f in spec["fields"]]

    def test_the_data_package_has_what_the_tides_profile_requires(self, run):
        pkg = json.loads((run / "tides" / "datapackage.json").read_text(encoding="utf-8"))
        spec = tides_spec.PACKAGE
        assert set(spec["required"]) <= set(pkg)
        assert pkg["profile"].endswith(f"/{tides_spec.COMMIT}/spec/tides-datapackage-profile.json")
        assert [r["name"] for r in pkg["resources"]] == ["vehicle_locations", "stop_visits"]
        for r in pkg["resources"]:
            assert set(spec["resource_required"]) <= set(r)
            assert re.match(spec["name_pattern"], r["name"]) and re.match(spec["path_pattern"], r["path"])
            assert r["tides-table"] in spec["tides_tables"] and r["profile"] == "tabular-data-resource"
            assert r["schema"].endswith(f"/{tides_spec.COMMIT}/spec/{r['name']}.schema.json")
            assert (run / "tides" / r["path"]).is_file()

    def test_a_broken_table_fails_the_same_validation(self, run, tmp_path):
        """The validation can fail: a negative dwell, a repeated primary key, a time that is not one."""
        lines = (run / "tides" / "stop_visits.csv").read_text(encoding="utf-8").splitlines()
        assert len(lines) >= 3
        first = lines[1].split(",")
        bad = list(first)
        bad[6] = "-5"                       # dwell
        bad[11] = "09:00 on Tuesday"        # actual_arrival_time
        (tmp_path / "stop_visits.csv").write_text("\n".join([lines[0], lines[1], ",".join(bad)]) + "\n",
                                                  encoding="utf-8")
        report = validate(tmp_path / "stop_visits.csv", tides_spec.STOP_VISITS)
        kinds = {e.type for e in errors(report)}
        assert not report.valid and {"constraint-error", "type-error", "primary-key"} <= kinds


class TestWhatTheTablesSay:
    def test_every_position_used_is_a_vehicle_location(self, run):
        got = rows(run / "tides" / "vehicle_locations.csv")
        fixes = rows(run / "fixes.csv")
        assert len(got) == len(fixes) == 4000        # (the sample has no reject)
        assert len({r["location_ping_id"] for r in got}) == len(got)
        from datetime import datetime, timezone

        by_id = {r["location_ping_id"]: r for r in got}
        f = fixes[0]
        stamp = datetime.fromtimestamp(int(f["ts"]), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        r = by_id[f"BusGPS:{f['vehicle']}:{stamp}"]
        assert (r["vehicle_id"], r["event_timestamp"], r["service_date"]) == (f["vehicle"], stamp, "2019-10-01")
        assert (float(r["latitude"]), float(r["longitude"])) == (float(f["lat"]), float(f["lon"]))

    def test_every_dwell_is_a_stop_visit(self, run):
        visits = rows(run / "tides" / "stop_visits.csv")
        dwells = [json.loads(line) for line in (run / "out" / "Dwell.jsonl").read_text().splitlines()]
        assert len(visits) == len(dwells) > 5
        key = sorted((d["vehicle"], d["stop"], d["arrived"], d["left"]) for d in dwells)
        assert sorted((v["vehicle_id"], v["stop_id"], v["actual_arrival_time"], v["actual_departure_time"])
                      for v in visits) == key
        from datetime import datetime

        for v in visits:
            span = (datetime.fromisoformat(v["actual_departure_time"])
                    - datetime.fromisoformat(v["actual_arrival_time"])).total_seconds()
            assert int(v["dwell"]) == round(span) > 60
        # each trip's visits are numbered 1, 2, ... in arrival order
        trips: dict = {}
        for v in visits:
            trips.setdefault(v["trip_id_performed"], []).append(v)
        for vs in trips.values():
            assert [int(v["trip_stop_sequence"]) for v in vs] == list(range(1, len(vs) + 1))
            assert [v["actual_arrival_time"] for v in vs] == sorted(v["actual_arrival_time"] for v in vs)
            assert len({v["vehicle_id"] for v in vs}) == 1


class TestBadOptions:
    def replay(self, run, tmp_path, *extra):
        return main(["replay", str(run / "p.spatec"), "--runner", "local", "--quiet",
                     "--events", f"BusGPS={run / 'fixes.csv'}", "--out", str(tmp_path / "out"), *extra])

    def test_no_visit_is_an_empty_table_that_passes(self, run, tmp_path):
        assert self.replay(run, tmp_path, "--phrase", "Never", "--tides", str(tmp_path / "t"),
                           "--tides-visits", "Never") == 0
        text = (tmp_path / "t" / "stop_visits.csv").read_text(encoding="utf-8")
        assert text.count("\n") == 1 and text.startswith("service_date,trip_id_performed,")
        assert validate(tmp_path / "t" / "stop_visits.csv", tides_spec.STOP_VISITS).valid

    def test_visits_need_a_folder(self, run, tmp_path, capsys):
        assert self.replay(run, tmp_path, "--tides-visits", "Dwell") == 1
        assert "--tides-visits needs --tides DIR" in capsys.readouterr().err

    def test_a_phrase_without_a_stop(self, run, tmp_path, capsys):
        assert self.replay(run, tmp_path, "--tides", str(tmp_path / "t"), "--tides-visits", "NoStop") == 1
        err = capsys.readouterr().err
        assert "--tides-visits NoStop: the phrase emits no stop id (a str/int field named stop_id or stop)" in err
        assert "Traceback" not in err and not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

    def test_an_unknown_phrase(self, run, tmp_path, capsys):
        assert self.replay(run, tmp_path, "--tides", str(tmp_path / "t"), "--tides-visits", "Dwel") == 1
        assert "the program has no phrase Dwel" in capsys.readouterr().err

    def test_departures_before_arrivals(self, run, tmp_path, capsys):
        assert self.replay(run, tmp_path, "--phrase", "Swapped", "--tides", str(tmp_path / "t"),
                           "--tides-visits", "Swapped") == 1
        err = capsys.readouterr().err
        assert "departs before it arrives (left < arrived)" in err and "Traceback" not in err


@pytest.mark.skipif(not os.environ.get("TIDES_SPEC"), reason="no TIDES checkout: set TIDES_SPEC to a folder "
                    "holding the specification's spec/*.json (CI cannot reach GitHub)")
class TestAgainstTheSpecificationsOwnFiles:
    def spec(self, name):
        return json.loads((Path(os.environ["TIDES_SPEC"]) / "spec" / name).read_text(encoding="utf-8"))

    @pytest.mark.parametrize("table, ours", [("vehicle_locations", tides_spec.VEHICLE_LOCATIONS),
                                             ("stop_visits", tides_spec.STOP_VISITS)])
    def test_the_transcription_is_the_specifications(self, table, ours):
        theirs = self.spec(f"{table}.schema.json")
        assert theirs["primaryKey"] == ours["primaryKey"] and theirs["missingValues"] == ours["missingValues"]
        assert [{k: f[k] for k in ("name", "type", "constraints") if k in f} for f in theirs["fields"]] \
            == ours["fields"]

    @pytest.mark.parametrize("table", ["vehicle_locations", "stop_visits"])
    def test_the_tables_pass_the_specifications_files(self, run, table):
        report = validate(run / "tides" / f"{table}.csv", self.spec(f"{table}.schema.json"))
        assert report.valid, [e.message for e in errors(report)][:5]

    def test_the_package_passes_the_tides_profile(self, run):
        import jsonschema

        pkg = json.loads((run / "tides" / "datapackage.json").read_text(encoding="utf-8"))
        jsonschema.validate(pkg, self.spec("tides-datapackage-profile.json"))

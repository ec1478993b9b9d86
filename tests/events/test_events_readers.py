"""Reading small hand-made files of every format; every reject reason with its row."""
from __future__ import annotations

import dataclasses
import json
import tarfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from events_cases import BUS, CELL, OBS, TICK, write_csv, write_jsonl, write_poll

from spatec.errors import DataError
from spatec.events.canonical import IngestResult, event_columns
from spatec.events.read import iter_events, read_events, write_rejects
from spatec.frontend.ast import AttrDecl, Quantity, SourceClause, TimeBound, TimeClause

LONDON = "Europe/London"
T0 = 1569916778  # 2019-10-01T07:59:38Z


def bus_rows(*overrides: dict) -> list[list[str]]:
    base = {"vehicle": "WP-101", "line": "401", "operator": "WP", "lon": "-0.1845219",
            "lat": "52.3288345", "ts": str(T0), "extra": "x"}
    return [[str({**base, **o}[k]) for k in base] for o in overrides]


def reasons(result) -> list[tuple[int, str]]:
    return list(zip(result.rejects["row"].tolist(), result.rejects["reason"].tolist()))


def counted(result):
    assert result.read == result.used + result.rejected
    return result


class TestCanonicalFrame:
    def test_columns_types_and_stamps(self, tmp_path, bus_header):
        p = write_csv(tmp_path / "bus.csv", bus_header, bus_rows({}, {"vehicle": "WP-102", "ts": f"{T0}.5"}))
        r = counted(read_events(p, BUS))
        ev = r.events
        assert list(ev.columns) == event_columns(BUS)
        assert list(ev.columns[:11]) == ["_type", "_id", "_source", "_t", "_lo", "_hi", "_place", "_lon",
                                         "_lat", "_r", "_geom"]
        assert list(ev.columns[-2:]) == ["_file", "_row"]
        assert ev.dtypes[["_t", "_lo", "_hi", "ts", "_row"]].tolist() == [np.dtype("int64")] * 5
        assert ev.dtypes[["_lon", "_lat", "_r", "lon", "lat"]].tolist() == [np.dtype("float64")] * 5
        first = ev.iloc[0]
        assert first["_id"] == "BusGPS:WP-101:2019-10-01T07:59:38Z"
        assert (first["_t"], first["_lo"], first["_hi"]) == (T0 * 10**6, (T0 - 30) * 10**6, T0 * 10**6)
        assert (first["_place"], first["_r"], first["_geom"]) == ("point", 15.0, None)
        assert (first["_lon"], first["_lat"]) == (-0.1845219, 52.3288345)
        assert (first["_file"], first["_row"]) == (str(p), 1)
        assert ev.iloc[1]["_id"] == "BusGPS:WP-102:2019-10-01T07:59:38.500000Z"
        assert "extra" not in ev.columns

    def test_all_attribute_types(self, tmp_path):
        p = write_jsonl(tmp_path / "obs.jsonl", [
            {"who": "a", "n": "7", "x": "2.5", "ok": "yes", "at": "2019-10-01T08:59:38", "lon": 0.1, "lat": 52},
            {"who": "b", "n": 8, "x": 3, "ok": False, "at": T0, "lon": "0.1", "lat": "52", "n2": None},
            {"who": "c", "n": None, "x": None, "ok": None, "at": T0 + 1, "lon": 0.1, "lat": 52},
        ])
        ev = counted(read_events(p, OBS, tz=LONDON)).events
        assert ev["n"].dtype == "Int64" and ev["ok"].dtype == "boolean" and ev["x"].dtype == "float64"
        assert ev["n"].tolist()[:2] == [7, 8] and ev["n"].isna().tolist() == [False, False, True]
        assert ev["ok"].tolist()[:2] == [True, False] and pd.isna(ev["ok"].iloc[2])
        assert ev["x"].tolist()[:2] == [2.5, 3.0] and np.isnan(ev["x"].iloc[2])
        assert ev["at"].tolist() == [T0 * 10**6, T0 * 10**6, (T0 + 1) * 10**6]
        assert (ev["_lo"] == ev["_t"] - 5 * 10**6).all() and (ev["_hi"] == ev["_t"] + 5 * 10**6).all()
        assert (ev["_r"] == 0.0).all()

    def test_geometry_place_and_sourceless_ids(self, tmp_path):
        square = "POLYGON ((0.1 52.2, 0.2 52.2, 0.2 52.3, 0.1 52.2))"
        geojson = json.dumps({"type": "Polygon", "coordinates": [[[0.1, 52.2], [0.2, 52.2], [0.2, 52.3], [0.1, 52.2]]]})
        rows = [["c1", "1.5", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", square],
                ["c2", "0", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", geojson]]
        ev = counted(read_events(write_csv(tmp_path / "c.csv", ["cell", "mm_h", "start", "end", "area"], rows),
                                 CELL)).events
        assert ev["_place"].tolist() == ["geom", "geom"] and ev["_r"].tolist() == [50.0, 50.0]
        assert ev["_geom"].tolist() == [square, square] and ev["area"].tolist() == [square, square]
        assert ev["_lon"].isna().all() and ev["_source"].isna().all()
        assert ev["_t"].tolist() == ev["_hi"].tolist()
        assert ev["_hi"].iloc[0] - ev["_lo"].iloc[0] == 15 * 60 * 10**6
        assert all(i.startswith("Cell:#") and len(i) == len("Cell:#") + 16 for i in ev["_id"])
        assert ev["_id"].nunique() == 2

    def test_no_place(self, tmp_path):
        ev = read_events(write_csv(tmp_path / "t.csv", ["name", "at"], [["a", str(T0)]]), TICK).events
        assert ev["_place"].tolist() == ["none"] and ev["_source"].tolist() == [None]
        assert ev["_r"].tolist() == [0.0] and ev["_geom"].tolist() == [None]

    def test_empty_input_has_the_columns(self, tmp_path, bus_header):
        r = counted(read_events(write_csv(tmp_path / "e.csv", bus_header, []), BUS))
        assert r.read == 0 and list(r.events.columns) == event_columns(BUS)
        assert r.events["_t"].dtype == np.dtype("int64")



class TestTexts:
    """IngestResult.texts: text columns handed on as Arrow (the Spark runner stages
    them so) must be the very columns the frame holds, whatever was rejected."""

    @staticmethod
    def same_as_the_frame(result, decl):
        from spatec.exec.tasks import arrow_column as _column

        ev = result.events
        for c, arr in result.texts.items():
            assert arr.type == pa.string() and arr.to_pylist() == ev[c].tolist(), c
            converted = _column(ev[c], pa.string())
            handed = _column(ev[c], pa.string(), result.texts[c])
            assert handed.equals(converted), c

    def test_bus_with_rejects_blanks_and_duplicates(self, tmp_path, bus_header):
        rows = bus_rows({}, {"ts": ""}, {"line": "  ", "vehicle": "WP-103"}, {"vehicle": ""}, {},
                        {"operator": "", "vehicle": "WP-104"}, {"vehicle": "WP-105", "line": "é 2"})
        r = counted(read_events(write_csv(tmp_path / "b.csv", bus_header, rows), BUS))
        assert r.used == 4 and r.rejected == 3
        assert {"_id", "_source", "_type", "_place", "_geom", "_file", "vehicle", "line", "operator"} <= set(r.texts)
        assert r.texts["line"].to_pylist() == ["401", None, "401", "é 2"]
        self.same_as_the_frame(r, BUS)

    def test_a_source_read_as_numbers(self, tmp_path):
        p = write_jsonl(tmp_path / "obs.jsonl", [
            {"who": 7, "n": 1, "x": 1.0, "ok": True, "at": T0, "lon": 0.1, "lat": 52},
            {"who": 8.5, "n": 2, "x": 2.0, "ok": False, "at": T0, "lon": 0.1, "lat": 52},
            {"who": None, "n": 3, "x": 3.0, "ok": False, "at": T0, "lon": 0.1, "lat": 52},
        ])
        r = counted(read_events(p, OBS))
        assert r.used == 2
        self.same_as_the_frame(r, OBS)

    def test_geometries_without_source_and_no_place(self, tmp_path):
        sq = "POLYGON ((0.1 52.2, 0.2 52.2, 0.2 52.3, 0.1 52.2))"
        rows = [["c1", "1.5", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", sq],
                ["", "0", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", sq]]
        r = counted(read_events(write_csv(tmp_path / "c.csv", ["cell", "mm_h", "start", "end", "area"], rows), CELL))
        assert "_geom" not in r.texts and "_id" not in r.texts       # converted as before
        self.same_as_the_frame(r, CELL)
        r = counted(read_events(write_csv(tmp_path / "t.csv", ["name", "at"], [["a", str(T0)], ["", str(T0 + 1)]]),
                                TICK))
        self.same_as_the_frame(r, TICK)

    def test_several_files_and_nothing_kept(self, tmp_path, bus_header):
        write_csv(tmp_path / "a.csv", bus_header, bus_rows({}))
        write_csv(tmp_path / "b.csv", bus_header, bus_rows({"vehicle": "WP-2"}))
        r = counted(read_events(str(tmp_path / "*.csv"), BUS))
        assert r.used == 2 and "_file" not in r.texts
        self.same_as_the_frame(r, BUS)
        r = counted(read_events(write_csv(tmp_path / "bad.csv", bus_header, bus_rows({"ts": ""})), BUS))
        assert r.used == 0 and r.texts == {}


class TestRejects:
    def test_every_row_reason(self, tmp_path, bus_header):
        rows = bus_rows(
            {},                                              # 1 ok
            {"ts": ""},                                      # 2 missing time
            {"ts": "2019-13-45"},                            # 3 unparsable time
            {"lon": ""},                                     # 4 missing coordinate
            {"lat": "north"},                                # 5 non-numeric coordinate
            {"lon": "-200"},                                 # 6 out of range
            {"lat": "95.5"},                                 # 7 out of range
            {"vehicle": ""},                                 # 8 empty source
            {"vehicle": "  "},                               # 9 blank source
            {},                                              # 10 duplicate of 1
            {"ts": "oops", "lon": "x"},                      # 11 two problems
            {"lon": "nan"},                                  # 12 NaN is not a coordinate
        )
        r = counted(read_events(write_csv(tmp_path / "bad.csv", bus_header, rows), BUS))
        assert r.used == 1 and r.rejected == 11 and r.duplicates == 1
        assert reasons(r) == [
            (2, "ts: missing time"),
            (3, 'ts: cannot parse "2019-13-45" as a time'),
            (4, "lon: missing coordinate"),
            (5, 'lat: cannot parse "north" as a float'),
            (6, 'lon: "-200" out of range [-180, 180]'),
            (7, 'lat: "95.5" out of range [-90, 90] (a longitude? `place point(lon, lat)` takes the longitude first)'),
            (8, "vehicle: empty source"),
            (9, "vehicle: empty source"),
            (10, "duplicate of BusGPS:WP-101:2019-10-01T07:59:38Z"),
            (11, 'lon: cannot parse "x" as a float; ts: cannot parse "oops" as a time'),
            (12, 'lon: "nan" out of range [-180, 180]'),
        ]
        rec = json.loads(r.rejects["record"].iloc[1])
        assert rec == dict(zip(bus_header, rows[2]))  # the raw record, every column, as text

    def test_typed_attributes(self, tmp_path):
        header = ["who", "n", "x", "ok", "at", "lon", "lat"]
        good = ["a", "1", "1.5", "true", str(T0), "0.1", "52.2"]
        rows = [good,
                ["b", "one", "1.5", "true", str(T0), "0.1", "52.2"],
                ["c", "1.5", "1.5", "true", str(T0), "0.1", "52.2"],
                ["d", "1", "1,5", "true", str(T0), "0.1", "52.2"],
                ["e", "1", "1.5", "maybe", str(T0), "0.1", "52.2"],
                ["f", "", "", "", str(T0), "0.1", "52.2"]]
        r = counted(read_events(write_csv(tmp_path / "o.csv", header, rows), OBS))
        assert reasons(r) == [(2, 'n: cannot parse "one" as an int'), (3, 'n: cannot parse "1.5" as an int'),
                              (4, 'x: cannot parse "1,5" as a float'), (5, 'ok: cannot parse "maybe" as a bool')]
        assert r.events["who"].tolist() == ["a", "f"]  # missing optional values are nulls, not rejects

    def test_geometry_and_flipped_interval(self, tmp_path):
        sq = "POLYGON ((0 52, 1 52, 1 53, 0 52))"
        rows = [["c1", "1", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", sq],
                ["c2", "1", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", "POLYGON ((0 52, 1 52"],
                ["c3", "1", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", ""],
                ["c4", "1", "2019-10-01T08:00:00Z", "2019-10-01T07:15:00Z", sq],
                ["c5", "1", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", "POINT (200 52)"],
                ["c6", "1", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", "POINT EMPTY"],
                ["c1", "1", "2019-10-01T07:00:00Z", "2019-10-01T07:15:00Z", sq]]
        r = counted(read_events(write_csv(tmp_path / "c.csv", ["cell", "mm_h", "start", "end", "area"], rows), CELL))
        assert r.used == 1
        assert reasons(r) == [
            (2, 'area: cannot parse "POLYGON ((0 52, 1 52" as a geometry (WKT or GeoJSON)'),
            (3, "area: missing geometry"),
            (4, "start .. end: lo 2019-10-01T08:00:00Z is after hi 2019-10-01T07:15:00Z"),
            (5, 'area: "POINT (200 52)" has coordinates out of range (lon/lat)'),
            (6, "area: empty geometry"),
            (7, f"duplicate of {r.events['_id'].iloc[0]}"),
        ]

    def test_offsets_in_the_lo_hi_reason(self, tmp_path, bus_header):
        odd = dataclasses.replace(BUS, time=TimeClause(TimeBound("ts"), TimeBound("ts", Quantity(-1, "min"))))
        r = read_events(write_csv(tmp_path / "b.csv", bus_header, bus_rows({})), odd)
        assert reasons(r) == [(1, "ts .. ts - 1 min: lo 2019-10-01T07:59:38Z is after hi 2019-10-01T07:58:38Z")]

    def test_write_rejects(self, tmp_path, bus_header):
        r = read_events(write_csv(tmp_path / "b.csv", bus_header, bus_rows({}, {"ts": "x"}, {})), BUS)
        [path] = write_rejects(r.rejects, tmp_path / "out")
        assert path == tmp_path / "out" / "_rejects" / "BusGPS.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert [list(x) for x in lines] == [["file", "row", "reason", "record"]] * 2
        assert [(x["row"], x["reason"]) for x in lines] == [
            (2, 'ts: cannot parse "x" as a time'), (3, "duplicate of BusGPS:WP-101:2019-10-01T07:59:38Z")]
        assert lines[0]["record"]["ts"] == "x" and lines[0]["file"] == str(tmp_path / "b.csv")


class TestFormats:
    def test_csv_gz_and_malformed_rows(self, tmp_path, bus_header):
        p = tmp_path / "b.csv.gz"
        rows = bus_rows({}, {"vehicle": "B"}) + [["short", "row"]] + bus_rows({"vehicle": "C"})
        write_csv(p, bus_header, rows, gz=True)
        r = counted(read_events(p, BUS))
        assert r.events["_row"].tolist() == [1, 2, 4]  # numbering survives the malformed record
        assert reasons(r) == [(3, "malformed CSV row: expected 7 fields, found 2")]
        assert json.loads(r.rejects["record"].iloc[0]) == ["short", "row"]

    def test_csv_quoted_newline_and_extra_columns_ignored(self, tmp_path):
        p = tmp_path / "q.csv"
        p.write_text('vehicle,note,line,operator,lon,lat,ts\nA,"two\nlines",1,X,0.1,52,1569916778\n'
                     'B,plain,1,X,0.1,52,1569916779\n')
        ev = counted(read_events(p, BUS)).events
        assert ev["vehicle"].tolist() == ["A", "B"] and ev["_row"].tolist() == [1, 2]

    def test_parquet_native_types(self, tmp_path):
        table = pa.table({
            "vehicle": ["A", "B", None], "line": pa.array([1, 2, 3]), "operator": ["X", "X", "X"],
            "lon": [0.1, 0.2, 0.3], "lat": pa.array([52, 52, 52], pa.int32()),
            "ts": pa.array([T0 * 10**6, T0 * 10**6, T0 * 10**6], pa.timestamp("us", tz="UTC"))})
        pq.write_table(table, tmp_path / "b.parquet")
        r = counted(read_events(tmp_path / "b.parquet", BUS))
        assert r.events["line"].tolist() == ["1", "2"] and r.events["_t"].tolist() == [T0 * 10**6] * 2
        assert reasons(r) == [(3, "vehicle: empty source")]

    def test_parquet_naive_timestamps_are_program_local(self, tmp_path):
        ts = pa.array([pd.Timestamp("2019-10-01 08:59:38").value // 1000], pa.timestamp("us"))
        pq.write_table(pa.table({"who": ["a"], "n": [1], "x": [1.0], "ok": [True], "at": ts, "lon": [0.1],
                                 "lat": [52.0]}), tmp_path / "o.parquet")
        assert read_events(tmp_path / "o.parquet", OBS, tz=LONDON).events["at"].tolist() == [T0 * 10**6]

    def test_jsonl_lines_gz_and_bad_lines(self, tmp_path):
        good = {"vehicle": "A", "line": 1, "operator": "X", "lon": 0.1, "lat": 52.0, "ts": T0}
        p = write_jsonl(tmp_path / "b.jsonl.gz", [good, "{not json", "", "[1, 2]",
                                                  {**good, "ts": "2019-10-01T08:59:38+01:00"},
                                                  {**good, "vehicle": "B", "lat": None}], gz=True)
        r = counted(read_events(p, BUS))
        assert r.events["_row"].tolist() == [1]  # line 5 repeats line 1's event
        assert reasons(r) == [(2, "invalid JSON: Expecting property name enclosed in double quotes at column 2"),
                              (4, "not a JSON object: list"),
                              (5, "duplicate of BusGPS:A:2019-10-01T07:59:38Z"),
                              (6, "lat: missing coordinate")]
        assert r.rejects["record"].iloc[0] == json.dumps("{not json")
        assert json.loads(r.rejects["record"].iloc[3]) == {**good, "vehicle": "B", "lat": None}  # as written

    def test_json_extension_is_lines(self, tmp_path):
        p = write_jsonl(tmp_path / "t.json", [{"name": "a", "at": T0}, {"name": "b", "at": T0}])
        assert counted(read_events(p, TICK)).used == 2

    def test_same_records_same_ids_in_every_format(self, tmp_path):
        recs = [{"cell": "c1", "mm_h": 1.5, "start": "2019-10-01T07:00:00Z", "end": "2019-10-01T07:15:00Z",
                 "area": "POINT (0.1 52.2)"}]
        write_jsonl(tmp_path / "c.jsonl", recs)
        write_csv(tmp_path / "c.csv", list(recs[0]), [[str(v) for v in recs[0].values()]])
        pq.write_table(pa.Table.from_pylist(recs), tmp_path / "c.parquet")
        ids = {f: read_events(tmp_path / f"c.{f}", CELL).events["_id"].tolist() for f in ("jsonl", "csv", "parquet")}
        assert ids["jsonl"] == ids["csv"] == ids["parquet"]

    def test_directory_and_glob(self, tmp_path, bus_header):
        d = tmp_path / "in"
        d.mkdir()
        write_csv(d / "b.csv", bus_header, bus_rows({"vehicle": "B"}))
        write_csv(d / "a.csv", bus_header, bus_rows({"vehicle": "A"}, {"vehicle": "B"}))
        (d / "_rejects").mkdir()
        (d / ".hidden.csv").write_text("junk")
        r = counted(read_events(d, BUS))
        assert r.events["vehicle"].tolist() == ["A", "B"] and r.duplicates == 1   # a.csv first, by name
        assert r.rejects["file"].tolist() == [str(d / "b.csv")]
        assert counted(read_events(str(d / "a*.csv"), BUS)).used == 2

    def test_whole_file_problems_are_data_errors(self, tmp_path, bus_header):
        p = write_csv(tmp_path / "b.csv", ["vehicle", "lon", "lat", "ts"], [["A", "0", "52", str(T0)]])
        with pytest.raises(DataError) as e:
            read_events(p, BUS)
        assert str(e.value) == (f"{p}: BusGPS declares line, operator but the file has no such columns; "
                                "columns present: vehicle, lon, lat, ts")
        with pytest.raises(DataError, match="no such file"):
            read_events(tmp_path / "nope.csv", BUS)
        with pytest.raises(DataError, match="no files match"):
            read_events(str(tmp_path / "*.parquet"), BUS)
        (tmp_path / "x.dat").write_text("")
        with pytest.raises(DataError, match="cannot tell the format"):
            read_events(tmp_path / "x.dat", BUS)
        write_jsonl(tmp_path / "y.jsonl", [{"vehicle": "A"}])
        with pytest.raises(DataError, match="several formats"):
            read_events(tmp_path, BUS)
        with pytest.raises(DataError, match="unknown input format"):
            read_events(p, BUS, fmt="xml")


def siri(vehicle: str, at: str, lon: str = "0.1", **more) -> dict:
    return {"VehicleRef": vehicle, "LineRef": "1", "OperatorRef": "X", "RecordedAtTime": at,
            "Longitude": lon, "Latitude": "52.2", **more}


class TestSiriVm:
    def test_directory_of_polls_in_time_order(self, tmp_path):
        d = tmp_path / "polls"
        d.mkdir()
        # names sort differently as text and as times: 99.5 < 100.25
        write_poll(d / "100.25_b.json", [siri("A", "2019-10-01T08:59:38+01:00"),
                                         siri("B", "2019-10-01T08:59:50+01:00", lon="0.3")])
        write_poll(d / "99.5_a.json", [siri("A", "2019-10-01T08:59:38+01:00", lon="0.2")])
        r = counted(read_events(d, BUS))
        assert r.events["_lon"].tolist() == [0.2, 0.3]   # the earlier poll's copy wins
        assert reasons(r) == [(1, "duplicate of BusGPS:A:2019-10-01T07:59:38Z")]
        assert r.rejects["file"].tolist() == [str(d / "100.25_b.json")]

    def test_archive_unreadable_poll_and_mapping(self, tmp_path):
        d = tmp_path / "src" / "01"
        d.mkdir(parents=True)
        write_poll(d / "1569916801.703_x.json", [siri("A", "2019-10-01T08:59:38+01:00", Bearing="90"),
                                                 siri("", "2019-10-01T08:59:38+01:00")])
        (d / "1569916803.000_y.json").write_text("{truncated")
        write_poll(d / "1569916805.000_z.json", [siri("A", "2019-10-01T08:59:38+01:00"),
                                                 siri("C", "2019-10-01T09:00:01+01:00", lon="-190")])
        tar = tmp_path / "polls.tar.gz"
        with tarfile.open(tar, "w:gz") as t:
            t.add(d, arcname="01")
        r = counted(read_events(tar, BUS))
        assert r.read == 5 and r.used == 1 and r.duplicates == 1
        got = [(f.split("!")[1], row, reason.split(" (")[0]) for f, row, reason
               in r.rejects[["file", "row", "reason"]].itertuples(index=False)]
        assert got == [("01/1569916801.703_x.json", 2, "vehicle: empty source"),
                       ("01/1569916803.000_y.json", 0, "not a SIRI-VM poll: invalid JSON"),
                       ("01/1569916805.000_z.json", 1, "duplicate of BusGPS:A:2019-10-01T07:59:38Z"),
                       ("01/1569916805.000_z.json", 2, 'lon: "-190" out of range [-180, 180]')]
        assert json.loads(r.rejects["record"].iloc[0])["VehicleRef"] == ""   # raw SIRI field names
        more = dataclasses.replace(BUS, attrs=BUS.attrs + (AttrDecl("bearing", "float"), AttrDecl("received", "time"),
                                                           AttrDecl("direction", "str")))
        ev = read_events(tar, more).events
        assert ev["bearing"].tolist() == [90.0] and ev["received"].tolist() == [1569916801_703000]
        assert ev["direction"].tolist() == [None]   # a mapped field no record has: null, not an error

    def test_unknown_field_is_a_data_error(self, tmp_path):
        write_poll(tmp_path / "1_a.json", [siri("A", "2019-10-01T08:59:38+01:00")])
        with pytest.raises(DataError, match="declares speed"):
            read_events(tmp_path / "1_a.json", dataclasses.replace(BUS, attrs=BUS.attrs + (AttrDecl("speed", "float"),)))

    def test_iter_events_carries_duplicates_across_polls(self, tmp_path):
        write_poll(tmp_path / "1_a.json", [siri("A", "2019-10-01T08:59:38+01:00")])
        write_poll(tmp_path / "2_b.json", [siri("A", "2019-10-01T08:59:38+01:00"), siri("B", "2019-10-01T08:59:38+01:00")])
        chunks = list(iter_events(tmp_path, BUS, fmt="sirivm"))
        assert [(c.used, c.duplicates) for c in chunks] == [(1, 0), (1, 1)]
        whole = read_events(tmp_path, BUS, fmt="sirivm")
        joined = IngestResult.concat(chunks, BUS)
        pd.testing.assert_frame_equal(joined.events, whole.events)
        pd.testing.assert_frame_equal(joined.rejects, whole.rejects)


class TestOddInputs:
    def test_csv_with_byte_order_mark(self, tmp_path, bus_header):
        p = tmp_path / "bom.csv"
        write_csv(p, bus_header, bus_rows({}))
        p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
        assert counted(read_events(p, BUS)).events["vehicle"].tolist() == ["WP-101"]

    def test_parquet_reject_records_have_every_column(self, tmp_path):
        pq.write_table(pa.table({"name": ["a", "b"], "at": ["x", str(T0)], "note": ["n1", "n2"]}),
                       tmp_path / "t.parquet")
        r = counted(read_events(tmp_path / "t.parquet", TICK))
        assert reasons(r) == [(1, 'at: cannot parse "x" as a time')]
        assert json.loads(r.rejects["record"].iloc[0]) == {"name": "a", "at": "x", "note": "n1"}

    def test_source_of_another_type_is_text(self, tmp_path):
        decl = dataclasses.replace(TICK, attrs=(AttrDecl("unit", "int"), AttrDecl("at", "time")),
                                   source=SourceClause("unit"))
        r = counted(read_events(write_jsonl(tmp_path / "u.jsonl", [{"unit": 7, "at": T0}, {"unit": "7", "at": T0}]), decl))
        assert r.events["_source"].tolist() == ["7"] and r.events["unit"].tolist() == [7]
        assert reasons(r) == [(2, "duplicate of Tick:7:2019-10-01T07:59:38Z")]

    def test_columns_do_not_share_memory(self, tmp_path, bus_header):
        ev = read_events(write_csv(tmp_path / "b.csv", bus_header, bus_rows({})), BUS).events
        ev.loc[0, "vehicle"] = "changed"
        ev.loc[0, "lon"] = 1.0
        assert ev.loc[0, "_source"] == "WP-101" and ev.loc[0, "_lon"] == -0.1845219


def test_empty_rejects_are_fresh_frames():
    from spatec.events.canonical import REJECT_COLUMNS, empty_rejects

    a, b = empty_rejects(), empty_rejects()
    assert a is not b and list(a.columns) == list(REJECT_COLUMNS) and len(a) == 0
    assert str(a["row"].dtype) == "int64" and a["reason"].dtype == object
    a["extra"] = []                     # changing one leaves the next alone
    assert "extra" not in empty_rejects().columns


def test_repeats_hashed_or_sorted_agree():
    # (source, t) as one int64 where it fits, a stable sort where it does not: the same copies
    from spatec.events.canonical import _repeats

    rng = np.random.default_rng(3)
    for t in (rng.integers(0, 50, 4000) * 1_000_000,
              rng.choice(np.array([-2**63, 0, 2**63 - 1]), 4000)):
        codes = rng.integers(0, 30, 4000)
        seen, want = set(), []
        for k in zip(codes.tolist(), t.tolist()):
            want.append(k in seen)
            seen.add(k)
        assert _repeats(codes, t.astype(np.int64)).tolist() == want


def test_a_parquet_binary_text_column_is_read_as_utf8_and_its_bad_bytes_are_rejects(tmp_path):
    """A Parquet ``binary`` column (bytes, not text) is read as the UTF-8 text it holds, as a
    CSV file's is: ids are its text, never hex; a value whose bytes are not UTF-8 makes its
    record a reject naming the byte (``BUS-\\xe9`` and ``BUS-\\xe8`` are never one vehicle)."""
    import pyarrow.parquet as pq

    t = pa.table({"vehicle": pa.array([b"BUS-1", b"BUS-\xe9", b"BUS-\xe8", "BÜS-2".encode()], pa.binary()),
                  "line": ["1"] * 4, "operator": ["X"] * 4, "lon": [0.12] * 4, "lat": [52.2] * 4,
                  "ts": [1569916778 + i for i in range(4)]})
    path = tmp_path / "b.parquet"
    pq.write_table(t, path)
    r = counted(read_events(path, BUS))
    assert r.events["vehicle"].tolist() == ["BUS-1", "BÜS-2"]
    assert r.events["_id"].tolist() == ["BusGPS:BUS-1:2019-10-01T07:59:38Z", "BusGPS:BÜS-2:2019-10-01T07:59:41Z"]
    assert r.rejects["row"].tolist() == [2, 3]
    assert r.rejects["reason"].tolist() == [
        "vehicle: not UTF-8 (byte 0xE9 at character 5); convert the column to UTF-8 text",
        "vehicle: not UTF-8 (byte 0xE8 at character 5); convert the column to UTF-8 text"]


def test_a_parquet_splits_rows_are_the_files_rows_whatever_its_row_groups_and_batches(tmp_path, monkeypatch):
    """Rows [a, b) of a Parquet file read for a split (only its row groups that hold them,
    the last decoded only as far as b) are the file's rows [a, b), for every range: within
    one group, across groups, at their edges, empty, at the end, in batches that do not
    fit the groups."""
    from spatec.exec import splits

    n = 23
    table = pa.table({"vehicle": [f"v{i % 4}" for i in range(n)], "ts": np.arange(n, dtype=np.int64),
                      "lon": np.linspace(0.0, 1.0, n), "other": [str(i) for i in range(n)]})
    path = tmp_path / "a.parquet"
    pq.write_table(table, path, row_group_size=5)
    f = pq.ParquetFile(path)
    assert f.metadata.num_row_groups == 5
    monkeypatch.setattr(splits, "PARQUET_BATCH", 3)
    cols = ["vehicle", "ts", "lon"]
    whole = table.select(cols)
    for a in range(n + 1):
        for b in range(a, n + 2):
            got = splits.rows_of(f, cols, a, b)
            assert got.schema.names == cols
            assert got.equals(whole.slice(a, min(b, n) - a)), (a, b)
    batch = splits.parquet_batch(str(path), ["vehicle", "ts", "lon", "line"], 7, 16)
    assert batch.table.column("ts").to_pylist() == list(range(7, 16))
    assert batch.rows.tolist() == list(range(8, 17))        # records numbered as in the file

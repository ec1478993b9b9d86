"""`spatec sql OUT "SELECT ..."`: DuckDB over a replay's outputs, a table per phrase; the answers
are pandas' over the same JSON lines; bad folders and bad SQL are one clear line, exit 1."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from spatec.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
HOUR = ROOT.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
PROGRAM = ROOT / "examples" / "hospital_to_station" / "hospital_to_station.spatec"


def replay(out: Path, *extra) -> None:
    assert main(["replay", str(PROGRAM), "--runner", "local", "--quiet", "--events", f"BusGPS={HOUR}",
                 "--out", str(out), *extra]) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not HOUR.is_file():
        pytest.skip(f"{HOUR} is not available")
    tmp = tmp_path_factory.mktemp("sql")
    replay(tmp / "jsonl", "--tz", "program")      # times written with their offset: the same instants
    replay(tmp / "parquet", "--format", "parquet")
    return tmp


def journeys(runs) -> pd.DataFrame:
    lines = (runs / "jsonl" / "HospitalToStation.jsonl").read_text(encoding="utf-8").splitlines()
    return pd.DataFrame([json.loads(x) for x in lines])


def sql(capsys, out, query, *extra) -> tuple[int, str, str]:
    code = main(["sql", str(out), query, *extra])
    got = capsys.readouterr()
    return code, got.out, got.err


class TestAnswers:
    def test_median_minutes_per_line_is_pandas(self, runs, capsys):
        code, out, _ = sql(capsys, runs / "jsonl", "SELECT line, count(*) AS n, median(minutes) AS m "
                           "FROM HospitalToStation GROUP BY line ORDER BY line", "--format", "csv")
        assert code == 0
        got = pd.read_csv(pd.io.common.StringIO(out), dtype={"line": str})
        want = journeys(runs).groupby("line")["minutes"].agg(["count", "median"]).reset_index()
        assert list(got["line"]) == list(want["line"]) and list(got["n"]) == list(want["count"])
        assert got["m"].tolist() == pytest.approx(want["median"].tolist())

    def test_parquet_outputs_give_the_same_answer(self, runs, capsys):
        q = "SELECT line, median(minutes) AS m, min(lo) AS first FROM HospitalToStation GROUP BY line ORDER BY line"
        a = sql(capsys, runs / "jsonl", q, "--format", "json")
        b = sql(capsys, runs / "parquet", q, "--format", "json")
        assert a[0] == b[0] == 0 and a[1] == b[1] and a[1].count("\n") >= 3

    def test_times_are_instants_shown_in_the_programs_zone(self, runs, capsys):
        from spatec.sinks.sql import connect

        con, info = connect(runs / "jsonl")
        assert info.tz == "Europe/London"
        first = journeys(runs).sort_values("left").iloc[0]
        got = con.sql('SELECT "left", hour("left") AS h FROM HospitalToStation ORDER BY "left" LIMIT 1').fetchone()
        assert got[0] == pd.Timestamp(first["left"]).to_pydatetime()        # (written with +01:00)
        assert got[1] == pd.Timestamp(first["left"]).tz_convert("Europe/London").hour
        utc = connect(runs / "jsonl", tz="UTC")[0]
        assert utc.sql('SELECT hour("left") FROM HospitalToStation ORDER BY "left" LIMIT 1').fetchone()[0] == \
            pd.Timestamp(first["left"]).tz_convert("UTC").hour

    def test_the_hull_is_a_geometry(self, runs):
        from shapely import wkt

        from spatec.sinks.sql import connect

        con, info = connect(runs / "jsonl")
        assert info.spatial, info.notes            # duckdb-extension-spatial is a pinned dependency
        t = {r[0]: r[1] for r in con.execute("DESCRIBE HospitalToStation").fetchall()}
        assert t["hull"] == "GEOMETRY" and t["lo"] == "TIMESTAMP WITH TIME ZONE"
        area, text = con.sql("SELECT ST_Area(hull), ST_AsText(hull) FROM HospitalToStation ORDER BY id LIMIT 1"
                             ).fetchone()
        first = journeys(runs).sort_values("id").iloc[0]
        assert area == pytest.approx(wkt.loads(first["hull"]).area)
        total = sum(wkt.loads(h).area for h in journeys(runs)["hull"])
        for con_ in (con, connect(runs / "parquet")[0]):   # GeoParquet's WKB hull too
            assert con_.sql("SELECT sum(ST_Area(hull)) FROM HospitalToStation").fetchone()[0] == pytest.approx(total)

    def test_without_the_extension_the_hull_is_wkt(self, runs):
        from spatec.sinks.sql import connect

        con, info = connect(runs / "jsonl", spatial=False)
        assert not info.spatial
        assert con.sql("SELECT hull FROM HospitalToStation ORDER BY id LIMIT 1").fetchone()[0].startswith("POLYGON")

    def test_no_query_lists_the_tables(self, runs, capsys):
        code = main(["sql", str(runs / "jsonl")])
        out = capsys.readouterr().out
        assert code == 0 and out.startswith("HospitalToStation: phrase VARCHAR, id VARCHAR, lo TIMESTAMP")

    def test_rejects_are_a_table(self, tmp_path, capsys):
        csv_ = tmp_path / "fixes.csv"
        csv_.write_text("vehicle,line,operator,direction,lon,lat,ts\nv1,U,WP,IN,0.14491,52.1759,1569916800\n"
                        "v1,U,WP,IN,0.14491,52.1759,-1\nv2,U,WP,IN,0,0,1569916800\n", encoding="utf-8")
        assert main(["replay", str(PROGRAM), "--runner", "local", "--quiet", "--events", f"BusGPS={csv_}",
                     "--out", str(tmp_path / "out")]) == 0
        code, out, _ = sql(capsys, tmp_path / "out", "SELECT type, row, reason FROM rejects ORDER BY row",
                           "--format", "json")
        rows = [json.loads(x) for x in out.splitlines()]
        assert code == 0 and [(r["type"], r["row"]) for r in rows] == [("BusGPS", 2), ("BusGPS", 3)]   # (rows counted from the first data row)
        code, out, _ = sql(capsys, tmp_path / "out", "SELECT count(*) AS n FROM HospitalToStation", "--format", "csv")
        assert (code, out) == (0, "n\n0\n")      # a phrase with no composite is an empty table


class TestErrors:
    def test_a_folder_that_is_not_there(self, tmp_path, capsys):
        code, _, err = sql(capsys, tmp_path / "nowhere", "SELECT 1")
        assert code == 1 and "nowhere: no such folder" in err and "Traceback" not in err

    def test_a_folder_that_is_not_a_replays(self, tmp_path, capsys):
        code, _, err = sql(capsys, tmp_path, "SELECT 1")
        assert code == 1 and "not a replay's output folder (it has no _manifest.json)" in err

    def test_bad_sql(self, runs, capsys):
        code, _, err = sql(capsys, runs / "jsonl", "SELEC line FROM HospitalToStation")
        assert code == 1 and 'syntax error at or near "SELEC"' in err and "tables: HospitalToStation" in err
        assert err.count("\n") <= 6 and "Traceback" not in err

    def test_a_keyword_column_gets_a_hint(self, runs, capsys):
        code, _, err = sql(capsys, runs / "jsonl", "SELECT left, arrived FROM HospitalToStation")
        assert code == 1 and "goes in double quotes" in err
        code, out, _ = sql(capsys, runs / "jsonl", 'SELECT "left" FROM HospitalToStation LIMIT 1', "--format", "csv")
        assert code == 0 and out.startswith("left\n2019-10-01")

    def test_an_unknown_table_says_which_there_are(self, runs, capsys):
        code, _, err = sql(capsys, runs / "jsonl", "SELECT * FROM HospitalToStatio")
        assert code == 1 and 'Did you mean "HospitalToStation"' in err

    def test_an_error_while_rows_are_made(self, runs, capsys):
        code, _, err = sql(capsys, runs / "jsonl", "SELECT CAST(line AS INTEGER) FROM HospitalToStation")
        assert code == 1 and "Could not convert string" in err and "Traceback" not in err

    def test_an_empty_query(self, runs, capsys):
        code, _, err = sql(capsys, runs / "jsonl", "  ")
        assert code == 1 and "the query is empty" in err

    def test_a_bad_time_zone(self, runs, capsys):
        code, _, err = sql(capsys, runs / "jsonl", "SELECT 1", "--tz", "Europe/Londn")
        assert code == 1 and "not a time zone" in err

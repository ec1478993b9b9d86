"""The hand-written benchmark baselines (bench/baselines.py) give spatec's composites.

On the Cambridge hour, and on a small hand-made day that sits on the edges of
the rules (an X exactly 5 min after A, an absence window ending exactly at the
end of the data, a journey of exactly 90 min, a Stuck run whose B and C do
not overlap), every DuckDB and PySpark baseline returns exactly the event-id
tuples in the ``events`` column of spatec's output for the phrase. The PySpark
baselines (and DuckDB's in the bench) read spatec's canonical events from a
Parquet file, as the bench at 16x does. The DuckDB baseline that projects in
SQL (:func:`B.duckdb_sql_file`) gives the same composites, and its projection
is pyproj's within :data:`SQL_PROJECTION_TOLERANCE` (on this machine, to the bit).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from bench import baselines as B
from bench import bench_replay as R
from spatec.plan.program import compile_program
from spatec.runners.local import replay_frames
from spatec.runners.replay import ingest
from tests.runners.conftest import SHARED

EXAMPLES = SHARED / "spec" / "examples"
#: phrase → (program, variables in order, in-memory DuckDB baseline, the baselines' name)
PHRASES = {
    "Silent": ("silent_and_bunching.spatec", ("A",), B.duckdb_silent, "silent"),
    "Stuck": ("stuck.spatec", ("A", "B", "C", "D"), B.duckdb_stuck, "stuck"),
    "HospitalToStation": ("hospital_to_station.spatec", ("A", "B"),
                          B.duckdb_hospital_to_station, "hospital_to_station"),
}


def _events(compiled, csv: Path, tmp: Path):
    frames, summary = ingest(compiled, [("BusGPS", str(csv))], tmp)
    assert summary.rejected == 0
    return frames


def _spatec(phrase: str, csv: Path, tmp: Path, fastpath=None):
    """(canonical frame, CRS, places, spatec's composites as event-id tuples)."""
    program, variables, _, _ = PHRASES[phrase]
    compiled = compile_program(EXAMPLES / program)
    frames = _events(compiled, csv, tmp)
    result = replay_frames(compiled, frames, phrases=[phrase], fastpath=fastpath)
    got = [tuple(ev[v] for v in variables) for ev in result.frames[phrase]["events"]]
    assert len(got) == len(set(got))
    return frames["BusGPS"], result.crs, B.places_of(compiled.program), set(got)


def _duckdb(phrase, df, crs, places):
    f = PHRASES[phrase][2]
    return f(df, crs, places) if phrase == "HospitalToStation" else f(df, crs)


def _canonical_parquet(df, path: Path) -> Path:
    """A canonical frame's :data:`B.CANONICAL` columns as the Parquet file :func:`B.write_canonical` writes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({c: pa.array(df[c].astype(str).tolist(), pa.string()) if c in ("_id", "vehicle")
                      else df[c].to_numpy() for c in B.CANONICAL})
    pq.write_table(table, path)
    return path


def _sql_rows(phrase, events: Path, crs, places, tmp: Path) -> set:
    """The DuckDB baseline projecting in SQL on the canonical events' file ``events``: a set of tuples."""
    name = PHRASES[phrase][3]
    con = B.duckdb_sql_file(name, str(events), crs, places=places, tmp=str(tmp))
    try:
        got = con.execute(f"SELECT {', '.join(B.RESULT_COLUMNS[name])} FROM res").fetchall()
    finally:
        con.close()
    assert len(got) == len(set(got)), "one row per composite"
    return set(got)


def _spark_rows(phrase, spark, events: Path, crs, places, folder: Path) -> set:
    """The PySpark baseline on the canonical events' file ``events``, its rows written by
    Spark to ``folder`` (:func:`B.pyspark_write`) and read back: a set of tuples."""
    import pyarrow.parquet as pq

    B.pyspark_write(spark, PHRASES[phrase][3], str(events), crs, str(folder), places)
    rows = pq.read_table(folder).to_pylist()
    got = [tuple(r[v] for v in PHRASES[phrase][1]) for r in rows]
    assert len(got) == len(set(got)), "one row per composite"
    return set(got)


# --------------------------------------------------------------------------- the Cambridge hour

@pytest.fixture(scope="module")
def hour_reference(hour_path, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baselines")
    return {p: _spatec(p, hour_path, tmp) for p in PHRASES}


def test_places_are_bus_spatec():
    compiled = compile_program(EXAMPLES / "bus.spatec")
    assert B.places_of(compiled.program) == B.BUS_PLACES


@pytest.mark.parametrize("phrase", list(PHRASES))
def test_duckdb_baseline_matches_spatec_on_the_hour(phrase, hour_reference):
    df, crs, places, expected = hour_reference[phrase]
    assert expected, "the hour has composites of every phrase"
    assert _duckdb(phrase, df, crs, places) == expected


# --------------------------------------------------------------------------- the edges of the rules

T0 = 1569916800  # 2019-10-01T08:00:00Z
HOSPITAL = B.BUS_PLACES["hospital"][:2]
STATION = B.BUS_PLACES["station"][:2]
ELSEWHERE = (0.1000, 52.2000)     # > 1 km from every place
M_LAT = 1 / 111_250               # degrees of latitude per metre, near 52.2°N
M_LON = M_LAT / math.cos(math.radians(52.2))


def _at(place, east_m=0.0, north_m=0.0):
    return place[0] + east_m * M_LON, place[1] + north_m * M_LAT


def edge_rows() -> list:
    """(vehicle, seconds after T0, (lon, lat)) rows; the data ends at T0 + 6000 s."""
    rows = [
        # Silent: X exactly 5 min after A negates A; 301 s later does not
        ("S1", 0, ELSEWHERE), ("S1", 300, ELSEWHERE), ("S1", 601, ELSEWHERE),
        # Silent at the end: a window ending exactly at the last event time is
        # decided (reported); one ending 1 s later is not
        ("S1", 5700, ELSEWHERE), ("S2", 5701, ELSEWHERE), ("END", 6000, ELSEWHERE),
        # HospitalToStation: exactly 90 min (B.hi - A.lo = 5370 s + 30 s) is within
        ("H1", 100, HOSPITAL), ("H1", 200, ELSEWHERE), ("H1", 5470, STATION),
        # 1 s longer is not
        ("H2", 100, HOSPITAL), ("H2", 5471, STATION),
        # A is the last fix at the hospital; 160 m from the 150 m circle's centre
        # is at the hospital (15 m disc), 170 m is not (so it does not negate)
        ("H3", 100, HOSPITAL), ("H3", 130, _at(HOSPITAL, north_m=160)),
        ("H3", 160, _at(HOSPITAL, north_m=-170)), ("H3", 400, _at(STATION, east_m=200)),
        # Stuck: A B C D overlap AB, AC, AD, BD but not BC (50 m) nor CD (35 m)
        ("K1", 1000, _at(ELSEWHERE, 0)), ("K1", 1030, _at(ELSEWHERE, 25)),
        ("K1", 1060, _at(ELSEWHERE, -25)), ("K1", 1090, _at(ELSEWHERE, 10)),
        ("K1", 1120, _at(ELSEWHERE, 12)), ("K1", 1150, _at(ELSEWHERE, 14)),
        # ... and a run where A and D are 40 m apart
        ("K2", 1000, _at(ELSEWHERE, 0, 200)), ("K2", 1030, _at(ELSEWHERE, 10, 200)),
        ("K2", 1060, _at(ELSEWHERE, 20, 200)), ("K2", 1090, _at(ELSEWHERE, 40, 200)),
    ]
    return rows


@pytest.fixture(scope="module")
def edge_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("edges") / "edges.csv"
    pd.DataFrame([{"vehicle": v, "line": "1", "operator": "X", "lon": p[0], "lat": p[1], "ts": T0 + s}
                  for v, s, p in edge_rows()]).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def edge_reference(edge_csv, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("edges_out")
    out = {}
    for p in PHRASES:
        df, crs, places, fast = _spatec(p, edge_csv, tmp, fastpath=True)
        *_, general = _spatec(p, edge_csv, tmp, fastpath=False)
        assert fast == general, p
        out[p] = (df, crs, places, fast)
    return out


def _ids(df, *pairs):
    by = {(v, int(t)): i for v, t, i in zip(df["vehicle"], df["_t"], df["_id"])}
    return tuple(by[(v, (T0 + s) * 1_000_000)] for v, s in pairs)


def test_edge_cases_are_what_the_spec_says(edge_reference):
    df, _, _, silent = edge_reference["Silent"]
    assert silent == {_ids(df, ("S1", 300)), _ids(df, ("S1", 601)), _ids(df, ("S1", 5700)),
                      _ids(df, ("H1", 200)), _ids(df, ("H1", 5470)), _ids(df, ("H2", 100)),
                      _ids(df, ("H2", 5471)), _ids(df, ("H3", 400)),
                      _ids(df, ("K1", 1150)), _ids(df, ("K2", 1090))}
    _, _, _, h2s = edge_reference["HospitalToStation"]
    assert h2s == {_ids(df, ("H1", 100), ("H1", 5470)), _ids(df, ("H3", 130), ("H3", 400))}
    _, _, _, stuck = edge_reference["Stuck"]
    assert _ids(df, ("K1", 1000), ("K1", 1030), ("K1", 1060), ("K1", 1090)) in stuck
    assert not any(t[0].startswith("BusGPS:K2:") for t in stuck)


@pytest.mark.parametrize("phrase", list(PHRASES))
def test_duckdb_baseline_matches_spatec_on_the_edges(phrase, edge_reference):
    df, crs, places, expected = edge_reference[phrase]
    assert _duckdb(phrase, df, crs, places) == expected


@pytest.mark.parametrize("phrase", list(PHRASES))
def test_duckdb_sql_baseline_matches_spatec_on_the_edges(phrase, edge_reference, tmp_path):
    df, crs, places, expected = edge_reference[phrase]
    events = _canonical_parquet(df, tmp_path / "events.parquet")
    assert _sql_rows(phrase, events, crs, places, tmp_path) == expected


@pytest.mark.parametrize("phrase", list(PHRASES))
def test_pyspark_baseline_matches_spatec_on_the_edges(phrase, edge_reference, spark, tmp_path):
    df, crs, places, expected = edge_reference[phrase]
    events = _canonical_parquet(df, tmp_path / "events.parquet")
    assert _spark_rows(phrase, spark, events, crs, places, tmp_path / "out") == expected


# --------------------------------------------------------------------------- from files (the bench at 16x)

@pytest.fixture(scope="module")
def hour_parquet(hour_path, tmp_path_factory):
    """The hour as Parquet, with one record repeated in a later slice (a duplicate
    across slices: :func:`B.write_canonical` must leave it out, as spatec's ingest does)."""
    df = pd.read_csv(hour_path)
    df = pd.concat([df, df.iloc[[5]]], ignore_index=True)
    path = tmp_path_factory.mktemp("hour_parquet") / "hour.parquet"
    df.to_parquet(path, index=False)
    return path


@pytest.fixture(scope="module")
def canonical_file(hour_parquet, tmp_path_factory):
    compiled = compile_program(EXAMPLES / "bus.spatec")
    out = tmp_path_factory.mktemp("canonical") / "events.parquet"
    used = B.write_canonical(compiled.program, "BusGPS", str(hour_parquet), str(out), rows=20_000)
    return out, used


def test_canonical_file_is_spatecs_events(canonical_file, hour_parquet, tmp_path):
    """Slice by slice, the same events as spatec's ingest of the whole file: the copy in
    a later slice left out, every id and time as spatec makes them."""
    import pyarrow.parquet as pq

    out, used = canonical_file
    frames, summary = ingest(compile_program(EXAMPLES / "bus.spatec"), [("BusGPS", str(hour_parquet))], tmp_path)
    assert summary.rejected == 1 and used == summary.used
    got = pq.read_table(out).to_pandas().sort_values("_id").reset_index(drop=True)
    want = frames["BusGPS"][list(B.CANONICAL)].sort_values("_id").reset_index(drop=True)
    for c in B.CANONICAL:
        assert got[c].tolist() == want[c].tolist(), c


@pytest.mark.parametrize("phrase", list(PHRASES))
def test_duckdb_file_baseline_matches_spatec_on_the_hour(phrase, hour_reference, canonical_file, hour_path, tmp_path):
    """The streaming DuckDB baseline's rows (count and digest) are spatec's composites,
    and so is the digest DuckDB reads from spatec's JSON lines and GeoParquet files."""
    from spatec.runners.replay import replay_local

    df, crs, places, expected = hour_reference[phrase]
    name = {"Silent": "silent", "Stuck": "stuck", "HospitalToStation": "hospital_to_station"}[phrase]
    variables = B.VARIABLES[name]
    want = B.rows_digest(expected, variables)
    assert want[0] == len(expected)
    kw = {"places": places} if name == "hospital_to_station" else {}
    con = B.duckdb_file(name, str(canonical_file[0]), crs, tmp=str(tmp_path), **kw)
    try:
        assert B.digest(con, "res", B.RESULT_COLUMNS[name]) == want
    finally:
        con.close()
    # one id changed: another digest
    assert B.rows_digest({(("x",) + t[1:]) if i == 0 else t for i, t in enumerate(sorted(expected))},
                         variables) != want
    program = EXAMPLES / PHRASES[phrase][0]
    for fmt in ("jsonl", "parquet"):
        out = tmp_path / fmt
        result = replay_local(compile_program(program), [("BusGPS", str(hour_path))],
                              out, fmt=fmt, phrases=[phrase])
        assert B.output_digest(result.paths[phrase], variables) == want, fmt


@pytest.mark.parametrize("phrase", list(PHRASES))
def test_pyspark_file_baseline_matches_spatec_and_duckdb_on_the_hour(phrase, hour_reference, canonical_file,
                                                                     spark, tmp_path):
    """The streaming PySpark baseline on the bench's canonical file: its rows are spatec's
    composites, and the digest of the folder Spark wrote equals DuckDB's digest of its own
    baseline's rows (what the bench compares); one id changed in that folder changes it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df, crs, places, expected = hour_reference[phrase]
    name, variables = PHRASES[phrase][3], PHRASES[phrase][1]
    folder = tmp_path / "spark"
    assert _spark_rows(phrase, spark, canonical_file[0], crs, places, folder) == expected
    got = B.files_digest(folder, variables)
    kw = {"places": places} if name == "hospital_to_station" else {}
    con = B.duckdb_file(name, str(canonical_file[0]), crs, tmp=str(tmp_path), **kw)
    try:
        assert got == B.digest(con, "res", B.RESULT_COLUMNS[name]) == B.rows_digest(expected, variables)
    finally:
        con.close()
    table = pq.read_table(folder)
    a = table.column("A").to_pylist()
    a[0] = a[0] + "x"
    changed = tmp_path / "changed"
    changed.mkdir()
    pq.write_table(table.set_column(0, "A", pa.array(a, pa.string())), changed / "part-0.parquet")
    assert B.files_digest(changed, variables) != got


# --------------------------------------------------------------------------- projecting in SQL

#: How far (metres) the SQL projection may be from pyproj's. The overlap decision nearest its
#: boundary on the Cambridge positions is 16 µm from it (two consecutive fixes, discs of
#: 15 m, whose centres are 30 m ± 16 µm apart), so 1 µm a position cannot flip one there. (PROJ's series itself
#: is good to nanometres; with the same C library the SQL steps give pyproj's bits, which
#: this does not assert: the bench's count-and-digest check guards the decisions.)
SQL_PROJECTION_TOLERANCE = 1e-6


def _sql_projection(lon, lat, crs):
    import duckdb
    import numpy as np

    con = duckdb.connect()
    try:
        con.register("pos", pd.DataFrame({"lon": np.asarray(lon, float), "lat": np.asarray(lat, float)}))
        got = con.execute(B.projected_sql("pos", crs, {"lon": "lon", "lat": "lat", "x": "x", "y": "y"},
                                          "lon", "lat")).df()
    finally:
        con.close()
    return got["lon"].to_numpy(), got["lat"].to_numpy(), got["x"].to_numpy(), got["y"].to_numpy()


def _assert_pyprojs(lon, lat, crs):
    import numpy as np
    import pyproj

    lon, lat, x, y = _sql_projection(lon, lat, crs)
    px, py = pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True).transform(lon, lat)
    inside = np.isfinite(px) & np.isfinite(py)
    assert (np.isfinite(x) & np.isfinite(y)).tolist() == inside.tolist(), "beyond the domain exactly where pyproj is"
    assert np.abs(x[inside] - px[inside]).max() <= SQL_PROJECTION_TOLERANCE
    assert np.abs(y[inside] - py[inside]).max() <= SQL_PROJECTION_TOLERANCE
    return inside


def test_sql_projection_is_pyprojs_on_the_hour(hour_reference):
    """Every canonical position of the hour, in spatec's CRS (the UTM zone it chose), and
    the places: as pyproj puts them, within the tolerance."""
    df, crs, places, _ = hour_reference["Stuck"]
    assert crs.startswith("EPSG:326"), crs      # the UTM zone spatec chose (30 for the hour)
    assert _assert_pyprojs(df["_lon"], df["_lat"], crs).all()
    import duckdb
    import pyproj

    con = duckdb.connect()
    try:
        sql = B.project_places_in_sql(con, places, crs)
    finally:
        con.close()
    forward = pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    assert set(sql) == {"hospital", "station"}
    for name, (x, y, r) in sql.items():
        px, py = forward.transform(places[name][0], places[name][1])
        assert abs(x - px) <= SQL_PROJECTION_TOLERANCE and abs(y - py) <= SQL_PROJECTION_TOLERANCE
        assert r == places[name][2]


@pytest.mark.parametrize("crs", ["EPSG:32631", "EPSG:32601", "EPSG:32760", "EPSG:32717"])
def test_sql_projection_is_pyprojs_across_the_globe(crs):
    """A grid over the whole globe, the zone's own strip densely: the same positions as
    pyproj wherever pyproj has one (the antimeridian's wrap, the other hemisphere, the
    poles), and beyond PROJ's domain (``inf``) exactly where pyproj is."""
    import numpy as np

    zone = int(crs[-2:])
    mid = (zone - 1) * 6 - 180 + 3
    lon, lat = np.meshgrid(np.linspace(-180, 180, 73), np.linspace(-90, 90, 37))
    slon, slat = np.meshgrid(np.linspace(mid - 3, mid + 3, 61), np.linspace(-84, 84, 85))
    inside = _assert_pyprojs(np.concatenate([lon.ravel(), slon.ravel()]),
                             np.concatenate([lat.ravel(), slat.ravel()]), crs)
    assert inside.sum() > slon.size and not inside.all(), "both inside and beyond the domain"


@pytest.mark.parametrize("crs", ["EPSG:27700", "EPSG:4326", "EPSG:32661", "EPSG:32600", "EPSG:326310", "utm31"])
def test_sql_projection_refuses_other_crs(crs):
    with pytest.raises(ValueError, match="WGS 84 UTM zones.*" + crs):
        B.projected_sql("pos", crs, {"x": "x", "y": "y"})


@pytest.mark.parametrize("phrase", list(PHRASES))
def test_duckdb_sql_file_baseline_matches_spatec_on_the_hour(phrase, hour_reference, canonical_file, tmp_path):
    """On the bench's canonical file of the hour, the DuckDB baseline projecting in SQL
    gives spatec's composites, row for row, and so the same digest the bench compares."""
    df, crs, places, expected = hour_reference[phrase]
    name, variables = PHRASES[phrase][3], PHRASES[phrase][1]
    assert _sql_rows(phrase, canonical_file[0], crs, places, tmp_path) == expected
    con = B.duckdb_sql_file(name, str(canonical_file[0]), crs, places=places, tmp=str(tmp_path))
    try:
        assert B.digest(con, "res", B.RESULT_COLUMNS[name]) == B.rows_digest(expected, variables)
    finally:
        con.close()


def test_bench_table_has_each_baselines_ratio_and_the_fastest():
    """The bench's rows: spatec against each DuckDB baseline and PySpark, and against the
    fastest; a row that ran no baseline (another format) is put against its scale's."""
    rows = [{"scale": 1, "program": "three", "format": "jsonl", "total_s": 12.0,
             "duckdb_pyproj_s": 4.0, "duckdb_sql_s": 3.0, "pyspark_s": 6.0},
            {"scale": 1, "program": "three", "format": "parquet", "total_s": 9.0},
            {"scale": 4, "program": "three", "format": "jsonl", "total_s": 40.0, "error": "no baselines"}]
    got = R.with_ratios(rows)
    assert got[0]["spatec_vs_duckdb_pyproj"] == 3.0 and got[0]["spatec_vs_duckdb_sql"] == 4.0
    assert got[0]["spatec_vs_pyspark"] == 2.0
    assert (got[0]["fastest"], got[0]["spatec_vs_fastest"]) == ("duckdb_sql", 4.0)
    assert (got[1]["fastest"], got[1]["spatec_vs_fastest"], got[1]["spatec_vs_duckdb_pyproj"]) == ("duckdb_sql", 3.0, 2.25)
    assert "spatec_vs_fastest" not in got[2]
    table = R.markdown(rows).splitlines()
    head = [c.strip() for c in table[0].strip("|").split("|")]
    assert head.index("spatec_vs_duckdb_pyproj") < head.index("spatec_vs_duckdb_sql") < head.index("spatec_vs_fastest")
    assert R.ratios(10.0, {"duckdb_pyproj_s": 5.0}) == {"spatec_vs_duckdb_pyproj": 2.0, "fastest": "duckdb_pyproj",
                                                        "spatec_vs_fastest": 2.0}

"""Hand-written baselines for the replay benchmark (issue 4): ``Silent``, ``Stuck``
and ``HospitalToStation`` of ``/work/shared/spec/examples`` written directly as
one DuckDB SQL query and one PySpark DataFrame query each, with no spatec code.

They show what a competent engineer's direct query costs, so they are written
to be fast, and they must give exactly spatec's composites: one row per
composite, its event ids in variable order (``(A,)``, ``(A, B, C, D)``, ``(A,
B)``), to be compared with the ``events`` column of spatec's output.

Three forms, one set of queries:

* DuckDB in memory (``duckdb_silent`` …: a pandas frame in, a set of tuples
  out), for the tests on small inputs; and DuckDB from a file, what the bench
  times, two ways: :func:`duckdb_file` reads the canonical events' Parquet
  file (:func:`write_canonical`), projects the positions (pyproj, as spatec
  does) batch by batch in Python and materialises the rows in a DuckDB table;
  :func:`duckdb_sql_file` has DuckDB read the file and project the positions
  itself, in SQL (:func:`projected_sql`: PROJ's transverse Mercator written
  out as SQL, pyproj's positions to the bit on valid input), with no Python
  per batch.
* PySpark from a file (:func:`pyspark_file` / :func:`pyspark_write`): Spark
  reads the same Parquet file, projects the positions in its tasks
  (``mapInArrow``), runs the query and writes the rows to a Parquet folder;
  nothing is collected to the driver.

The bench compares a baseline's rows with spatec's output by count and an
order-free digest (:func:`digest`), computed by DuckDB from each side's file.

Input: spatec's canonical events of ``BusGPS``, of which the baselines read
``_id`` (the event id), ``vehicle``, ``_t`` (local time), ``_lo``, ``_hi``
(the time stamp, int µs), ``_lon``, ``_lat`` and ``_r`` (the disc radius,
metres). ``crs`` is the metric CRS spatec uses
(``spatec.spatial.crs.choose_crs``: the UTM zone of the median position of the data).

How the queries read SPEC (``/work/shared/SPEC.md``, ``lang/REFERENCE.md``)
---------------------------------------------------------------------------
Common to all three:

* ``per vehicle`` on ``BusGPS``, whose ``source`` is ``vehicle``: every
  variable, negated ones too, is a fix of one vehicle. (Ingest rejects a
  record with no vehicle or no position, so every row has both.) Within one
  source ``before(a, b)`` is ``a.t < b.t`` whatever the stamps (SPEC §2,
  decision 21), so a
  vehicle's fixes are totally ordered by local time ``_t`` (ingest drops
  duplicates: ``(type, source, t)`` is the identity), and the overlapping
  ``ts - 30 s .. ts`` stamps of neighbouring fixes never make two fixes of a
  bus concurrent. "The next fix of the vehicle" is therefore ``LEAD(...) OVER
  (PARTITION BY vehicle ORDER BY _t)``.
* A fix's location stamp is the disc of radius ``_r`` (15 m) around its
  projected position. Two discs overlap when the distance between centres is
  at most ``r1 + r2`` (SPEC §1), written as spatec does, ``dx*dx + dy*dy <=
  (r1 + r2)^2`` (plain IEEE arithmetic, the same bits in numpy, DuckDB and
  Spark, so the boundary falls in the same place). ``at P`` for a circle place
  is "possibly at": the fix's disc overlaps the place's circle (its centre
  projected with the same transformer).

``Silent``: ``BusGPS -> A ; not BusGPS -> X within 5 min``.
  A is reported iff there is no fix X of its vehicle with ``before(A, X)``
  (``X.t > A.t``) and ``X.hi <= A.hi + 5 min`` (SPEC §3), and the absence is
  decided: its window must not reach past the data, ``A.hi + 5 min <= W``
  with ``W`` the largest ``hi`` of the whole input (SPEC §4: a batch replay
  ends with the watermark at its last event's time; an absence whose window
  reaches past the data is not reported). ``hi`` is ``t`` for ``BusGPS``
  (``time ts - 30 s .. ts``), so the fixes after A by ``t`` are those after it
  by ``hi`` and the only X to look at is the next fix: A is silent iff
  ``LEAD(hi)`` is NULL or ``> A.hi + 5 min``, and ``A.hi + 5 min <= W``.
  (When the next fix exists and is more than 5 min later, ``W`` is at least
  its ``hi``, so the watermark condition only bites on a vehicle's last fix.)
  An X exactly 5 min after A negates it; a window ending exactly at ``W`` is
  decided (spatec's local runner, fast path and automaton alike). DuckDB
  takes ``W`` as a scalar subquery; PySpark as one column's maximum, its own pass.

``Stuck``: ``A ;= B ;= C ;= D where successive(A, B, C, D) and overlap(A, C)
and overlap(A, D) and overlap(B, D)``.
  ``successive`` makes A, B, C, D four consecutive fixes of one vehicle (the
  same source: "nothing of that type and source between"), so each window
  of four neighbouring rows is one candidate and ``before`` holds along the
  chain. ``;=`` groups from the left: ``((A ;= B) ;= C) ;= D`` asks
  ``overlap(A, B)``, then that the convex hull of A and B overlaps C, then
  that the hull of A, B, C overlaps D. A's disc lies inside both hulls, so
  ``overlap(A, C)`` and ``overlap(A, D)`` from ``where`` already imply the two
  hull conditions: the whole phrase is ``overlap(A, B) and overlap(A, C) and
  overlap(A, D) and overlap(B, D)`` — B–C and C–D are *not* required (the
  example's comment says "pairwise", its formula does not ask it; on the
  Cambridge hour the pairwise reading would give 10969 composites, SPEC's
  10986, as spatec). Nothing
  about the end of the data: ``successive`` over events that are all present
  is decided at the end of a batch replay (decision 17).

``HospitalToStation``: ``(A and at hospital) ; not (X and (at hospital or at
station)) ; (B and at station) within 90 min``.
  No fix of the vehicle possibly at either place strictly between A and B
  (``A.t < X.t < B.t``): among the vehicle's fixes possibly at hospital or
  station, in local-time order, B is the one right after A. So: keep those
  fixes, take ``LEAD`` over them, and keep the pairs with A at the hospital,
  B at the station and the composite's stamp ``[min lo, max hi]`` at most
  90 min long (``within``). It is decided when the watermark reaches
  ``B.hi`` (decision 17, no slack for ``ts - 30 s .. ts`` stamps): always, at
  the end of a batch replay.

Place coordinates and radii: :data:`BUS_PLACES` (from ``bus.spatec``), or
:func:`places_of` on a compiled program.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyproj

#: ``place NAME = circle(lon, lat, radius)`` of /work/shared/spec/examples/bus.spatec:
#: name → (lon, lat, radius in metres).
BUS_PLACES = {
    "hospital": (0.14491, 52.17590, 150.0),
    "station": (0.13610, 52.19300, 200.0),
    "centre": (0.12415, 52.20520, 120.0),
}

US = 1_000_000
SILENT_WINDOW = 5 * 60 * US          # within 5 min
H2S_WINDOW = 90 * 60 * US            # within 90 min


def places_of(program) -> dict:
    """name → (lon, lat, radius m) for the circle places of a checked spatec program."""
    return {n: (p.lon, p.lat, p.radius) for n, p in program.places.items() if p.kind == "circle"}


# ------------------------------------------------------------------------- preparation

def _transformer(crs: str) -> pyproj.Transformer:
    return pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)


def prepare(df: pd.DataFrame, crs: str) -> pd.DataFrame:
    """The columns the queries read, positions projected to ``crs`` (metres)."""
    x, y = _transformer(crs).transform(df["_lon"].to_numpy(float), df["_lat"].to_numpy(float))
    return pd.DataFrame({
        "id": df["_id"].to_numpy(),
        "vehicle": df["vehicle"].to_numpy(),
        "t": df["_t"].to_numpy(np.int64),
        "lo": df["_lo"].to_numpy(np.int64),
        "hi": df["_hi"].to_numpy(np.int64),
        "x": x,
        "y": y,
        "r": df["_r"].to_numpy(float),
    })


def _project_places(places: dict, crs: str, names=("hospital", "station")) -> dict:
    """name → (x, y, radius) in ``crs``: each centre projected as spatec does."""
    tr = _transformer(crs)
    out = {}
    for n in names:
        lon, lat, radius = places[n]
        x, y = tr.transform(np.asarray(lon, float), np.asarray(lat, float))
        out[n] = (float(x), float(y), float(radius))
    return out


# ------------------------------------------------------------------------- DuckDB

def _duck_rows(df: pd.DataFrame, crs: str, sql: str, params: dict | None = None) -> set:
    """Every row of ``sql`` over the prepared events (registered as ``ev``), as a set of tuples."""
    import duckdb

    con = duckdb.connect()
    try:
        con.register("ev", prepare(df, crs))
        return set(con.execute(sql, params).fetchall() if params else con.execute(sql).fetchall())
    finally:
        con.close()


def _ov_sql(a: str, b: str) -> str:
    """overlap of the discs of rows ``a`` and ``b`` (column prefixes)."""
    return (f"({a}x - {b}x) * ({a}x - {b}x) + ({a}y - {b}y) * ({a}y - {b}y)"
            f" <= ({a}r + {b}r) * ({a}r + {b}r)")


DUCKDB_SILENT = f"""
WITH f AS (
  SELECT id, hi, LEAD(hi) OVER (PARTITION BY vehicle ORDER BY t) AS next_hi
  FROM ev)
SELECT id FROM f
WHERE (next_hi IS NULL OR next_hi > hi + {SILENT_WINDOW})
  AND hi + {SILENT_WINDOW} <= (SELECT max(hi) FROM ev)
"""


def duckdb_silent(df: pd.DataFrame, crs: str) -> set:
    """``Silent`` in DuckDB: {(A,)}."""
    return _duck_rows(df, crs, DUCKDB_SILENT)


DUCKDB_STUCK = f"""
WITH w AS (
  SELECT id AS a_id, x AS a_x, y AS a_y, r AS a_r,
         LEAD(id, 1) OVER v AS b_id, LEAD(x, 1) OVER v AS b_x, LEAD(y, 1) OVER v AS b_y, LEAD(r, 1) OVER v AS b_r,
         LEAD(id, 2) OVER v AS c_id, LEAD(x, 2) OVER v AS c_x, LEAD(y, 2) OVER v AS c_y, LEAD(r, 2) OVER v AS c_r,
         LEAD(id, 3) OVER v AS d_id, LEAD(x, 3) OVER v AS d_x, LEAD(y, 3) OVER v AS d_y, LEAD(r, 3) OVER v AS d_r
  FROM ev
  WINDOW v AS (PARTITION BY vehicle ORDER BY t))
SELECT a_id, b_id, c_id, d_id FROM w
WHERE d_id IS NOT NULL
  AND {_ov_sql("a_", "b_")} AND {_ov_sql("a_", "c_")}
  AND {_ov_sql("a_", "d_")} AND {_ov_sql("b_", "d_")}
"""


def duckdb_stuck(df: pd.DataFrame, crs: str) -> set:
    """``Stuck`` in DuckDB: {(A, B, C, D)}."""
    return _duck_rows(df, crs, DUCKDB_STUCK)


def _at_sql(p: str) -> str:
    """``at P`` for a circle place with parameters ``$p_x, $p_y, $p_r``."""
    return (f"(x - ${p}_x) * (x - ${p}_x) + (y - ${p}_y) * (y - ${p}_y)"
            f" <= (r + ${p}_r) * (r + ${p}_r)")


DUCKDB_H2S = f"""
WITH p AS (
  SELECT id, vehicle, t, lo, hi, {_at_sql("h")} AS at_h, {_at_sql("s")} AS at_s
  FROM ev),
f AS (
  SELECT id, lo, hi, at_h,
         LEAD(id) OVER v AS b_id, LEAD(lo) OVER v AS b_lo, LEAD(hi) OVER v AS b_hi, LEAD(at_s) OVER v AS b_at_s
  FROM p
  WHERE at_h OR at_s
  WINDOW v AS (PARTITION BY vehicle ORDER BY t))
SELECT id, b_id FROM f
WHERE at_h AND b_at_s
  AND greatest(hi, b_hi) - least(lo, b_lo) <= {H2S_WINDOW}
"""


def duckdb_hospital_to_station(df: pd.DataFrame, crs: str, places: dict = BUS_PLACES) -> set:
    """``HospitalToStation`` in DuckDB: {(A, B)}. ``places``: name → (lon, lat, radius m)."""
    return _duck_rows(df, crs, DUCKDB_H2S, _place_params(_project_places(places, crs)))


def _place_params(projected: dict) -> dict:
    """:data:`DUCKDB_H2S`'s parameters from the projected places (name → (x, y, radius))."""
    return {f"{k}_{c}": v for k, n in (("h", "hospital"), ("s", "station")) for c, v in zip("xyr", projected[n])}


#: The queries by baseline name, over the prepared events ``ev``.
_QUERIES = {"silent": DUCKDB_SILENT, "stuck": DUCKDB_STUCK, "hospital_to_station": DUCKDB_H2S}


# ------------------------------------------------------------------------- from files, streaming
#
# At 16 bus-days the canonical events (21 M) do not fit in pandas on a shared machine
# (~20 GB with their Python strings), nor do the baselines' result sets. So the bench
# writes spatec's canonical events once to a Parquet file, slice by slice (untimed,
# :func:`write_canonical`), and each DuckDB baseline reads that file itself
# (:func:`duckdb_file`): the positions are projected batch by batch, as they stream into
# DuckDB, and the result rows are materialised in a DuckDB table. The comparison with
# spatec's output is by row count and an order-free digest of the rows (the sum of
# DuckDB's 64-bit hash of each composite's event ids, :func:`digest`), computed by DuckDB
# from spatec's output file and from the baseline's table: neither is ever whole in Python.

#: The canonical columns the baselines read (the names :func:`prepare` takes).
CANONICAL = ("_id", "vehicle", "_t", "_lo", "_hi", "_lon", "_lat", "_r")
#: The phrases' variables, in the order of the baselines' tuples (spatec's ``events`` keys, sorted).
VARIABLES = {"hospital_to_station": ("A", "B"), "stuck": ("A", "B", "C", "D"), "silent": ("A",)}
#: The columns of a DuckDB baseline's result table ``res`` that hold the :data:`VARIABLES`, in their order.
RESULT_COLUMNS = {"hospital_to_station": ("id", "b_id"), "stuck": ("a_id", "b_id", "c_id", "d_id"), "silent": ("id",)}
#: DuckDB's memory for one baseline (it spills beyond, to ``temp_directory``): bounded on a shared machine.
DUCK_MEMORY = "6GB"


def _duck(tmp: str | None = None):
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{DUCK_MEMORY}'")
    if tmp:
        con.execute(f"SET temp_directory = '{tmp}'")
    return con


def _quote(path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def write_canonical(program, type_name: str, path: str, out: str, rows: int = 250_000) -> int:
    """spatec's canonical events of ``type_name`` read from the Parquet file ``path``
    (:func:`~spatec.events.canonical.to_events`, slice by slice: typing, stamps, ids,
    rejects, duplicates within a slice), their :data:`CANONICAL` columns written to the
    Parquet file ``out``; a copy of an event an earlier slice had (the same id: type,
    source and time) is left out, as spatec's ingest leaves it out. Returns the events
    written. Never more than a slice in pandas."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from spatec.events.canonical import to_events
    from spatec.events.formats import parquet_slices
    from spatec.events.read import wanted_columns

    decl = program.events[type_name]
    raw = out + ".slices.parquet"
    writer = None
    seq = 0
    try:
        for b in parquet_slices(path, wanted_columns(decl), rows):
            ev = to_events([b], decl, program.timezone).events
            cols = {"_id": pa.array(ev["_id"].tolist(), pa.string()),
                    "vehicle": pa.array(ev["vehicle"].astype(str).tolist(), pa.string())}
            cols.update({c: ev[c].to_numpy(np.int64) for c in ("_t", "_lo", "_hi")})
            cols.update({c: ev[c].to_numpy(float) for c in ("_lon", "_lat", "_r")})
            cols["_seq"] = np.arange(seq, seq + len(ev), dtype=np.int64)
            seq += len(ev)
            table = pa.table(cols)
            if writer is None:
                writer = pq.ParquetWriter(raw, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    cols = ", ".join(CANONICAL)
    con = _duck(os.path.dirname(out))
    try:
        src = f"read_parquet({_quote(raw)})"
        dup = con.execute(f"SELECT count(*) - count(DISTINCT _id) FROM {src}").fetchone()[0]
        first = "" if not dup else " QUALIFY row_number() OVER (PARTITION BY _id ORDER BY _seq) = 1"
        return con.execute(f"COPY (SELECT {cols} FROM {src}{first}) TO {_quote(out)} "
                           "(FORMAT parquet)").fetchone()[0]
    finally:
        con.close()
        os.unlink(raw)


def _projected(path: str, crs: str, batch: int = 1 << 20):
    """The canonical events of the Parquet file ``path`` as the rows :func:`prepare` makes
    (an Arrow table a batch at a time), positions projected to ``crs`` as they stream.
    Iterated on the caller's thread: a pyproj transformer is not to be shared between threads."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tr = _transformer(crs)
    for b in pq.ParquetFile(path).iter_batches(batch_size=batch, columns=list(CANONICAL)):
        x, y = tr.transform(b["_lon"].to_numpy(), b["_lat"].to_numpy())
        yield pa.table({"id": b["_id"], "vehicle": b["vehicle"], "t": b["_t"], "lo": b["_lo"], "hi": b["_hi"],
                        "x": pa.array(x), "y": pa.array(y), "r": b["_r"]})


def duckdb_file(name: str, path: str, crs: str, places: dict = BUS_PLACES, tmp: str | None = None):
    """Baseline ``name`` (``silent``, ``stuck``, ``hospital_to_station``) in DuckDB on the
    canonical events of the Parquet file ``path`` (:func:`write_canonical`): the events
    streamed in and projected, the query's rows materialised in a table. Returns the open
    connection, whose table ``res`` holds the result (for :func:`digest`; close it)."""
    sql = _QUERIES[name]
    params = _place_params(_project_places(places, crs)) if name == "hospital_to_station" else None
    con = _duck(tmp)
    try:
        for i, part in enumerate(_projected(path, crs)):
            con.register("part", part)
            con.execute("INSERT INTO ev SELECT * FROM part" if i else "CREATE TEMP TABLE ev AS SELECT * FROM part")
            con.unregister("part")
        con.execute("CREATE TEMP TABLE res AS " + sql, params) if params else \
            con.execute("CREATE TEMP TABLE res AS " + sql)
    except BaseException:
        con.close()
        raise
    return con


def digest(con, relation: str, columns) -> tuple[int, int]:
    """(rows, the sum of DuckDB's hash of each row's ``columns`` joined by a unit
    separator) of ``relation`` in ``con``: the same for two relations holding the same
    rows, whatever their order."""
    key = "concat_ws(chr(31), " + ", ".join(columns) + ")"
    n, h = con.execute(f"SELECT count(*), coalesce(sum(hash({key})), 0) FROM {relation}").fetchone()
    return int(n), int(h)


def output_digest(path, variables) -> tuple[int, int]:
    """:func:`digest` of the event ids (``variables``, in order) of spatec's output file
    (JSON lines or GeoParquet), read by DuckDB."""
    con = _duck()
    try:
        if str(path).endswith(".parquet"):
            return digest(con, f"read_parquet({_quote(path)})",
                          [f"map_extract_value(events, '{v}')" for v in variables])
        struct = "STRUCT(" + ", ".join(f'"{v}" VARCHAR' for v in variables) + ")"
        rel = (f"read_json({_quote(path)}, format = 'newline_delimited', "
               f"columns = {{'events': '{struct}'}})")
        return digest(con, rel, [f'events."{v}"' for v in variables])
    finally:
        con.close()


def rows_digest(rows: set, variables) -> tuple[int, int]:
    """:func:`digest` of a set of tuples (the in-memory baselines', spatec's composites in the tests)."""
    import pyarrow as pa

    cols = list(zip(*rows)) if rows else [() for _ in variables]
    table = pa.table({v: pa.array(list(c), pa.string()) for v, c in zip(variables, cols)})
    con = _duck()
    try:
        con.register("rows_", table)
        return digest(con, "rows_", list(variables))
    finally:
        con.close()


# ------------------------------------------------------------------------- DuckDB, projecting in SQL
#
# The same three queries on the same canonical Parquet file, but with no Python per batch:
# DuckDB reads the file and computes the metric positions itself, in SQL (issue 30).
# DuckDB's spatial extension (``ST_Transform``) cannot be had here: DuckDB's extension
# repository is out of reach, and PyPI's ``duckdb-extension-spatial`` is built only for
# DuckDB up to 1.5.5, not for the 2.0.0 the project pins. So the projection is written out
# as SQL: the transverse Mercator forward of PROJ 9 (``tmerc.cpp``, ``exact_e_fwd``: Poder
# and Engsager's 6th-order Krüger series, what ``+proj=utm`` runs, accurate to a few
# nanometres within the zone), operation for operation and in PROJ's order of evaluation,
# with PROJ's constants computed here as PROJ computes them (``setup_exact``, ``ell_set``,
# ``utm``). ``hypot``, which DuckDB lacks, is glibc's (2.35+: Borges' corrected
# ``sqrt(x*x + y*y)``, the kernel without FMA). Every operation is a plain IEEE double
# operation or the C library's ``sin``/``cos``/``atan2``/``asinh``, so with the C library
# pyproj's PROJ uses (here glibc 2.36) the SQL positions are pyproj's to the bit: every
# position of the Cambridge hour and of the bench's bus-days, and 250,000 random positions
# (a fifth over the whole globe, the rest within the zone) in each of zones 1, 30, 31 and
# 60, north and south. tests/runners/test_baselines.py asserts them
# within 1 µm (another C library may round differently); the bench's count-and-digest
# check stays the guard that no overlap decision differs.

#: PROJ's ``DEG_TO_RAD`` (``unitconvert``'s factor from degrees to radians).
_DEG_TO_RAD = 0.017453292519943296
#: WGS 84 (``+ellps=WGS84``): semi-major axis (m) and inverse flattening.
_WGS84_A, _WGS84_RF = 6378137.0, 298.257223563


def _utm_zone(crs: str) -> tuple[int, bool]:
    """(zone 1..60, south) of a WGS 84 UTM code ``EPSG:326NN`` / ``EPSG:327NN`` (what
    ``spatec.spatial.crs.choose_crs`` picks); ValueError for any other CRS."""
    import re

    m = re.fullmatch(r"EPSG:32([67])(\d\d)", str(crs).strip().upper())
    if not m or not 1 <= int(m.group(2)) <= 60:
        raise ValueError(f"the SQL projection is written for the WGS 84 UTM zones (EPSG:32601..32660, "
                         f"EPSG:32701..32760), not {crs!r}")
    return int(m.group(2)), m.group(1) == "7"


def tmerc_constants(crs: str) -> dict:
    """PROJ 9's constants of the UTM projection ``crs`` (a WGS 84 UTM zone), computed as
    PROJ computes them, operation for operation: ``a``, ``x0``, ``y0``, ``lam0`` (the
    central meridian, radians), ``Qn`` (the normalised meridian quadrant times ``k0``),
    ``Zb`` (-0.0: the origin is on the equator) and the 6-term Krüger series ``cbg``
    (geodetic to Gaussian latitude) and ``gtu`` (Gaussian sphere to the ellipsoid's
    transverse Mercator)."""
    zone, south = _utm_zone(crs)
    f = 1 / _WGS84_RF                                   # ell_set: rf given
    es = 2 * f - f * f
    alpha = math.asin(math.sqrt(es))                    # pj_calc_ellipsoid_params
    n = math.pow(math.tan(alpha / 2), 2)                # third flattening
    cbg = [0.0] * 6
    gtu = [0.0] * 6
    np_ = n
    cbg[0] = n * (-2 + n * (2 / 3.0 + n * (4 / 3.0 + n * (-82 / 45.0 + n * (32 / 45.0 + n * (4642 / 4725.0))))))
    np_ *= n
    cbg[1] = np_ * (5 / 3.0 + n * (-16 / 15.0 + n * (-13 / 9.0 + n * (904 / 315.0 + n * (-1522 / 945.0)))))
    np_ *= n
    cbg[2] = np_ * (-26 / 15.0 + n * (34 / 21.0 + n * (8 / 5.0 + n * (-12686 / 2835.0))))
    np_ *= n
    cbg[3] = np_ * (1237 / 630.0 + n * (-12 / 5.0 + n * (-24832 / 14175.0)))
    np_ *= n
    cbg[4] = np_ * (-734 / 315.0 + n * (109598 / 31185.0))
    np_ *= n
    cbg[5] = np_ * (444337 / 155925.0)
    k0 = 0.9996
    np_ = n * n
    qn = k0 / (1 + n) * (1 + np_ * (1 / 4.0 + np_ * (1 / 64.0 + np_ / 256.0)))
    gtu[0] = n * (0.5 + n * (-2 / 3.0 + n * (5 / 16.0 + n * (41 / 180.0 + n * (-127 / 288.0 + n * (7891 / 37800.0))))))
    gtu[1] = np_ * (13 / 48.0 + n * (-3 / 5.0 + n * (557 / 1440.0 + n * (281 / 630.0 + n * (-1983433 / 1935360.0)))))
    np_ *= n
    gtu[2] = np_ * (61 / 240.0 + n * (-103 / 140.0 + n * (15061 / 26880.0 + n * (167603 / 181440.0))))
    np_ *= n
    gtu[3] = np_ * (49561 / 161280.0 + n * (-179 / 168.0 + n * (6601661 / 7257600.0)))
    np_ *= n
    gtu[4] = np_ * (34729 / 80640.0 + n * (-3418889 / 1995840.0))
    np_ *= n
    gtu[5] = np_ * (212378941 / 319334400.0)
    # phi0 = 0: the origin's Gaussian latitude gatg(cbg, 0) is 0, clens(gtu, 0) is sin(0) * ... = 0
    zb = -qn * (0.0 + 0.0)
    return {"a": _WGS84_A, "x0": 500000.0, "y0": 10000000.0 if south else 0.0,
            "lam0": (zone - 1 + .5) * math.pi / 30. - math.pi, "Qn": qn, "Zb": zb, "cbg": cbg, "gtu": gtu}


def _lit(v: float) -> str:
    """A DOUBLE literal of exactly ``v`` (a decimal literal would be a DECIMAL in DuckDB)."""
    return f"'{float(v)!r}'::DOUBLE"


def tmerc_steps(crs: str, lon: str = "_lon", lat: str = "_lat") -> list:
    """PROJ's ``exact_e_fwd`` (with ``unitconvert``'s degrees to radians, ``fwd_prepare``'s
    shift to the central meridian and ``adjlon``, ``fwd_finalize``'s scaling and false
    origin) as SQL over the columns ``lon``, ``lat`` (WGS 84 degrees): a list of steps,
    each a list of ``(name, expression)`` over the columns of the steps before it; the
    last step's ``x``, ``y`` are the metres in ``crs``. ``infinity`` beyond PROJ's domain
    (more than ~150° of the Gaussian sphere from the central meridian), as pyproj's inf."""
    k = tmerc_constants(crs)
    L = _lit
    cbg, gtu = k["cbg"], k["gtu"]
    pi = math.pi

    def adjlon(v):          # adjlon.cpp: into -pi..pi
        w = f"({v} + {L(pi)})"
        return (f"CASE WHEN abs({v}) < {L(pi + 1e-12)} THEN {v} "
                f"ELSE ({w} - {L(2 * pi)} * floor({w} / {L(2 * pi)})) - {L(pi)} END")

    steps = [
        # unitconvert deg -> rad; fwd_prepare: lam - from_greenwich (0) - lam0
        [("lam_", f"{lon} * {L(_DEG_TO_RAD)} - {L(k['lam0'])}"), ("phi_", f"{lat} * {L(_DEG_TO_RAD)}")],
        [("lam_", adjlon("lam_")), ("two_cos_2b", "2 * cos(2 * phi_)"), ("sin_2b", "sin(2 * phi_)")],
    ]
    # gatg(cbg, phi): Clenshaw; the first turn's -h2 is -0.0, which adds nothing
    steps.append([("g4", f"two_cos_2b * {L(cbg[5])} + {L(cbg[4])}")])
    steps.append([("g3", f"({L(-cbg[5])} + two_cos_2b * g4) + {L(cbg[3])}")])
    for j in (2, 1, 0):
        steps.append([(f"g{j}", f"(-g{j + 2} + two_cos_2b * g{j + 1}) + {L(cbg[j])}")])
    steps += [
        [("cn_", "phi_ + g0 * sin_2b")],
        [("sin_cn", "sin(cn_)"), ("cos_cn", "cos(cn_)"), ("sin_ce", "sin(lam_)"), ("cos_ce", "cos(lam_)")],
        [("cc", "cos_cn * cos_ce")],
        [("cn_", "atan2(sin_cn, cc)"),
         ("hx", "greatest(abs(sin_cn), abs(cc))"), ("hy", "least(abs(sin_cn), abs(cc))")],
        [("hh", "sqrt(hx * hx + hy * hy)")],
        # glibc's hypot(sin_cn, cc) (e_hypot.c, kernel without FMA); its scaling of huge or
        # tiny inputs cannot apply: |sin|, |cos| <= 1, and both tiny is outside the domain
        [("hyp", f"CASE WHEN hy <= hx * {L(2.0 ** -54)} THEN hx + hy "
                 "WHEN hh <= 2 * hy THEN hh - ((hx * (2 * (hh - hy) - hx)) "
                 "+ ((hh - hy) - 2 * (hx - hy)) * (hh - hy)) / (2 * hh) "
                 "ELSE hh - ((2 * (hh - hx)) * (hx - 2 * hy) "
                 "+ ((4 * (hh - hx) - hy) * hy + (hh - hx) * (hh - hx))) / (2 * hh) END")],
        [("inv", "1. / hyp")],
        [("tan_ce", "sin_ce * cos_cn * inv"), ("two_inv", "2 * inv")],
        [("ce_", "asinh(tan_ce)"), ("two_inv_sq", "two_inv * inv"), ("sinh_i", "tan_ce * two_inv")],
        [("tmp_r", "cc * two_inv_sq"), ("cosh_i", "two_inv_sq - 1")],
        [("sin_r", "sin_cn * tmp_r"), ("cos_r", "cc * tmp_r - 1")],
        # clenS(gtu, ...): complex Clenshaw; the first turn's zero terms add nothing
        [("cr", "2 * cos_r * cosh_i"), ("ci", "-2 * sin_r * sinh_i"),
         ("rr", "sin_r * cosh_i"), ("ri", "cos_r * sinh_i")],
        [("hr4", f"cr * {L(gtu[5])} + {L(gtu[4])}"), ("hi4", f"ci * {L(gtu[5])}")],
        [("hr3", f"(({L(-gtu[5])} + cr * hr4) - ci * hi4) + {L(gtu[3])}"), ("hi3", "ci * hr4 + cr * hi4")],
    ]
    for j in (2, 1, 0):
        steps.append([(f"hr{j}", f"((-hr{j + 2} + cr * hr{j + 1}) - ci * hi{j + 1}) + {L(gtu[j])}"),
                      (f"hi{j}", f"(-hi{j + 2} + ci * hr{j + 1}) + cr * hi{j + 1}")])
    steps += [
        [("cn_", "cn_ + (rr * hr0 - ri * hi0)"), ("ce_", "ce_ + (rr * hi0 + ri * hr0)")],
        # the domain; Qn * Cn + Zb, Qn * Ce; fwd_finalize: a * xy + x0 (fr_meter 1)
        [("x", f"CASE WHEN abs(ce_) <= {L(2.623395162778)} "
               f"THEN {L(k['a'])} * ({L(k['Qn'])} * ce_) + {L(k['x0'])} ELSE 'infinity'::DOUBLE END"),
         ("y", f"CASE WHEN abs(ce_) <= {L(2.623395162778)} "
               f"THEN {L(k['a'])} * ({L(k['Qn'])} * cn_ + {L(k['Zb'])}) + {L(k['y0'])} ELSE 'infinity'::DOUBLE END")],
    ]
    return steps


def projected_sql(source: str, crs: str, columns: dict, lon: str = "_lon", lat: str = "_lat") -> str:
    """``SELECT`` of ``columns`` (output name → expression over the relation ``source``;
    the names ``x`` and ``y`` are the positions of ``source``'s ``lon``, ``lat`` in
    ``crs``, computed by :func:`tmerc_steps`), in that order: a nested ``SELECT`` a step,
    so that every intermediate value is computed once a row, and only where a query uses
    ``x`` or ``y`` (DuckDB prunes the unused columns)."""
    keep = {c: e for c, e in columns.items() if c not in ("x", "y")}
    have = set(keep) | {"lon_", "lat_"}
    sql = "SELECT " + "".join(f"{e} AS {c}, " for c, e in keep.items()) + f"{lon} AS lon_, {lat} AS lat_ FROM {source}"
    for step in tmerc_steps(crs, "lon_", "lat_"):
        again = [f"{e} AS {n}" for n, e in step if n in have]
        new = [f", {e} AS {n}" for n, e in step if n not in have]
        sql = f"SELECT *{' REPLACE (' + ', '.join(again) + ')' if again else ''}{''.join(new)} FROM ({sql})"
        have |= {n for n, _ in step}
    return f"SELECT {', '.join(columns)} FROM ({sql})"


def project_places_in_sql(con, places: dict, crs: str, names=("hospital", "station")) -> dict:
    """name → (x, y, radius) in ``crs``: each centre projected by the same SQL as the events."""
    rows = ", ".join(f"({_lit(places[n][0])}, {_lit(places[n][1])}, {i})" for i, n in enumerate(names))
    sql = projected_sql(f"(VALUES {rows}) AS p(lon, lat, i)", crs, {"i": "i", "x": "x", "y": "y"}, "lon", "lat")
    got = {i: (x, y) for i, x, y in con.execute(sql).fetchall()}
    return {n: (float(got[i][0]), float(got[i][1]), float(places[n][2])) for i, n in enumerate(names)}


def duckdb_sql_file(name: str, path: str, crs: str, places: dict = BUS_PLACES, tmp: str | None = None):
    """Baseline ``name`` (``silent``, ``stuck``, ``hospital_to_station``) in DuckDB on the
    canonical events of the Parquet file ``path`` (:func:`write_canonical`), projecting
    in SQL: the events (``ev``) are a view over the file whose ``x``, ``y`` DuckDB computes
    (:func:`projected_sql`; the places too), no Python per batch; the query's rows
    materialised in a table. Returns the open connection, whose table ``res`` holds the
    result (for :func:`digest`; close it)."""
    cols = {"id": "_id", "vehicle": "vehicle", "t": "_t", "lo": "_lo", "hi": "_hi", "x": "x", "y": "y", "r": "_r"}
    con = _duck(tmp)
    try:
        con.execute("CREATE TEMP VIEW ev AS " + projected_sql(f"read_parquet({_quote(path)})", crs, cols))
        params = None
        if name == "hospital_to_station":
            params = _place_params(project_places_in_sql(con, places, crs))
        con.execute("CREATE TEMP TABLE res AS " + _QUERIES[name], params)
    except BaseException:
        con.close()
        raise
    return con


# ------------------------------------------------------------------------- PySpark, from files, streaming
#
# The same three queries as DataFrame queries, on the canonical events' Parquet file
# (:func:`write_canonical`) read by Spark itself: the positions projected in the tasks
# (``mapInArrow``, pyproj, as DuckDB's baseline and spatec do), the result rows written by
# Spark to a Parquet folder. Nothing is collected to the driver but Silent's end of the
# data (one number); :func:`files_digest` then reads the folder in DuckDB for the comparison.

#: The prepared events' Spark schema (the columns :func:`prepare` makes).
SPARK_EVENTS = {"id": "string", "vehicle": "string", "t": "long", "lo": "long", "hi": "long",
                "x": "double", "y": "double", "r": "double"}
_FROM_CANONICAL = {"id": "_id", "vehicle": "vehicle", "t": "_t", "lo": "_lo", "hi": "_hi", "r": "_r"}


def spark_events(spark, path: str, crs: str, columns, by_vehicle: bool = False):
    """The canonical events of the Parquet file ``path`` as a Spark DataFrame of the
    prepared ``columns`` (of :data:`SPARK_EVENTS`). ``x`` and ``y`` are projected to
    ``crs`` in the tasks, batch by batch (``mapInArrow``; one pyproj transformer per task,
    i.e. per file split: a handful); without them nothing leaves the JVM.

    ``by_vehicle``: hash-partition the rows by vehicle over the cores once, so that a
    window over all of them needs no further exchange. (With the default 200 shuffle
    partitions and adaptive execution, Spark coalesces the window's exchange into very
    few partitions and runs the sort on one core: on the bus-day this is 2-5x faster.
    ``HospitalToStation`` filters before its window and leaves Spark's own exchange alone.)"""
    from pyspark.sql import functions as F

    columns = list(columns)
    raw = spark.read.parquet(str(path))
    if "x" in columns or "y" in columns:
        keep = [c for c in columns if c not in ("x", "y")]
        names = keep + ["x", "y"]
        schema = ", ".join(f"{c} {SPARK_EVENTS[c]}" for c in names)

        def project(batches, crs=crs, keep=tuple(keep), names=tuple(names)):
            import pyarrow as pa
            import pyproj

            tr = pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)
            for b in batches:
                x, y = tr.transform(b.column("_lon").to_numpy(), b.column("_lat").to_numpy())
                yield pa.RecordBatch.from_arrays([b.column(c) for c in keep] + [pa.array(x), pa.array(y)],
                                                 names=list(names))

        sdf = (raw.select(*[F.col(_FROM_CANONICAL[c]).alias(c) for c in keep], "_lon", "_lat")
               .mapInArrow(project, schema).select(*columns))
    else:
        sdf = raw.select(*[F.col(_FROM_CANONICAL[c]).alias(c) for c in columns])
    if by_vehicle:
        sdf = sdf.repartition(spark.sparkContext.defaultParallelism, "vehicle")
    return sdf


def _ov(F, a: str, b: str):
    dx = F.col(f"{a}x") - F.col(f"{b}x")
    dy = F.col(f"{a}y") - F.col(f"{b}y")
    s = F.col(f"{a}r") + F.col(f"{b}r")
    return dx * dx + dy * dy <= s * s


def pyspark_silent(spark, path: str, crs: str):
    """``Silent`` in PySpark: a DataFrame of ``A``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # the end of the data: one column's maximum, its own (cheap) pass; an aggregate
    # cross-joined back into the query costs a second pass over every column (~1.5x)
    end = spark.read.parquet(str(path)).agg(F.max("_hi")).first()[0]
    ev = spark_events(spark, path, crs, ["id", "vehicle", "t", "hi"], by_vehicle=True)
    w = Window.partitionBy("vehicle").orderBy("t")
    return (ev.withColumn("next_hi", F.lead("hi").over(w))
            .where((F.col("next_hi").isNull() | (F.col("next_hi") > F.col("hi") + SILENT_WINDOW))
                   & (F.col("hi") + SILENT_WINDOW <= F.lit(end)))
            .select(F.col("id").alias("A")))


def pyspark_stuck(spark, path: str, crs: str):
    """``Stuck`` in PySpark: a DataFrame of ``A, B, C, D``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ev = spark_events(spark, path, crs, ["id", "vehicle", "t", "x", "y", "r"], by_vehicle=True)
    w = Window.partitionBy("vehicle").orderBy("t")
    cols = [F.col("id").alias("a_id"), F.col("x").alias("a_x"), F.col("y").alias("a_y"), F.col("r").alias("a_r")]
    for k, v in ((1, "b"), (2, "c"), (3, "d")):
        cols += [F.lead(c, k).over(w).alias(f"{v}_{c}") for c in ("id", "x", "y", "r")]
    return (ev.select(*cols)
            .where(F.col("d_id").isNotNull() & _ov(F, "a_", "b_") & _ov(F, "a_", "c_")
                   & _ov(F, "a_", "d_") & _ov(F, "b_", "d_"))
            .select(*[F.col(f"{v.lower()}_id").alias(v) for v in "ABCD"]))


def pyspark_hospital_to_station(spark, path: str, crs: str, places: dict = BUS_PLACES):
    """``HospitalToStation`` in PySpark: a DataFrame of ``A, B``. ``places``: name → (lon, lat, radius m)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    pl = _project_places(places, crs)

    def at(name):
        px, py, pr = pl[name]
        dx, dy, s = F.col("x") - F.lit(px), F.col("y") - F.lit(py), F.col("r") + F.lit(pr)
        return dx * dx + dy * dy <= s * s

    ev = spark_events(spark, path, crs, ["id", "vehicle", "t", "lo", "hi", "x", "y", "r"])
    w = Window.partitionBy("vehicle").orderBy("t")
    return (ev.select("id", "vehicle", "t", "lo", "hi", at("hospital").alias("at_h"), at("station").alias("at_s"))
            .where(F.col("at_h") | F.col("at_s"))
            .select("id", "lo", "hi", "at_h",
                    F.lead("id").over(w).alias("b_id"), F.lead("lo").over(w).alias("b_lo"),
                    F.lead("hi").over(w).alias("b_hi"), F.lead("at_s").over(w).alias("b_at_s"))
            .where(F.col("at_h") & F.col("b_at_s")
                   & (F.greatest("hi", "b_hi") - F.least("lo", "b_lo") <= H2S_WINDOW))
            .select(F.col("id").alias("A"), F.col("b_id").alias("B")))


def pyspark_file(spark, name: str, path: str, crs: str, places: dict = BUS_PLACES):
    """Baseline ``name`` (``silent``, ``stuck``, ``hospital_to_station``) in PySpark on the
    canonical events of the Parquet file ``path``: a DataFrame (lazy) whose columns are the
    phrase's :data:`VARIABLES`, one row per composite."""
    if name == "hospital_to_station":
        return pyspark_hospital_to_station(spark, path, crs, places)
    return {"silent": pyspark_silent, "stuck": pyspark_stuck}[name](spark, path, crs)


def pyspark_write(spark, name: str, path: str, crs: str, out: str, places: dict = BUS_PLACES) -> None:
    """:func:`pyspark_file`'s rows written by Spark to the Parquet folder ``out`` (replaced)."""
    pyspark_file(spark, name, path, crs, places).write.mode("overwrite").parquet(str(out))


def files_digest(folder, variables) -> tuple[int, int]:
    """:func:`digest` of the rows Spark wrote to the Parquet folder ``folder``
    (:func:`pyspark_write`), read by DuckDB."""
    con = _duck()
    try:
        return digest(con, f"read_parquet({_quote(str(folder) + '/*.parquet')})", list(variables))
    finally:
        con.close()

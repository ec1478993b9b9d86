"""Hand-written baselines for the replay benchmark (issue 4): ``Silent``, ``Stuck``
and ``HospitalToStation`` of ``/work/shared/spec/examples`` written directly as
one DuckDB SQL query and one PySpark DataFrame query each, with no spatec code.

They show what a competent engineer's direct query costs, so they are written
to be fast, and they must give exactly spatec's composites: one row per
composite, its event ids in variable order (``(A,)``, ``(A, B, C, D)``, ``(A,
B)``), to be compared with the ``events`` column of spatec's output.

Two forms, one set of queries:

* DuckDB in memory (``duckdb_silent`` …: a pandas frame in, a set of tuples
  out), for the tests on small inputs; and DuckDB from a file
  (:func:`duckdb_file`), what the bench times: it reads the canonical events'
  Parquet file (:func:`write_canonical`), projects the positions (pyproj, as
  spatec does) batch by batch and materialises the rows in a DuckDB table.
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
    pl = _project_places(places, crs)
    params = {f"{k}_{c}": v for k, n in (("h", "hospital"), ("s", "station"))
              for c, v in zip("xyr", pl[n])}
    return _duck_rows(df, crs, DUCKDB_H2S, params)


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
    sql = {"silent": DUCKDB_SILENT, "stuck": DUCKDB_STUCK, "hospital_to_station": DUCKDB_H2S}[name]
    params = None
    if name == "hospital_to_station":
        pl = _project_places(places, crs)
        params = {f"{k}_{c}": v for k, n in (("h", "hospital"), ("s", "station")) for c, v in zip("xyr", pl[n])}
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

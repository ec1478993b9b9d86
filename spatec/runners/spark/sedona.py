"""Apache Sedona on Spark: the spatial joins of a replay whose events are Spark
DataFrames (the shuffle exchange; the Python API's ``replay``).

- **Leaf space patterns** (:func:`sedona_prefilter`): the events that possibly
  meet a region their phrase needs, found by the leaf join of
  :mod:`spatec.spatial.engines` in its spatial-join form, which Sedona plans as a
  broadcast index join (an R-tree over the regions: a few places or thousands of
  stops alike) of the events against the places.
- **Proximity across keys** (:func:`proximity_groups`): a phrase of two events
  with no key, bounded in time and in space (``A || B where distance(A, B) < 50 m``,
  ``A ||= B``: any two buses, whatever their line; the planner's
  ``plan.physical.proximity``, :mod:`spatec.plan.proximity`), is not one partition:
  a Sedona distance join, with a time bucket as an equality key
  (``sedona.join.optimizationmode=all``), finds the pairs of events close enough in
  space and time to be a match, and the events are cut into groups of nearby
  pivots with their partners, each matched apart by the local runner's code.

Coordinates are projected in Python tasks (pyproj, as every runner projects
them: the CRS is the run's), so the joins do planar arithmetic and the answers
are the local runner's to the bit; Sedona's ``ST_Transform`` (GeoTools, LGPL) is
not needed. Sedona's functions are registered (``SedonaContext.create``) the first
time a join is planned.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import shapely

from spatec.errors import UnsupportedError
from spatec.plan.nodes import PhrasePlan
from spatec.runners.spark.frames import local_frame
from spatec.spatial.crs import Projector
from spatec.spatial.engines import SPATIAL_SQL_FUNCTIONS, SedonaSparkEngine

ENGINE = SedonaSparkEngine.name

#: Sedona's setting that lets it plan a spatial join beside an equality key (the time bucket).
OPTIMIZATION_MODE = "sedona.join.optimizationmode"

#: Metres added to a distance join's bound: the join only proposes pairs (JTS and
#: numpy may round a distance apart), the phrase's own arithmetic decides.
SLACK_M = 1.0

#: Metres: the side of the squares of space that pivots are grouped by (with their
#: partners, never farther than the join's bound, a group's events stay near).
CELL_M = 2000.0


def sedona_session(spark):
    """``spark`` with Sedona's SQL functions registered (``SedonaContext.create``,
    once), and spatial joins beside equality keys allowed; UnsupportedError saying
    why not when Sedona's jar is missing."""
    if not SedonaSparkEngine.available(spark):
        from spatec.runners.spark.session import sedona_missing

        raise UnsupportedError(
            "the sedona-spark spatial engine", "this Spark session",
            (sedona_missing() or "Sedona's jar is on spark.jars but its functions ("
             + ", ".join(SPATIAL_SQL_FUNCTIONS) + ") do not register")
            + "; or set spark.spatec.spatial.engine=sedonadb")
    if spark.conf.get(OPTIMIZATION_MODE, None) != "all":
        spark.conf.set(OPTIMIZATION_MODE, "all")
    return spark


# ------------------------------------------------------------------------------- projection

PROJECTED = (("ev", pa.int64()), ("x", pa.float64()), ("y", pa.float64()), ("r", pa.float64()),
             ("wkb", pa.binary()), ("lo", pa.int64()))


def project_fn(crs: str):
    """For ``mapInArrow``: canonical events' ``_ev, _lo, _place, _lon, _lat, _r, _geom``
    → :data:`PROJECTED` (points as ``x, y``; geometries as projected WKB; neither for
    an event of unknown place), as the leaf join reads them."""

    def run(batches):
        proj = Projector(crs)
        for b in batches:
            if b.num_rows:
                yield projected_batch(b, proj)

    return run


def projected_batch(b: pa.RecordBatch, proj: Projector) -> pa.RecordBatch:
    col = {name: b.column(i) for i, name in enumerate(b.schema.names)}
    n = b.num_rows
    kinds = np.asarray(col["_place"].to_pylist(), dtype=object)
    lon = col["_lon"].to_numpy(zero_copy_only=False).astype(float)
    lat = col["_lat"].to_numpy(zero_copy_only=False).astype(float)
    xs, ys = np.full(n, np.nan), np.full(n, np.nan)
    pts = kinds == "point"
    if pts.any():
        xs[pts], ys[pts] = proj.forward(lon[pts], lat[pts])
    wkb = np.full(n, None, dtype=object)
    geo = np.flatnonzero(kinds == "geom")
    if len(geo):
        gs = shapely.from_wkt(np.asarray(col["_geom"].to_pylist(), dtype=object)[geo])
        gs = shapely.transform(gs, lambda c: np.column_stack(proj.forward(c[:, 0], c[:, 1])))
        wkb[geo] = shapely.to_wkb(gs)
    r = col["_r"].to_numpy(zero_copy_only=False).astype(float)
    r = np.where(np.isfinite(r), r, 0.0)
    arrays = [col["_ev"], pa.array(xs), pa.array(ys), pa.array(r), pa.array(wkb, pa.binary()), col["_lo"]]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(list(PROJECTED)))


def _projected(df, crs: str):
    """Events with an int64 key ``_ev`` (a hash of type and id) → :data:`PROJECTED`."""
    from pyspark.sql.types import BinaryType, DoubleType, LongType, StructField, StructType

    spark_type = {pa.int64(): LongType(), pa.float64(): DoubleType(), pa.binary(): BinaryType()}
    schema = StructType([StructField(n, spark_type[t], True) for n, t in PROJECTED])
    cols = ["_ev", "_lo", "_place", "_lon", "_lat", "_r", "_geom"]
    return df.select(*cols).mapInArrow(project_fn(crs), schema)


def with_key(df):
    """``df`` with ``_ev``: a 64-bit hash of each event's type and id. Two events whose
    hashes meet are both kept or both grouped alike: the joins below only ever keep
    more events than they must, never fewer, so a collision costs work, not results."""
    from pyspark.sql import functions as F

    return df.withColumn("_ev", F.xxhash64("_type", "_id"))


# ------------------------------------------------------------------------------- leaf patterns

#: a pre-filter's places: phrase, type and the union of its places (grown by their radii), as WKB
PLACE_SHAPES = pa.schema([("_rp", pa.string()), ("_rt", pa.string()), ("_wkb", pa.binary())])


def sedona_prefilter(df, regions: dict, crs: str):
    """The events of ``df`` (canonical rows of one type) that possibly meet one of
    ``regions`` (name → Loc): a Sedona broadcast index join of the events against the
    regions (:data:`~spatec.spatial.engines.SPATIAL_SQL`), then a semi join back."""
    from pyspark.sql import functions as F

    sedona_session(df.sparkSession)
    keyed = with_key(df)
    pairs = SedonaSparkEngine().join(_projected(keyed, crs), sorted(regions.items()))
    keep = pairs.select(F.col("ev").alias("_ev")).distinct()
    return keyed.join(keep, "_ev", "left_semi").drop("_ev")


def live_prefilter(events, regions: dict):
    """The rows of a live query's fan-out (columns ``phrase``, ``type``, ``x``, ``y``, ``r``:
    an event's disc in the metric CRS) that possibly meet a place their phrase's leaves need:
    ``regions`` is (phrase, type) → the places (Locs) of its leaf pre-filter. Each (phrase,
    type) is one geometry, the union of its places grown by their radius and a metre (so an
    event meets at most one: a stream-static inner join adds no row), broadcast and joined
    with the box around each event's disc (``ST_Intersects``: Sedona's broadcast index join);
    the box holds the disc, so no event that could meet a place is dropped. Rows of other
    phrases, events that are no disc and the end-of-input marks pass through."""
    import shapely
    from pyspark.sql import functions as F

    spark = sedona_session(events.sparkSession)
    rows = []
    for (phrase, t), locs in sorted(regions.items()):
        shape = shapely.union_all([shapely.buffer(loc.geom, loc.r + 1.0, quad_segs=16) for loc in locs])
        rows.append((phrase, t, shapely.to_wkb(shape)))
    places = local_frame(spark, rows, PLACE_SHAPES) \
        .select("_rp", "_rt", F.expr("ST_GeomFromWKB(_wkb)").alias("_g"))
    names = sorted({p for p, _ in regions})
    tested = F.col("phrase").isin(names) & F.col("x").isNotNull()
    box = F.expr("ST_PolygonFromEnvelope(x - r, y - r, x + r, y + r)")
    cand = events.where(tested).withColumn("_box", box)
    kept = cand.join(F.broadcast(places), (F.col("phrase") == F.col("_rp")) & (F.col("type") == F.col("_rt"))
                     & F.expr("ST_Intersects(_box, _g)")).select(*events.columns)
    return kept.unionByName(events.where(~tested))


# ------------------------------------------------------------------------------- proximity

def proximity_groups(plan: PhrasePlan, events, crs: str, buckets: int, bound: float):
    """The phrase's events (``events``: every type it reads, canonical rows) in groups
    ``_b`` that together hold every match, none of them all of the events: None when
    some event's place is unknown or not a point (it could be near anything: the
    phrase stays one partition).

    A Sedona distance join pairs each event (a pivot) with the later-hashed events
    whose centres lie within ``bound`` and both radii of it, in the same stretch of
    ``span_bound`` or the next or previous one (the time bucket: an equality key).
    Every match is such a pair. A pivot's group is ``hash(its bucket, its square of
    space)``; the group holds its pivots and their partners (an event may be in
    several). Each group is matched by the local runner's code: the phrase depends
    on its own two events only, so whatever a group matches is a match, and every
    pair is in its pivot's group. Events without a partner are in no group: they
    are in no match."""
    from pyspark.sql import functions as F

    spark = sedona_session(events.sparkSession)
    keyed = with_key(events)
    p = _projected(keyed, crs)
    stats = p.agg(F.max("r").alias("r"), F.sum(F.when(F.isnan("x") | F.col("x").isNull() | F.col("wkb").isNotNull(),
                                                       1).otherwise(0)).alias("odd")).first()
    if stats is None or stats["r"] is None:
        return None
    if stats["odd"]:
        return None
    within = bound + 2 * float(stats["r"]) + SLACK_M
    width = max(int(plan.span_bound), 1)
    p = p.withColumn("tb", F.floor(F.col("lo") / F.lit(width)))
    left = p.select(F.col("ev").alias("l_ev"), "tb", F.col("x").alias("lx"), F.col("y").alias("ly"),
                    F.expr("ST_Point(x, y)").alias("lg"))
    right = p.select(F.col("ev").alias("r_ev"), F.explode(F.array(F.col("tb") - 1, F.col("tb"), F.col("tb") + 1))
                     .alias("tb"), F.expr("ST_Point(x, y)").alias("rg"))
    pairs = left.join(right, (left["tb"] == right["tb"]) & F.expr(f"ST_DWithin(lg, rg, {within!r})")
                      & (F.col("l_ev") < F.col("r_ev")))
    group = F.pmod(F.xxhash64(left["tb"], F.floor(F.col("lx") / CELL_M), F.floor(F.col("ly") / CELL_M)),
                   F.lit(buckets)).cast("int")
    pairs = pairs.select(group.alias("_b"), "l_ev", "r_ev")
    members = pairs.select("_b", F.col("l_ev").alias("_ev")).union(pairs.select("_b", F.col("r_ev").alias("_ev"))) \
        .distinct()
    return keyed.join(members, "_ev").drop("_ev")


def executed_plan(df) -> str:
    """The physical plan Spark ran (or would run) for ``df``, as text."""
    return df._jdf.queryExecution().executedPlan().toString()

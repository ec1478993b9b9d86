"""Bulk space patterns: events joined against a program's places.

Leaf filters (``at P``, ``certainly in circle(...)``) are evaluated for many
events at once as a join of events against regions, written once in the
Apache Sedona SQL dialect (:data:`SQL`) and run by an engine:

- ``"shapely"``: the reference, numpy/shapely without SQL
  (:func:`spatec.spatial.stamps.relate_many`);
- ``"sedonadb"``: Apache SedonaDB in process, on Arrow tables or batches
  (usable inside Spark's ``mapInArrow``);
- ``"sedona-spark"``: Apache Sedona on Spark, when the cluster has its jars.

Coordinates are projected before the join, so the SQL does planar
arithmetic only. A circle region is a centre and a radius, never a polygon:
discs against circles compare squared distances in plain SQL arithmetic,
which every engine evaluates to the same bits. Containment in a grown
polygon uses a polygon prepared once in Python (:func:`region_table`) and
shared by all engines, so they cannot approximate differently.

Input: events with columns ``ev`` (int64 key), ``r`` (metres, >= 0) and
either ``x, y`` (a disc's centre, projected metres) or ``wkb`` (a projected
geometry; a point geometry counts as a disc). A row whose ``wkb`` is null and
whose ``x`` or ``y`` is null/NaN, or whose geometry is empty, has an unknown
place (UNIVERSE): possibly in every region, certainly in none.

Output: rows ``ev, region, possibly, certainly`` for every pair with
``possibly`` true; a pair not listed is not possibly in.

The template needs no dialect shim: Spark SQL and DataFusion both accept it
verbatim (DataFusion reads the ``BROADCAST`` hint as a comment).
"""
from __future__ import annotations

import itertools
import re
import threading
import warnings
from collections import OrderedDict

import numpy as np
import pandas as pd
import pyarrow as pa
import shapely

from spatec.errors import SpatecError, UnsupportedError
from spatec.spatial.stamps import BOX_SLACK, Loc, containment, relate_many

__all__ = [
    "ENGINES", "SQL", "OUTPUT_SCHEMA", "EngineError", "ShapelyEngine", "SedonaDBEngine",
    "SedonaSparkEngine", "SPATIAL_SQL", "engine", "events_table", "region_table", "render_sql",
]

ENGINES = ("shapely", "sedonadb", "sedona-spark")

OUTPUT_SCHEMA = pa.schema([
    ("ev", pa.int64()), ("region", pa.string()), ("possibly", pa.bool_()), ("certainly", pa.bool_()),
])

REGION_SCHEMA = pa.schema([
    ("name", pa.string()), ("circle", pa.bool_()), ("cx", pa.float64()), ("cy", pa.float64()),
    ("rr", pa.float64()), ("areal", pa.bool_()),
    ("bx0", pa.float64()), ("by0", pa.float64()), ("bx1", pa.float64()), ("by1", pa.float64()),
    ("wkb", pa.binary()), ("cont_wkb", pa.binary()),
])

EVENT_SCHEMA = pa.schema([
    ("ev", pa.int64()), ("x", pa.float64()), ("y", pa.float64()), ("r", pa.float64()), ("wkb", pa.binary()),
])

#: The join, in Sedona's SQL dialect; ``{events}`` and ``{regions}`` are table
#: names. Each branch mirrors one case of ``stamps.possibly_in`` /
#: ``stamps.certainly_in``, with the same arithmetic in the same order.
SQL = """
WITH e0 AS (
  SELECT ev, r,
         wkb IS NULL AND (x IS NULL OR y IS NULL OR isnan(x) OR isnan(y)) AS nowhere,
         ST_GeomFromWKB(COALESCE(wkb, ST_AsBinary(ST_Point(x, y)))) AS geom
  FROM {events}
), e1 AS (
  SELECT ev, r, geom, nowhere OR ST_IsEmpty(geom) AS gone,
         COALESCE(ST_GeometryType(geom) = 'ST_Point', FALSE) AS point,
         ST_XMin(geom) AS xmin, ST_XMax(geom) AS xmax, ST_YMin(geom) AS ymin, ST_YMax(geom) AS ymax
  FROM e0
), e AS (
  SELECT ev, r, geom, xmin, xmax, ymin, ymax, point AS disc,
         gone OR (point AND (isnan(xmin) OR isnan(ymin))) AS unknown
  FROM e1
), g AS (
  SELECT name, circle, cx, cy, rr, areal, bx0, by0, bx1, by1,
         ST_GeomFromWKB(wkb) AS geom,
         ST_GeomFromWKB(cont_wkb) AS cont,
         ST_Boundary(ST_GeomFromWKB(cont_wkb)) AS cont_edge
  FROM {regions}
), pairs AS (
  SELECT /*+ BROADCAST(g) */ e.ev AS ev, g.name AS region,
    CASE WHEN e.unknown THEN TRUE
         WHEN e.disc AND g.circle THEN
           (e.xmin - g.cx) * (e.xmin - g.cx) + (e.ymin - g.cy) * (e.ymin - g.cy) <= (e.r + g.rr) * (e.r + g.rr)
         ELSE ST_Distance(e.geom, g.geom) <= e.r + g.rr
    END AS possibly,
    CASE WHEN e.unknown THEN FALSE
         WHEN e.disc AND g.circle THEN
           g.rr - e.r >= 0
           AND (e.xmin - g.cx) * (e.xmin - g.cx) + (e.ymin - g.cy) * (e.ymin - g.cy) <= (g.rr - e.r) * (g.rr - e.r)
         WHEN g.circle THEN ST_MaxDistance(g.geom, e.geom) + e.r <= g.rr
         ELSE ST_CoveredBy(e.geom, g.cont)
              AND (e.r = 0 OR (g.areal AND ST_Distance(e.geom, g.cont_edge) >= e.r))
    END AS certainly
  FROM e JOIN g
    ON e.unknown
    OR (e.xmin - e.r <= g.bx1 AND e.xmax + e.r >= g.bx0 AND e.ymin - e.r <= g.by1 AND e.ymax + e.r >= g.by0)
)
SELECT ev, region, possibly, certainly FROM pairs WHERE possibly
"""

_BOX = "e.xmin - e.r <= g.bx1 AND e.xmax + e.r >= g.bx0 AND e.ymin - e.r <= g.by1 AND e.ymax + e.r >= g.by0"

#: The same join for Apache Sedona on Spark, as a spatial join Sedona's planner
#: recognises (a broadcast index join against the regions, or a range join when
#: both sides are large): the known events' boxes, grown by their radius and a
#: metre, intersect the regions' grown boxes (``ST_Intersects`` of two envelopes:
#: an R-tree over the regions finds the candidates), then the template's own box
#: test and arithmetic decide, so the answer is the template's to the bit. Events
#: of unknown place (possibly in every region) join every region apart: ``OR
#: e.unknown`` in the join condition would hide the spatial predicate from Sedona.
SPATIAL_SQL = SQL.replace("), pairs AS (", """), ek AS (
  SELECT *, ST_PolygonFromEnvelope(xmin - r - 1.0, ymin - r - 1.0, xmax + r + 1.0, ymax + r + 1.0) AS env
  FROM e WHERE NOT unknown
), gk AS (
  SELECT *, ST_PolygonFromEnvelope(bx0, by0, bx1, by1) AS env FROM g
), pairs AS (""").replace("FROM e JOIN g\n    ON e.unknown\n    OR (" + _BOX + ")\n)", f"""FROM ek e JOIN gk g
    ON ST_Intersects(e.env, g.env) AND {_BOX}
  UNION ALL
  SELECT e.ev AS ev, g.name AS region, TRUE AS possibly, FALSE AS certainly
  FROM e CROSS JOIN g WHERE e.unknown
)""")

#: The spatial functions the template calls: an engine must provide them all.
SQL_FUNCTIONS = tuple(sorted(set(re.findall(r"\bST_\w+", SQL))))
#: ... and those of its spatial-join form (Sedona on Spark).
SPATIAL_SQL_FUNCTIONS = tuple(sorted(set(re.findall(r"\bST_\w+", SPATIAL_SQL))))


class EngineError(SpatecError, ValueError):
    """An unknown spatial engine name or malformed engine input."""


def render_sql(events: str, regions: str, spatial_join: bool = False) -> str:
    """The join over tables named ``events`` and ``regions`` (``spatial_join``:
    :data:`SPATIAL_SQL`, for Sedona on Spark).

    Examples
    --------
    >>> "FROM spatec_ev" in render_sql("spatec_ev", "spatec_rg")
    True
    >>> "ST_Intersects(e.env, g.env)" in render_sql("spatec_ev", "spatec_rg", spatial_join=True)
    True
    """
    return (SPATIAL_SQL if spatial_join else SQL).format(events=events, regions=regions)


# --- inputs -----------------------------------------------------------------


def region_table(regions) -> pa.Table:
    """Regions ``[(name, Loc), ...]`` as the Arrow table the join reads.

    Each row holds the region's geometry, its radius ``rr``, whether it is a
    circle (then ``cx, cy``), the polygon a stamp must lie in to be certainly
    inside (``cont_wkb``, from ``stamps.containment``), whether that polygon
    is areal, and the region's bounding box grown by ``rr + BOX_SLACK``.

    Examples
    --------
    >>> t = region_table([("stop", Loc.disc(0.0, 0.0, 200.0))])
    >>> t.select(["name", "circle", "cx", "rr", "bx0"]).to_pylist()
    [{'name': 'stop', 'circle': True, 'cx': 0.0, 'rr': 200.0, 'bx0': -201.0}]
    """
    rows = {f.name: [] for f in REGION_SCHEMA}
    seen = set()
    for name, loc in regions:
        if name in seen:
            raise EngineError(f"region {name!r} is given twice")
        seen.add(name)
        if not isinstance(loc, Loc) or loc.is_universe:
            raise EngineError(f"region {name!r} must be a Loc with a geometry, got {loc!r}")
        circle = loc.xy is not None
        x0, y0, x1, y1 = shapely.bounds(loc.geom)
        grow = loc.r + BOX_SLACK
        if circle:
            cont, areal = None, False
        else:
            q, _, areal = containment(loc)
            cont = shapely.to_wkb(q, output_dimension=2)
        values = {
            "name": name, "circle": circle,
            "cx": loc.xy[0] if circle else None, "cy": loc.xy[1] if circle else None,
            "rr": loc.r, "areal": bool(areal),
            "bx0": x0 - grow, "by0": y0 - grow, "bx1": x1 + grow, "by1": y1 + grow,
            "wkb": shapely.to_wkb(loc.geom, output_dimension=2), "cont_wkb": cont,
        }
        for key, value in values.items():
            rows[key].append(value)
    return pa.table(rows, schema=REGION_SCHEMA)


def events_table(events) -> pa.Table:
    """Normalise events (pandas, Arrow table or batch) to :data:`EVENT_SCHEMA`.

    Missing ``x, y`` or ``wkb`` columns become nulls. Radii must be present,
    finite and ``>= 0``.

    Examples
    --------
    >>> events_table(pd.DataFrame({"ev": [1], "x": [0.0], "y": [0.0], "r": [15]})).schema.names
    ['ev', 'x', 'y', 'r', 'wkb']
    """
    if isinstance(events, pd.DataFrame):
        events = pa.Table.from_pandas(events, preserve_index=False)
    elif isinstance(events, pa.RecordBatch):
        events = pa.Table.from_batches([events])
    elif not isinstance(events, pa.Table):
        raise EngineError(f"events must be a pandas DataFrame or an Arrow table or batch, not {type(events).__name__}")
    names = set(events.column_names)
    if not {"ev", "r"} <= names or not ({"x", "y"} <= names or "wkb" in names):
        raise EngineError(f"events need columns ev, r and x, y and/or wkb; got {sorted(names)}")
    cols = []
    for f in EVENT_SCHEMA:
        if f.name in names:
            cols.append(events.column(f.name).cast(f.type))
        else:
            cols.append(pa.nulls(events.num_rows, f.type))
    table = pa.Table.from_arrays(cols, schema=EVENT_SCHEMA)
    if table.column("ev").null_count:
        raise EngineError("event keys ev must not be null")
    r = table.column("r").to_numpy(zero_copy_only=False)
    if not np.all(np.isfinite(r) & (r >= 0)):
        raise EngineError("event radii r must be present, finite and >= 0")
    return table


def _finish(table: pa.Table) -> pa.Table:
    """Cast to the output schema and sort, so every local engine gives the same table."""
    table = table.select(OUTPUT_SCHEMA.names).cast(OUTPUT_SCHEMA)
    return table.sort_by([("ev", "ascending"), ("region", "ascending")])


# --- engines ----------------------------------------------------------------


class ShapelyEngine:
    """The reference engine: numpy and shapely, no SQL."""

    name = "shapely"

    @staticmethod
    def available(spark=None) -> bool:
        """Always available: shapely is a dependency."""
        return True

    def join_arrow(self, events, regions) -> pa.Table:
        """The join as an Arrow table with :data:`OUTPUT_SCHEMA`, sorted."""
        table = events_table(events)
        regions = list(regions)
        region_table(regions)  # the same checks as the SQL engines
        ev = table.column("ev").to_numpy(zero_copy_only=False)
        xs = table.column("x").to_numpy(zero_copy_only=False)
        ys = table.column("y").to_numpy(zero_copy_only=False)
        rs = table.column("r").to_numpy(zero_copy_only=False)
        geoms = shapely.from_wkb(np.asarray(table.column("wkb").to_pylist(), dtype=object))
        parts = [OUTPUT_SCHEMA.empty_table()]
        for name, loc in regions:
            possibly, certainly = relate_many(xs, ys, geoms, rs, loc)
            parts.append(pa.table({
                "ev": ev[possibly], "region": pa.array([name] * int(possibly.sum()), pa.string()),
                "possibly": possibly[possibly], "certainly": certainly[possibly],
            }, schema=OUTPUT_SCHEMA))
        return _finish(pa.concat_tables(parts))

    def join(self, events, regions) -> pd.DataFrame:
        """The join as a pandas DataFrame, sorted by ``ev, region``."""
        return self.join_arrow(events, regions).to_pandas()


_sedonadb_lock = threading.RLock()
_sedonadb_ctx = None


def _sedonadb():
    """The process's SedonaDB context, created on first use."""
    global _sedonadb_ctx
    with _sedonadb_lock:
        if _sedonadb_ctx is None:
            with warnings.catch_warnings():
                # Importing sedonadb probes for GDAL and PROJ libraries it
                # needs only for rasters and CRS transforms, which we never use.
                warnings.filterwarnings("ignore", message="Failed to configure (GDAL|PROJ)")
                import sedonadb
            _sedonadb_ctx = sedonadb.connect()
        return _sedonadb_ctx


class SedonaDBEngine:
    """Apache SedonaDB, in process, over Arrow.

    One context per process, created lazily; the regions table is registered
    once per distinct list of regions (a few are kept), the events once per
    call. Calls are serialised by a lock, so threads may share the engine.
    """

    name = "sedonadb"
    _KEEP_REGIONS = 8
    _names = itertools.count()
    _region_views: "OrderedDict[tuple, str]" = OrderedDict()

    @staticmethod
    def available(spark=None) -> bool:
        """Whether the ``sedonadb`` package can be imported."""
        try:
            _sedonadb()
        except ImportError:
            return False
        return True

    def _regions_view(self, ctx, regions) -> str:
        key = tuple(regions)
        views = SedonaDBEngine._region_views
        name = views.get(key)
        if name is not None:
            views.move_to_end(key)
            return name
        name = f"spatec_regions_{next(SedonaDBEngine._names)}"
        ctx.create_data_frame(region_table(regions)).to_view(name)
        views[key] = name
        while len(views) > self._KEEP_REGIONS:
            _, old = views.popitem(last=False)
            ctx.drop_view(old)
        return name

    def join_arrow(self, events, regions) -> pa.Table:
        """The join as an Arrow table with :data:`OUTPUT_SCHEMA`, sorted.

        ``events`` may be a pandas DataFrame, an Arrow table or an Arrow
        record batch (as ``mapInArrow`` hands them out).
        """
        table = events_table(events)
        regions = list(regions)
        with _sedonadb_lock:
            ctx = _sedonadb()
            rname = self._regions_view(ctx, regions)
            ename = f"spatec_events_{next(SedonaDBEngine._names)}"
            ctx.create_data_frame(table).to_view(ename)
            try:
                # pa.table() reads the result's Arrow C stream directly:
                # DataFrame.to_arrow_table() would import geoarrow, which we
                # do not need because the output has no geometry column.
                out = pa.table(ctx.sql(render_sql(ename, rname)))
            finally:
                ctx.drop_view(ename)
        return _finish(out)

    def join(self, events, regions) -> pd.DataFrame:
        """The join as a pandas DataFrame, sorted by ``ev, region``."""
        return self.join_arrow(events, regions).to_pandas()


def _has_sedona_functions(spark) -> bool:
    try:
        return all(spark.catalog.functionExists(f) for f in SPATIAL_SQL_FUNCTIONS)
    except Exception:  # noqa: BLE001 - a session that cannot answer has none
        return False


class SedonaSparkEngine:
    """Apache Sedona on Spark: the template run by Spark SQL.

    Needs Sedona's jars on the cluster (``spark.jars.packages`` or a Sedona
    image). Its functions are registered either by the session's
    configuration (``spark.sql.extensions=org.apache.sedona.sql.SedonaSqlExtensions``)
    or, when the ``apache-sedona`` package is installed, by
    ``SedonaContext.create(spark)``, which :meth:`available` calls.
    """

    name = "sedona-spark"

    @staticmethod
    def available(spark) -> bool:
        """Whether ``spark`` has (or can be given) every function the join uses."""
        if spark is None:
            return False
        if _has_sedona_functions(spark):
            return True
        try:
            from sedona.spark import SedonaContext
        except ImportError:
            return False
        try:
            SedonaContext.create(spark)
        except Exception:  # noqa: BLE001 - missing jars surface as JVM errors of any kind
            return False
        return _has_sedona_functions(spark)

    def join(self, events, regions):
        """The join as a Spark DataFrame (not sorted).

        Parameters
        ----------
        events : pyspark.sql.DataFrame
            Columns ``ev, r`` and ``x, y`` and/or ``wkb``.
        regions : list of (str, Loc)

        Raises
        ------
        UnsupportedError
            If the session lacks Sedona's functions.
        """
        from pyspark.sql import DataFrame as SparkDataFrame

        if not isinstance(events, SparkDataFrame):
            raise EngineError(f"the sedona-spark engine joins Spark DataFrames, not {type(events).__name__}")
        spark = events.sparkSession
        if not self.available(spark):
            raise UnsupportedError(
                "the sedona-spark spatial engine", "this Spark session",
                "Sedona's SQL functions (" + ", ".join(SPATIAL_SQL_FUNCTIONS) + ") are not registered; "
                "put Sedona's Spark jar on the cluster (scripts/setup.sh fetches it into jars/) "
                "and install apache-sedona, or set spark.spatec.spatial.engine=sedonadb",
            )
        return spark.sql(render_sql(*_spark_views(events, regions), spatial_join=True))


def _spark_views(events, regions) -> tuple[str, str]:
    """Register events and regions as temporary views; return their names."""
    from pyspark.sql import functions as F

    spark = events.sparkSession
    types = {"ev": "long", "x": "double", "y": "double", "r": "double", "wkb": "binary"}
    events = events.select([
        (F.col(c) if c in events.columns else F.lit(None)).cast(t).alias(c) for c, t in types.items()
    ])
    n = next(SedonaDBEngine._names)
    ename, rname = f"spatec_events_{n}", f"spatec_regions_{n}"
    events.createOrReplaceTempView(ename)
    spark.createDataFrame(region_table(list(regions))).createOrReplaceTempView(rname)
    return ename, rname


_BY_NAME = {cls.name: cls for cls in (ShapelyEngine, SedonaDBEngine, SedonaSparkEngine)}


def engine(name: str):
    """The engine called ``name`` (the setting ``spatec.spatial.engine``).

    Examples
    --------
    >>> engine("shapely").name
    'shapely'
    >>> engine("postgis")
    Traceback (most recent call last):
    ...
    spatec.spatial.engines.EngineError: unknown spatial engine 'postgis'; valid engines: shapely, sedonadb, sedona-spark
    """
    try:
        return _BY_NAME[name]()
    except KeyError:
        raise EngineError(f"unknown spatial engine {name!r}; valid engines: {', '.join(ENGINES)}") from None

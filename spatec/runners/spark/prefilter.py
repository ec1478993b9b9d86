"""The leaf pre-filter: events that no part of a phrase can use dropped before
matching, by a spatial join of the events against the regions its leaves need
(the Sedona SQL dialect, run by the configured engine)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import shapely

from spatec.frontend import ast as A
from spatec.plan.nodes import PhrasePlan
from spatec.spatial.crs import Projector
from spatec.storage.atomic import safe_name


def prefiltered(table: pa.Table, regions: dict, crs: str, engine: str) -> pa.Table:
    """The events of ``table`` that possibly meet one of ``regions`` (:func:`prefilter`, in-task)."""
    names = sorted(regions)
    flags = [f"_in_{safe_name(n)}" for n in names]
    fn = flag_fn([(n, regions[n]) for n in names], flags, crs, task_engine(engine))
    kept = []
    for b in fn(table.to_batches()):
        keep = np.zeros(b.num_rows, dtype=bool)
        for f in flags:
            keep |= b.column(b.schema.get_field_index(f)).to_numpy(zero_copy_only=False)
        kept.append(b.filter(pa.array(keep)).select(table.schema.names))
    return pa.Table.from_batches(kept, schema=table.schema) if kept else table.slice(0, 0)


def engine_name(spark) -> str:
    """The engine the session's leaf pre-filter runs: ``sedona-spark`` (a Sedona join
    where the events are Spark DataFrames; in tasks, :func:`task_engine`), ``sedonadb``,
    or ``shapely`` where SedonaDB cannot be imported."""
    from spatec.runners.spark.session import spatial_engine

    name = spatial_engine(spark)
    return task_engine(name) if name != "sedona-spark" else name


def task_engine(name: str) -> str:
    """The engine that runs inside a Spark task for the configured ``name``: the
    staged exchange's tasks hold their events as Arrow, never as a DataFrame a Sedona
    join could take, so there ``sedona-spark`` runs the same SQL in SedonaDB."""
    from spatec.spatial.engines import SedonaDBEngine

    if name in ("sedona-spark", "sedonadb"):
        return "sedonadb" if SedonaDBEngine.available() else "shapely"
    return name


def prefilter_regions(plan: PhrasePlan, program, crs: str) -> dict:
    """Event type → ``{name: Loc}``: the phrase's pre-filter regions
    (``plan.physical.prefilter``, :mod:`spatec.plan.prefilter`) projected with ``crs``."""
    from spatec.automata.patterns import PatternCompiler

    compiler = PatternCompiler(program.places, program.timezone, Projector(crs))
    return {t: {r.name: _region(r.pattern, compiler) for r in rs} for t, rs in plan.physical.prefilter}


def _region(p, compiler):
    if isinstance(p, A.AtPlace):
        return compiler.region(p.place)
    if isinstance(p, A.NearPlace):
        return compiler.region(p.place, p.distance.metres())
    return compiler.shape_region(p.shape)



def prefilter(df, regions: dict, crs: str, engine: str):
    """Flag each event ``_in_<region>`` (possibly meets it) with the spatial engine inside
    ``mapInArrow``, keep the events that meet one, drop the flags; with ``sedona-spark``,
    a Sedona join (:func:`spatec.runners.spark.sedona.sedona_prefilter`)."""
    from functools import reduce

    if engine == "sedona-spark":
        from spatec.runners.spark.sedona import sedona_prefilter

        return sedona_prefilter(df, regions, crs)

    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, StructField, StructType

    names = sorted(regions)
    flags = [f"_in_{safe_name(n)}" for n in names]
    schema = StructType(list(df.schema.fields) + [StructField(f, BooleanType(), True) for f in flags])
    fn = flag_fn([(n, regions[n]) for n in names], flags, crs, engine)
    flagged = df.mapInArrow(fn, schema)
    keep = reduce(lambda a, b: a | b, [F.col(f) for f in flags])
    return flagged.where(keep).drop(*flags)


def flag_fn(regions: list, flags: list, crs: str, engine: str):
    def run(batches):
        from spatec.spatial import engines as E

        eng = E.engine(engine)
        proj = Projector(crs)
        for b in batches:
            if b.num_rows:
                yield _flag_batch(b, regions, flags, proj, eng)

    return run


def _flag_batch(b: pa.RecordBatch, regions, flags, proj, eng) -> pa.RecordBatch:
    n = b.num_rows
    kinds = np.asarray(b.column(b.schema.get_field_index("_place")).to_pylist(), dtype=object)
    lon = b.column(b.schema.get_field_index("_lon")).to_numpy(zero_copy_only=False).astype(float)
    lat = b.column(b.schema.get_field_index("_lat")).to_numpy(zero_copy_only=False).astype(float)
    r = b.column(b.schema.get_field_index("_r")).to_numpy(zero_copy_only=False).astype(float)
    xs, ys = np.full(n, np.nan), np.full(n, np.nan)
    pts = kinds == "point"
    if pts.any():
        xs[pts], ys[pts] = proj.forward(lon[pts], lat[pts])
    wkb = [None] * n
    geo = np.flatnonzero(kinds == "geom")
    if len(geo):
        wkts = np.asarray(b.column(b.schema.get_field_index("_geom")).to_pylist(), dtype=object)[geo]
        gs = shapely.from_wkt(wkts)
        gs = shapely.transform(gs, lambda c: np.column_stack(proj.forward(c[:, 0], c[:, 1])))
        for i, g in zip(geo, gs):
            wkb[i] = shapely.to_wkb(g)
    r = np.where(np.isfinite(r), r, 0.0)
    events = pa.table({"ev": pa.array(np.arange(n, dtype=np.int64)), "x": pa.array(xs), "y": pa.array(ys),
                       "r": pa.array(r), "wkb": pa.array(wkb, pa.binary())})
    pairs = eng.join_arrow(events, regions)
    ev = pairs.column("ev").to_numpy()
    reg = np.asarray(pairs.column("region").to_pylist(), dtype=object)
    cols = list(b.columns)
    for (name, _), flag in zip(regions, flags):
        f = np.zeros(n, dtype=bool)
        f[ev[reg == name]] = True
        cols.append(pa.array(f))
    return pa.RecordBatch.from_arrays(cols, names=list(b.schema.names) + flags)

"""Batch replay on Spark: the local runner's semantics, one key per Spark group.

Events are ingested on the driver (the same readers, rejects and duplicate
rules as every runner), become Spark DataFrames of canonical rows, and each
phrase runs as ``groupBy(key).applyInPandas``: a group is one partition of
:func:`spatec.runners.common.partitions` (broadcast types joined to every key
present), replayed by :func:`spatec.runners.common.run_partition` with the
global final watermark. The automaton travels in the closure (cloudpickle).

Leaf space patterns may drop events before the shuffle (:func:`prefilter`),
but only events that no part of the phrase can use; results are the same
with and without it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import shapely

from spatec.frontend import ast as A
from spatec.plan.nodes import Leaf, PhrasePlan, walk_nodes
from spatec.automata.machine import HistoryEv
from spatec.runners.common import (Compiled, attribute_names, choose_crs, event_order, keyed_types,
                                   needs_source_history,
                                   output_row, phrase_types, rows_frame, run_partition, to_evs)
from spatec.runners.local import ReplayResult
from spatec.spatial.crs import Projector

CANONICAL = ("_type", "_id", "_source", "_t", "_lo", "_hi", "_place", "_lon", "_lat", "_r", "_geom")

#: What ``applyInPandas`` returns per composite: fixed fields, then the
#: variable → event id map and the emit fields as JSON (decoded on the driver,
#: so values keep their Python types exactly as the local runner makes them).
RAW_SCHEMA = "phrase string, id string, lo long, hi long, hull string, events string, emit string"


def replay_spark(compiled: Compiled, inputs, out, fmt: str = "jsonl", crs=None, phrases=None,
                 master=None, ui=None, spark=None, prefilter_leaves: bool = True):
    """``spatec replay --runner spark``: ingest, run every phrase on Spark, write one file per phrase."""
    from spatec.runners.replay import ingest, write_outputs
    from spatec.runners.spark_session import get_or_create

    frames, summary = ingest(compiled, inputs, out, ui)
    if ui:
        ui.stage("starting Spark")
    spark = spark or get_or_create(master)
    if ui:
        ui.stage("matching on Spark")
    result = replay_frames_spark(spark, compiled, frames, crs=crs, phrases=phrases,
                                 prefilter_leaves=prefilter_leaves)
    result.ingest = summary
    result.paths = write_outputs(compiled, result.frames, out, fmt)
    return result


def replay_frames_spark(spark, compiled: Compiled, frames: dict, crs=None, phrases=None,
                        prefilter_leaves: bool = True) -> ReplayResult:
    """Canonical frames (type → pandas) through every phrase on Spark; output rows as pandas."""
    raw, crs = raw_outputs(spark, compiled, frames, crs, phrases, prefilter_leaves)
    result = ReplayResult({}, crs)
    for plan in compiled.plans:
        if plan.name not in raw:
            continue
        df = decode_rows(plan, raw[plan.name].toPandas())
        result.frames[plan.name] = df
        result.counts[plan.name] = len(df)
    return result


def raw_outputs(spark, compiled: Compiled, frames: dict, crs=None, phrases=None,
                prefilter_leaves: bool = True):
    """Per phrase, a lazy Spark DataFrame of composites in :data:`RAW_SCHEMA`; and the CRS used."""
    program = compiled.program
    frames = {t: df for t, df in frames.items() if t in program.events}
    crs = choose_crs(program, frames, crs)
    final_w = final_watermark(frames)
    events = {t: spark_events(spark, program, t, df) for t, df in frames.items() if len(df)}
    dtypes = {t: _dtypes(program, t, df) for t, df in frames.items()}
    engine = _engine_name(spark)
    out = {}
    for plan in compiled.plans:
        if phrases and plan.name not in phrases:
            continue
        grouped = phrase_groups(plan, program, events, crs, engine if prefilter_leaves else None)
        out[plan.name] = _run_groups(grouped, plan, compiled, crs, final_w, dtypes, spark)
    return out, crs


def final_watermark(frames: dict) -> int:
    """The batch's final watermark: the latest event time (``_hi``) over every input event."""
    his = [int(df["_hi"].max()) for df in frames.values() if len(df)]
    return max(his) if his else 0


# ------------------------------------------------------------------------------- events

def _col(type_name: str, attr: str) -> str:
    """Attributes are carried as ``<type>__<attr>`` so types with the same attribute
    name (and perhaps another type) share one union without clashing."""
    return f"{type_name}__{attr}"


def spark_events(spark, program, type_name: str, df: pd.DataFrame):
    """One type's canonical rows as a Spark DataFrame (attributes prefixed by the type)."""
    names = attribute_names(program, type_name)
    pdf = df[list(CANONICAL) + names].rename(columns={a: _col(type_name, a) for a in names})
    # object columns of Python values: Arrow infers each column's one type
    table = pa.Table.from_pandas(pdf, preserve_index=False)
    table = table.cast(pa.schema([_spark_field(f) for f in table.schema]))
    return spark.createDataFrame(pdf, schema=_ddl(table.schema))


def _spark_field(f: pa.Field) -> pa.Field:
    if pa.types.is_null(f.type):
        return pa.field(f.name, pa.string())
    return f


def _ddl(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, from_arrow_type(f.type), True) for f in schema])


def _dtypes(program, type_name: str, df: pd.DataFrame) -> dict:
    names = attribute_names(program, type_name)
    return {c: str(df[c].dtype) for c in list(CANONICAL) + names if c in df}


# ------------------------------------------------------------------------------- groups

def phrase_groups(plan: PhrasePlan, program, events: dict, crs: str, engine: str | None):
    """The phrase's events with string key columns ``_k0..``: one group per partition.

    Keyed types carry their key; events without a key value are dropped (they
    relate to nothing, as in :func:`partitions`). Broadcast types are
    cross-joined with the distinct keys present, so every key sees them.
    """
    from pyspark.sql import functions as F

    types = sorted(t for t in phrase_types(plan, program) if t in events)
    keyed = keyed_types(plan, program, types)
    drop = prefilter_regions(plan, program, crs) if engine else {}
    dfs = {}
    for t in types:
        df = events[t]
        if t in drop:
            df = prefilter(df, drop[t], crs, engine)
        dfs[t] = df
    nkey = len(plan.key) if plan.key and keyed else 1

    def keyed_df(t):
        df = dfs[t]
        if not plan.key:
            return df.withColumn("_k0", F.lit(""))
        cond = None
        for i, k in enumerate(plan.key):
            c = F.col(_col(t, k))
            ok = c.isNotNull()
            if dict(df.dtypes)[_col(t, k)] in ("double", "float"):
                ok = ok & ~F.isnan(c)
            cond = ok if cond is None else cond & ok
            df = df.withColumn(f"_k{i}", c.cast("string"))
        return df.where(cond)

    parts = [keyed_df(t) for t in types if t in keyed]
    bcast = [dfs[t] for t in types if t not in keyed]
    if not parts:
        # no keyed type among the inputs: the broadcast types form the one partition
        parts = [df.withColumn(f"_k{i}", F.lit("")) for df in bcast for i in range(nkey)] if bcast else []
        bcast = []
    if not parts:
        return None
    k = _union(parts)
    kcols = [f"_k{i}" for i in range(nkey)]
    if bcast:
        keys = k.select(*kcols).distinct()
        k = _union([k] + [b.crossJoin(F.broadcast(keys)) for b in bcast])
    if needs_source_history(plan, program):
        k = _union([k.withColumn("_hist", F.lit(False))] + _history_rows(plan, program, dfs, keyed, k, kcols))
    return k


def _history_rows(plan: PhrasePlan, program, dfs: dict, keyed, k, kcols) -> list:
    """For ``successive`` under a key that is not the source: each partition also gets,
    flagged ``_hist``, its sources' events that the key sent elsewhere (see
    :func:`spatec.runners.common.partitions`)."""
    from pyspark.sql import functions as F

    out = []
    for t in sorted(keyed):
        decl = program.events[t]
        if decl.source is None or tuple(plan.key) == (decl.source.attr,):
            continue
        pairs = k.where(F.col("_type") == t).select(*kcols, F.col("_source").alias("_hsrc")).distinct()
        ev = dfs[t].where(F.col("_source").isNotNull())
        h = ev.join(pairs, ev["_source"] == pairs["_hsrc"]).drop("_hsrc")
        same = None
        for i, key in enumerate(plan.key):
            c = F.col(_col(t, key)).cast("string") == F.col(f"_k{i}")
            same = c if same is None else same & c
        h = h.where(~F.coalesce(same, F.lit(False)))
        out.append(h.withColumn("_hist", F.lit(True)))
    return out


def _union(dfs):
    out = dfs[0]
    for d in dfs[1:]:
        out = out.unionByName(d, allowMissingColumns=True)
    return out


def _run_groups(df, plan: PhrasePlan, compiled: Compiled, crs: str, final_w: int, dtypes: dict, spark):
    if df is None:
        return spark.createDataFrame([], RAW_SCHEMA)
    from spatec.automata.machine import build

    program = compiled.program
    proj = Projector(crs)
    am = build(plan, program, proj)
    kcols = sorted(c for c in df.columns if c.startswith("_k") and c[2:].isdigit())
    fn = partition_fn(am, program, proj, final_w, dtypes)
    return df.groupBy(*kcols).applyInPandas(fn, RAW_SCHEMA)


def partition_fn(am, program, proj, final_w: int, dtypes: dict):
    """The function each group runs: canonical rows → events → automaton → raw output rows."""

    def run(pdf: pd.DataFrame) -> pd.DataFrame:
        evs = []
        hist = pdf["_hist"].fillna(False).astype(bool) if "_hist" in pdf else None
        for t, sub in pdf.groupby("_type", sort=True):
            names = attribute_names(program, t)
            flags = hist.loc[sub.index].to_numpy() if hist is not None else None
            sub = sub[list(CANONICAL) + [_col(t, a) for a in names]]
            sub = sub.rename(columns={_col(t, a): a for a in names})
            sub = _restore(sub, dtypes.get(t, {}))
            got_evs = to_evs(sub.reset_index(drop=True), program, proj)
            if flags is not None and flags.any():
                got_evs = [HistoryEv(e.type, e.id, e.source, e.t, e.lo, e.hi, e.loc, e.attrs) if f else e
                           for e, f in zip(got_evs, flags)]
            evs.extend(got_evs)
        evs.sort(key=event_order)
        got, st = run_partition(am, evs, final_w)
        rows = []
        for c in got:
            r = output_row(am, c, proj, st)
            emit = {k: v for k, v in r.items() if k not in ("phrase", "id", "lo", "hi", "hull", "events")}
            rows.append((r["phrase"], r["id"], r["lo"], r["hi"], r["hull"],
                         json.dumps(r["events"]), json.dumps(emit)))
        return pd.DataFrame(rows, columns=["phrase", "id", "lo", "hi", "hull", "events", "emit"])

    return run


def _restore(df: pd.DataFrame, dtypes: dict) -> pd.DataFrame:
    """Column dtypes as the driver had them (a round trip through Spark may widen ints)."""
    for c, dt in dtypes.items():
        if c in df and str(df[c].dtype) != dt:
            try:
                df[c] = df[c].astype(dt)
            except (TypeError, ValueError):
                pass
    return df


def decode_rows(plan: PhrasePlan, raw: pd.DataFrame) -> pd.DataFrame:
    """Raw rows collected from Spark → the local runner's output frame (deduplicated by id)."""
    rows, seen = [], set()
    for rec in raw.itertuples(index=False):
        if rec.id in seen:
            continue  # found in two partitions (broadcast-only phrases): reported once
        seen.add(rec.id)
        row = {"phrase": rec.phrase, "id": rec.id, "lo": int(rec.lo), "hi": int(rec.hi),
               "hull": rec.hull, "events": json.loads(rec.events)}
        row.update(json.loads(rec.emit))
        rows.append(row)
    return rows_frame(plan, rows)


# ------------------------------------------------------------------------------- leaf pre-filter

def _engine_name(spark) -> str:
    from spatec.runners.spark_session import spatial_engine
    from spatec.spatial.engines import SedonaDBEngine

    name = spatial_engine(spark)
    if name == "sedona-spark" or (name == "sedonadb" and not SedonaDBEngine.available()):
        # the Sedona-on-Spark join needs the events projected in Spark SQL; until that
        # lands, the per-batch engine runs in the Python workers
        return "sedonadb" if SedonaDBEngine.available() else "shapely"
    return name


def _necessary(p, compiler):
    """Regions ``{name: Loc}`` an event must possibly meet to satisfy pattern ``p``; None: no such set."""
    if isinstance(p, A.AtPlace):
        return {p.place: compiler.region(p.place)}
    if isinstance(p, A.NearPlace):
        return {f"{p.place}_{p.distance.metres():g}m": compiler.region(p.place, p.distance.metres())}
    if isinstance(p, A.InShape):
        return {f"shape{abs(hash(p.shape)) % 10**8}": compiler.shape_region(p.shape)}
    if isinstance(p, A.Certainly):
        return _necessary(p.pattern, compiler)   # certainly inside implies possibly
    if isinstance(p, A.Binary) and p.op in ("and", "or"):
        a, b = _necessary(p.left, compiler), _necessary(p.right, compiler)
        if p.op == "and":
            return a if a is not None else b
        return {**a, **b} if a is not None and b is not None else None
    return None


def prefilter_regions(plan: PhrasePlan, program, crs: str) -> dict:
    """Event type → regions, for the types whose every use is a positive leaf whose
    space pattern needs one of those regions. A type that is negated, bound in
    ``successive`` or read by an unfiltered leaf is never filtered: absences and
    ``successive`` need the events that match no positive leaf."""
    from spatec.automata.patterns import PatternCompiler

    compiler = PatternCompiler(program.places, program.timezone, Projector(crs))
    blocked, regions = set(), {}
    for n in walk_nodes(plan.root):
        if getattr(n, "absence", None) is not None:
            blocked |= {l.type for l in n.absence.leaves}
        for neg in _negations(n):
            blocked |= {l.type for l in neg.leaves}
    if "successive" in repr(plan.deferred) or "successive" in repr(plan.emit):
        blocked |= set(plan.vars.values())
    for n in walk_nodes(plan.root):
        if not isinstance(n, Leaf):
            continue
        if n.type is None:
            return {}
        if "successive" in repr(n.preds):
            blocked.add(n.type)
        need = None
        for f in n.filters:
            got = _necessary(f, compiler)
            if got is not None:
                need = got
                break
        if need is None:
            blocked.add(n.type)
        else:
            regions.setdefault(n.type, {}).update(need)
    return {t: r for t, r in regions.items() if t not in blocked}


def _negations(n):
    for attr in ("absence", "negation"):
        v = getattr(n, attr, None)
        if v is not None and hasattr(v, "leaves"):
            yield v


def prefilter(df, regions: dict, crs: str, engine: str):
    """Flag each event ``_in_<region>`` (possibly meets it) with the spatial engine inside
    ``mapInArrow``, keep the events that meet one, drop the flags."""
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, StructField, StructType

    names = sorted(regions)
    flags = [f"_in_{_safe(n)}" for n in names]
    schema = StructType(list(df.schema.fields) + [StructField(f, BooleanType(), True) for f in flags])
    fn = flag_fn([(n, regions[n]) for n in names], flags, crs, engine)
    flagged = df.mapInArrow(fn, schema)
    keep = reduce(lambda a, b: a | b, [F.col(f) for f in flags])
    return flagged.where(keep).drop(*flags)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)


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

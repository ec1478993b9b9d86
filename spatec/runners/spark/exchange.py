"""The shuffle exchange: events through Spark DataFrames, grouped by Spark's own
exchange (``groupBy(_b).applyInPandas``); and which exchange a session uses.

Each phrase's events get a group column ``_b`` hashed from the key, so that
every partition lies wholly in one group; broadcast types are cross-joined with
the groups present; for ``successive`` under a key that is not the source, a
group also receives its sources' events held by other groups, as history. A
phrase of two nearby events with no key is cut by a Sedona distance join
(:func:`spatec.runners.spark.sedona.proximity_groups`) instead of being one group.
"""
from __future__ import annotations

import json
import os
import uuid

import numpy as np
import pandas as pd
import pyarrow as pa

from spatec.errors import SpatecError
from spatec.plan.nodes import PhrasePlan
from spatec.plan.program import Compiled
from spatec.runners.spark.prefilter import prefilter, prefilter_regions
from spatec.runners.spark.staging import (
    CANONICAL,
    STAGING_KEY,
    canonical_table,
    restore_dtypes,
    staging_dir,
)
from spatec.runtime.batch import phrase_rows
from spatec.runtime.events import attribute_names
from spatec.runtime.routing import key_buckets
from spatec.runtime.rows import STD_COLUMNS, rows_frame
from spatec.spatial.crs import Projector
from spatec.storage.atomic import safe_name

#: What ``applyInPandas`` returns per composite: fixed fields, then the
#: variable → event id map and the emit fields as JSON (decoded on the driver,
#: so values keep their Python types exactly as the local runner makes them).
RAW_SCHEMA = "phrase string, id string, lo long, hi long, hull string, events string, emit string"


#: Setting: how a phrase's events reach the Python workers that match them —
#: ``shuffle`` (Spark DataFrames hashed by the key through Spark's exchange),
#: ``staged`` (the driver hashes them into Arrow files in the staging
#: directory, :data:`STAGING_KEY`, and each Spark task reads its group's
#: files), or ``auto`` (staged when there is a staging directory).
EXCHANGE_KEY = "spark.spatec.exchange"


def exchange_mode(spark) -> str:
    mode = spark.conf.get(EXCHANGE_KEY, "auto").strip().lower()
    if mode not in ("auto", "staged", "shuffle"):
        raise SpatecError(f"{EXCHANGE_KEY} must be auto, staged or shuffle, not {mode!r}")
    if mode == "auto":
        return "staged" if staging_dir(spark) is not None else "shuffle"
    if mode == "staged" and staging_dir(spark) is None:
        raise SpatecError(f"{EXCHANGE_KEY}=staged needs a staging directory every executor can read: "
                         f"set {STAGING_KEY} to one (it is off, or the master is not on this machine)")
    return mode


def _col(type_name: str, attr: str) -> str:
    """Attributes are carried as ``<type>__<attr>`` so types with the same attribute
    name (and perhaps another type) share one union without clashing."""
    return f"{type_name}__{attr}"


def spark_events(spark, program, type_name: str, df: pd.DataFrame):
    """One type's canonical rows as a Spark DataFrame (attributes prefixed by the type).

    Staged as Parquet and read by Spark's vectorised reader where the
    executors can read the staging directory (:data:`STAGING_KEY`): sending
    a million rows through ``createDataFrame`` costs the JVM a row-by-row
    conversion many times slower than reading them back from Parquet."""
    names = set(attribute_names(program, type_name))
    table = canonical_table(program, type_name, df)
    table = table.rename_columns([_col(type_name, c) if c in names else c for c in table.column_names])
    stage = staging_dir(spark)
    if stage is None:
        return spark.createDataFrame(table.to_pandas(), schema=_ddl(table.schema))
    import pyarrow.parquet as pq

    path = os.path.join(stage, f"{safe_name(type_name)}-{uuid.uuid4().hex}.parquet")
    pq.write_table(table, path, row_group_size=65_536, compression="snappy")
    return spark.read.schema(_ddl(table.schema)).parquet(path)


def _ddl(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, from_arrow_type(f.type), True) for f in schema])


def phrase_groups(plan: PhrasePlan, program, events: dict, crs: str, engine: str | None, buckets: int):
    """The phrase's events with a group column ``_b``: each partition (key value)
    wholly in one group, ``buckets`` groups hashed from the key.

    Keyed types carry their key; events without a key value are dropped (they
    relate to nothing, as in :func:`partitions`). Broadcast types are
    cross-joined with the groups present, so every key sees them. For
    ``successive`` under a key that is not the source, a group also gets,
    flagged ``_hist``, the events of its sources that the key sent to other
    groups (history only).
    """
    from pyspark.sql import functions as F

    phys = plan.physical
    types = [t for t in phys.types if t in events]
    keyed = set(phys.keyed)
    drop = prefilter_regions(plan, program, crs) if engine else {}
    dfs = {}
    for t in types:
        df = events[t]
        if t in drop:
            df = prefilter(df, drop[t], crs, engine)
        dfs[t] = df

    if phys.proximity is not None and engine == "sedona-spark" and types:
        from spatec.runners.spark.sedona import proximity_groups

        got = proximity_groups(plan, _union([dfs[t] for t in types]), crs, buckets, phys.proximity)
        if got is not None:
            return got

    def bucketed(t):
        df = dfs[t]
        if not phys.key:
            return df.withColumn("_b", F.lit(0))
        return with_bucket(df, t, phys.key, buckets).where(F.col("_b") >= 0)

    parts = [bucketed(t) for t in types if t in keyed]
    bcast = [dfs[t] for t in types if t not in keyed]
    if not parts:
        # no keyed type among the inputs: the broadcast types form the one partition
        parts = [df.withColumn("_b", F.lit(0)) for df in bcast]
        bcast = []
    if not parts:
        return None
    k = _union(parts)
    if bcast:
        present = k.select("_b").distinct()
        k = _union([k] + [b.crossJoin(F.broadcast(present)) for b in bcast])
    if phys.source_history:
        k = _union([k.withColumn("_hist", F.lit(False))] + _history_rows(phys, dfs, k, buckets))
    return k


def with_bucket(df, t: str, key: tuple, buckets: int, name: str = "_b"):
    """``df`` (events of type ``t``) with a column ``name``: each event's group from its key
    values (:func:`~spatec.runtime.routing.key_buckets`, the one hash every runner uses;
    -1 without a key value), computed on the key columns in Arrow batches."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    cols = [_col(t, k) for k in key]
    schema = StructType(list(df.schema.fields) + [StructField(name, IntegerType(), False)])

    def fn(batches):
        for b in batches:
            keys = pa.Table.from_batches([b.select(cols)]).to_pandas()
            bs = key_buckets(keys, cols, buckets).astype(np.int32)
            yield pa.RecordBatch.from_arrays([*b.columns, pa.array(bs)], names=[*b.schema.names, name])

    return df.mapInArrow(fn, schema)


def _history_rows(phys, dfs: dict, k, buckets: int) -> list:
    """For ``successive`` under a key that is not the source: each group also gets,
    flagged ``_hist``, the events of its sources that are not its own (see
    :func:`spatec.runtime.routing.partitions`)."""
    from pyspark.sql import functions as F

    out = []
    for t in phys.source_history:
        pairs = k.where(F.col("_type") == t).select(F.col("_b").alias("_hb"), F.col("_source").alias("_hsrc")) \
            .distinct()
        ev = with_bucket(dfs[t].where(F.col("_source").isNotNull()), t, phys.key, buckets, "_own")
        h = ev.join(pairs, ev["_source"] == pairs["_hsrc"]).where(F.col("_own") != F.col("_hb"))
        h = h.drop("_hsrc", "_own").withColumnRenamed("_hb", "_b")
        out.append(h.withColumn("_hist", F.lit(True)))
    return out


def _union(dfs):
    out = dfs[0]
    for d in dfs[1:]:
        out = out.unionByName(d, allowMissingColumns=True)
    return out


def run_groups(df, plan: PhrasePlan, compiled: Compiled, crs: str, final_w: int, dtypes: dict, spark):
    if df is None:
        return spark.createDataFrame([], RAW_SCHEMA)
    fn = group_fn(plan, compiled.program, crs, final_w, dtypes)
    return df.groupBy("_b").applyInPandas(fn, RAW_SCHEMA)


def group_fn(plan: PhrasePlan, program, crs: str, final_w: int, dtypes: dict):
    """The function each group runs: canonical rows of whole partitions → the local
    runner's :func:`~spatec.runtime.batch.phrase_rows` → raw output rows."""

    def run(pdf: pd.DataFrame) -> pd.DataFrame:
        proj = Projector(crs)
        hist = pdf["_hist"].fillna(False).astype(bool).to_numpy() if "_hist" in pdf else None
        frames, history = {}, {}
        for t, sub in pdf.groupby("_type", sort=True):
            names = attribute_names(program, t)
            flags = hist[sub.index.to_numpy()] if hist is not None else None
            sub = sub[list(CANONICAL) + [_col(t, a) for a in names]]
            sub = sub.rename(columns={_col(t, a): a for a in names})
            sub = restore_dtypes(sub.reset_index(drop=True), dtypes.get(t, {}))
            if flags is not None and flags.any():
                history[t] = sub[flags].reset_index(drop=True)
                sub = sub[~flags].reset_index(drop=True)
            frames[t] = sub
        rows, _size = phrase_rows(plan, program, frames, proj, final_w, history=history)
        return raw_frame(rows)

    return run


def raw_frame(rows: list) -> pd.DataFrame:
    """Output rows as :data:`RAW_SCHEMA` (``events`` and the emit fields as JSON)."""
    dumps = json.dumps
    out = {c: [r[c] for r in rows] for c in ("phrase", "id", "lo", "hi", "hull")}
    out["events"] = [dumps(r["events"]) for r in rows]
    out["emit"] = [dumps({k: v for k, v in r.items() if k not in STD_COLUMNS}) for r in rows]
    return pd.DataFrame({c: pd.Series(v, dtype="int64" if c in ("lo", "hi") else object)
                         for c, v in out.items()})


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

"""The Spark executor: Spark reads, shuffles, schedules and writes; the driver plans and
commits, and holds neither the events nor the composites.

1. **Read and type** (:meth:`SparkExecutor.ingest`): one task per split
   (:mod:`spatec.exec.splits`; ``spark.range`` with a partition per split, dealt largest
   first), each reading its file's records with spatec's readers and typing them
   (:func:`~spatec.exec.tasks.typed_batches`); the typed rows are cached on the executors
   (``persist``). Then Spark's aggregates give the counts per input, the latest event time
   and the positions' 0.1° cells (the CRS), and the copies across splits are found by a
   window over ``(source, t)`` in input order, over the sources whose time spans in two
   splits meet. The rejects — the typing's and the copies — are written by Spark's text
   writer, in input order.
2. **Match** (:meth:`SparkExecutor.match`), grouping by grouping
   (:mod:`spatec.exec.groups`): the events are given to their items before the shuffle (the
   leaf pre-filter there: :func:`~spatec.exec.tasks.assign`), moved by Spark's shuffle to the
   partition of their item (:mod:`~spatec.runners.spark.placement`: the items largest first),
   and each partition's item matched (:func:`~spatec.exec.tasks.match_partition`), its
   composites rendered and cut into their output ranges. Phrases over phrases (SPEC §8) are
   stages of their own: a producer's matched DataFrame is cached, and the consumer's groups
   read its composites as events from it, with the producer's frontier as their watermark.
3. **Write**: a second shuffle brings each range's blobs to the partition of its part;
   each part is put in ``(lo, hi, id)`` order and written by Spark's text writer (JSON
   lines, GeoJSON features) or by the task with spatec's GeoParquet encoder, under the
   run's folder; :class:`~spatec.exec.commit.Outputs` commits them.

Errors a Spark job raises are one line naming the phrase and the step, with the Spark
log's path (:func:`spatec.runners.spark.errors.spark_step`).
"""
from __future__ import annotations

import math
import os
import re

import numpy as np
import pandas as pd
import pyarrow as pa

from spatec.exec.decide import IngestSummary, cells_of, duplicate_rejects, suspect_sources
from spatec.exec.executor import Executor, Ingested
from spatec.exec.groups import dealt, groupings, items_of
from spatec.exec.match import MatchJob, prefixed, wanted
from spatec.exec.parts import QUANTILES, range_bounds
from spatec.exec.tasks import (
    EVENT,
    EVENTS,
    LINES,
    LOW,
    MATCHED,
    REJECT,
    OutputJob,
    derived_events,
    group_column,
    match_partition,
    part_table,
    typed_batches,
    typed_schema,
)
from spatec.runners.spark.errors import spark_step
from spatec.runners.spark.placement import placed, placing
from spatec.runtime.derived import end_frontier, input_watermark


def spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, from_arrow_type(f.type), True) for f in schema])


class SparkExecutor(Executor):
    """Every step on Spark (see the module)."""

    where = "on Spark"

    def __init__(self, spark, log: str | None = None):
        self.spark = spark
        self.log = log
        self.cached: list = []

    @property
    def cores(self) -> int:
        return max(1, self.spark.sparkContext.defaultParallelism)

    # ------------------------------------------------------------------ read and type

    def ingest(self, ctx, splits, ui=None, outputs=None) -> Ingested:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        spark = self.spark
        program = ctx.program
        rows = sum(s.estimate for s in splits)
        self.groupings = groupings(ctx.plans, rows, self.cores, ctx.settings.bucket_rows, ctx.settings.time_window)
        gs = self.groupings
        typed: dict = {}
        for t in dict.fromkeys(s.type for s in splits):
            mine = [s for s in splits if s.type == t]
            order = sorted(range(len(mine)), key=lambda i: (-mine[i].estimate, i))
            chosen = [mine[i] for i in order]
            schema = typed_schema(program, t, gs)

            def read(batches, chosen=chosen):
                from spatec.runners.spark.errors import in_task

                for b in batches:
                    for i in b.column(0).to_pylist():
                        with in_task(f"reading {chosen[i].file}"):
                            yield from typed_batches(chosen[i], program, gs)

            df = spark.range(len(chosen), numPartitions=len(chosen)).mapInArrow(read, spark_schema(schema))
            typed[t] = df.persist(StorageLevel.MEMORY_AND_DISK)
            self.cached.append(typed[t])
        if ui:
            ui.stage(f"typing {len(splits)} split{'s' if len(splits) != 1 else ''} of input on Spark")
        with spark_step("reading and typing the inputs", self.log):
            counts = {}
            max_hi = None
            for t, df in typed.items():
                for r in df.groupBy("_split", "_kind").agg(F.count(F.lit(1)).alias("n"),
                                                            F.max("_hi").alias("hi")).collect():
                    counts[(int(r["_split"]), int(r["_kind"]))] = int(r["n"])
                    if r["_kind"] == EVENT and r["hi"] is not None:
                        max_hi = int(r["hi"]) if max_hi is None else max(max_hi, int(r["hi"]))
            cells: dict = {}
            for t, df in typed.items():
                ev = df.where(F.col("_kind") == EVENT)
                both = ev.select(F.col("_c0").alias("c")).union(ev.select(F.col("_c1").alias("c")))
                for r in both.where(F.col("c") >= 0).groupBy("c").count().collect():
                    cells[int(r["c"])] = cells.get(int(r["c"]), 0) + int(r["count"])
        with spark_step("finding copies of events across splits", self.log):
            events, dups = {}, {}
            for t, df in typed.items():
                ev = df.where(F.col("_kind") == EVENT)
                copies = self._copies(program, t, ev, [s for s in splits if s.type == t])
                if copies is not None:
                    dups[t] = copies.persist(StorageLevel.MEMORY_AND_DISK)
                    self.cached.append(dups[t])
                    ev = ev.join(F.broadcast(copies.select("_split", "_batch", "_row")),
                                 ["_split", "_batch", "_row"], "left_anti")
                events[t] = ev
            dup_counts: dict = {}
            for t, d in dups.items():
                for r in d.groupBy("_split").count().collect():
                    dup_counts[int(r["_split"])] = int(r["count"])
        summary = IngestSummary()
        by_input: dict = {}
        for s in splits:
            by_input.setdefault(s.input, []).append(s.index)
        for i, (t, path) in enumerate(ctx.inputs):
            idx = by_input.get(i, [])
            used = sum(counts.get((k, EVENT), 0) for k in idx) - sum(dup_counts.get(k, 0) for k in idx)
            rejected = sum(counts.get((k, REJECT), 0) for k in idx) + sum(dup_counts.get(k, 0) for k in idx)
            summary.rows.append((t, path, used + rejected, used, rejected))
        with spark_step("writing the rejects", self.log):
            rejected = self._rejects(ctx, typed, dups, splits, outputs, summary)
        return Ingested(summary, cells_of(cells), max_hi, rejected=rejected, events=events)

    def _copies(self, program, t: str, ev, splits: list):
        """The events of ``ev`` that are copies of an earlier split's (``_split``, ``_batch``,
        ``_row``, ``_id``, ``_file``); None when none can be."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if len(splits) < 2:
            return None
        decl = program.events[t]
        if decl.source is not None:
            spans = ev.groupBy("_split", "_source").agg(F.min("_t").alias("lo"), F.max("_t").alias("hi")).collect()
            frame = pd.DataFrame({"split": [r["_split"] for r in spans], "source": [r["_source"] for r in spans],
                                  "lo": [r["lo"] for r in spans], "hi": [r["hi"] for r in spans]})
            suspects = sorted(suspect_sources(frame))
            if not suspects:
                return None
            cand = ev.join(F.broadcast(self.spark.createDataFrame([(s,) for s in suspects], "_source string")),
                           "_source")
            by = ["_source", "_t"]
        else:
            cand, by = ev, ["_id"]
        w = Window.partitionBy(*by).orderBy("_split", "_batch", "_row")
        again = cand.select("_split", "_batch", "_row", "_id", "_file", F.row_number().over(w).alias("_n"))
        return again.where(F.col("_n") > 1).drop("_n")

    def _rejects(self, ctx, typed: dict, dups: dict, splits: list, outputs, summary) -> dict:
        """The rejects of every type, in input order: written as parts under ``outputs``
        (``{"parts": {type: [files]}}``), or brought back as a frame (no ``outputs``)."""
        from pyspark.sql import functions as F

        program = ctx.program
        by_index = {s.index: s for s in splits}
        frames, parts = [], {}
        total = {t: 0 for t in typed}
        for row in summary.rows:
            total[row[0]] = total.get(row[0], 0) + row[4]
        for t, df in typed.items():
            if not total.get(t):
                continue
            rej = df.where(F.col("_kind") == REJECT).select(
                F.lit(t).alias("type"), F.col("_file").alias("file"), F.col("_row").alias("row"), "reason", "record",
                "_split", "_batch")
            if t in dups:
                decl = program.events[t]

                def records(batches, decl=decl, t=t):
                    from spatec.exec.inprocess import records_at

                    for b in batches:
                        d = b.to_pandas()
                        for k, sub in d.groupby("_split", sort=True):
                            got = duplicate_rejects(t, sub, records_at(by_index[int(k)], decl, sub))
                            got["_split"] = sub["_split"].to_numpy()
                            got["_batch"] = sub["_batch"].to_numpy()
                            yield pa.RecordBatch.from_pandas(got, preserve_index=False, schema=REJECTS)

                rej = rej.unionByName(dups[t].repartition(1).mapInArrow(records, spark_schema(REJECTS)))
            ordered = rej.orderBy("_split", "_batch", "row")
            if outputs is None:
                frames.append(ordered.drop("_split", "_batch").toPandas())
                continue
            folder = outputs.rejects_folder() / f"{t}.parts"
            ordered.select("file", "row", "reason", "record").mapInArrow(_reject_lines, "value string") \
                .write.text(str(folder))
            parts[t] = part_files(folder)
        if outputs is None:
            from spatec.events.canonical import empty_rejects

            return {"frame": pd.concat(frames, ignore_index=True) if frames else empty_rejects()}
        return {"parts": parts}

    # ------------------------------------------------------------------ match

    def match(self, ctx, ingested, decisions, outputs, ui=None) -> dict:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        program = ctx.program
        events = ingested.events
        shown = [p.name for p in ctx.shown]
        plans = {p.name: p for p in ctx.plans}
        self._plan, self._program = plans, program
        settings = ctx.settings
        fmt = ctx.fmt if outputs is not None else "jsonl"
        # each shown phrase's output ranges, from its events' starts
        quant = self._quantiles(events, ctx.plans)
        first, bounds, n_out = {}, {}, 0
        for name in shown:
            plan = plans[name]
            n = sum(self._rows.get(t, 0) for t in plan.physical.types if t in self._rows)
            k = max(1, min(QUANTILES, math.ceil(n / (2 * settings.bucket_rows))))
            b = range_bounds(quant.get(tuple(sorted(plan.physical.types)), []), k)
            first[name], bounds[name] = n_out, b
            n_out += len(b) + 1
        out_job = OutputJob(fmt, ctx.tz, tuple(shown), bounds, first, placing(max(1, n_out)))
        watermarks: dict = {}
        frontiers: dict = {}
        consumed = {t for p in ctx.plans for t in p.physical.derived}
        matched: dict = {}          # grouping → its matched DataFrame
        engine = settings.engine if settings.prefilter else None
        if ui:
            ui.matching({name: sum(self._rows.get(t, 0) for t in plans[name].physical.types) for name in shown})
        for g in self.groupings:
            gplans = tuple(plans[n] for n in g.phrases)
            for p in gplans:
                watermarks[p.name] = input_watermark(p, decisions.final_watermark, frontiers)
            job = MatchJob(program, gplans, decisions.crs, dict(watermarks),
                           produce=frozenset(p.name for p in gplans if p.name in consumed))
            with spark_step(f"matching {', '.join(g.phrases)}", self.log):
                if g.derived:
                    df = self._match_derived(g, job, matched, out_job)
                else:
                    df = self._match_events(ctx, g, job, events, decisions, out_job, engine)
            if df is None:
                continue
            if job.produce:
                df = df.persist(StorageLevel.MEMORY_AND_DISK)
                self.cached.append(df)
                with spark_step(f"matching {', '.join(g.phrases)}", self.log):
                    lows = df.where(F.col("_kind") == LOW).agg(F.min("low").alias("low")).collect()
                low = lows[0]["low"] if lows else None
                for p in gplans:
                    if p.name in job.produce:
                        frontiers[p.name] = end_frontier(watermarks[p.name], [low])
            matched[g.index] = (df, job)
        return self._write(ctx, matched, out_job, outputs)

    def _quantiles(self, events: dict, plans: list) -> dict:
        """Per set of types a phrase reads, quantiles of its events' ``lo``; and each type's events."""
        from pyspark.sql import functions as F

        self._rows = {}
        with spark_step("cutting the outputs into ranges", self.log):
            for t, df in events.items():
                self._rows[t] = df.count()
            out = {}
            for plan in plans:
                types = tuple(sorted(t for t in plan.physical.types if t in events))
                if not types or types in out:
                    continue
                u = None
                for t in types:
                    s = events[t].select("_lo")
                    u = s if u is None else u.union(s)
                probs = [i / QUANTILES for i in range(1, QUANTILES)]
                out[types] = [int(v) for v in u.approxQuantile("_lo", probs, 0.002)] if u is not None else []
        return out

    def _columns(self, program, g, t: str) -> list:
        from pyspark.sql import functions as F

        plans = [p for p in self._plans_of(g)]
        attrs = wanted(program, plans, t)
        cols = [F.lit(t).alias("_type"), "_id", "_source", "_t", "_lo", "_hi", "_place", "_lon", "_lat", "_r", "_geom"]
        cols += [prefixed(t, a) for a in attrs]
        if g.key and t in g.keyed:
            cols.append(group_column(g.index))
        elif g.key:
            cols.append(F.lit(-2).cast("int").alias(group_column(g.index)))
        return cols

    def _plans_of(self, g):
        return [self._plan[n] for n in g.phrases]

    def _match_events(self, ctx, g, job: MatchJob, events: dict, decisions, out_job: OutputJob, engine):
        """A grouping's events given to its items in Spark (joins with the small table of its
        items, :func:`items_table`), moved by the shuffle to each item's partition, matched."""
        from pyspark.sql import functions as F

        program = ctx.program
        types = [t for t in g.types if t in events]
        if not types:
            return None
        gc = group_column(g.index)
        # the groups' sizes and spans, for the items
        stats: dict = {}
        for t in types:
            if g.key and t not in g.keyed:
                continue
            ev = events[t]
            col = F.col(gc) if g.key else F.lit(0)
            if g.key:
                ev = ev.where(col >= 0)
            for r in ev.groupBy(col.alias("g")).agg(F.count(F.lit(1)).alias("n"), F.min("_lo").alias("a"),
                                                    F.max("_lo").alias("b")).collect():
                n0, a0, b0 = stats.get(int(r["g"]), (0, None, None))
                stats[int(r["g"])] = (n0 + int(r["n"]), int(r["a"]) if a0 is None else min(a0, int(r["a"])),
                                      int(r["b"]) if b0 is None else max(b0, int(r["b"])))
        items = items_of(g, stats, self.cores, ctx.settings.bucket_rows)
        if not items:
            return None
        table = items_table(self.spark, g, items)
        cut = any(it.lo_range is not None for it in items)
        assigned = []
        for t in types:
            df = events[t].select(*self._columns(program, g, t))
            assigned.append(_to_items(df, g, t, table, cut))
        if g.history and g.key:
            h = self._history(g, events)
            if h is not None:
                assigned.append(_to_items(h.withColumnRenamed("_hg", gc), g, g.history[0], table, cut))
        union = assigned[0]
        for a in assigned[1:]:
            union = union.unionByName(a, allowMissingColumns=True)
        if engine:
            from spatec.exec.prefilter import prefilter_regions

            regions = {p.name: prefilter_regions(p, program, decisions.crs) for p in job.plans if p.physical.prefilter}
            job = MatchJob(job.program, job.plans, job.crs, job.watermarks, job.produce, regions,
                           engine if engine != "sedona-spark" else "sedonadb")
        moved = placed(union, len(items), "_to")
        its = tuple(items)

        def matched(batches):
            from spatec.runners.spark.errors import in_task

            table = _table(batches)
            with in_task(f"matching {', '.join(g.phrases)}"):
                yield from match_partition(job, out_job, its, table, program)

        return moved.mapInArrow(matched, spark_schema(MATCHED))

    def _history(self, g, events: dict):
        """For ``successive`` under a key that is not the source: each group's sources'
        events held by other groups, flagged ``_hist``, with the group ``_hg`` they go to."""
        from pyspark.sql import functions as F

        out = None
        for t in g.history:
            if t not in events:
                continue
            ev = events[t]
            gc = group_column(g.index)
            pairs = ev.where(F.col(gc) >= 0).select(F.col(gc).alias("_hg"), F.col("_source").alias("_hs")).distinct()
            h = ev.where(F.col("_source").isNotNull()).join(pairs, F.col("_source") == F.col("_hs"))
            h = h.where(F.col(gc) != F.col("_hg"))
            cols = self._columns(self._program, g, t)
            h = h.select(*[c for c in cols if not (isinstance(c, str) and c == gc)], F.col("_hg"),
                         F.lit(True).alias("_hist"))
            out = h if out is None else out.unionByName(h, allowMissingColumns=True)
        return out

    def _match_derived(self, g, job: MatchJob, matched: dict, out_job: OutputJob):
        """A phrase over phrases: its producers' composites (their matched DataFrames' events)
        given to its groups by key, each matched with the phrase's watermark."""
        from pyspark.sql import functions as F

        producers = [m for m in matched.values() if any(p.name in g.derived for p in m[1].plans)]
        if not producers:
            return None
        blobs = None
        for df, _ in producers:
            e = df.where(F.col("_kind") == EVENTS).select("value")
            blobs = e if blobs is None else blobs.union(e)
        plan = job.plans[0]
        key = tuple(plan.physical.key)
        buckets = g.buckets if key else 1

        def keyed(batches):
            from spatec.runtime.routing import bucket_of, key_of

            for b in batches:
                got = derived_events(b.column(0).to_pylist())
                for phrase, evs in got.items():
                    if phrase not in g.derived:
                        continue
                    if key:
                        ks = [key_of(e, key) for e in evs]
                        ok = [i for i, k in enumerate(ks) if k is not None]
                        bs = bucket_of([ks[i] for i in ok], buckets)
                        groups = {}
                        for i, bk in zip(ok, bs):
                            groups.setdefault(bk, []).append(evs[i])
                    else:
                        groups = {0: evs}
                    for bk, es in groups.items():
                        yield pa.RecordBatch.from_arrays(
                            [pa.array([int(bk)], pa.int32()),
                             pa.array([_pickled(phrase, es)], pa.binary())], names=["_g", "value"])

        by_group = blobs.mapInArrow(keyed, "_g int, value binary").persist()
        self.cached.append(by_group)
        groups = sorted(int(r["_g"]) for r in by_group.select("_g").distinct().collect())
        if not groups:
            return None
        from spatec.exec.groups import Item

        items = tuple(Item(g.index, k) for k in groups)
        places = placing(len(items))
        place_of = {k: places[i] for i, k in enumerate(groups)}
        index_of = {k: i for i, k in enumerate(groups)}

        def with_place(batches):
            for b in batches:
                ks = b.column(0).to_pylist()
                yield pa.RecordBatch.from_arrays([pa.array([place_of[k] for k in ks], pa.int32()),
                                                  pa.array([index_of[k] for k in ks], pa.int32()), b.column(1)],
                                                 names=["_to", "_item", "value"])

        moved = placed(by_group.mapInArrow(with_place, "_to int, _item int, value binary"), len(items), "_to")

        def matched_fn(batches):
            from spatec.runners.spark.errors import in_task

            table = _table(batches)
            if table is None:
                return
            its = table.column("_item").to_numpy(zero_copy_only=False)
            vals = table.column("value").to_pylist()
            for i in np.unique(its).tolist():
                derived = derived_events([v for v, k in zip(vals, its) if k == i])
                for t in derived:
                    derived[t].sort(key=lambda e: (e.hi, e.lo, e.id))
                with in_task(f"matching {', '.join(g.phrases)}"):
                    from spatec.exec.match import match_item
                    from spatec.exec.tasks import matched_rows

                    got = match_item(job, {}, {}, derived=derived)
                    yield from matched_rows(job, out_job, got)

        return moved.mapInArrow(matched_fn, spark_schema(MATCHED))

    # ------------------------------------------------------------------ write

    def _write(self, ctx, matched: dict, out_job: OutputJob, outputs) -> dict:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        shown = list(out_job.phrases)
        result: dict = {"counts": {}, "parts": {}, "frames": {}}
        lines = None
        for df, job in matched.values():
            if not any(p.name in shown for p in job.plans):
                continue
            x = df.where(F.col("_kind") == LINES).select("_to", "_phrase", "_range", "value")
            lines = x if lines is None else lines.union(x)
        n_out = len(out_job.places)
        if lines is None:
            if outputs is not None:
                result["parts"] = {name: [] for name in shown}
            return result
        moved = placed(lines, n_out, "_to")
        fmt = out_job.fmt

        if fmt == "parquet" and outputs is not None:
            folders = {name: str(outputs.folder(name)) for name in shown}

            def write_parts(batches):
                from spatec.exec.parts import EXTENSIONS  # noqa: F401

                table = _table(batches)
                if table is None:
                    return
                k = int(table.column("_phrase")[0].as_py())
                r = int(table.column("_range")[0].as_py())
                t = part_table(table.column("value").to_pylist())
                name = shown[k]
                os.makedirs(folders[name], exist_ok=True)
                path = os.path.join(folders[name], f"part-{r:05d}.parquet")
                write_parquet_part(t, path)
                yield pa.RecordBatch.from_arrays([pa.array([k], pa.int32()), pa.array([r], pa.int32()),
                                                  pa.array([path]), pa.array([t.num_rows], pa.int64())],
                                                 names=["k", "r", "path", "n"])

            with spark_step("writing the outputs", self.log):
                got = moved.mapInArrow(write_parts, "k int, r int, path string, n long").collect()
            for name in shown:
                mine = sorted((int(x["r"]), x["path"], int(x["n"])) for x in got if shown[int(x["k"])] == name)
                result["parts"][name] = [p for _, p, _ in mine]
                result["counts"][name] = sum(n for _, _, n in mine)
            return result

        def texts(batches):
            table = _table(batches)
            if table is None:
                return
            k = int(table.column("_phrase")[0].as_py())
            t = part_table(table.column("value").to_pylist())
            if t is None:
                return
            vals = t.column("value")
            for b in pa.table({"_phrase": pa.array(np.full(t.num_rows, k, np.int32)), "value": vals}).to_batches(
                    max_chunksize=8192):
                yield b

        rendered = moved.mapInArrow(texts, "_phrase int, value string")
        obs = Observation("spatec_counts")
        rendered = rendered.observe(obs, F.count(F.lit(1)).alias("_all"),
                                    *[F.sum(F.when(F.col("_phrase") == i, 1).otherwise(0)).alias(f"p{i}")
                                      for i in range(len(shown))])
        if outputs is None:
            with spark_step("collecting the composites", self.log):
                got = rendered.toArrow()
            result["texts"] = got
            counts = obs.get
        else:
            folder = outputs.root / "_texts"
            with spark_step("writing the outputs", self.log):
                rendered.select("value").write.text(str(folder))
            counts = obs.get
            files = part_files(folder, with_index=True)
            owner = {}
            for k, name in enumerate(shown):
                for r in range(len(out_job.bounds[name]) + 1):
                    owner[out_job.first[name] + r] = name
            for name in shown:
                result["parts"][name] = [f for i, f in files if owner.get(i) == name]
        for k, name in enumerate(shown):
            result["counts"][name] = int(counts.get(f"p{k}") or 0)
        return result

    def close(self) -> None:
        """Free what this replay cached on the executors."""
        for df in self.cached:
            try:
                df.unpersist()
            except Exception:  # noqa: BLE001 (a session already stopped has nothing to free)
                pass
        self.cached = []


REJECTS = pa.schema([pa.field("type", pa.string()), pa.field("file", pa.string()), pa.field("row", pa.int64()),
                     pa.field("reason", pa.string()), pa.field("record", pa.string()),
                     pa.field("_split", pa.int32()), pa.field("_batch", pa.int32())])


def _reject_lines(batches):
    """Rejects' lines of ``_rejects/<type>.jsonl``, in order (:func:`spatec.events.read.reject_line`)."""
    from spatec.events.read import reject_line

    for b in batches:
        d = b.to_pydict()
        yield pa.RecordBatch.from_arrays([pa.array([reject_line(f, r, why, rec) for f, r, why, rec in
                                                    zip(d["file"], d["row"], d["reason"], d["record"])], pa.string())],
                                         names=["value"])


def _arrow_of(t):
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(t)


def _table(batches) -> pa.Table | None:
    got = list(batches)
    if not got:
        return None
    t = pa.Table.from_batches(got)
    return t if t.num_rows else None


def _pickled(phrase: str, evs: list) -> bytes:
    import pickle

    return pickle.dumps((phrase, evs), protocol=pickle.HIGHEST_PROTOCOL)


_PART = re.compile(r"^part-(\d+)")


def part_files(folder, with_index: bool = False) -> list:
    """The part files Spark's writer left in ``folder``, in partition order."""
    from pathlib import Path

    folder = Path(folder)
    if not folder.is_dir():
        return []
    got = []
    for p in folder.iterdir():
        m = _PART.match(p.name)
        if m and not p.name.endswith(".crc"):
            got.append((int(m.group(1)), p))
    got.sort()
    return got if with_index else [p for _, p in got]


def write_parquet_part(table: pa.Table, path: str) -> None:
    """A part's blobs (:func:`~spatec.exec.tasks.part_table`) as a GeoParquet part: the rows'
    own columns (``_``-named in the blobs), their ``geo`` metadata."""
    import pyarrow.parquet as pq

    if table is None:
        return
    cols = [c for c in table.column_names if c.startswith("_")]
    t = table.select(cols).rename_columns([c[1:] for c in cols]).replace_schema_metadata(table.schema.metadata)
    pq.write_table(t, path)


def items_table(spark, g, items: list):
    """A grouping's items as a small DataFrame to join the events with: the group ``_ig`` (or
    the stretch of time ``_is`` of a keyless phrase), the span of starts ``[_ia, _ib]`` its
    events have (null: every event of the group), its number ``_item``, and ``_to``: the
    number that places it in its partition (the items largest first)."""
    order = dealt(items)
    slot = {i: p for p, i in enumerate(order)}
    places = placing(len(items))
    rows = []
    for i, it in enumerate(items):
        s = it.own[0] // g.window if g.window is not None else None
        a, b = it.lo_range if it.lo_range is not None else (None, None)
        rows.append((int(it.group), s, a, b, i, int(places[slot[i]])))
    return spark.createDataFrame(rows, "_ig int, _is long, _ia long, _ib long, _item int, _to int")


def _to_items(df, g, t: str, table, cut: bool):
    """The events of ``df`` (type ``t``) with the items that hold them (an event may be in
    several: a broadcast type's in all its group's, a stretch's events near its start in the
    one before too)."""
    from pyspark.sql import functions as F

    gc = group_column(g.index)
    items = F.broadcast(table)
    if g.window is not None:
        w, span = int(g.window), int(g.span)
        s = F.floor(F.col("_lo") / F.lit(w)).cast("long")
        halo = (F.col("_lo") - s * F.lit(w)) <= F.lit(span)
        df = df.withColumn("_s", F.explode(F.when(halo, F.array(s, s - 1)).otherwise(F.array(s))))
        a = df.join(items, F.col("_s") == F.col("_is")).drop("_s")
    elif not g.key or t not in g.keyed:
        a = df.crossJoin(items) if not g.key else df.join(items, (F.col(gc) == F.lit(-2)) | (F.col(gc) == F.col("_ig")))
    else:
        a = df.join(items, F.col(gc) == F.col("_ig"))
    if cut or g.window is not None:
        a = a.where(F.col("_ia").isNull() | ((F.col("_lo") >= F.col("_ia")) & (F.col("_lo") <= F.col("_ib"))))
    return a.drop("_ig", "_is", "_ia", "_ib")

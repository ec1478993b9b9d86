"""The Spark executor: Spark reads, shuffles, schedules and writes; the driver plans and
commits, and holds neither the events nor the composites.

Events travel as Arrow: a task hands on blobs (the Arrow IPC stream of many events,
:mod:`spatec.exec.tasks`), so Spark's shuffle moves a few large values per task rather than
a row per event — a row of the JVM per event costs more than matching it.

1. **Read and type** (:meth:`SparkExecutor.ingest`): one task per split
   (:mod:`spatec.exec.splits`; ``spark.range`` with a partition per split, the largest
   first), each reading its records with spatec's readers and typing them
   (:func:`~spatec.exec.tasks.typed_rows`): its events cut into group blobs by each
   keying's hash, its rejects, and small rows for the decisions. The typed rows are
   cached on the executors (``persist``: few rows, mostly blobs). One Spark aggregate
   over the small rows gives the counts per input, the latest event time, the positions'
   0.1° cells (the CRS), the groups' sizes and spans, the starts' histogram and the sources'
   time spans per split; the copies across splits are found by a window over
   ``(source, t)`` in input order, over the events of the sources whose spans in two splits
   meet. The rejects (the typing's and the copies) are written by Spark's text writer, in
   input order.
2. **Match** (:meth:`SparkExecutor.match`), grouping by grouping (:mod:`spatec.exec.groups`):
   each group blob joined with the items that hold its group (a small table,
   :func:`items_table`) — or, where groups are cut into stretches of time or copies are left
   out, cut into items' blobs (:func:`~spatec.exec.tasks.recut`) —, moved by Spark's shuffle
   to the partition of its item (:mod:`~spatec.runners.spark.placement`: the items largest
   first), and each item matched (:func:`~spatec.exec.tasks.match_rows`), its composites
   rendered and cut into their output ranges. Phrases over phrases (SPEC §8) are stages of
   their own: a producer's matched DataFrame is cached, and the consumer's groups read its
   composites as events from it, with the producer's frontier as their watermark.
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
import pyarrow.compute as pc

from spatec.exec.decide import IngestSummary, cells_of, duplicate_rejects, suspect_sources
from spatec.exec.executor import Executor, Ingested
from spatec.exec.groups import Item, dealt, groupings, items_of
from spatec.exec.match import MatchJob
from spatec.exec.parts import QUANTILES, TEXT_RUN, range_bounds, text_runs
from spatec.exec.tasks import (
    BLOB,
    CELL,
    EVENTS,
    GSTAT,
    HIST,
    HIST_BIN,
    ITEMS,
    LINES,
    LOW,
    MATCHED,
    REJECTS,
    SPAN,
    SUMMARY,
    TYPED,
    Files,
    OutputJob,
    Recut,
    Store,
    derived_events,
    keyings,
    match_rows,
    part_table,
    recut,
    blob_schema,
    ipc,
    plain,
    typed_rows,
    unipc,
)
from spatec.runners.spark.errors import spark_step
from spatec.runners.spark.frames import local_frame
from spatec.runners.spark.placement import few_groups, placed, placing
from spatec.runners.spark.session import on_this_machine
from spatec.runtime.derived import end_frontier, input_watermark
from spatec.storage.scratch import chosen_memory, twin_folder


#: where each item's rows go: its group, its number, the value that sends it to its partition
PLACES = pa.schema([("_ig", pa.int32()), ("_item", pa.int32()), ("_to", pa.int32())])


def spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, from_arrow_type(f.type), True) for f in schema])


class SparkExecutor(Executor):
    """Every step on Spark (see the module)."""

    where = "on Spark"
    spark_frames = True

    def __init__(self, spark, log: str | None = None):
        self.spark = spark
        self.log = log
        self.cached: list = []
        self.store = Store()
        self.folder: str | None = None
        #: the files exchange's twin in memory (:mod:`spatec.storage.scratch`), or None
        self.memory_folder: str | None = None
        #: the Sedona joins the replay's plans hold (``BroadcastIndexJoin``, ``DistanceJoin`` ...)
        self.joins: list = []
        #: phrases whose composites two tasks may both find (a part writes each once)
        self.repeats: set = set()

    @property
    def cores(self) -> int:
        return max(1, self.spark.sparkContext.defaultParallelism)

    def _keep(self, df):
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.cached.append(df)
        return df

    # ------------------------------------------------------------------ read and type

    def ingest(self, ctx, splits, ui=None, outputs=None) -> Ingested:
        from pyspark.sql import functions as F

        spark = self.spark
        program = ctx.program
        plans = {p.name: p for p in ctx.plans}
        if ctx.exchange == "files":
            import tempfile

            base = ctx.settings.exchange_dir
            if base:
                os.makedirs(base, exist_ok=True)
            self.folder = tempfile.mkdtemp(prefix="spatec-exchange-", dir=base)
            memory = chosen_memory(ctx.settings.exchange_memory, on_this_machine(spark))
            self.memory_folder = twin_folder(memory) if memory else None
            self.store = Files(self.folder, self.memory_folder)
        store = self.store
        rows = sum(s.estimate for s in splits)
        self.groupings = groupings(ctx.plans, rows, self.cores, ctx.settings.bucket_rows, ctx.settings.time_window)
        self.keyings, self.keying_of = keyings(self.groupings, program, plans)
        keys = self.keyings
        per_type: dict = {}
        for s in splits:
            per_type[s.type] = per_type.get(s.type, 0) + 1
        self.tracked = {t for t, n in per_type.items() if n > 1}
        files = [s for s in splits if s.fmt != "spark"]
        order = sorted(range(len(files)), key=lambda i: (-files[i].estimate, i))
        chosen = [files[i] for i in order]
        tracked = self.tracked
        log = ctx.settings.task_log

        def read(batches):
            from spatec.exec.tasklog import TaskClock
            from spatec.runners.spark.errors import in_task

            for b in batches:
                for i in b.column(0).to_pylist():
                    s = chosen[i]
                    clock = TaskClock(log, "ingest", split=s.index, file=s.file)
                    with in_task(f"reading {s.file}"):
                        got = typed_rows(s, program, keys, s.type in tracked, store)
                    clock.done(batches=len(got))
                    yield from got

        if ui:
            ui.stage(f"typing {len(splits)} split{'s' if len(splits) != 1 else ''} of input on Spark")
        n = max(1, len(chosen))
        typed = spark.range(len(chosen), numPartitions=n).mapInArrow(read, spark_schema(TYPED)) if chosen else None
        for df, parts in spark_frame_inputs(splits):
            mine = df.mapInArrow(frame_reader(parts, program, keys, tracked, store, log), spark_schema(TYPED))
            typed = mine if typed is None else typed.union(mine)
        self.typed = typed = self._keep(typed)
        with spark_step("reading and typing the inputs", self.log):
            part = F.when(F.col("kind").isin(SUMMARY, SPAN), F.col("split")).otherwise(F.lit(-1))
            at = F.when(F.col("kind").isin(CELL, HIST), F.col("a"))
            keys = ["kind", "sp", "keying", "g", "at", "source", "type"]
            small = typed.where(F.col("kind") < BLOB).select(
                "kind", part.alias("sp"), "keying", "g", at.alias("at"), "source", "type", "n", "m", "a", "b")
            got = few_groups(small, keys, self.cores).agg(
                F.sum("n").alias("n"), F.sum("m").alias("m"), F.min("a").alias("lo"), F.max("b").alias("hi"),
                F.sum("a").alias("sa")).collect()
        counts: dict = {}
        cells: dict = {}
        self.stats: dict = {}       # keying → group → (events, least lo, greatest lo)
        self.hist: dict = {}        # type → {bin: events}
        spans: dict = {}            # type → rows of (split, source, lo, hi)
        max_hi = None
        for r in got:
            kind = r["kind"]
            if kind == SUMMARY:
                counts[int(r["sp"])] = (int(r["sa"]), int(r["n"]), int(r["m"]))
                if r["hi"] is not None:
                    max_hi = int(r["hi"]) if max_hi is None else max(max_hi, int(r["hi"]))
            elif kind == CELL:
                cells[int(r["at"])] = cells.get(int(r["at"]), 0) + int(r["n"])
            elif kind == HIST:
                h = self.hist.setdefault(r["type"], {})
                h[int(r["at"])] = h.get(int(r["at"]), 0) + int(r["n"])
            elif kind == GSTAT:
                self.stats.setdefault(int(r["keying"]), {})[int(r["g"])] = (int(r["n"]), int(r["lo"]), int(r["hi"]))
            elif kind == SPAN:
                spans.setdefault(r["type"], []).append((int(r["sp"]), r["source"], int(r["lo"]), int(r["hi"])))
        with spark_step("finding copies of events across splits", self.log):
            self.copies = self._copies(program, spans)
            dup_counts: dict = {}
            if self.copies is not None:
                for r in few_groups(self.copies, ["_split"], self.cores).count().collect():
                    dup_counts[int(r["_split"])] = int(r["count"])
        self.events_of = {t: sum(counts.get(s.index, (0, 0, 0))[1] for s in splits if s.type == t)
                          for t in per_type}
        summary = IngestSummary()
        by_input: dict = {}
        for s in splits:
            by_input.setdefault(s.input, []).append(s.index)
        for i, (t, path) in enumerate(ctx.inputs):
            idx = by_input.get(i, [])
            read = sum(counts.get(k, (0, 0, 0))[0] for k in idx)
            dups = sum(dup_counts.get(k, 0) for k in idx)
            used = sum(counts.get(k, (0, 0, 0))[1] for k in idx) - dups
            summary.rows.append((t, path, read, used, read - used))
        with spark_step("writing the rejects", self.log):
            rejected = self._rejects(ctx, splits, outputs, summary)
        return Ingested(summary, cells_of(cells), max_hi, rejected=rejected, events=None)

    def _copies(self, program, spans: dict):
        """The events that are copies of an earlier split's (``_split``, ``_batch``, ``_row``,
        ``_id``, ``_file``, ``type``), cached; None when none can be."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        found = []
        for t in sorted(self.tracked):
            decl = program.events[t]
            if decl.source is not None:
                rows = spans.get(t, [])
                frame = pd.DataFrame({"split": [r[0] for r in rows], "source": [r[1] for r in rows],
                                      "lo": [r[2] for r in rows], "hi": [r[3] for r in rows]})
                suspects = frozenset(suspect_sources(frame)) if len(frame) else frozenset()
                if not suspects:
                    continue
            else:
                suspects = None
            k = next(k for k in self.keyings if k.reads(t))
            blobs = self.typed.where((F.col("kind") == BLOB) & (F.col("type") == t) & (F.col("keying") == k.index))
            if k.key and t in k.keyed:
                blobs = blobs.where(F.col("g") >= 0)

            def keys(batches, suspects=suspects):
                for b in batches:
                    for v in b.column("value").to_pylist():
                        table = plain(unipc(v))
                        if suspects is not None:
                            src = table.column("_source").to_pylist()
                            keep = pa.array([s in suspects for s in src])
                            table = table.filter(keep)
                        if table.num_rows:
                            yield pa.RecordBatch.from_arrays(
                                [table.column(c).combine_chunks() for c in
                                 ("_source", "_t", "_id", "_split", "_batch", "_row", "_file")],
                                names=["_source", "_t", "_id", "_split", "_batch", "_row", "_file"])

            ev = blobs.select("value").mapInArrow(
                keys, "_source string, _t long, _id string, _split int, _batch int, _row long, _file string")
            by = ["_source", "_t"] if suspects is not None else ["_id"]
            w = Window.partitionBy(*by).orderBy("_split", "_batch", "_row")
            again = ev.withColumn("_n", F.row_number().over(w)).where(F.col("_n") > 1).drop("_n")
            found.append(again.withColumn("type", F.lit(t)))
        if not found:
            return None
        out = found[0]
        for f in found[1:]:
            out = out.unionByName(f)
        return self._keep(out)

    def _rejects(self, ctx, splits: list, outputs, summary) -> dict:
        """The rejects of every type, in input order: written as parts under ``outputs``
        (``{"parts": {type: [files]}}``), or brought back as a frame (no ``outputs``)."""
        from pyspark.sql import functions as F

        program = ctx.program
        store = self.store
        # (a Spark DataFrame's partitions are not read again: a copy across them has no record)
        by_index = {s.index: s for s in splits if s.fmt != "spark"}
        frames, parts = [], {}
        total: dict = {}
        for row in summary.rows:
            total[row[0]] = total.get(row[0], 0) + row[4]
        for t in sorted(total):
            if not total[t]:
                continue
            mine = [s for s in splits if s.type == t]
            slot = {s.index: k for k, s in enumerate(mine)}
            places = placing(len(mine))
            rej = self.typed.where((F.col("kind") == REJECTS) & (F.col("type") == t)).select("split", "value")
            if self.copies is not None:
                decl = program.events[t]

                def records(batches, decl=decl, t=t):
                    from spatec.events.canonical import REJECT_COLUMNS
                    from spatec.exec.inprocess import records_at
                    from spatec.exec.tasks import ipc

                    for b in batches:
                        d = b.to_pandas()
                        for k, sub in d.groupby("_split", sort=True):
                            split = by_index.get(int(k))
                            got = duplicate_rejects(t, sub, [None] * len(sub) if split is None
                                                    else records_at(split, decl, sub))
                            got = got[list(REJECT_COLUMNS)].assign(_batch=sub["_batch"].to_numpy().astype(np.int32))
                            yield pa.RecordBatch.from_arrays(
                                [pa.array([int(k)], pa.int32()), pa.array([ipc(pa.Table.from_pandas(
                                    got, preserve_index=False), store)], pa.binary())], names=["split", "value"])

                dups = self.copies.where(F.col("type") == t).repartition(self.cores, "_split")
                rej = rej.unionByName(dups.mapInArrow(records, "split int, value binary"))
            place = {int(k): int(places[slot[k]]) for k in slot}

            def to(batches, place=place):
                for b in batches:
                    sp = b.column("split").to_pylist()
                    yield pa.RecordBatch.from_arrays([pa.array([place[s] for s in sp], pa.int32()), b.column(1)],
                                                     names=["_to", "value"])

            moved = placed(rej.mapInArrow(to, "_to int, value binary"), len(mine), "_to")
            if outputs is None:
                tables = [unipc(r["value"]) for r in moved.collect()]
                frames.append(_ordered_rejects(tables))
                continue
            folder = outputs.rejects_folder() / f"{t}.parts"
            moved.mapInArrow(_reject_lines, "value string").write.text(str(folder))
            parts[t] = part_files(folder)
        if outputs is None:
            from spatec.events.canonical import empty_rejects

            return {"frame": pd.concat(frames, ignore_index=True) if frames else empty_rejects()}
        return {"parts": parts}

    # ------------------------------------------------------------------ match

    def match(self, ctx, ingested, decisions, outputs, ui=None) -> dict:
        from pyspark.sql import functions as F

        program = ctx.program
        shown = [p.name for p in ctx.shown]
        plans = {p.name: p for p in ctx.plans}
        self._plan = plans
        settings = ctx.settings
        fmt = ctx.fmt if outputs is not None else "jsonl"
        first, bounds, n_out = {}, {}, 0
        for name in shown:
            plan = plans[name]
            n = sum(self.events_of.get(t, 0) for t in plan.physical.types)
            k = max(1, min(QUANTILES, math.ceil(n / (2 * settings.bucket_rows))))
            b = range_bounds(quantiles(self.hist, plan.physical.types), k)
            first[name], bounds[name] = n_out, b
            n_out += len(b) + 1
        out_job = OutputJob(fmt, ctx.tz, tuple(shown), bounds, first, placing(max(1, n_out)), self.store)
        watermarks: dict = {}
        frontiers: dict = {}
        consumed = {t for p in ctx.plans for t in p.physical.derived}
        matched: dict = {}
        engine = settings.engine if settings.prefilter else None
        if ui:
            ui.matching({name: sum(self.events_of.get(t, 0) for t in plans[name].physical.types) for name in shown})
        for g in self.groupings:
            gplans = tuple(plans[n] for n in g.phrases)
            for p in gplans:
                watermarks[p.name] = input_watermark(p, decisions.final_watermark, frontiers)
            regions = {}
            from spatec.exec.prefilter import prefilter_regions, task_engine

            if engine:
                regions = {p.name: prefilter_regions(p, program, decisions.crs) for p in gplans if p.physical.prefilter}
            job = MatchJob(program, gplans, decisions.crs, dict(watermarks),
                           produce=frozenset(p.name for p in gplans if p.name in consumed), regions=regions,
                           engine=engine, log=ctx.settings.task_log)
            with spark_step(f"matching {', '.join(g.phrases)}", self.log):
                df = self._match_derived(g, job, matched, out_job) if g.derived \
                    else self._match_events(ctx, g, job, out_job)
                if df is None:
                    continue
                if job.produce:
                    df = self._keep(df)
                    lows = df.where(F.col("_kind") == LOW).agg(F.min("low").alias("low")).collect()
                    low = lows[0]["low"] if lows else None
                    for p in gplans:
                        if p.name in job.produce:
                            frontiers[p.name] = end_frontier(watermarks[p.name], [low])
            matched[g.index] = (df, job)
        return self._write(matched, out_job, outputs)

    def _match_events(self, ctx, g, job: MatchJob, out_job: OutputJob):
        """A grouping's group blobs given to its items, moved by Spark's shuffle to each item's
        partition, matched there; where Sedona's joins pay (:func:`sedona_pays`), the events as
        rows through them instead (:meth:`_match_rows`)."""
        from pyspark.sql import functions as F

        program = ctx.program
        k = self.keyings[self.keying_of[g.index]]
        why = sedona_pays(g, job, ctx.settings.engine if ctx.settings.prefilter else None)
        if why is not None and self.copies is None:
            got = self._match_rows(ctx, g, k, job, out_job, why)
            if got is not None:
                return got
        stats = {grp: v for grp, v in self.stats.get(k.index, {}).items()}
        if not g.key:
            stats = _merged(stats)
        items = items_of(g, stats, self.cores, ctx.settings.bucket_rows)
        if not items:
            return None
        blobs = self.typed.where((F.col("kind") == BLOB) & (F.col("keying") == k.index)
                                 & F.col("type").isin(list(g.types)))
        order = dealt(items)
        slot = {i: p for p, i in enumerate(order)}
        places = placing(len(items))
        place = tuple(int(places[slot[i]]) for i in range(len(items)))
        simple = (all(it.lo_range is None for it in items) and self.copies is None and not g.history)
        if simple:
            table = local_frame(self.spark, [(int(it.group), i, place[i]) for i, it in enumerate(items)], PLACES)
            moved = blobs.join(F.broadcast(table), (F.col("g") == F.col("_ig")) | (F.col("g") == F.lit(-2))) \
                .select("_to", "_item", "type", F.lit(False).alias("hist"), "value")
        else:
            copies = frozenset()
            if self.copies is not None:
                copies = frozenset((int(r["_split"]), int(r["_batch"]), int(r["_row"]))
                                   for r in self.copies.select("_split", "_batch", "_row").collect())
            rc = Recut(g, tuple(items), place, copies, self.store)

            def cut(batches):
                for b in batches:
                    d = b.to_pydict()
                    out = []
                    for t, grp, v in zip(d["type"], d["g"], d["value"]):
                        out += recut(rc, t, int(grp), v)
                    if out:
                        cols = list(zip(*out))
                        yield pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(cols, ITEMS)],
                                                         schema=ITEMS)

            moved = blobs.select("type", "g", "value").mapInArrow(cut, spark_schema(ITEMS))
            if g.history:
                moved = moved.unionByName(self._history(g, k, rc))
        moved = placed(moved, len(items), "_to")
        its = tuple(items)

        def matched(batches):
            from spatec.runners.spark.errors import in_task

            table = _table(batches)
            with in_task(f"matching {', '.join(g.phrases)}"):
                yield from match_rows(job, out_job, its, table, program)

        return moved.mapInArrow(matched, spark_schema(MATCHED))

    def _match_rows(self, ctx, g, k, job: MatchJob, out_job: OutputJob, why: str):
        """A grouping's events as Spark rows, through Sedona's joins: the leaf pre-filter as a
        broadcast index join of the events against the places (``why="places"``), and a keyless
        phrase of two nearby events cut by a distance join into small groups of nearby events
        (``why="proximity"``: :func:`~spatec.runners.spark.sedona.proximity_groups`). The groups
        are matched apart; a composite two groups find is written once (:func:`part_table`).
        None when the events do not fit (a place that is not a point: one group, as without)."""
        from pyspark.sql import functions as F

        from spatec.runners.spark.sedona import proximity_groups, sedona_prefilter

        program = ctx.program
        types = [t for t in g.types if t in dict(k.columns)]
        rows = None
        for t in types:
            schema = blob_schema(program, t, dict(k.columns)[t], t in self.tracked)
            blobs = self.typed.where((F.col("kind") == BLOB) & (F.col("keying") == k.index) & (F.col("type") == t))

            def explode(batches):
                for b in batches:
                    for g0, v in zip(b.column("g").to_pylist(), b.column("value").to_pylist()):
                        for rb in unipc(v).cast(schema).to_batches():
                            yield rb.append_column("_b", pa.array(np.full(rb.num_rows, g0, np.int32)))

            with_b = schema.append(pa.field("_b", pa.int32()))
            r = blobs.select("g", "value").mapInArrow(explode, spark_schema(with_b)).withColumn("_type", F.lit(t))
            if why == "places":
                regions = job.regions.get(job.plans[0].name, {}).get(t)
                if regions:
                    r = sedona_prefilter(r, regions, job.crs)
            rows = r if rows is None else rows.unionByName(r, allowMissingColumns=True)
        if rows is None:
            return None
        buckets = max(g.buckets, self.cores * 6)
        if why == "proximity":
            grouped = proximity_groups(job.plans[0], rows.drop("_b"), job.crs, buckets,
                                       job.plans[0].physical.proximity)
            if grouped is None:
                return None
            self.repeats.update(g.phrases)
        else:
            grouped = rows
        grouped = grouped.repartition(buckets, "_b")
        if why == "places":        # (pre-filtered by the join already)
            job = MatchJob(job.program, job.plans, job.crs, job.watermarks, job.produce, log=job.log)
        from spatec.runners.spark.sedona import executed_plan

        self.joins += [j for j in SPATIAL_JOINS if j in executed_plan(grouped)]
        plain = job

        def matched(batches):
            from spatec.runners.spark.errors import in_task

            table = _table(batches)
            if table is None:
                return
            bs = table.column("_b").to_numpy(zero_copy_only=False)
            items = tuple(Item(g.index, int(b)) for b in np.unique(bs))
            blobs = []
            for i, it in enumerate(items):
                sub = table.filter(pa.array(bs == it.group))
                for t in types:
                    mine = sub.filter(pc.equal(sub.column("_type"), t))
                    if mine.num_rows:
                        blobs.append((0, i, t, False, ipc(mine.drop_columns([c for c in ("_type", "_b")
                                                                             if c in mine.column_names]))))
            if not blobs:
                return
            cols = list(zip(*blobs))
            t = pa.Table.from_arrays([pa.array(list(c), f.type) for c, f in zip(cols, ITEMS)], schema=ITEMS)
            with in_task(f"matching {', '.join(g.phrases)}"):
                yield from match_rows(plain, out_job, items, t, program)

        return grouped.mapInArrow(matched, spark_schema(MATCHED))

    def _history(self, g, k, rc: Recut):
        """For ``successive`` under a key that is not the source: for each group, the events of
        its sources that other groups hold, as history blobs of its items."""
        from pyspark.sql import functions as F

        blobs = self.typed.where((F.col("kind") == BLOB) & (F.col("keying") == k.index)
                                 & F.col("type").isin(list(g.history)) & (F.col("g") >= 0))

        def sources(batches):
            for b in batches:
                d = b.to_pydict()
                for grp, v in zip(d["g"], d["value"]):
                    src = pa.compute.unique(unipc(v).column("_source").drop_null()).to_pylist()
                    if src:
                        yield pa.RecordBatch.from_arrays([pa.array([int(grp)] * len(src), pa.int32()),
                                                          pa.array(src, pa.string())], names=["hg", "source"])

        pairs = few_groups(blobs.select("g", "value").mapInArrow(sources, "hg int, source string"), ["hg", "source"],
                           self.cores).count().collect()
        wants: dict = {}
        for r in pairs:
            wants.setdefault(r["source"], set()).add(int(r["hg"]))

        def hist(batches):
            for b in batches:
                d = b.to_pydict()
                out = []
                for t, grp, v in zip(d["type"], d["g"], d["value"]):
                    table = unipc(v)
                    src = table.column("_source").to_pylist()
                    targets: dict = {}
                    for j, s in enumerate(src):
                        for hg in wants.get(s, ()):
                            if hg != grp:
                                targets.setdefault(hg, []).append(j)
                    for hg, rows in targets.items():
                        from spatec.exec.tasks import ipc

                        out += recut(rc, t, hg, ipc(table.take(pa.array(rows))), hist=True)     # (inline: cut at once)
                if out:
                    cols = list(zip(*out))
                    yield pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(cols, ITEMS)],
                                                     schema=ITEMS)

        return blobs.select("type", "g", "value").mapInArrow(hist, spark_schema(ITEMS))

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
        wanted = set(g.derived)
        store = self.store

        def keyed(batches):
            from spatec.exec.tasks import pickled_events
            from spatec.runtime.routing import bucket_of, key_of

            for b in batches:
                got = derived_events(b.column(0).to_pylist())
                for phrase, evs in got.items():
                    if phrase not in wanted:
                        continue
                    if key:
                        ks = [key_of(e, key) for e in evs]
                        ok = [i for i, kk in enumerate(ks) if kk is not None]
                        bs = bucket_of([ks[i] for i in ok], buckets)
                        groups: dict = {}
                        for i, bk in zip(ok, bs):
                            groups.setdefault(bk, []).append(evs[i])
                    else:
                        groups = {0: evs}
                    for bk, es in groups.items():
                        yield pa.RecordBatch.from_arrays([pa.array([int(bk)], pa.int32()),
                                                          pa.array([store.put(pickled_events(phrase, es))],
                                                                   pa.binary())], names=["_g", "value"])

        by_group = self._keep(blobs.mapInArrow(keyed, "_g int, value binary"))
        groups = sorted(int(r["_g"]) for r in few_groups(by_group, ["_g"], self.cores).count().collect())
        if not groups:
            return None
        items = tuple(Item(g.index, k) for k in groups)
        places = placing(len(items))
        table = local_frame(self.spark, [(k, i, int(places[i])) for i, k in enumerate(groups)], PLACES)
        moved = placed(by_group.join(F.broadcast(table), F.col("_g") == F.col("_ig")).select("_to", "_item", "value"),
                       len(items), "_to")

        def matched_fn(batches):
            from spatec.exec.match import match_item
            from spatec.exec.tasks import matched_rows
            from spatec.runners.spark.errors import in_task

            table = _table(batches)
            if table is None:
                return
            its = table.column("_item").to_numpy(zero_copy_only=False)
            vals = table.column("value").to_pylist()
            for i in np.unique(its).tolist():
                derived = derived_events([v for v, kk in zip(vals, its) if kk == i])
                for t in derived:
                    derived[t].sort(key=lambda e: (e.hi, e.lo, e.id))
                with in_task(f"matching {', '.join(g.phrases)}"):
                    got = match_item(job, {}, {}, derived=derived)
                    yield from matched_rows(job, out_job, got)

        return moved.mapInArrow(matched_fn, spark_schema(MATCHED))

    # ------------------------------------------------------------------ write

    def _write(self, matched: dict, out_job: OutputJob, outputs) -> dict:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        shown = list(out_job.phrases)
        result: dict = {"counts": {name: 0 for name in shown}, "parts": {name: [] for name in shown}, "frames": {}}
        lines = None
        for df, job in matched.values():
            if not any(p.name in shown for p in job.plans):
                continue
            x = df.where(F.col("_kind") == LINES).select("_to", "_phrase", "_range", "n", "size", "value")
            lines = x if lines is None else lines.union(x)
        if lines is None:
            if outputs is None:
                from spatec.runtime.rows import rows_frame

                result["frames"] = {name: rows_frame(self._plan[name], []) for name in shown}
            return result
        fmt = out_job.fmt

        if outputs is not None and (fmt == "parquet" or self.store.kind == "files"):
            # the tasks write their parts (GeoParquet: spatec's encoder; with the files
            # exchange, every part: its texts never cross the JVM), into the merged file
            # where they can (:mod:`spatec.exec.inplace`)
            folders = {name: str(outputs.folder(name)) for name in shown}
            ext = {"parquet": "parquet", "jsonl": "jsonl", "geojson": "geojson"}[fmt]
            lines, layouts = self._layouts(lines, shown, outputs, fmt)
            moved = placed(lines.select("_to", "_phrase", "_range", "value"), len(out_job.places), "_to")

            def write_parts(batches):
                table = _table(batches)
                if table is None:
                    return
                k = int(table.column("_phrase")[0].as_py())
                r = int(table.column("_range")[0].as_py())
                t = part_table(table.column("value").to_pylist())
                name = shown[k]
                if k in layouts:
                    from spatec.exec.inplace import write_at

                    path = layouts[k].path
                    write_at(t, layouts[k], r, fmt)
                else:
                    os.makedirs(folders[name], exist_ok=True)
                    path = os.path.join(folders[name], f"part-{r:05d}.{ext}")
                    if fmt == "parquet":
                        write_parquet_part(t, path)
                    else:
                        write_text_part(t, path, fmt)
                yield pa.RecordBatch.from_arrays([pa.array([k], pa.int32()), pa.array([r], pa.int32()),
                                                  pa.array([path]), pa.array([t.num_rows], pa.int64())],
                                                 names=["k", "r", "path", "n"])

            with spark_step("writing the outputs", self.log):
                got = moved.mapInArrow(write_parts, "k int, r int, path string, n long").collect()
            for k, name in enumerate(shown):
                mine = sorted((int(x["r"]), x["path"], int(x["n"])) for x in got if shown[int(x["k"])] == name)
                result["parts"][name] = [layouts[k].path] if k in layouts else [p for _, p, _ in mine]
                result["counts"][name] = sum(n for _, _, n in mine)
                if not mine and fmt == "parquet":       # (no composite: a file of no rows, its schema)
                    from spatec.exec.inprocess import write_part

                    result["parts"][name] = [write_part(self._plan[name], [], fmt, out_job.tz,
                                                        outputs.folder(name), 0)]
            return result

        def texts(batches):
            table = _table(batches)
            if table is None:
                return
            k = int(table.column("_phrase")[0].as_py())
            t = part_table(table.column("value").to_pylist())
            if t is None:
                return
            for chunk in text_chunks(t.column("value"), fmt):
                yield pa.RecordBatch.from_arrays([pa.array([k], pa.int32()), pa.array([chunk[1]], pa.int64()),
                                                  chunk[0]], names=["_phrase", "n", "value"])

        moved = placed(lines.select("_to", "_phrase", "_range", "value"), len(out_job.places), "_to")
        rendered = moved.mapInArrow(texts, "_phrase int, n long, value string")
        obs = Observation("spatec_counts")
        rendered = rendered.observe(obs, F.sum("n").alias("_all"),
                                    *[F.sum(F.when(F.col("_phrase") == i, F.col("n")).otherwise(0)).alias(f"p{i}")
                                      for i in range(len(shown))])
        if outputs is None:
            from spatec.exec.parts import frame_of_lines

            with spark_step("collecting the composites", self.log):
                got = rendered.toArrow()
            ks = got.column("_phrase").to_numpy(zero_copy_only=False)
            vals = got.column("value")
            for k, name in enumerate(shown):
                mine = [line for v in vals.filter(pa.array(ks == k)).to_pylist() for line in v.split("\n")]
                result["frames"][name] = frame_of_lines(self._plan[name], mine)
        else:
            folder = outputs.root / "_texts"
            with spark_step("writing the outputs", self.log):
                rendered.select("value").write.text(str(folder))
            owner = {}
            for name in shown:
                for r in range(len(out_job.bounds[name]) + 1):
                    owner[out_job.first[name] + r] = name
            for i, f in part_files(folder, with_index=True):
                name = owner.get(i)
                if name is not None:
                    result["parts"][name].append(f)
        counts = obs.get
        for k, name in enumerate(shown):
            result["counts"][name] = int(counts.get(f"p{k}") or 0)
        return result

    def _layouts(self, lines, shown: list, outputs, fmt: str):
        """``(lines, layouts)``: phrase number → the :class:`~spatec.exec.inplace.Layout` of its
        merged file, made (:func:`~spatec.exec.inplace.prepare`), for the phrases whose parts
        the write tasks write into it; ``lines`` then the match stages' rows kept (they are
        read twice: their sizes by range, then the parts)."""
        from pyspark.sql import functions as F

        from spatec.exec.inplace import FORMATS, layout, prepare

        if not (outputs.merged and fmt in FORMATS and self.store.kind == "files"):
            return lines, {}
        exact = [k for k, name in enumerate(shown) if name not in self.repeats]
        if not exact:
            return lines, {}
        lines = self._keep(lines)
        with spark_step("sizing the outputs", self.log):
            got = few_groups(lines.where(F.col("_phrase").isin(exact)), ["_phrase", "_range"], self.cores) \
                .agg(F.sum("size").alias("b"), F.sum("n").alias("n")).collect()
        ranges: dict = {k: {} for k in exact}
        for x in got:
            ranges[int(x["_phrase"])][int(x["_range"])] = (int(x["b"]), int(x["n"]))
        layouts = {}
        try:
            for k in exact:
                layouts[k] = layout(str(outputs.staged(shown[k])), ranges[k], fmt)
                prepare(layouts[k], fmt)
        except OSError as e:
            from spatec.exec.commit import write_error

            raise write_error(e, outputs.out) from None
        return lines, layouts

    def close(self) -> None:
        """Free what this replay cached on the executors, and the files exchange's folder."""
        for df in self.cached:
            try:
                df.unpersist()
            except Exception:  # noqa: BLE001 (a session already stopped has nothing to free)
                pass
        self.cached = []
        from spatec.storage.atomic import remove_soon

        for folder in (self.folder, self.memory_folder):
            if folder is not None:
                remove_soon(folder)         # (a second or two of unlinking: not the replay's)
        self.folder = self.memory_folder = None


#: Sedona's spatial join operators, as Spark's physical plans name them.
SPATIAL_JOINS = ("BroadcastIndexJoin", "DistanceJoin", "RangeJoin", "SpatialIndex")

#: Places a phrase's leaves need at least for the leaf pre-filter to be a Sedona join of the
#: events' rows (fewer: the lon/lat boxes in the match tasks, which cost less than the rows).
SEDONA_PLACES = 64


def spark_frame_inputs(splits: list) -> list:
    """The Spark DataFrames given as inputs, each with its splits (one per partition, the
    frame itself left out of them: it stays on the driver, its rows on the executors)."""
    import dataclasses

    out: dict = {}
    for s in splits:
        if s.fmt == "spark":
            out.setdefault(s.input, (s.table, []))[1].append(dataclasses.replace(s, table=None))
    return list(out.values())


def frame_reader(parts: list, program, keys, tracked: set, store, log):
    """The function of ``mapInArrow`` over a Spark DataFrame given as an input: each
    partition's rows typed as its split (:func:`~spatec.exec.splits.spark_frame_splits`),
    as :func:`~spatec.exec.tasks.typed_rows` types every split."""
    def read(batches):
        import dataclasses

        from pyspark import TaskContext

        from spatec.exec.tasklog import TaskClock
        from spatec.runners.spark.errors import in_task

        s = parts[TaskContext.get().partitionId()]
        got = list(batches)
        schema = got[0].schema if got else None
        if schema is None:
            return
        table = pa.Table.from_batches(got, schema)
        split = dataclasses.replace(s, fmt="frame", table=table, estimate=table.num_rows)
        clock = TaskClock(log, "ingest", split=s.index, file=s.file)
        with in_task(f"reading {s.file}"):
            rows = typed_rows(split, program, keys, s.type in tracked, store)
        clock.done(batches=len(rows))
        yield from rows

    return read


def sedona_pays(g, job: MatchJob, engine: str | None) -> str | None:
    """Why a grouping's events go through Sedona's joins as rows (None: they do not): a
    keyless phrase of two nearby events (``"proximity"``: a distance join instead of one
    group), or a leaf pre-filter against a place set (``"places"``: a broadcast index join
    over at least :data:`SEDONA_PLACES` places). Only with the ``sedona-spark`` engine."""
    if engine != "sedona-spark" or len(job.plans) != 1 or (g.key and g.broadcast):
        return None
    plan = job.plans[0]
    if plan.physical.proximity is not None and not plan.physical.key:
        return "proximity"
    regions = job.regions.get(plan.name) or {}
    if any(len(r) >= SEDONA_PLACES for r in regions.values()):
        return "places"
    return None


def quantiles(hist: dict, types) -> list:
    """The starts' quantiles (``1/Q .. (Q-1)/Q``) of a phrase's types, from their histograms."""
    merged: dict = {}
    for t in types:
        for b, n in hist.get(t, {}).items():
            merged[b] = merged.get(b, 0) + n
    if not merged:
        return []
    bins = np.array(sorted(merged), dtype=np.int64)
    counts = np.array([merged[b] for b in bins], dtype=np.float64)
    cum = np.cumsum(counts)
    at = np.searchsorted(cum, cum[-1] * np.arange(1, QUANTILES) / QUANTILES, side="left")
    return (bins[np.clip(at, 0, len(bins) - 1)] * HIST_BIN).tolist()


def _merged(stats: dict) -> dict:
    """A keyless phrase's one group: every group's statistics together."""
    if not stats:
        return {}
    n = sum(v[0] for v in stats.values())
    return {0: (n, min(v[1] for v in stats.values()), max(v[2] for v in stats.values()))}


def _ordered_rejects(tables: list) -> pd.DataFrame:
    from spatec.events.canonical import REJECT_COLUMNS

    df = pd.concat([t.to_pandas() for t in tables], ignore_index=True)
    return df.sort_values(["_batch", "row"], kind="mergesort")[list(REJECT_COLUMNS)].reset_index(drop=True)


def _reject_lines(batches):
    """A split's rejects (its blobs: the typing's and the copies') as the lines of
    ``_rejects/<type>.jsonl``, in order (:func:`spatec.events.read.reject_line`)."""
    from spatec.events.read import reject_line

    table = _table(batches)
    if table is None:
        return
    df = _ordered_rejects([unipc(v) for v in table.column("value").to_pylist()])
    lines = [reject_line(f, r, why, rec) for f, r, why, rec in
             zip(df["file"].tolist(), df["row"].tolist(), df["reason"].tolist(), df["record"].tolist())]
    yield pa.RecordBatch.from_arrays([pa.array(lines, pa.string())], names=["value"])


#: Lines put in one row of the text writer: a row's value is its lines joined by newlines, which
#: the writer ends with one, so the file is the lines' bytes, and the JVM handles a few large
#: values rather than one row a line.
def text_chunks(lines: pa.ChunkedArray, fmt: str = "jsonl"):
    """``(value, lines)`` of runs of :data:`~spatec.exec.parts.TEXT_RUN` texts, each value one row of Spark's
    text writer, which ends it with a newline: JSON lines (which end with their newline
    already, :func:`~spatec.exec.parts.render`) their bytes less the last newline; GeoJSON
    features joined by the FeatureCollection's separator, and a run followed by another ends
    with a comma, so that a part is a run of features the collection's parts join."""
    from spatec.sinks.files import GEOJSON_BETWEEN

    for a, lists, n in text_runs(lines):
        k = len(lists.values)
        if fmt == "jsonl":
            yield pc.utf8_slice_codeunits(pc.binary_join(lists, ""), 0, -1), k
        else:
            joined = pc.binary_join(lists, GEOJSON_BETWEEN)
            if a + TEXT_RUN < n:
                joined = pc.binary_join_element_wise(joined, pa.array([","]), "")
            yield joined, k


def _table(batches) -> pa.Table | None:
    got = list(batches)
    if not got:
        return None
    t = pa.Table.from_batches(got)
    return t if t.num_rows else None


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


def write_text_part(table: pa.Table, path: str, fmt: str = "jsonl") -> None:
    """A part's texts as the in-process executor writes a part
    (:func:`~spatec.exec.inprocess.write_part`): JSON lines (which end with their newline,
    :func:`~spatec.exec.parts.render`) the sorted column's bytes as they are, GeoJSON
    features joined by the FeatureCollection's separator (:func:`~spatec.exec.inplace.text_pieces`)."""
    from spatec.exec.inplace import text_pieces

    with open(path, "wb") as f:
        for piece in text_pieces(table, fmt):
            f.write(piece)


def write_parquet_part(table: pa.Table, path: str) -> None:
    """A part's blobs (:func:`~spatec.exec.tasks.part_table`) as a GeoParquet part: the rows'
    own columns (``_``-named in the blobs), their ``geo`` metadata."""
    import pyarrow.parquet as pq

    if table is None:
        return
    cols = [c for c in table.column_names if c.startswith("_")]
    t = table.select(cols).rename_columns([c[1:] for c in cols]).replace_schema_metadata(table.schema.metadata)
    pq.write_table(t, path)

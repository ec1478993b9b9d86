"""Batch replay on Spark: the local runner's semantics over groups of whole partitions.

Events are ingested with the same readers, rejects and duplicate rules as
every runner: in Spark tasks, chunk by chunk, on the staged exchange
(:mod:`spatec.runners.spark.ingest`); on the driver for the shuffle exchange,
where they become Spark DataFrames of canonical rows. Each
phrase's events are hashed by the phrase's key into a few groups (a multiple
of the cores, each about :data:`BUCKET_ROWS` events: setting
``spark.spatec.bucketRows``), so that every partition of
:func:`spatec.runtime.routing.partitions` lies wholly in one group; broadcast
types are joined to every group. Each group runs in one Spark task (the
staged exchange: a task reads its groups' Arrow files, the groups dealt to the
tasks by size; the shuffle exchange: ``groupBy(_b).applyInPandas``) through :func:`spatec.runtime.batch.phrase_rows`
— the local runner's own function, fast paths included — with the global final
watermark. For
``successive`` under a key that is not the source, a group also receives, as
history only, its sources' events held by other groups.

One group per key (``groupBy(key)``) was the first design: a pandas frame and
a Python call per vehicle, and the fast paths ran per key on run-time event
objects; grouping many keys per call lets the vectorised fast paths run over
whole groups (see ``bench/bench_replay.py``).

A phrase without a key whose matches are bounded in time and depend on their
own events only is cut into stretches of time instead (:func:`time_window`,
staged exchange), so that it too runs on every core.

Leaf space patterns may drop events before the shuffle (:func:`prefilter`),
but only events that no part of the phrase can use; results are the same
with and without it.

Phrases over phrases (SPEC §8) run on the staged exchange: the phrases they read in Spark
tasks, then they on the driver over the composites those hand on
(:func:`~spatec.runners.spark.match.derived_on_driver`, REFERENCE decision 37). The shuffle
exchange refuses them by name.
"""
from __future__ import annotations

import os
import shutil
import uuid

import numpy as np

from spatec.plan.program import Compiled
from spatec.plan.support import require_derived_only, require_flow
from spatec.runners.local import ReplayResult
from spatec.runners.spark.exchange import (
    decode_rows,
    exchange_mode,
    phrase_groups,
    run_groups,
    spark_events,
)
from spatec.runners.spark.match import run_staged
from spatec.runners.spark.prefilter import engine_name
from spatec.runners.spark.scheduling import bucket_count, time_window
from spatec.runners.spark.staging import (
    Stager,
    column_dtypes,
    merge_stages,
    staging_dir,
)
from spatec.runtime.derived import needed
from spatec.runtime.events import final_watermark
from spatec.runtime.rows import dedupe, rows_frame
from spatec.spatial.crs import Projector, choose_crs


def replay_spark(compiled: Compiled, inputs, out, fmt: str = "jsonl", crs=None, phrases=None,
                 master=None, ui=None, spark=None, prefilter_leaves: bool = True, conf: dict | None = None,
                 tz: str | None = None, log_dir=None):
    """``spatec replay --runner spark``: ingest, run every phrase on Spark, write one file per phrase
    (text times in ``tz``, default UTC). ``log_dir``: where a session started here logs (Spark's and
    the JVM's log lines, :func:`~spatec.runners.spark.session.get_or_create`)."""
    from spatec.runners.replay import ingest, write_outputs

    require_derived_only(_run(compiled, phrases), "Spark batch")
    if spark is None:
        spark = _start(master, conf, ui, log_dir)
    if exchange_mode(spark) != "staged":
        require_flow(_run(compiled, phrases), "Spark batch on the shuffle exchange")
    if exchange_mode(spark) == "staged":
        # the events are typed and staged in Spark tasks: the driver never holds them
        from spatec.runners.spark.ingest import replay_inputs_spark

        result = replay_inputs_spark(spark, compiled, inputs, out, crs=crs, phrases=phrases, ui=ui,
                                     prefilter_leaves=prefilter_leaves, fmt=fmt, tz=tz)
        if fmt in ("jsonl", "parquet"):      # the tasks wrote the files (match.PARTS)
            return result
    else:
        frames, summary = ingest(compiled, inputs, out, ui)
        if ui:
            from spatec.runners.replay import phrase_events

            ui.stage("matching on Spark")
            ui.matching(phrase_events(compiled, frames, phrases))
        result = replay_frames_spark(spark, compiled, frames, crs=crs, phrases=phrases,
                                     prefilter_leaves=prefilter_leaves)
        if ui:
            ui.matched()
        result.ingest = summary
    result.paths = write_outputs(compiled, result.frames, out, fmt, tz)
    return result


def _run(compiled: Compiled, phrases) -> list:
    """The plans a replay of ``phrases`` runs: those and the phrases they read, in flow order."""
    run = needed(compiled, phrases)
    return [p for p in compiled.plans if p.name in run]


def _start(master, conf, ui=None, log_dir=None):
    from spatec.runners.spark.session import get_or_create

    if ui:
        ui.stage("starting Spark")
    spark = get_or_create(master, conf, log_dir=log_dir)
    warm_workers(spark)
    return spark


def _warm(batches):
    """In a Python worker: what every spatec task needs first (modules, the PROJ database)."""
    import spatec.runners.spark.ingest  # noqa: F401
    import spatec.vector.fastpath  # noqa: F401

    Projector("EPSG:32631").forward(np.array([0.1]), np.array([52.2]))
    for b in batches:
        yield b


def warm_workers(spark) -> None:
    """Start the session's Python workers and load spatec in them (a second or two of a
    first job), as part of starting Spark rather than of the first replay."""
    par = max(1, spark.sparkContext.defaultParallelism)
    spark.range(par, numPartitions=par).mapInPandas(_warm, "id long").count()


def replay_frames_spark(spark, compiled: Compiled, frames: dict, crs=None, phrases=None,
                        prefilter_leaves: bool = True) -> ReplayResult:
    """Canonical frames (type → pandas) through every phrase on Spark; output rows as pandas."""
    raw, crs = raw_outputs(spark, compiled, frames, crs, phrases, prefilter_leaves, collect=True)
    result = ReplayResult({}, crs)
    for plan in compiled.plans:
        if plan.name not in raw or (phrases and plan.name not in phrases):
            continue
        got = raw[plan.name]
        if isinstance(got, list):       # staged: the rows themselves, read back from the workers' files
            df = rows_frame(plan, dedupe(got))
        else:
            df = decode_rows(plan, got.toPandas())
        result.frames[plan.name] = df
        result.counts[plan.name] = len(df)
    return result


def raw_outputs(spark, compiled: Compiled, frames: dict, crs=None, phrases=None,
                prefilter_leaves: bool = True, collect: bool = False):
    """Per phrase, a lazy Spark DataFrame of composites in :data:`RAW_SCHEMA`; and the CRS used.

    ``collect`` (staged exchange only): run the phrases now and give each one's
    output rows as a list instead — the workers pickle their rows into the
    staging directory, which the driver reads back exactly as they were made
    (no JSON round trip through the JVM: Stuck's bus-day is a gigabyte of hulls)."""
    program = compiled.program
    require_derived_only(_run(compiled, phrases), "Spark batch")
    if exchange_mode(spark) != "staged":
        require_flow(_run(compiled, phrases), "Spark batch on the shuffle exchange")
    frames = {t: df for t, df in frames.items() if t in program.events}
    crs = choose_crs(program, frames, crs)
    final_w = final_watermark(frames)
    dtypes = {t: column_dtypes(program, t, df) for t, df in frames.items()}
    engine = engine_name(spark)
    buckets = bucket_count(spark, sum(len(df) for df in frames.values()))
    stage = staging_dir(spark) if exchange_mode(spark) == "staged" else None
    out = {}
    if stage is not None:
        root = os.path.join(stage, uuid.uuid4().hex)
        stager = Stager(program, frames, root)
        plans = _run(compiled, phrases)
        windows = {p.name: time_window(spark, p) for p in plans}
        stager.share(plans, windows)
        staged = {p.name: merge_stages([(0, stager.stage(p, buckets, windows[p.name]))]) for p in plans}
        try:
            return run_staged(spark, plans, program, staged, crs, final_w, dtypes,
                              engine if prefilter_leaves else None, root, collect), crs
        finally:
            if collect:
                shutil.rmtree(root, ignore_errors=True)   # lazy DataFrames (not collect) read it later
    events = {t: spark_events(spark, program, t, df) for t, df in frames.items() if len(df)}
    for plan in compiled.plans:
        if phrases and plan.name not in phrases:
            continue
        grouped = phrase_groups(plan, program, events, crs, engine if prefilter_leaves else None, buckets)
        out[plan.name] = run_groups(grouped, plan, compiled, crs, final_w, dtypes, spark)
    return out, crs


# ------------------------------------------------------------------------------- staged exchange


# ------------------------------------------------------------------------------- events


# ------------------------------------------------------------------------------- groups


# ------------------------------------------------------------------------------- leaf pre-filter



"""The steps of a replay that run where the data is, and the replay that runs them.

:func:`replay` is what every batch runner does, in order: plan the splits
(:func:`~spatec.exec.splits.plan_splits`), have the executor read and type them and decide
the copies across them (:meth:`Executor.ingest`: the counts per input, the rejects, the
positions' cells and the latest event time), decide the CRS and the final watermark
(:mod:`~spatec.exec.decide`), have the executor match every phrase and write its parts
(:meth:`Executor.match`), and commit the outputs (:class:`~spatec.exec.commit.Outputs`).

An :class:`Executor` holds the events between its two steps: pandas frames in this process
(:class:`InProcess`, ``--runner local``), Spark DataFrames cached on the executors
(:class:`spatec.runners.spark.executor.SparkExecutor`).
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from spatec.exec.context import RunContext
from spatec.exec.decide import Decisions, IngestSummary, metric_crs


@dataclass
class Ingested:
    """What :meth:`Executor.ingest` found: counts per input, rejects per type, the positions'
    cells, the latest event time, and the executor's own handle on the events."""

    summary: IngestSummary
    cells: dict
    max_hi: int | None
    #: the rejects: ``{"frame": DataFrame}`` (held: written by :func:`replay`) or
    #: ``{"parts": {type: [files]}}`` (written by the executor, in input order)
    rejected: dict = field(default_factory=dict)
    events: object = None


@dataclass
class ReplayResult:
    """What a replay produced: the composites per phrase (frames, or the files written),
    the CRS, how the input was used, and how long each stage took."""

    frames: object                     # phrase → DataFrame (or a lazy mapping over the files)
    crs: str
    counts: dict = field(default_factory=dict)   # phrase → composites
    state_sizes: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)  # stage → wall time (ingest, match)
    paths: dict = field(default_factory=dict)    # phrase → its output (file or folder)
    ingest: IngestSummary | None = None
    rejects: object = None                       # the rejects (a frame), where they are held


class Executor(ABC):
    """Where a replay's data is read, matched and written (see the module)."""

    #: for the progress lines: "matching <where>"
    where = "in this process"
    #: whether a Spark DataFrame given as an input is read where its partitions are (else
    #: it is collected to this process first)
    spark_frames = False

    @property
    def cores(self) -> int:
        return 1

    @abstractmethod
    def ingest(self, ctx: RunContext, splits: list, ui=None, outputs=None) -> Ingested:
        """Read and type every split; reject the copies across splits; the rejects written as
        parts under ``outputs``, or held."""

    def close(self) -> None:
        """Free what the replay held (cached data)."""

    @abstractmethod
    def match(self, ctx: RunContext, ingested: Ingested, decisions: Decisions, outputs, ui=None) -> dict:
        """Match every phrase of ``ctx.plans`` (in flow order) and write the parts of the
        phrases shown into ``outputs``; phrase → its part files in order, and the counts
        (``{"parts": ..., "counts": ...}``); without ``outputs``, ``{"frames": ...}``."""


def replay(ctx: RunContext, executor: Executor, ui=None) -> ReplayResult:
    """One replay, start to end (see the module)."""
    from spatec.exec.commit import Outputs
    from spatec.exec.splits import plan_splits

    started = time.perf_counter()
    if ui:
        ui.stage("reading the inputs")
    splits = plan_splits(ctx.program, [(t, p) for t, p in ctx.inputs], ctx.settings.split_rows, executor.cores,
                         executor.spark_frames)
    outputs = Outputs(ctx.out, ctx.fmt, ctx.merged, [p.name for p in ctx.shown]) if ctx.out is not None else None
    try:
        got = executor.ingest(ctx, splits, ui, outputs)
        for row in got.summary.rows:
            if ui:
                ui.ingested(*row)
        crs = metric_crs(ctx.program, ctx.crs, got.cells)
        decisions = Decisions(crs, got.max_hi if got.max_hi is not None else 0, got.summary)
        ingested = time.perf_counter()
        if ui:
            ui.stage(f"matching {executor.where}")
        done = executor.match(ctx, got, decisions, outputs, ui)
        if ui:
            ui.matched()
        result = ReplayResult(done.get("frames", {}), crs, dict(done.get("counts", {})),
                              state_sizes=dict(done.get("state_sizes", {})), ingest=got.summary,
                              rejects=got.rejected.get("frame"))
        if outputs is not None:
            from spatec.exec.commit import WrittenFrames, reject_parts

            if ui:
                ui.stage("writing the output")
            rejects = got.rejected.get("parts")
            if rejects is None:
                rejects = reject_parts(got.rejected.get("frame"), outputs)
            result.paths = outputs.commit(done.get("parts", {}), rejects)
            result.frames = WrittenFrames(result.paths, {p.name: p for p in ctx.shown})
    finally:
        if outputs is not None:
            outputs.discard()
        executor.close()
    result.seconds = {"ingest": ingested - started, "match": time.perf_counter() - ingested}
    return result


def out_path(out) -> Path | None:
    return None if out is None else Path(out)

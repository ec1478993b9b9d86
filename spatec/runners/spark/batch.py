"""Batch replay on Spark: :func:`~spatec.exec.executor.replay` on the Spark executor
(:mod:`spatec.runners.spark.executor`), with the run's settings read once from the session."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from spatec.exec.context import RunContext, Settings
from spatec.exec.executor import ReplayResult, replay
from spatec.plan.program import Compiled
from spatec.spatial.crs import Projector


def context(spark, compiled: Compiled, inputs, out=None, fmt: str | None = "jsonl", tz=None, crs=None,
            phrases=None) -> RunContext:
    """A replay's :class:`~spatec.exec.context.RunContext` on ``spark`` (its settings, its cores)."""
    from spatec.runners.spark.session import on_this_machine, spatial_engine

    settings = Settings.read(lambda k, d=None: spark.conf.get(k, d), engine=spatial_engine(spark))
    return RunContext(compiled, tuple(inputs), Path(out) if out is not None else None, fmt, tz, crs,
                      tuple(phrases) if phrases else None, settings,
                      cores=max(1, spark.sparkContext.defaultParallelism), local=on_this_machine(spark))


def replay_spark(compiled: Compiled, inputs, out, fmt: str = "jsonl", crs=None, phrases=None,
                 master=None, ui=None, spark=None, conf: dict | None = None,
                 tz: str | None = None, log_dir=None) -> ReplayResult:
    """``spatec replay --runner spark``: every input read, typed, matched and written on
    Spark; one output per phrase (text times in ``tz``, default UTC). ``log_dir``: where a
    session started here logs (Spark's and the JVM's log lines,
    :func:`~spatec.runners.spark.session.get_or_create`)."""
    from spatec.plan.support import require_derived_only
    from spatec.runners.spark.executor import SparkExecutor

    require_derived_only(RunContext(compiled, (), phrases=tuple(phrases) if phrases else None).plans, "Spark batch")
    if spark is None:
        spark = _start(master, conf, ui, log_dir)
    ctx = context(spark, compiled, inputs, out, fmt, tz, crs, phrases)
    log = str(Path(log_dir) / "spark.log") if log_dir is not None else None
    return replay(ctx, SparkExecutor(spark, log), ui)


def _start(master, conf, ui=None, log_dir=None):
    from spatec.runners.spark.session import get_or_create

    if ui:
        ui.stage("starting Spark")
    spark = get_or_create(master, conf, log_dir=log_dir)
    warm_workers(spark)
    return spark


def _warm(batches):
    """In a Python worker: what every spatec task needs first (modules, the PROJ database)."""
    import spatec.exec.tasks  # noqa: F401
    import spatec.vector.fastpath  # noqa: F401

    Projector("EPSG:32631").forward(np.array([0.1]), np.array([52.2]))
    for b in batches:
        yield b


def warm_workers(spark) -> None:
    """Start the session's Python workers and load spatec in them (a second or two of a
    first job), as part of starting Spark rather than of the first replay."""
    par = max(1, spark.sparkContext.defaultParallelism)
    spark.range(par, numPartitions=par).mapInPandas(_warm, "id long").count()

"""The staged exchange run in this process, one task after another: the local runner's
way through inputs too large to hold (bounded memory).

The Spark runner's staged exchange (:mod:`spatec.runners.spark.ingest`) never holds
the whole input: the driver cuts each CSV or Parquet input into chunks of about
``spark.spatec.ingestRows`` rows, tasks type and stage them chunk by chunk, then
match the phrases group by group (``spark.spatec.bucketRows`` events each) and
write their parts of the output files, which the driver merges. Its results are
the local runner's, byte for byte (the Spark tests compare them). Run with
:class:`SerialSession` in place of a SparkSession, every task runs here, one at a
time, so peak memory is about one chunk or one group, however large the input.

:class:`SerialSession` is only the part of a SparkSession the staged exchange uses:
settings (``conf.get``), one core (``sparkContext.defaultParallelism``), and
``range(n).withColumnRenamed(...).mapInPandas(fn, schema).collect()``, each seed
in a partition of its own, as :func:`~spatec.runners.spark.scheduling.dealt` makes
them.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pandas as pd

from spatec.plan.program import Compiled

__all__ = ["SerialSession", "STREAM_BYTES", "local_replay", "replay_streamed", "streams"]

#: ``spatec replay --runner local`` streams inputs whose files add up to more than this
#: many bytes (about a bus-day of the Cambridge fixes as Parquet, a third of one as
#: CSV); ``SPATEC_LOCAL_STREAM``: ``on``, ``off`` or ``auto`` (this threshold).
STREAM_BYTES = 16 << 20
STREAM_ENV = "SPATEC_LOCAL_STREAM"


class _Conf:
    def __init__(self, values: dict):
        self.values = values

    def get(self, key: str, default=None):
        return self.values.get(key, default)


class _Context:
    defaultParallelism = 1
    master = "local[1]"


class _Frame:
    """A pandas frame standing for a DataFrame of one partition per row."""

    def __init__(self, pdf: pd.DataFrame):
        self.pdf = pdf

    def withColumnRenamed(self, old: str, new: str) -> "_Frame":     # noqa: N802 (Spark's name)
        return _Frame(self.pdf.rename(columns={old: new}))

    def mapInPandas(self, fn, schema: str) -> "_Frame":              # noqa: N802 (Spark's name)
        parts = [out for i in range(len(self.pdf)) for out in fn(iter([self.pdf.iloc[i:i + 1]]))]
        return _Frame(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame())

    def collect(self) -> list:
        return list(self.pdf.itertuples(index=False))


class SerialSession:
    """What the staged exchange asks of a SparkSession, done in this process."""

    where = "in this process"       # for the progress lines ("matching in this process")
    runs_here = True                # (tasks run in the caller's thread: collected, then watched)

    def __init__(self, conf: dict | None = None):
        self.conf = _Conf(dict(conf or {}))
        self.sparkContext = _Context()                                   # noqa: N815 (Spark's name)

    def range(self, n: int, numPartitions: int = 1) -> _Frame:         # noqa: N803 (Spark's name)
        return _Frame(pd.DataFrame({"id": range(n)}))


def streams(compiled: Compiled, inputs, fmt: str, phrases=None) -> bool:
    """Whether ``replay_local`` streams (:func:`replay_streamed`): the output is JSON lines
    or GeoParquet (written in parts), every phrase runs on the staged exchange (no phrase
    over phrases), and the inputs are larger than :data:`STREAM_BYTES` (or
    ``SPATEC_LOCAL_STREAM=on``; ``off``: never)."""
    from spatec.errors import UnsupportedError
    from spatec.plan.support import require_flow
    from spatec.runners.spark.match import PARTS

    setting = os.environ.get(STREAM_ENV, "auto").strip().lower()
    if setting == "off" or fmt not in PARTS:
        return False
    try:
        require_flow([p for p in compiled.plans if not phrases or p.name in phrases], "streaming")
    except UnsupportedError:
        return False
    if setting == "on":
        return True
    return sum(_bytes(path) for _, path in inputs) > STREAM_BYTES


def _bytes(path) -> int:
    """The size of an input's files (0 where they cannot be listed: the ingest says why)."""
    from spatec.errors import SpatecError
    from spatec.events.formats import expand

    try:
        return sum(os.path.getsize(f) for f, _ in expand(os.fspath(path)))
    except (OSError, SpatecError):
        return 0


def replay_streamed(compiled: Compiled, inputs, out, fmt: str = "jsonl", crs=None, phrases=None, ui=None,
                    tz: str | None = None, conf: dict | None = None):
    """``replay_local`` through the staged exchange, every task here (:class:`SerialSession`):
    the same files, in bounded memory. Staging in a temporary directory, removed after.
    ``conf``: the staged exchange's settings (``spark.spatec.ingestRows``, ``bucketRows``)."""
    from spatec.runners.spark.ingest import replay_inputs_spark
    from spatec.runners.spark.staging import STAGING_KEY

    root = tempfile.mkdtemp(prefix="spatec-stream-")
    try:
        return replay_inputs_spark(SerialSession({**(conf or {}), STAGING_KEY: root}), compiled, inputs, out, crs=crs,
                                   phrases=phrases, ui=ui, prefilter_leaves=False, fmt=fmt, tz=tz)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def local_replay(compiled: Compiled, inputs, out, fmt: str = "jsonl", crs=None, phrases=None, ui=None,
                 tz: str | None = None):
    """``spatec replay --runner local``: :func:`replay_streamed` where :func:`streams` says so
    (a large input), else :func:`~spatec.runners.replay.replay_local` (the whole input in memory)."""
    from spatec.runners.replay import replay_local

    if streams(compiled, inputs, fmt, phrases):
        return replay_streamed(compiled, inputs, out, fmt=fmt, crs=crs, phrases=phrases, ui=ui, tz=tz)
    return replay_local(compiled, inputs, out, fmt=fmt, crs=crs, phrases=phrases, ui=ui, tz=tz)

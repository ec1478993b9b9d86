"""What a replay is asked to do, and its settings, read once (as Sedona's ``SedonaConf``).

A :class:`RunContext` is made once per replay, on the driver, and handed to every step: the
program and its plans in flow order, the inputs, where the outputs go and in which format,
and the :class:`Settings` (from a SparkSession's settings, or from ``--conf`` for the
in-process executor). Nothing else reads a setting: a value that is wrong is one clear
error before anything is read.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from spatec.errors import SpatecError
from spatec.plan.program import Compiled
from spatec.runtime.derived import needed

#: Settings (``--conf`` / the SparkSession's): key → (field, default as text, meaning).
BUCKET_ROWS_KEY = "spark.spatec.bucketRows"
TIME_WINDOW_KEY = "spark.spatec.timeWindow"
SPLIT_ROWS_KEY = "spark.spatec.ingestRows"
OUTPUT_KEY = "spark.spatec.output"
TASK_LOG_KEY = "spark.spatec.taskLog"
ENGINE_KEY = "spark.spatec.spatial.engine"
PREFILTER_KEY = "spark.spatec.prefilter"
EXCHANGE_KEY = "spark.spatec.exchange"
EXCHANGE_DIR_KEY = "spark.spatec.exchangeDir"
EXCHANGE_MEMORY_KEY = "spark.spatec.exchangeMemory"
#: settings of earlier versions that no longer mean anything (a warning, not an error)
RETIRED = ("spark.spatec.staging", "spark.spatec.stagingMemory")

EXCHANGES = ("auto", "shuffle", "files")

OUTPUTS = ("auto", "merged", "dataset")


@dataclass(frozen=True)
class Settings:
    """A replay's settings, typed and checked."""

    #: about how many events one group holds (a task's memory)
    bucket_rows: int = 400_000
    #: seconds: the shortest stretch of time a phrase without a key is cut into
    time_window: int = 3600
    #: input rows per split (the unit of reading and typing)
    split_rows: int = 250_000
    #: ``merged``: one file per phrase (``out/P.jsonl``); ``dataset``: a folder of parts per
    #: phrase (``out/P/part-00000.jsonl`` ...), readable as one dataset; ``auto``: merged
    #: where the executors run on this machine
    output: str = "auto"
    #: the spatial engine of the leaf pre-filter (``sedona-spark``, ``sedonadb``, ``shapely``)
    engine: str = "sedonadb"
    #: a JSON lines file of every task's timings, or None
    task_log: str | None = None
    #: the leaf pre-filter on (results are the same without it)
    prefilter: bool = True
    #: how blobs move between stages: ``shuffle`` (in Spark's shuffle: any cluster), ``files``
    #: (as files in a folder every executor mounts: the rows Spark moves name them), ``auto``:
    #: files where the executors run on this machine
    exchange: str = "auto"
    #: the folder of the files exchange (None: a temporary one on this machine)
    exchange_dir: str | None = None
    #: where the files exchange's files go while the machine has memory to spare
    #: (:mod:`spatec.storage.scratch`): ``auto`` (``/dev/shm`` where it is a memory file
    #: system), ``off`` (all in :attr:`exchange_dir`), or a memory file system's folder
    exchange_memory: str = "auto"

    @classmethod
    def read(cls, get: Callable[[str, str | None], str | None], engine: str | None = None) -> "Settings":
        """The settings from ``get(key, default)`` (a SparkConf's ``get``, or a dict's)."""
        def number(key: str, default: int, least: int = 1) -> int:
            text = get(key, None)
            if text is None or str(text).strip() == "":
                return default
            try:
                value = int(float(str(text).strip()))
            except ValueError:
                raise SpatecError(f"{key}={text!r}: expected a whole number") from None
            if value < least:
                raise SpatecError(f"{key}={text!r}: must be at least {least}")
            return value

        output = str(get(OUTPUT_KEY, "auto") or "auto").strip().lower()
        if output not in OUTPUTS:
            raise SpatecError(f"{OUTPUT_KEY}={output!r}: expected one of {', '.join(OUTPUTS)}")
        log = str(get(TASK_LOG_KEY, "") or "").strip()
        if log.lower() in ("", "off"):
            log = None
        else:
            log = os.path.abspath(log)
            os.makedirs(os.path.dirname(log), exist_ok=True)
        pre = str(get(PREFILTER_KEY, "on") or "on").strip().lower()
        if pre not in ("on", "off", "true", "false"):
            raise SpatecError(f"{PREFILTER_KEY}={pre!r}: expected on or off")
        exchange = str(get(EXCHANGE_KEY, "auto") or "auto").strip().lower()
        if exchange not in EXCHANGES:
            raise SpatecError(f"{EXCHANGE_KEY}={exchange!r}: expected one of {', '.join(EXCHANGES)}")
        where = str(get(EXCHANGE_DIR_KEY, "") or "").strip() or None
        memory = str(get(EXCHANGE_MEMORY_KEY, "auto") or "auto").strip()
        return cls(bucket_rows=number(BUCKET_ROWS_KEY, cls.bucket_rows),
                   time_window=number(TIME_WINDOW_KEY, cls.time_window),
                   split_rows=number(SPLIT_ROWS_KEY, cls.split_rows),
                   output=output,
                   engine=str(get(ENGINE_KEY, None) or engine or cls.engine).strip(),
                   task_log=log, prefilter=pre in ("on", "true"), exchange=exchange, exchange_dir=where,
                   exchange_memory=memory)

    @classmethod
    def of(cls, conf: dict | None = None, engine: str | None = None) -> "Settings":
        conf = dict(conf or {})
        return cls.read(lambda k, d=None: conf.get(k, d), engine)


@dataclass(frozen=True)
class RunContext:
    """One replay: the program, its inputs, where and how its outputs go, its settings."""

    compiled: Compiled
    #: ``(type, source)``: a path (file, directory, glob) or a frame (pandas, Spark)
    inputs: tuple
    #: the output directory (None: the composites are handed back, not written)
    out: Path | None = None
    #: ``jsonl``, ``parquet``, ``geojson`` (None: handed back as frames)
    fmt: str | None = "jsonl"
    #: the text outputs' time zone (None: UTC)
    tz: str | None = None
    #: the metric CRS asked for (None: chosen from the data)
    crs: str | None = None
    #: the phrases asked for (None: all)
    phrases: tuple | None = None
    settings: Settings = field(default_factory=Settings)
    #: cores the executor has (how finely work is cut)
    cores: int = 1
    #: whether the executors share this machine's file system (``merged`` output by default)
    local: bool = True

    @property
    def program(self):
        return self.compiled.program

    @property
    def plans(self) -> list:
        """The phrases run, in flow order: those asked for and every phrase they read."""
        run = needed(self.compiled, self.phrases)
        return [p for p in self.compiled.plans if p.name in run]

    @property
    def shown(self) -> list:
        """The phrases whose composites are written (asked for, or all)."""
        return [p for p in self.plans if not self.phrases or p.name in self.phrases]

    @property
    def exchange(self) -> str:
        """How blobs move between stages (``shuffle`` or ``files``; see :class:`Settings`)."""
        if self.settings.exchange == "auto":
            return "files" if self.local else "shuffle"
        return self.settings.exchange

    @property
    def merged(self) -> bool:
        """One file per phrase (else a folder of parts)."""
        if self.settings.output == "auto":
            return self.local
        return self.settings.output == "merged"

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
"""
from __future__ import annotations

import atexit
import json
import os
import pickle
import resource
import shutil
import tempfile
import time
import uuid

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import shapely

from spatec.errors import SpatecError
from spatec.frontend import ast as A
from spatec.plan.nodes import After, Leaf, PhrasePlan, walk_nodes
from spatec.plan.program import Compiled
from spatec.runners.local import ReplayResult
from spatec.runtime.batch import phrase_rows
from spatec.runtime.events import attribute_names, final_watermark
from spatec.runtime.routing import keyed_types, needs_source_history, phrase_types
from spatec.runtime.rows import (
    STD_COLUMNS,
    dedupe,
    rows_frame,
    rows_starting,
    time_fields,
)
from spatec.sinks.files import write_jsonl_part
from spatec.spatial.crs import Projector, choose_crs

CANONICAL = ("_type", "_id", "_source", "_t", "_lo", "_hi", "_place", "_lon", "_lat", "_r", "_geom")

#: What ``applyInPandas`` returns per composite: fixed fields, then the
#: variable → event id map and the emit fields as JSON (decoded on the driver,
#: so values keep their Python types exactly as the local runner makes them).
RAW_SCHEMA = "phrase string, id string, lo long, hi long, hull string, events string, emit string"


def replay_spark(compiled: Compiled, inputs, out, fmt: str = "jsonl", crs=None, phrases=None,
                 master=None, ui=None, spark=None, prefilter_leaves: bool = True, conf: dict | None = None):
    """``spatec replay --runner spark``: ingest, run every phrase on Spark, write one file per phrase."""
    from spatec.runners.replay import ingest, write_outputs

    if spark is None:
        spark = _start(master, conf, ui)
    if exchange_mode(spark) == "staged":
        # the events are typed and staged in Spark tasks: the driver never holds them
        from spatec.runners.spark.ingest import replay_inputs_spark

        result = replay_inputs_spark(spark, compiled, inputs, out, crs=crs, phrases=phrases, ui=ui,
                                     prefilter_leaves=prefilter_leaves, fmt=fmt)
        if fmt == "jsonl":      # the tasks wrote the files
            return result
    else:
        frames, summary = ingest(compiled, inputs, out, ui)
        if ui:
            ui.stage("matching on Spark")
        result = replay_frames_spark(spark, compiled, frames, crs=crs, phrases=phrases,
                                     prefilter_leaves=prefilter_leaves)
        result.ingest = summary
    result.paths = write_outputs(compiled, result.frames, out, fmt)
    return result


def _start(master, conf, ui=None):
    from spatec.runners.spark.session import get_or_create

    if ui:
        ui.stage("starting Spark")
    spark = get_or_create(master, conf)
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
        if plan.name not in raw:
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
    frames = {t: df for t, df in frames.items() if t in program.events}
    crs = choose_crs(program, frames, crs)
    final_w = final_watermark(frames)
    dtypes = {t: _dtypes(program, t, df) for t, df in frames.items()}
    engine = _engine_name(spark)
    buckets = bucket_count(spark, sum(len(df) for df in frames.values()))
    stage = staging_dir(spark) if exchange_mode(spark) == "staged" else None
    out = {}
    if stage is not None:
        root = os.path.join(stage, uuid.uuid4().hex)
        stager = Stager(program, frames, root)
        plans = [p for p in compiled.plans if not phrases or p.name in phrases]
        staged = {p.name: merge_stages([(0, stager.stage(p, buckets, time_window(spark, p)))]) for p in plans}
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
        out[plan.name] = _run_groups(grouped, plan, compiled, crs, final_w, dtypes, spark)
    return out, crs


def run_staged(spark, plans, program, staged: dict, crs: str, final_w: int, dtypes: dict, engine: str | None,
               root: str, collect: bool | str, drop: dict | None = None) -> dict:
    """Every phrase over its staged groups (``staged``: phrase → :func:`merge_stages`):
    per phrase, a lazy DataFrame of :data:`RAW_SCHEMA`, or with ``collect`` its rows,
    run now and read back from the files the tasks pickled them to under ``root``;
    with ``collect="jsonl"``, the tasks' parts of the JSON lines output instead
    (``[(path, keys)]`` for :func:`~spatec.sinks.files.merge_jsonl_parts`)."""
    out = {}
    for plan in plans:
        rows_dir = os.path.join(root, "rows-" + _safe(plan.name)) if collect else None
        out[plan.name] = staged_groups(spark, staged[plan.name], plan, program, crs, final_w, dtypes, engine,
                                       rows_dir, drop, jsonl=collect == "jsonl")
    if not collect:
        return out
    if collect == "jsonl":
        return {name: [(r.path, read_arrow(r.path + ".keys")) for r in sorted(df.collect(), key=lambda r: r.g)]
                for name, df in out.items()}
    return {name: _read_rows(df) for name, df in out.items()}


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


# ------------------------------------------------------------------------------- staged exchange

class Stager:
    """One chunk of canonical frames (type → pandas), written per phrase as Arrow IPC
    files under ``root``: the groups of :func:`phrase_groups`, hashed here
    (:func:`key_buckets`) instead of by Spark's exchange. A replay's events are
    one chunk (ingested on the driver) or many (ingested in Spark tasks,
    :mod:`spatec.runners.spark.ingest`); :func:`merge_stages` puts the chunks'
    files together, in input order, for the tasks that match them."""

    def __init__(self, program, frames: dict, root: str, tag: str = "d", texts: dict | None = None):
        self.program = program
        self.frames = {t: df for t, df in frames.items() if len(df)}
        self.texts = texts or {}        # type → its frame's text columns as Arrow (IngestResult.texts)
        self.root = root
        self.tag = tag
        self._tables: dict = {}
        os.makedirs(root, exist_ok=True)

    def table(self, t: str, columns: tuple | None = None) -> pa.Table:
        """Type ``t``'s canonical table, or just ``columns`` of it: converting a column of
        Python strings to Arrow costs about as much as typing it did, so a column no
        phrase reads is left out rather than converted and dropped. On one thread: a
        chunk is staged in a Spark task, beside others that keep the cores busy, where a
        pool of threads only adds their start and join."""
        if (t, columns) not in self._tables:
            self._tables[t, columns] = canonical_table(self.program, t, self.frames[t], columns, nthreads=1,
                                                       texts=self.texts.get(t))
        return self._tables[t, columns]

    def used(self, plan: PhrasePlan, t: str) -> pa.Table:
        """Type ``t``'s table with the columns the phrase can read: the canonical ones but
        ``_type`` (one value per file), and the attributes the plan names anywhere (every
        attribute its expressions read, its key, the source). The worker puts the others
        back as missing (:func:`staged_fn`)."""
        decl = self.program.events[t]
        text = repr(plan)
        keep = {a for a in attribute_names(self.program, t) if f"'{a}'" in text}
        keep |= set(plan.key) | ({decl.source.attr} if decl.source is not None else set())
        return self.table(t, tuple(c for c in (*CANONICAL, *attribute_names(self.program, t))
                                   if c != "_type" and (c in CANONICAL or c in keep)))

    def write(self, table: pa.Table, name: str) -> str:
        return write_arrow(table, os.path.join(self.root, f"{self.tag}-{name}.arrow"))

    def stage(self, plan: PhrasePlan, buckets: int, window: int | None = None) -> dict:
        """This chunk's files for the phrase: ``{"groups": {group: {type: path}},
        "all": {type: path}, "src": {type: path}}`` — the keyed types' events by
        group; the broadcast types' (every group reads them); and, for
        ``successive`` under a key that is not the source, every keyed event of
        the sourced types with its group (``_g``), from which a group takes its
        sources' events held by other groups as history (:func:`source_history`).

        ``window`` (µs, :func:`time_window`; a phrase without a key): the groups
        are stretches of time instead, ``[g W, (g + 1) W)``, each holding the
        events that a match starting in it can bind (``"window"`` in the result)."""
        program = self.program
        types = sorted(t for t in phrase_types(plan, program) if t in self.frames)
        keyed = keyed_types(plan, program, types)
        tag = _safe(plan.name)
        out: dict = {"groups": {}, "all": {}, "src": {}, "rows": {}, "lo": {}}
        if window:
            out["window"] = window
        history = needs_source_history(plan, program)
        for t in types:
            if t not in keyed:
                out["all"][t] = self.write(self.used(plan, t), f"{tag}-all-{_safe(t)}")
                continue
            df = self.frames[t]
            if window:
                bs, order = window_groups(df["_lo"].to_numpy(np.int64), window, plan.span_bound)
            else:
                b = key_buckets(df, plan.key, buckets)
                rows = np.flatnonzero(b >= 0)
                order = rows[np.argsort(b[rows], kind="stable")]
                bs = b[order]
            cuts = np.flatnonzero(np.diff(bs)) + 1
            table = self.used(plan, t)
            lo = df["_lo"].to_numpy(np.int64)
            for idx, g in zip(np.split(order, cuts), np.split(bs, cuts)):
                if len(idx):
                    g = int(g[0])
                    out["rows"][g] = out["rows"].get(g, 0) + len(idx)
                    out["lo"][g] = _widened(out["lo"].get(g), (int(lo[idx].min()), int(lo[idx].max())))
                    out["groups"].setdefault(g, {})[t] = self.write(table.take(pa.array(idx)),
                                                                    f"{tag}-b{g}-{_safe(t)}")
            decl = program.events[t]
            if history and decl.source is not None and tuple(plan.key) != (decl.source.attr,):
                out["src"][t] = self.write(table.append_column("_g", pa.array(b.astype(np.int32))),
                                           f"{tag}-src-{_safe(t)}")
        return out


#: Setting: the shortest stretch of time (seconds) that a phrase without a key is
#: cut into for Spark (:func:`time_window`); default an hour.
TIME_WINDOW_KEY = "spark.spatec.timeWindow"
TIME_WINDOW = 3600


def time_window(spark, plan: PhrasePlan) -> int | None:
    """Stretches of time (µs) that a phrase without a key can be matched in, apart:
    when every match lies within ``span_bound`` and depends on its own events only
    (no absence, no ``successive``), the matches that start in ``[g W, (g + 1) W)``
    are exactly those among the events that start in ``[g W, (g + 1) W + span]``.
    At least :data:`TIME_WINDOW_KEY` long (an hour: an event starting less than a
    span into a stretch is in the one before too, and few are), and two spans (so
    that no event is in three). None for a phrase with a key, or not so bounded: it
    is one group."""
    if plan.key or not local_in_time(plan):
        return None
    least = int(float(spark.conf.get(TIME_WINDOW_KEY, str(TIME_WINDOW))) * 1_000_000)
    return max(least, 2 * plan.span_bound, 1)


def local_in_time(plan: PhrasePlan) -> bool:
    """Whether every match of ``plan`` lies within ``span_bound`` and depends on its own
    events only (no absence, no ``successive``, no negated leaf): then the matches that
    start in ``[t0, t1)`` are exactly those among the events that start in
    ``[t0, t1 + span]`` (:func:`time_window`, :func:`split_in_time`)."""
    if plan.span_bound is None or plan.deferred or plan.negated:
        return False
    return not any(isinstance(n, After) or getattr(n, "absence", None) is not None for n in walk_nodes(plan.root))


def split_in_time(groups: list, plan: PhrasePlan, cores: int, most: int | None = None) -> list:
    """Groups of a phrase with a key (specs of :func:`merge_stages`) with one or a few keys
    holding much more than their share of the events, each cut into stretches of time
    matched apart, when the phrase is :func:`local_in_time`: a stretch's spec reports the
    matches that start in it (``own``) from the events that start in it or up to a span
    after (``lo_range``, :func:`staged_fn`). Keys cannot be cut, but their matches can:
    Bunching's lines, one of which held 29% of its bus-day's matching, a core's tail.
    A group of more than one and a half ``share`` is cut into ``ceil(rows / share)``
    stretches of equal time, ``share`` being what :data:`GROUPS_PER_CORE` groups a core
    would hold, and at most ``most`` events (:data:`BUCKET_ROWS_KEY`): a key's events
    grow with the days replayed while the keys do not (Bunching's lines), and a task
    holds its stretch's events, so this bounds a task's memory whatever the input's size
    (Bunching over 16 bus-days: 2.3 GB a worker before)."""
    if not plan.key or not groups or not local_in_time(plan):
        return groups
    share = sum(spec["rows"] for spec in groups) / max(1, cores * GROUPS_PER_CORE)
    if most:
        share = min(share, most)
    span = int(plan.span_bound)
    out = []
    for spec in groups:
        lo0, lo1 = spec.get("lo", (0, 0))
        k = -int(-spec["rows"] // max(share, 1)) if spec["rows"] > 1.5 * share else 1
        k = min(k, (lo1 - lo0) // max(2 * span, 1))         # stretches at least two spans long
        if k < 2 or "own" in spec:
            out.append(spec)
            continue
        cuts = [lo0 + (lo1 + 1 - lo0) * i // k for i in range(k + 1)]
        for t0, t1 in zip(cuts[:-1], cuts[1:]):
            out.append({**spec, "rows": spec["rows"] // k, "own": (t0, t1), "lo_range": (t0, t1 + span)})
    return out


def window_groups(lo: np.ndarray, window: int, span: int) -> tuple[np.ndarray, np.ndarray]:
    """(group, row) of every event's place in :func:`time_window`'s stretches, in order
    of group then row: an event starting at ``lo`` is in stretch ``lo // W`` and, when it
    starts at most ``span`` into it, in the one before too."""
    g = np.floor_divide(lo, window)
    rows = np.arange(len(lo))
    halo = (lo - g * window) <= span
    gs = np.concatenate([g, g[halo] - 1])
    rs = np.concatenate([rows, rows[halo]])
    order = np.lexsort((rs, gs))
    return gs[order], rs[order]


def write_arrow(table: pa.Table, path: str) -> str:
    """``table`` as an Arrow IPC file at ``path`` (the staging directory's format)."""
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    return path


def read_arrow(path: str) -> pa.Table:
    """An Arrow IPC file written by :func:`write_arrow`, memory-mapped."""
    return pa.ipc.open_file(pa.memory_map(path)).read_all()


def merge_stages(chunks: list) -> dict:
    """The chunks' :meth:`Stager.stage` outputs for one phrase, in input order → each
    group's files: ``{group: {"frames": {type: [(chunk, path)]}, "history": {type: [(chunk, path)]}}}``.
    With no keyed events but broadcast ones, the broadcast types form the one group 0."""
    groups: dict = {}
    every: dict = {}
    src: dict = {}
    window = next((st["window"] for _, st in chunks if st.get("window")), None)
    for c, st in chunks:
        for g, files in st["groups"].items():
            spec = groups.setdefault(g, {"frames": {}, "history": {}, "key": g, "rows": 0})
            spec["rows"] += st["rows"][g]
            spec["lo"] = _widened(spec.get("lo"), st["lo"][g])      # its events' least and greatest start
            for t, path in files.items():
                spec["frames"].setdefault(t, []).append((c, path))
        for t, path in st["all"].items():
            every.setdefault(t, []).append((c, path))
        for t, path in st["src"].items():
            src.setdefault(t, []).append((c, path))
    if not groups and every:
        groups[0] = {"frames": {}, "history": {}, "key": 0, "rows": 0}
    for g, spec in groups.items():
        if window:           # the matches this stretch of time reports: those that start in it
            spec["own"] = (g * window, (g + 1) * window)
        for t, paths in every.items():
            spec["frames"][t] = list(paths)
        for t, paths in src.items():
            spec["history"][t] = list(paths)
    return {g: groups[g] for g in sorted(groups)}


def _widened(span: tuple | None, more: tuple) -> tuple:
    """The least and greatest of ``span`` (None: none yet) and ``more``."""
    return more if span is None else (min(span[0], more[0]), max(span[1], more[1]))


def key_buckets(df: pd.DataFrame, key, buckets: int) -> np.ndarray:
    """Each event's group from its key values (as strings, like :func:`_bucket`);
    -1 for an event without a key value (it relates to nothing)."""
    n = len(df)
    if not key:
        return np.zeros(n, dtype=np.int64)
    ok = np.ones(n, dtype=bool)
    h = np.zeros(n, dtype=np.uint64)
    for k in key:
        codes, uniques = pd.factorize(df[k], use_na_sentinel=True)      # hash each value once
        ok &= codes >= 0
        hu = pd.util.hash_array(np.array([str(u) for u in uniques] + [""], dtype=object))
        h = h * np.uint64(1_000_003) ^ hu[codes]                        # -1 (missing): the ""
    out = (h % np.uint64(buckets)).astype(np.int64)
    out[~ok] = -1
    return out


#: Setting: a JSON lines file every task appends its timings to (one line per ingest
#: chunk and per matched group: stage, phrase, item, process, seconds per step, CPU
#: and kernel seconds, rows); default off. For profiling a run: which group is the
#: slowest, how much of a task is matching, writing, or the kernel's.
TASK_LOG_KEY = "spark.spatec.taskLog"


def task_log(spark) -> str | None:
    """The task log's path (:data:`TASK_LOG_KEY`), None when off."""
    path = spark.conf.get(TASK_LOG_KEY, "").strip()
    if not path or path.lower() == "off":
        return None
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return os.path.abspath(path)


class TaskClock:
    """In a task: the wall time of its steps (:meth:`step`), and its CPU and kernel time,
    appended as one JSON line to the task log (:meth:`done`); nothing without a log."""

    def __init__(self, log: str | None, stage: str, **what):
        self.log, self.line = log, {"stage": stage, **what}
        if log:
            self._usage = resource.getrusage(resource.RUSAGE_SELF)
            self._start = self._at = time.perf_counter()
            self.line.update(pid=os.getpid(), start=time.time(), seconds={})

    def step(self, name: str) -> None:
        if self.log:
            now = time.perf_counter()
            self.line["seconds"][name] = round(now - self._at, 6)
            self._at = now

    def done(self, **more) -> None:
        if not self.log:
            return
        u = resource.getrusage(resource.RUSAGE_SELF)
        self.line.update(more, total_s=round(time.perf_counter() - self._start, 6),
                         cpu_s=round(u.ru_utime + u.ru_stime - self._usage.ru_utime - self._usage.ru_stime, 6),
                         kernel_s=round(u.ru_stime - self._usage.ru_stime, 6))
        data = (json.dumps(self.line) + "\n").encode()
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, data)          # one write in append mode: lines of tasks do not mix
        finally:
            os.close(fd)


#: What a staged task returns when its rows go to a file (``collect``).
ROWS_SCHEMA = "g long, path string, n long"


def staged_groups(spark, groups: dict, plan: PhrasePlan, program, crs: str, final_w: int, dtypes: dict,
                  engine: str | None, rows_dir: str | None = None, drop: dict | None = None, jsonl: bool = False):
    """The phrase's composites (:data:`RAW_SCHEMA`; with ``rows_dir``, :data:`ROWS_SCHEMA`:
    where each group pickled its rows): one Spark task per group of :func:`merge_stages`.
    ``drop``: chunk → ids of its events found again in an earlier chunk (dropped)."""
    schema = ROWS_SCHEMA if rows_dir else RAW_SCHEMA
    if not groups:
        return spark.createDataFrame([], schema)
    specs = split_in_time([groups[g] for g in sorted(groups)], plan, max(1, spark.sparkContext.defaultParallelism),
                          int(spark.conf.get(BUCKET_ROWS_KEY, str(BUCKET_ROWS))))
    regions = prefilter_regions(plan, program, crs) if engine else {}
    seeds, tasks = dealt(spark, [spec["rows"] for spec in specs])
    fn = staged_fn(plan, program, crs, final_w, dtypes, dict(enumerate(specs)), regions,
                   engine, tasks, rows_dir, drop or {}, jsonl, log=task_log(spark))
    return seeds.mapInPandas(fn, schema)


def dealt(spark, sizes: list):
    """Work items of these sizes dealt to the cores (:func:`balance`): a DataFrame of one
    number (column ``g``) per task, in a partition of its own, and the items (positions
    in ``sizes``) that each number stands for. A Python task costs a tenth of a second
    or more to start, so a task works through several items rather than one each."""
    tasks = balance(sizes, max(1, spark.sparkContext.defaultParallelism))
    seeds = spark.range(len(tasks), numPartitions=max(1, len(tasks))).withColumnRenamed("id", "g")
    return seeds, tasks


def items_of(pdf: pd.DataFrame, tasks: list, claims: str | None = None):
    """In a task: the items its seeds (:func:`dealt`) stand for, in the order dealt
    (largest first). With ``claims``, a directory every task sees, then also the items
    dealt to other tasks that none has begun yet, each from the end of its task's list
    (the smallest, which that task would come to last): a task that is done early takes
    work from one still busy, so the stage ends when the work does rather than when the
    task whose groups were slower than their sizes said does (Stuck's bus-day: one core
    was idle 0.4 s of 3.4 s, with groups dealt evenly by events).

    An item is claimed (:func:`claim`) before it is begun; a task skips one another has
    claimed. Items come lazily: each claim is made when the item before it is done. On a
    file system without symbolic links every task does its own items, as without claims."""
    seeds = pdf["g"].tolist()
    for seed in seeds:
        for i in tasks[seed]:
            if claims is not None:
                try:
                    if not claim(claims, i, seed):
                        continue
                except _NoClaims:
                    claims = None
            yield i
    if claims is None or not seeds:
        return
    mine = set(seeds)
    queues = [list(reversed(tasks[s])) for s in range(len(tasks)) if s not in mine]
    while any(queues):
        for q in queues:
            if q:
                i = q.pop(0)
                try:
                    if claim(claims, i, seeds[0]):
                        yield i
                except _NoClaims:
                    return


class _NoClaims(Exception):
    """The claims' directory cannot hold a symbolic link."""


def claim(claims: str, item: int, seed: int) -> bool:
    """Whether the task of ``seed`` is to match ``item``: it is the first to claim it, or
    the one that did (a retry of a task that failed after claiming: its items are done
    again, as a task's output is all or nothing). A claim is a symbolic link named after
    the item whose target is the seed, made at once with its content (``symlink`` fails
    when the name exists, also on a shared file system). :class:`_NoClaims` where the
    file system has no symbolic links: no task can claim anything there (they all see
    the one directory), so each does its own items."""
    path = os.path.join(claims, str(int(item)))
    try:
        os.symlink(str(int(seed)), path)
        return True
    except FileExistsError:
        return os.readlink(path) == str(int(seed))
    except OSError as e:
        raise _NoClaims(str(e)) from e


def balance(sizes: list, tasks: int) -> list:
    """Groups (by position) dealt to at most ``tasks`` tasks so that each task's events
    add up about the same (largest first, each to the least loaded task); a task's
    groups largest first. A group's work grows with its events, and the slowest task is
    the stage's time.

    >>> balance([5, 1, 1, 4, 3], 2)
    [[0, 1, 2], [3, 4]]
    >>> balance([1, 2, 3], 1)
    [[2, 1, 0]]
    """
    load = [0] * max(1, min(tasks, len(sizes)))
    dealt: list = [[] for _ in load]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        k = min(range(len(load)), key=lambda k: (load[k], k))
        load[k] += sizes[i]
        dealt[k].append(i)
    return [d for d in dealt if d]


def _read_rows(df) -> list:
    rows = []
    for r in sorted(df.collect(), key=lambda r: r.g):
        with open(r.path, "rb") as f:
            got = pickle.load(f)
        if len(got) != r.n:
            raise RuntimeError(f"{r.path}: {len(got)} rows, the task wrote {r.n}")
        rows.extend(got)
    return rows


def load_staged(files: list, drop: dict) -> pa.Table:
    """Staged files ``[(chunk, path)]`` as one table, in order; the events each
    chunk's ``drop`` names (copies of earlier chunks' events) left out."""
    tables = []
    for c, path in files:
        table = read_arrow(path)
        gone = drop.get(c)
        if gone:
            keep = pc.invert(pc.is_in(table.column("_id"), value_set=pa.array(sorted(gone), pa.string())))
            table = table.filter(keep)
        tables.append(table)
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="permissive")


def source_history(table: pa.Table, g: int) -> pa.Table:
    """From a type's ``src`` table (every keyed event with its group ``_g``): the
    events of group ``g``'s sources that other groups hold (``successive``'s history)."""
    gs = table.column("_g")
    src = table.column("_source")
    mine = pc.unique(pc.filter(src, pc.and_(pc.equal(gs, g), pc.is_valid(src))))
    keep = pc.and_(pc.is_in(src, value_set=mine), pc.not_equal(gs, g))
    return table.filter(pc.fill_null(keep, False)).drop_columns(["_g"])


def staged_fn(plan: PhrasePlan, program, crs: str, final_w: int, dtypes: dict, groups: dict, regions: dict,
              engine: str | None, tasks: list, rows_dir: str | None = None, drop: dict | None = None,
              jsonl: bool = False, log: str | None = None):
    """The function each task runs: its group's Arrow files → (leaf pre-filter) →
    :func:`~spatec.runtime.batch.phrase_rows` → raw output rows (or, with
    ``rows_dir``, the rows pickled to a file there, and where; with ``jsonl``
    too, the group's lines of the JSON lines output and their keys,
    :func:`~spatec.sinks.files.write_jsonl_part`). ``tasks``: the groups each seed
    stands for (:func:`dealt`); ``log``: the task log (:data:`TASK_LOG_KEY`)."""
    drop = drop or {}

    def frame(t, table, prefilter=True):
        if prefilter and t in regions:
            table = _prefiltered(table, regions[t], crs, engine)
        # ids stay Arrow text (pandas' ArrowDtype): the fast path makes strings of the ids
        # its composites bind only (vexpr.TextColumn), the rest read them as strings
        ids = pd.Series(pd.arrays.ArrowExtensionArray(table.column("_id")), name="_id")
        df = table.drop_columns(["_id"]).to_pandas()
        df.insert(0, "_type", t)
        df.insert(1, "_id", ids)
        kept = dtypes.get(t, {})
        unread = [a for a in attribute_names(program, t) if a not in df]
        for a in unread:              # an attribute the phrase never reads (Stager.used)
            df[a] = _missing_column(len(df), kept.get(a))
        return _restore(df, {c: dt for c, dt in kept.items() if c != "_id" and c not in unread})

    def run(batches):
        proj = Projector(crs)
        claims = None
        if rows_dir is not None:      # the output goes to files: a task may take another's groups
            claims = os.path.join(rows_dir, "claims")
            os.makedirs(claims, exist_ok=True)        # (and rows_dir with it)
        for pdf in batches:
            own = {i for seed in pdf["g"].tolist() for i in tasks[seed]}
            for g in items_of(pdf, tasks, claims):
                spec = groups[g]
                clock = TaskClock(log, "match", phrase=plan.name, item=int(g))
                frames = {t: frame(t, _starting(load_staged(fs, drop), spec.get("lo_range")))
                          for t, fs in spec["frames"].items()}
                history = {t: frame(t, source_history(load_staged(fs, drop), spec["key"]), prefilter=False)
                           for t, fs in spec["history"].items()}
                clock.step("load")
                rows, _size = phrase_rows(plan, program, frames, proj, final_w, history=history,
                                          arrow_hulls=jsonl and rows_dir is not None)
                if "own" in spec:
                    rows = rows_starting(rows, *spec["own"])
                clock.step("match")
                if rows_dir is None:
                    clock.done(events=int(spec["rows"]), rows=len(rows))
                    yield raw_frame(rows)
                    continue
                path = os.path.join(rows_dir, f"g{int(g)}.{'jsonl' if jsonl else 'pickle'}")
                tmp = f"{path}.{os.getpid()}.tmp"     # (two attempts of one task may both write it)
                if jsonl:     # the output file's lines, and the keys the driver merges them by
                    keys = write_jsonl_part(rows_frame(plan, rows), tmp, time_fields(plan))   # deduplicated
                    write_arrow(keys, tmp + ".keys")
                    os.replace(tmp + ".keys", path + ".keys")
                else:
                    with open(tmp, "wb") as f:
                        pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)
                clock.step("write")
                clock.done(events=int(spec["rows"]), rows=len(rows), taken=g not in own)
                yield pd.DataFrame({"g": pd.Series([int(g)], dtype="int64"), "path": [path],
                                    "n": pd.Series([len(rows)], dtype="int64")})

    return run


def _starting(table: pa.Table, lo_range: tuple | None) -> pa.Table:
    """The events of ``table`` that start in ``lo_range`` (both ends in; all without one)."""
    if lo_range is None or not table.num_rows:
        return table
    lo = table.column("_lo")
    return table.filter(pc.and_(pc.greater_equal(lo, lo_range[0]), pc.less_equal(lo, lo_range[1])))


def _prefiltered(table: pa.Table, regions: dict, crs: str, engine: str) -> pa.Table:
    """The events of ``table`` that possibly meet one of ``regions`` (:func:`prefilter`, in-task)."""
    names = sorted(regions)
    flags = [f"_in_{_safe(n)}" for n in names]
    fn = flag_fn([(n, regions[n]) for n in names], flags, crs, engine)
    kept = []
    for b in fn(table.to_batches()):
        keep = np.zeros(b.num_rows, dtype=bool)
        for f in flags:
            keep |= b.column(b.schema.get_field_index(f)).to_numpy(zero_copy_only=False)
        kept.append(b.filter(pa.array(keep)).select(table.schema.names))
    return pa.Table.from_batches(kept, schema=table.schema) if kept else table.slice(0, 0)


# ------------------------------------------------------------------------------- events

def _col(type_name: str, attr: str) -> str:
    """Attributes are carried as ``<type>__<attr>`` so types with the same attribute
    name (and perhaps another type) share one union without clashing."""
    return f"{type_name}__{attr}"


#: Setting: where canonical events are staged as Parquet for Spark to read —
#: ``auto`` (a temporary directory, when the executors share this machine's
#: file system: a ``local`` master or a standalone one on 127.0.0.1/localhost),
#: ``off`` (send them through ``createDataFrame``), or a directory every
#: executor can read (a shared mount).
STAGING_KEY = "spark.spatec.staging"


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

    path = os.path.join(stage, f"{_safe(type_name)}-{uuid.uuid4().hex}.parquet")
    pq.write_table(table, path, row_group_size=65_536, compression="snappy")
    return spark.read.schema(_ddl(table.schema)).parquet(path)


def canonical_table(program, type_name: str, df: pd.DataFrame, columns=None, nthreads=None,
                    texts: dict | None = None) -> pa.Table:
    """One type's canonical rows (canonical columns, then its attributes; or ``columns``)
    as Arrow, with the types Spark can hold (a column of nothing but missing values is a
    string column). ``nthreads``: as :meth:`pyarrow.Table.from_pandas`. ``texts``: some
    of ``df``'s text columns as Arrow already (:attr:`~spatec.events.canonical.IngestResult.texts`),
    taken as they are rather than converted from Python strings again."""
    if columns is None:
        columns = list(CANONICAL) + attribute_names(program, type_name)
    columns = list(columns)
    given = {c: a for c, a in (texts or {}).items() if c in columns and len(a) == len(df)}
    rest = [c for c in columns if c not in given]
    # object columns of Python values: Arrow infers each column's one type
    table = pa.Table.from_pandas(df, columns=rest, preserve_index=False, nthreads=nthreads)
    if given:
        table = pa.table({c: given[c] if c in given else table.column(c) for c in columns})
    return table.cast(pa.schema([_spark_field(f) for f in table.schema]))


def staging_dir(spark) -> str | None:
    """The directory to stage events in (see :data:`STAGING_KEY`), None: do not stage."""
    setting = spark.conf.get(STAGING_KEY, "auto").strip()
    if setting.lower() == "off":
        return None
    if setting.lower() != "auto":
        os.makedirs(setting, exist_ok=True)
        return setting
    master = spark.sparkContext.master
    if not (master.startswith("local") or "://127.0.0.1" in master or "://localhost" in master):
        return None
    global _STAGE
    if _STAGE is None or not os.path.isdir(_STAGE):
        _STAGE = tempfile.mkdtemp(prefix="spatec-stage-")
        atexit.register(shutil.rmtree, _STAGE, True)
    return _STAGE


_STAGE: str | None = None


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

#: Setting: about how many events one Spark group (one pandas frame in a Python
#: worker) holds; the number of groups is a multiple of the default parallelism.
BUCKET_ROWS_KEY = "spark.spatec.bucketRows"
BUCKET_ROWS = 400_000


#: Groups per core at least: keys differ in size, and several groups a core let
#: :func:`balance` even the tasks out (Bunching's lines: 60/40 with one a core).
GROUPS_PER_CORE = 6


def bucket_count(spark, rows: int) -> int:
    """How many groups a phrase's events are hashed into: enough for every core to
    have :data:`GROUPS_PER_CORE`, and groups of about :data:`BUCKET_ROWS_KEY` events."""
    par = max(1, spark.sparkContext.defaultParallelism)
    per = int(spark.conf.get(BUCKET_ROWS_KEY, str(BUCKET_ROWS)))
    rounds = max(GROUPS_PER_CORE, -(-rows // (par * max(1, per))))
    return par * rounds


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

    types = sorted(t for t in phrase_types(plan, program) if t in events)
    keyed = keyed_types(plan, program, types)
    drop = prefilter_regions(plan, program, crs) if engine else {}
    dfs = {}
    for t in types:
        df = events[t]
        if t in drop:
            df = prefilter(df, drop[t], crs, engine)
        dfs[t] = df

    def bucketed(t):
        df = dfs[t]
        if not plan.key:
            return df.withColumn("_b", F.lit(0))
        return df.where(_has_key(plan, t, df)).withColumn("_b", _bucket(plan, t, buckets))

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
    if needs_source_history(plan, program):
        k = _union([k.withColumn("_hist", F.lit(False))] + _history_rows(plan, program, dfs, keyed, k, buckets))
    return k


def _has_key(plan: PhrasePlan, t: str, df):
    from pyspark.sql import functions as F

    cond = None
    for k in plan.key:
        c = F.col(_col(t, k))
        ok = c.isNotNull()
        if dict(df.dtypes)[_col(t, k)] in ("double", "float"):
            ok = ok & ~F.isnan(c)
        cond = ok if cond is None else cond & ok
    return cond


def _bucket(plan: PhrasePlan, t: str, buckets: int):
    """The group of an event from its key values (as strings: one key value,
    whatever the type that carries it, hashes alike)."""
    from pyspark.sql import functions as F

    h = F.xxhash64(*[F.col(_col(t, k)).cast("string") for k in plan.key])
    return F.pmod(h, F.lit(buckets)).cast("int")


def _history_rows(plan: PhrasePlan, program, dfs: dict, keyed, k, buckets: int) -> list:
    """For ``successive`` under a key that is not the source: each group also gets,
    flagged ``_hist``, the events of its sources that are not its own (see
    :func:`spatec.runtime.routing.partitions`)."""
    from pyspark.sql import functions as F

    out = []
    for t in sorted(keyed):
        decl = program.events[t]
        if decl.source is None or tuple(plan.key) == (decl.source.attr,):
            continue
        pairs = k.where(F.col("_type") == t).select(F.col("_b").alias("_hb"), F.col("_source").alias("_hsrc")) \
            .distinct()
        ev = dfs[t].where(F.col("_source").isNotNull())
        ev = ev.withColumn("_own", F.when(_has_key(plan, t, ev), _bucket(plan, t, buckets)))
        h = ev.join(pairs, ev["_source"] == pairs["_hsrc"]).where(~F.coalesce(F.col("_own") == F.col("_hb"),
                                                                              F.lit(False)))
        h = h.drop("_hsrc", "_own").withColumnRenamed("_hb", "_b")
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
            sub = _restore(sub.reset_index(drop=True), dtypes.get(t, {}))
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


def _missing_column(n: int, dtype: str | None):
    """``n`` missing values as :func:`_restore` makes a column of None of ``dtype``
    (NaN, NA, NaT; None where the dtype holds no missing value), made as such
    rather than converted from None one by one."""
    if dtype == "float64":
        return np.full(n, np.nan)
    if dtype is None or dtype == "object":
        return None
    try:
        return pd.array(np.full(n, None, dtype=object), dtype=dtype)
    except (TypeError, ValueError):
        return None


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
    from spatec.runners.spark.session import spatial_engine
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

"""Ingest in Spark tasks, for the staged exchange: the driver never holds the events.

The driver reads each CSV or Parquet input as raw text columns, one slice of
about ``spark.spatec.ingestRows`` rows at a time (:data:`INGEST_ROWS_KEY`),
and writes each slice to the staging directory as an Arrow file: a *chunk*.
Spark tasks, each with a share of the chunks (dealt by size), then do for each
chunk what the driver's ingest does
(:func:`spatec.events.canonical.to_events`: typing, stamps, ids, rejects,
duplicates within the chunk) and stages the chunk's events for every phrase
(:class:`~spatec.runners.spark.staging.Stager`: one Arrow file per group and
type). What comes back to the driver is small: counts, rejects, the events'
bounding box and latest time, and per source the span of its times.

From those the driver makes exactly the decisions a whole-input ingest makes:

- **duplicates across chunks**: an event whose source and time (or, for a
  type without a source, whose record) an earlier chunk already had — of the
  same input or an earlier input of the type — is a reject (``duplicate of
  <id>``), as :func:`spatec.runners.replay.ingest` makes it. Only sources whose
  time spans overlap in two chunks are examined, from the per-chunk key
  files; the tasks that match then leave the copies out;
- the metric CRS (the median of the positions, from each chunk's counts per
  cell: :func:`~spatec.spatial.crs.position_cells`) and the final watermark;
- the rejects file, in input order, and the read/used/rejected counts.

Other formats (JSONL, SIRI-VM polls) are read on the driver as before and
staged there as one chunk each: the same files, the same merge. A type with
an input of such a format has all its inputs read there.

Peak memory: the driver holds one raw slice at a time and the per-chunk
summaries; a task holds one chunk, or one group (``spark.spatec.bucketRows``).
For JSON lines output the tasks write the composites' lines and the driver
only merges them (:func:`~spatec.sinks.files.merge_jsonl_parts`); other formats
bring the composites back to the driver to be written.
"""
from __future__ import annotations

import os
import pickle
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from spatec.events.canonical import (
    DUPLICATE,
    IngestResult,
    check_columns,
    empty_rejects,
    to_events,
)
from spatec.events.raw import RawBatch
from spatec.plan.program import Compiled
from spatec.spatial.crs import choose_crs, event_extents, extent_cells, merge_cells
from spatec.storage import scratch
from spatec.storage.sweep import sweep

#: Setting: about how many input rows one ingest task types and stages.
INGEST_ROWS_KEY = "spark.spatec.ingestRows"
INGEST_ROWS = 250_000

#: Formats read in slices by the driver and typed in Spark tasks.
SLICED = ("csv", "parquet")

#: CSV files larger than this (bytes on disk) are streamed slice by slice; smaller ones
#: are parsed whole, by Arrow's multi-threaded reader (faster), then cut.
STREAM_CSV_BYTES = 64 << 20


@dataclass
class Chunk:
    """A slice of one raw batch of one input, staged as an Arrow file (``raw``): what a
    task needs to make it a :class:`RawBatch` again (:meth:`load`)."""

    index: int
    input: int
    type: str
    file: str
    batch: int                  # the batch's number within its input (file order)
    raw: str
    rows: int
    names: dict
    present: tuple
    provides: frozenset
    unreadable: list = field(default_factory=list)
    fetch: str | None = None    # csv | parquet: whole records are read again from the file

    def load(self) -> RawBatch:
        from spatec.events.formats import slice_fetch
        from spatec.runners.spark.staging import read_arrow

        table = read_arrow(self.raw)
        rows = table.column("__row").to_numpy()
        table = table.drop_columns(["__row"])
        return RawBatch(self.file, table, rows, self.names, list(self.unreadable), self.provides,
                        self.present, slice_fetch(self.fetch, self.file, self.present, rows))


def slice_inputs(program, inputs, root: str, rows: int, cores: int = 1):
    """Chunks of the CSV and Parquet inputs (written under ``root``) and the inputs of
    other formats, as ``(chunks, {input: (type, path)})``. Rows of every slice are
    checked against the declaration here, so a missing column fails before any task.
    A file whose rows are known before it is cut (Parquet, a CSV read whole) is cut
    into slices of equal size, at most ``rows``, as many as ``cores`` share evenly
    (:func:`even_rows`)."""
    from spatec.events.formats import (
        StreamFailed,
        csv_slices,
        expand,
        parquet_slices,
        read_csv,
    )
    from spatec.events.read import wanted_columns

    chunks: list = []
    elsewhere: dict = {}
    files_of = [expand(os.fspath(path)) for _, path in inputs]
    # a type with any input of another format is read on the driver, every input of it (so
    # that copies across its inputs are found where the records are)
    driver = {t for (t, _), files in zip(inputs, files_of) if any(f not in SLICED for _, f in files)}
    for i, ((t, path), files) in enumerate(zip(inputs, files_of)):
        decl = program.events[t]
        if t in driver:
            elsewhere[i] = (t, path)
            continue
        for k, (file, fmt) in enumerate(files):
            if fmt == "parquet":
                parts = parquet_slices(file, wanted_columns(decl), even_rows(parquet_rows(file), rows, cores))
            elif os.path.getsize(file) > STREAM_CSV_BYTES:
                parts = csv_slices(file, wanted_columns(decl), rows)
            else:
                whole = read_csv(file, wanted_columns(decl))
                parts = _slices(whole, even_rows(whole.table.num_rows, rows, cores))
            mark = len(chunks)
            try:
                for b in parts:
                    check_columns(b, decl)
                    chunks.append(_write_chunk(b, len(chunks), i, t, k, fmt, root))
            except StreamFailed:
                # a record Arrow cannot parse: the whole file again, by the reader that
                # numbers malformed records exactly
                for ch in chunks[mark:]:
                    os.unlink(ch.raw)
                del chunks[mark:]
                for b in _slices(read_csv(file, wanted_columns(decl)), rows):
                    check_columns(b, decl)
                    chunks.append(_write_chunk(b, len(chunks), i, t, k, fmt, root))
    return chunks, elsewhere


def even_rows(n: int, rows: int, cores: int) -> int:
    """Rows per slice of ``n`` rows: at most ``rows``, in as many slices as the ``cores``
    share evenly (a multiple of them, when there is more than one slice). The slices'
    tasks then end together: 1.32 M rows in slices of 250k would leave one core the
    short sixth slice, ~15 % of the ingest idle.

    >>> even_rows(1_318_584, 250_000, 2), even_rows(100, 250_000, 2), even_rows(600_000, 250_000, 4)
    (219764, 100, 150000)
    """
    count = -(-n // max(1, rows))
    if count > 1 and cores > 1:
        count = -(-count // cores) * cores
    return max(1, -(-n // max(1, count)))


def parquet_rows(path: str) -> int:
    """Rows of a Parquet file, from its footer (0 when it cannot be read: the reader says why)."""
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowInvalid, OSError):
        return 0


def _slices(b: RawBatch, rows: int):
    """A whole-file batch in slices of ``rows`` (unreadable records with the first)."""
    n = b.table.num_rows
    for a in range(0, max(n, 1), max(1, rows)):
        yield RawBatch(b.file, b.table.slice(a, rows), b.rows[a:a + rows], b.names,
                       b.unreadable if a == 0 else [], b.provides, b.present, b.fetch)


def _write_chunk(b: RawBatch, index: int, inp: int, t: str, k: int, fmt: str, root: str) -> Chunk:
    from spatec.runners.spark.staging import write_arrow

    path = write_arrow(b.table.append_column("__row", pa.array(np.asarray(b.rows, dtype=np.int64))),
                       os.path.join(root, f"raw-{index}.arrow"))
    return Chunk(index, inp, t, b.file, k, path, b.table.num_rows, dict(b.names), tuple(b.present), b.provides,
                 list(b.unreadable), fmt if b.fetch is not None else None)


# ------------------------------------------------------------------------------- one chunk

def chunk_result(index: int, inp: int, res: IngestResult, program, plans, buckets: int, root: str,
                 windows: dict | None = None) -> dict:
    """One chunk's ingest result staged for every phrase that reads its type, and what
    the driver needs of it (counts, rejects, keys for duplicates, position cells, latest time).
    ``windows``: phrase → :func:`~spatec.runners.spark.scheduling.time_window`."""
    from spatec.runners.spark.staging import Stager, column_dtypes

    t = res.type
    ev = res.events
    tag = f"c{index}"
    out = {"index": index, "input": inp, "type": t, "read": res.read, "used": res.used,
           "rejected": res.rejected, "rejects": res.rejects, "stages": {}, "dtypes": None,
           "max_hi": None, "cells": None, "keys": None, "sources": None, "spans": None}
    if not len(ev):
        return out
    stager = Stager(program, {t: ev}, root, tag, texts={t: res.texts})
    stager.share([plan for plan in plans if t in plan.physical.types], windows)
    for plan in plans:
        if t in plan.physical.types:
            out["stages"][plan.name] = stager.stage(plan, buckets, (windows or {}).get(plan.name))
    out["dtypes"] = column_dtypes(program, t, ev)
    hi = ev["_hi"].to_numpy(np.int64)
    out["max_hi"] = int(hi.max())
    x0, x1, y0, y1 = event_extents(ev)
    out["cells"] = extent_cells(x0, x1, y0, y1)
    keys = {"row": ev["_row"].to_numpy(np.int64), "hi": hi, "x0": x0, "y0": y0}
    if not (np.array_equal(x0, x1, equal_nan=True) and np.array_equal(y0, y1, equal_nan=True)):
        keys.update(x1=x1, y1=y1)          # geometries: their extents (points: x0, y0 alone)
    if program.events[t].source is not None:
        codes, uniques = pd.factorize(ev["_source"], use_na_sentinel=True)
        tt = ev["_t"].to_numpy(np.int64)
        keys.update(src=codes.astype(np.int32), t=tt)
        out["sources"] = [str(u) for u in uniques]
        spans = pd.DataFrame({"c": codes, "t": tt}).groupby("c")["t"].agg(["min", "max"])
        spans = spans[spans.index >= 0]
        out["spans"] = (spans.index.to_numpy(np.int64), spans["min"].to_numpy(np.int64),
                        spans["max"].to_numpy(np.int64))
    else:
        keys.update(h=np.array([int(i.rsplit("#", 1)[1], 16) for i in ev["_id"]], dtype=np.uint64))
    out["keys"] = scratch.written(os.path.join(root, f"{tag}-keys.npz"), sum(a.nbytes for a in keys.values()),
                                  lambda p: np.savez(p, **keys))[1]
    return out


def ingest_fn(program, plans, chunks: list, tasks: list, buckets: int, root: str, windows: dict | None = None,
              log: str | None = None):
    """The function each ingest task runs: its chunks (``tasks``:
    :func:`~spatec.runners.spark.scheduling.dealt`) → :func:`chunk_result`, pickled
    beside them; the task returns where. ``log``: the task log
    (:data:`~spatec.runners.spark.scheduling.TASK_LOG_KEY`)."""
    from spatec.runners.spark.scheduling import TaskClock, items_of

    def run(batches):
        for pdf in batches:
            for c in items_of(pdf, tasks):
                ch = chunks[c]
                clock = TaskClock(log, "ingest", item=int(c), input=ch.file)
                res = to_events([ch.load()], program.events[ch.type], tz=program.timezone)
                clock.step("type")
                got = chunk_result(ch.index, ch.input, res, program, plans, buckets, root, windows)
                data = pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL)
                path = scratch.written(os.path.join(root, f"c{ch.index}-result.pickle"), len(data),
                                       lambda p, data=data: _write_bytes(p, data))[1]
                clock.step("stage")
                clock.done(rows=int(ch.rows), events=len(res.events))
                yield pd.DataFrame({"g": pd.Series([int(c)], dtype="int64"), "path": [path]})

    return run


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


# ------------------------------------------------------------------------------- the driver

def replay_inputs_spark(spark, compiled: Compiled, inputs, out, crs=None, phrases=None, ui=None,
                        prefilter_leaves: bool = True, fmt: str | None = None, tz: str | None = None):
    """``spatec replay`` on the staged exchange: ingest in Spark tasks, match, and the
    rejects written under ``out/_rejects``; a :class:`~spatec.runners.local.ReplayResult`
    with ``ingest`` (the counts per input) set.

    With ``fmt="jsonl"`` (``"parquet"``) the tasks render their groups' lines
    (rows) of the output files and the driver only merges them into
    ``out/<phrase>.jsonl`` (``.parquet``) (``result.paths`` set; ``result.frames``
    read back from the files when used): the driver never holds the rows."""

    from spatec.events.read import read_events, write_rejects
    from spatec.runners.local import ReplayResult, WrittenFrames
    from spatec.runners.replay import seen_across
    from spatec.runners.spark.match import PARTS, run_staged
    from spatec.runners.spark.prefilter import engine_name
    from spatec.runners.spark.scheduling import (
        TaskClock,
        bucket_count,
        dealt,
        task_log,
        time_window,
    )
    from spatec.runners.spark.staging import merge_stages, staging_dir, staging_memory
    from spatec.runtime.rows import dedupe, rows_frame, time_fields
    from spatec.sinks.files import extension

    from spatec.runtime.derived import needed

    program = compiled.program
    # the phrases asked for and the phrases they read (SPEC §8), in flow order; only those asked for
    # are written
    run = needed(compiled, phrases)
    plans = [p for p in compiled.plans if p.name in run]
    shown = [p for p in plans if not phrases or p.name in phrases]
    where = getattr(spark, "where", "on Spark")     # (the local runner's SerialSession: in this process)
    root = os.path.join(staging_dir(spark), uuid.uuid4().hex)
    scratch.pair(root, staging_memory(spark))
    started = time.perf_counter()
    log = task_log(spark)
    clock = TaskClock(log, "driver", phrases=[p.name for p in plans])
    sweeps = []
    merged = None
    try:
        rows = int(spark.conf.get(INGEST_ROWS_KEY, str(INGEST_ROWS)))
        if ui:
            ui.stage("reading the inputs")
        chunks, elsewhere = slice_inputs(program, inputs, root, rows, max(1, spark.sparkContext.defaultParallelism))
        read_here = {}
        seen = seen_across(elsewhere.values())
        for i, (t, path) in elsewhere.items():
            if ui:
                ui.stage(f"reading {t} from {path}")
            read_here[i] = read_events(path, program.events[t], tz=program.timezone, seen=seen.get(t))
        clock.step("read")
        buckets = bucket_count(spark, sum(ch.rows for ch in chunks)
                               + sum(len(res.events) for res in read_here.values()))
        windows = {p.name: time_window(spark, p) for p in plans}
        results: dict = {}
        if chunks:
            if ui:
                ui.stage(f"typing {len(chunks)} chunk{'s' if len(chunks) > 1 else ''} of input {where}")
            seeds, tasks = dealt(spark, [ch.rows for ch in chunks])
            fn = ingest_fn(program, plans, chunks, tasks, buckets, root, windows, log=log)
            for r in seeds.mapInPandas(fn, "g long, path string").collect():
                with open(r.path, "rb") as f:
                    results[int(r.g)] = pickle.load(f)
        clock.step("ingest tasks")
        for j, (i, res) in enumerate(read_here.items()):
            index = len(chunks) + j
            results[index] = chunk_result(index, i, res, program, plans, buckets, root, windows)
        order = sorted(results, key=lambda c: (results[c]["input"], c))
        results = [results[c] for c in order]
        batch_of = {ch.index: ch.batch for ch in chunks}
        drop, extra = cross_chunk_duplicates(results, {ch.index: ch for ch in chunks})
        summary, rejects = _summary(inputs, results, extra, batch_of)
        for row in summary.rows:
            if ui:
                ui.ingested(*row)
        if len(rejects):
            write_rejects(rejects, out)
        crs = choose_crs(program, {}, crs, cells=merge_cells(r["cells"] for r in results))
        his = [r["max_hi"] for r in results if r["max_hi"] is not None]
        final_w = max(his) if his else 0
        dtypes = {}
        for r in results:
            if r["dtypes"] is not None:
                dtypes.setdefault(r["type"], r["dtypes"])
        staged = {p.name: merge_stages([(r["index"], r["stages"][p.name]) for r in results
                                        if p.name in r["stages"]]) for p in plans}
        ingested = time.perf_counter()
        clock.step("decide")
        if ui:
            ui.stage(f"matching {where}")
            ui.matching({p.name: sum(g["rows"] for g in staged[p.name].values()) for p in plans})
        engine = engine_name(spark) if prefilter_leaves else None
        result = ReplayResult({}, crs)
        if fmt in PARTS:
            result.paths = {p.name: Path(out) / f"{p.name}.{extension(fmt)}" for p in shown}
            merged = Merged(result.paths, fmt, {p.name: p for p in shown}, tz, sweeps)
        raw = run_staged(spark, plans, program, staged, crs, final_w, dtypes, engine, root,
                         fmt if fmt in PARTS else True, drop, tz=tz, ready=merged)
        if ui:
            ui.matched()
        clock.step("match tasks")
        # the raw chunks and staged groups (the files directly in root) are dead now: removed
        # beside the merge, which reads only the parts (root's rows-* folders)
        sweeps.append(sweep(scratch.top_files(root)))
        if merged is not None:
            if ui:
                ui.stage("writing the output")
            result.counts.update(merged.commit())
            result.frames = WrittenFrames(result.paths, {p.name: p for p in shown})
            clock.step("merge")
    finally:
        if merged is not None:
            merged.discard()
        for s in sweeps:
            s.join()
        scratch.remove(root)
    clock.step("clean up")
    clock.done()
    if fmt not in PARTS:
        for plan in shown:
            df = rows_frame(plan, dedupe(raw[plan.name]))
            result.frames[plan.name] = df
            result.counts[plan.name] = len(df)
    result.ingest = summary
    result.seconds = {"ingest": ingested - started, "match": time.perf_counter() - ingested}
    return result


class Merged:
    """The output files of a replay that writes parts (``ready`` of
    :func:`~spatec.runners.spark.match.run_staged`): each phrase's parts merged as soon as
    they are handed on (maybe while other phrases are still matched) into a hidden file
    beside its output file; :meth:`commit` puts every file in its place once the run has
    succeeded, or :meth:`discard` removes them: a failed run leaves no output file of this
    run. Either sweeps the parts (``sweeps``: their sweepers), not before: a phrase may be
    handed on again with some of the same parts. ``plans``: the phrases written (others
    handed on are left alone)."""

    def __init__(self, paths: dict, fmt: str, plans: dict, tz: str | None, sweeps: list):
        self.paths, self.fmt, self.plans, self.tz, self.sweeps = paths, fmt, plans, tz, sweeps
        self.counts: dict = {}
        self.parts: set = set()

    def hidden(self, name: str) -> Path:
        path = Path(self.paths[name])
        return path.with_name(f".{path.name}.merged")

    def __call__(self, name: str, parts: list) -> None:
        from spatec.runtime.rows import rows_frame, time_fields
        from spatec.sinks.files import merge_jsonl_parts, merge_parquet_parts

        plan = self.plans.get(name)
        if plan is None:
            return
        path = self.hidden(name)
        if self.fmt == "jsonl":
            n = merge_jsonl_parts(parts, path, time_fields(plan), self.tz)
        else:       # an instant is an instant: GeoParquet's times do not depend on tz
            n = merge_parquet_parts(parts, path, rows_frame(plan, []), time_fields(plan))
        self.counts[name] = n
        self.parts.update(part for part, _ in parts)

    def commit(self) -> dict:
        """Every phrase's file in its place (in the phrases' order); their composites' counts."""
        for name in self.plans:
            os.replace(self.hidden(name), self.paths[name])
        done, self.counts = self.counts, {}
        self._sweep()
        return {name: done[name] for name in self.plans}

    def discard(self) -> None:
        """Remove what is merged and not committed."""
        for name in self.counts:
            self.hidden(name).unlink(missing_ok=True)
        self.counts = {}
        self._sweep()

    def _sweep(self) -> None:
        if self.parts:
            self.sweeps.append(sweep(sorted(self.parts)))
            self.parts = set()


# ------------------------------------------------------------------------------- duplicates

def cross_chunk_duplicates(results: list, chunks: dict):
    """Copies of an event in a later chunk than its first: ``drop`` (chunk → ids to
    leave out) and the rejects they are (:class:`pandas.DataFrame` per chunk; the
    chunk's counts, cells and latest time recomputed without them)."""
    from spatec.events.timefmt import format_time

    drop: dict = {}
    extra: dict = {}
    by_type: dict = {}
    for r in results:
        if r["keys"] is not None:
            by_type.setdefault(r["type"], []).append(r)
    for t, rs in by_type.items():
        if len(rs) < 2:
            continue
        frames = []
        if rs[0]["sources"] is not None:
            suspects = _overlapping_sources(rs)
            if not suspects:
                continue
            for r in rs:
                k = np.load(r["keys"])
                names = np.asarray(r["sources"], dtype=object)
                src = k["src"]
                mine = np.flatnonzero(np.isin(src, [i for i, s in enumerate(r["sources"]) if s in suspects]))
                if len(mine):
                    frames.append(pd.DataFrame({"c": r["index"], "j": mine,
                                                "k1": names[src[mine]], "k2": k["t"][mine]}))
        else:
            for r in rs:
                h = np.load(r["keys"])["h"]
                frames.append(pd.DataFrame({"c": r["index"], "j": np.arange(len(h)),
                                            "k1": h, "k2": 0}))
        if not frames:
            continue
        df = pd.concat(frames, ignore_index=True)     # in input order: results are
        again = df.duplicated(["k1", "k2"], keep="first").to_numpy()
        gone = df[again]
        if not len(gone):
            continue
        by_index = {r["index"]: r for r in results}
        for c, sub in gone.groupby("c", sort=False):
            r = by_index[c]
            ids = [(f"{t}:{s}:{format_time(int(tt))}" if r["sources"] is not None else f"{t}:#{int(s):016x}")
                   for s, tt in zip(sub["k1"], sub["k2"])]
            drop[int(c)] = set(ids)
            if int(c) not in chunks:
                raise RuntimeError(f"copies across inputs read on the driver were not rejected there ({t})")
            k = np.load(r["keys"])
            j = sub["j"].to_numpy()
            keep = np.ones(len(k["row"]), bool)
            keep[j] = False
            ext = [k[a if a in k.files else a[0] + "0"][keep] for a in ("x0", "x1", "y0", "y1")]
            r["cells"] = extent_cells(*ext)
            r["max_hi"] = int(k["hi"][keep].max()) if keep.any() else None
            r["used"] -= len(j)
            r["rejected"] += len(j)
            extra[int(c)] = _duplicate_rejects(chunks[int(c)], t, k["row"][j], ids)
    return drop, extra


def _overlapping_sources(rs: list) -> set:
    """Sources whose time spans in two chunks meet (only they can have copies)."""
    spans: dict = {}
    for r in rs:
        if r["spans"] is None:
            continue
        codes, lo, hi = r["spans"]
        names = r["sources"]
        for c, a, b in zip(codes.tolist(), lo.tolist(), hi.tolist()):
            spans.setdefault(names[c], []).append((a, b))
    out = set()
    for s, ss in spans.items():
        if len(ss) < 2:
            continue
        ss.sort()
        end = ss[0][1]
        for a, b in ss[1:]:
            if a <= end:
                out.add(s)
                break
            end = max(end, b)
    return out


def _duplicate_rejects(ch: Chunk, t: str, rows: np.ndarray, ids) -> pd.DataFrame:
    b = ch.load()
    idx = np.searchsorted(b.rows, rows)
    return pd.DataFrame({"type": [t] * len(rows), "file": [ch.file] * len(rows),
                         "row": np.asarray(rows, dtype=np.int64),
                         "reason": [f"{DUPLICATE}{i}" for i in ids],
                         "record": b.records([int(i) for i in idx])})


def _summary(inputs, results: list, extra: dict, batch_of: dict):
    """Counts per input, and every reject in input order (within an input: by file,
    then record number, as a whole-input read orders them)."""
    from spatec.runners.replay import IngestSummary

    summary = IngestSummary()
    frames = []
    for i, (t, path) in enumerate(inputs):
        mine = [r for r in results if r["input"] == i]
        summary.rows.append((t, path, sum(r["read"] for r in mine), sum(r["used"] for r in mine),
                             sum(r["rejected"] for r in mine)))
        parts = []
        for r in mine:
            for df in (r["rejects"], extra.get(r["index"])):
                if df is not None and len(df):
                    parts.append(df.assign(_k=batch_of.get(r["index"], 0)))
        if not parts:
            continue
        df = pd.concat(parts, ignore_index=True)
        if len(mine) > 1:
            df = df.sort_values(["_k", "row"], kind="mergesort")
        frames.append(df.drop(columns="_k"))
    rejects = pd.concat(frames, ignore_index=True) if frames else empty_rejects()
    return summary, rejects

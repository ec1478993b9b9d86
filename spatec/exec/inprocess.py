"""The in-process executor (``spatec replay --runner local``, :meth:`spatec.api.Program.replay_local`):
every step of :func:`~spatec.exec.executor.replay` here, the events held as pandas frames.

It is the reference: the Spark executor must write the same files. Its splits are read one
after another, their copies across splits rejected by the rule of :mod:`spatec.exec.decide`,
and every phrase is matched over all its events at once (one item: the local runner's
function partitions by key itself), in flow order, phrases over phrases over the composites
of the phrases they read (:class:`~spatec.runtime.derived.BatchFlows`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from spatec.events.canonical import empty_events, empty_rejects
from spatec.exec.decide import (
    IngestSummary,
    copies_across,
    duplicate_rejects,
    frame_cells,
    in_order,
)
from spatec.exec.executor import Executor, Ingested
from spatec.exec.splits import split_batches
from spatec.spatial.crs import merge_cells


class InProcess(Executor):
    """Every step in this process (see the module). ``statistics``: the physical plans are
    made again from a sample of the input (SPEC §10; the composites are the same)."""

    where = "in this process"

    def __init__(self, statistics: bool = True, fastpath: bool | None = None, progress=None):
        self.statistics, self.fastpath, self.progress = statistics, fastpath, progress

    def ingest(self, ctx, splits, ui=None, outputs=None) -> Ingested:
        from spatec.exec.splits import read_split

        program = ctx.program
        read = [(s, read_split(s, program)) for s in splits]
        return ingest_results(ctx, read)

    def match(self, ctx, ingested, decisions, outputs, ui=None) -> dict:
        from spatec.plan.program import with_statistics
        from spatec.runtime.batch import phrase_rows
        from spatec.runtime.derived import BatchFlows
        from spatec.runtime.events import to_evs
        from spatec.spatial.crs import Projector

        frames = ingested.events
        compiled = with_statistics(ctx.compiled, frames) if self.statistics else ctx.compiled
        by_name = {p.name: p for p in compiled.plans}
        plans = [by_name[p.name] for p in ctx.plans]
        program = compiled.program
        proj = Projector(decisions.crs)
        cache: dict = {}

        def evs_by_type():
            if not cache:
                cache.update({t: to_evs(df, program, proj) for t, df in frames.items()})
            return cache

        if ui:
            ui.matching(phrase_events(compiled, frames, ctx.phrases))
        progress = self.progress or (ui.partition if ui else None)
        flows = BatchFlows(plans, decisions.final_watermark)
        shown = {p.name for p in ctx.shown}
        out: dict = {"frames": {}, "counts": {}, "state_sizes": {}, "parts": {}}
        for plan in plans:
            produced = flows.produced(plan)
            rows, size = phrase_rows(plan, program, frames, proj, flows.watermark(plan), fastpath=self.fastpath,
                                     evs_by_type=evs_by_type, progress=progress, derived=flows.inputs(plan),
                                     produced=produced)
            flows.done(plan, produced)
            if plan.name not in shown:
                continue
            out["counts"][plan.name] = len(rows)
            out["state_sizes"][plan.name] = size
            if outputs is None:
                from spatec.runtime.rows import rows_frame

                out["frames"][plan.name] = rows_frame(plan, rows)
            else:
                out["parts"][plan.name] = [write_part(plan, rows, ctx.fmt, ctx.tz, outputs.folder(plan.name), 0)]
        out["rejects"] = ingested.rejected
        return out


def write_part(plan, rows, fmt: str, tz, folder, r: int):
    """A phrase's rows as part ``r`` of its output, in ``folder`` (:mod:`spatec.exec.parts`)."""
    from spatec.exec.parts import EXTENSIONS, render

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part-{r:05d}.{EXTENSIONS[fmt]}"
    _df, payload = render(plan, rows, fmt, tz)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(payload, path)
    else:
        from spatec.sinks.files import GEOJSON_BETWEEN

        sep = "\n" if fmt == "jsonl" else GEOJSON_BETWEEN
        with open(path, "w", encoding="utf-8") as f:
            texts = payload.to_pylist()
            if texts:
                f.write(sep.join(texts))
                if fmt == "jsonl":
                    f.write("\n")
    return path


def ingest_results(ctx, read: list) -> Ingested:
    """Splits read here (``[(split, IngestResult)]``, in input order): their copies across
    splits rejected, the events by type, the rejects in input order, the counts per input."""
    program = ctx.program
    by_type: dict = {}
    for s, res in read:
        by_type.setdefault(s.type, []).append((s, res))
    events: dict = {}
    dups: dict = {}                     # split index → its copies' rejects
    for t, items in by_type.items():
        decl = program.events[t]
        masks = copies_across([res.events for _, res in items], decl.source is not None)
        kept = []
        for (s, res), m in zip(items, masks):
            ev = res.events
            if m.any():
                gone = ev[m]
                dups[s.index] = duplicate_rejects(t, gone, records_at(s, decl, gone))
                ev = ev[~m].reset_index(drop=True)
            kept.append(ev)
        kept = [e for e in kept if len(e)]
        events[t] = pd.concat(kept, ignore_index=True) if len(kept) > 1 else (kept[0] if kept else empty_events(decl))
    summary = IngestSummary()
    rejects = []
    for i, (t, path) in enumerate(ctx.inputs):
        mine = [(s, res) for s, res in read if s.input == i]
        nd = sum(len(dups.get(s.index, ())) for s, _ in mine)
        summary.rows.append((t, path, sum(r.read for _, r in mine), sum(r.used for _, r in mine) - nd,
                             sum(r.rejected for _, r in mine) + nd))
        for s, res in mine:
            for df in (res.rejects, dups.get(s.index)):
                if df is not None and len(df):
                    rejects.append(df.assign(_split=s.index, _batch=batch_order(s, df["file"])))
    rejected = in_order(pd.concat(rejects, ignore_index=True)) if rejects else empty_rejects()
    cells = merge_cells(frame_cells(df) for df in events.values() if len(df))
    his = [int(df["_hi"].max()) for df in events.values() if len(df)]
    return Ingested(summary, cells, max(his) if his else None, rejected={"frame": rejected}, events=events)


def batch_order(split, files) -> np.ndarray:
    """The position of each reject's batch (file or poll) in its split's reading order."""
    names = list(split.files)
    if len(names) == 1 and split.fmt != "sirivm":
        return np.zeros(len(files), dtype=np.int64)
    from spatec.events.formats import poll_order

    keys = {}
    out = []
    for f in files.tolist():
        if f not in keys:
            keys[f] = _poll_key(f, names, poll_order)
        out.append(keys[f])
    codes = pd.Series(out, dtype=object)
    ranks = {k: i for i, k in enumerate(sorted(set(out)))}
    return codes.map(ranks).to_numpy(np.int64)


def _poll_key(name: str, files: list, poll_order) -> tuple:
    """A poll's place in a split: its file's position, then its order within an archive."""
    base, _, member = name.partition("!")
    at = files.index(base) if base in files else len(files)
    return (at, poll_order(member) if member else (0.0, ""))


def records_at(split, decl, ev: pd.DataFrame) -> list:
    """The raw records (JSON text) of some of a split's events, read again from its files."""
    batches = {b.file: b for b in split_batches(split, decl)}
    files = ev["_file"].tolist()
    rows = ev["_row"].to_numpy(np.int64)
    out: list = [None] * len(files)
    for f in dict.fromkeys(files):
        at = [j for j, x in enumerate(files) if x == f]
        b = batches[f]
        idx = np.searchsorted(b.rows, rows[at]).tolist()
        for j, rec in zip(at, b.records(idx)):
            out[j] = rec
    return out


def phrase_events(compiled, frames: dict, phrases=None) -> dict:
    """Phrase → how many events it reads (of ``frames``: type → events), in the order the
    phrases run: the measure of matching's progress."""
    return {p.name: sum(len(frames[t]) for t in p.physical.types if t in frames)
            for p in compiled.plans if not phrases or p.name in phrases}

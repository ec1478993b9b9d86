"""One phrase over the events of whole partitions, to the end of the input: the
batch evaluation every batch runner (local, Spark tasks) runs."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from spatec.automata.machine import Automaton, RunState, build
from spatec.automata.step import step, undecided_low
from spatec.frontend.check import Program
from spatec.plan.nodes import After, PhrasePlan, walk_nodes
from spatec.runtime.derived import Produced, derived_event, derived_from_rows
from spatec.runtime.events import to_evs
from spatec.runtime.routing import partitions
from spatec.runtime.rows import ColumnRows, convert_values, dedupe, output_row
from spatec.sinks.encoding import hulls_wkt, matches_hulls_wkt
from spatec.spatial.crs import Projector

CHUNK = 512


def fastpath_enabled(flag: bool | None = None) -> bool:
    """Whether batch replays may use the fast paths: ``flag`` if given, else
    unless the environment sets ``SPATEC_FASTPATH=0``."""
    if flag is not None:
        return bool(flag)
    return os.environ.get("SPATEC_FASTPATH", "1").strip() not in ("0", "false", "no", "off")


def run_partition(am: Automaton, evs: list, final_watermark: int, state: RunState | None = None,
                  fastpath: bool | None = None):
    """Replay one partition's events (sorted by event time) to the end: decided composites.

    A phrase with a fast path (:mod:`spatec.vector.fastpath`) is evaluated
    by it unless ``fastpath`` is False (or ``SPATEC_FASTPATH=0``); the run state
    returned is then empty. A phrase over other phrases' composites never lets its
    watermark pass ``final_watermark`` (its watermark at the end, :mod:`spatec.runtime.derived`)."""
    if state is None and fastpath_enabled(fastpath):
        from spatec.vector.fastpath import run_events

        got = run_events(am, evs, final_watermark)
        if got is not None:
            return got, RunState()
    st = state or RunState()
    out = []
    limit = final_watermark if am.derived else None
    for i in range(0, len(evs), CHUNK):
        got, _late = step(am, st, evs[i:i + CHUNK], ordered=True, limit=limit)
        out.extend(got)
    got, _ = step(am, st, [], watermark=final_watermark, final=True, limit=limit)
    out.extend(got)
    return out, st


def phrase_rows(plan: PhrasePlan, program: Program, frames: dict, projector: Projector, final_watermark: int,
                fastpath: bool | None = None, history: dict | None = None, evs_by_type=None,
                progress=None, arrow_hulls: bool | str = False, derived: dict | None = None,
                produced: Produced | None = None) -> tuple[list, int]:
    """One phrase over canonical event frames (type → DataFrame): its output rows
    (as :func:`output_row`, each id once) and the largest per-key state size.

    ``frames`` hold every partition, or (a Spark group) a set of whole
    partitions; ``history`` (type → frame) then holds the events of other
    partitions that ``successive`` needs as history only. A phrase with a fast
    path runs it over all partitions at once (state size 0) unless
    ``fastpath`` is False or the data does not fit it. ``evs_by_type``: a
    callable giving the run-time events of ``frames`` by type (a cache shared
    by phrases). ``progress(phrase, events, composites)`` per partition.
    ``arrow_hulls``: the fast path's hulls as Arrow text or WKB (:func:`fast_rows`).

    Phrases as event types (:mod:`spatec.runtime.derived`): ``derived`` (type → run-time
    events) holds the composites of the phrases this one reads, and ``final_watermark`` is
    then this phrase's own (at most its producers' frontiers); ``produced``, when given,
    receives this phrase's composites as events and the least ``lo`` it left undecided.
    """
    from spatec.vector.fastpath import fast_path

    history = {t: df for t, df in (history or {}).items() if len(df)}
    fp = fast_path(plan) if fastpath_enabled(fastpath) else None
    if fp is not None and produced is not None and any(isinstance(n, After) for n in walk_nodes(plan.root)):
        fp = None   # its undecided composites (absences past the data) hold back its frontier
    if fp is not None and plan.physical.derived:
        fp = None   # it reads other phrases' composites, which are not in the frames
    if fp is not None and produced is not None and any(l.var is None for l in plan.leaves):
        fp = None   # (the rows name bound events only: the composites are made again from them)
    if fp is not None and produced is not None and arrow_hulls:
        fp = None   # (rows to be read back as events need their hulls as plain values)
    if fp is not None and fp.shape == "run":
        got = run_rows(fp, frames, history, program, projector, final_watermark, progress, produced)
        if got is not None:
            return got
        fp = None
    if fp is not None:
        df = frames.get(fp.type)
        hist = history.get(fp.type)
        if hist is not None:
            df = pd.concat([df.assign(_hist=False), hist.assign(_hist=True)], ignore_index=True) \
                if df is not None else None
        rows = [] if df is None or not len(df) else fast_rows(fp, df, program, projector, final_watermark,
                                                              arrow_hulls)
        if rows is not None:
            if progress:
                progress(plan.name, 0 if df is None else len(df), len(rows))
            rows = dedupe(rows)
            if produced is not None and len(rows):
                evs = evs_by_type() if evs_by_type is not None else {fp.type: to_evs(df, program, projector)}
                produced.events.extend(derived_from_rows(build(plan, program, projector), rows,
                                                         {e.id: e for e in evs.get(fp.type, ())}))
            return rows, 0
    if evs_by_type is None:
        evs = {t: to_evs(df, program, projector) for t, df in frames.items()}
    else:
        evs = evs_by_type()
    if derived:
        evs = {**evs, **derived}
    hist_evs = {t: to_evs(df, program, projector) for t, df in history.items()}
    am = build(plan, program, projector)
    rows, size = [], 0
    seen = set()
    for _key, part in partitions(plan, evs, hist_evs).items():
        got, st = run_partition(am, part, final_watermark, fastpath=False)
        size = max(size, st.size())
        # the hulls of a partition's composites at once (vectorised where their stamps are discs)
        part_rows = [output_row(am, c, projector, st, hull=False) for c in got]
        for row, h in zip(part_rows, hulls_wkt(got, projector)):
            row["hull"] = h
        rows.extend(part_rows)
        if produced is not None:
            produced.add_low(undecided_low(am, st))
            for c in got:
                if c.id not in seen:        # (a composite of broadcast events only, found by each key)
                    seen.add(c.id)
                    produced.events.append(derived_event(am, c, st))
        if progress:
            progress(plan.name, len(part), len(got))
    return dedupe(rows), size


def run_rows(fp, frames: dict, history: dict, program: Program, projector: Projector, final_watermark: int,
             progress=None, produced: Produced | None = None):
    """``(rows, 0)`` of a run phrase cut vectorised (:mod:`spatec.vector.runs`): its
    composites made as the automaton's, output (and handed on as events to ``produced``)
    as :func:`phrase_rows` does the automaton's; None when the data does not fit."""
    from spatec.vector.runs import run_composites

    df = frames.get(fp.type)
    if history.get(fp.type) is not None:
        return None
    if df is None or not len(df):
        return [], 0
    got = run_composites(fp, df, program, projector, final_watermark, lambda d: to_evs(d, program, projector))
    if got is None:
        return None
    am, st, composites, open_low = got
    rows = [output_row(am, c, projector, st, hull=False) for c in composites]
    for row, h in zip(rows, hulls_wkt(composites, projector)):
        row["hull"] = h
    if produced is not None:
        produced.add_low(undecided_low(am, st))
        produced.add_low(open_low)
        seen = set()
        for c in composites:
            if c.id not in seen:
                seen.add(c.id)
                produced.events.append(derived_event(am, c, st))
    if progress:
        progress(fp.phrase, len(df), len(rows))
    return dedupe(rows), 0


def fast_rows(fp, df: pd.DataFrame, program: Program, projector: Projector, final_watermark: int,
              arrow_hulls: bool | str = False):
    """Output rows (as :func:`output_row`, held as :class:`ColumnRows`) of a fast-path
    phrase over the canonical events of its type, every partition at once; None when
    the data does not fit. ``arrow_hulls``: the hulls' texts as an Arrow string array
    (a frame of them has an Arrow text column; for the JSON lines writer); ``"wkb"``:
    as a hull column of their WKB (:mod:`spatec.spatial.hullcol`; for GeoParquet); with
    either, the bound events too as Arrow (:meth:`~spatec.vector.fastpath.Matches.event_ids`)."""
    from spatec.vector import chains
    from spatec.vector.fastpath import run_frame

    run = chains.run_frame if fp.shape == "chains" else run_frame
    m = run(fp, df, program, projector, final_watermark, lambda d: to_evs(d, program, projector))
    if m is None:
        return None
    types = dict(fp.plan.schema)
    emit = m.emit(program.timezone)
    columns = [("phrase", [fp.phrase] * len(m)), ("id", m.ids()),
               ("lo", np.asarray(m.lo, dtype=np.int64)), ("hi", np.asarray(m.hi, dtype=np.int64)),
               ("hull", matches_hulls_wkt(m, projector, arrow=arrow_hulls)),
               ("events", m.event_ids(arrow=bool(arrow_hulls)))]
    columns += [(name, convert_values(vals, types.get(name))) for name, vals in emit.items()]
    return ColumnRows(dict(columns))

"""The local runner: every phrase evaluated in-process, partition by partition.

This is the reference runner: the others must give the same composites.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from spatec.automata.machine import build
from spatec.automata.fastpath import fast_path
from spatec.runners.common import (Compiled, choose_crs, fast_rows, fastpath_enabled, output_row, partitions,
                                   rows_frame, run_partition, to_evs)
from spatec.spatial.crs import Projector


@dataclass
class ReplayResult:
    """What a replay produced: one frame per phrase, and how the input was used."""

    frames: dict                      # phrase → DataFrame of output rows
    crs: str
    counts: dict = field(default_factory=dict)   # phrase → composites
    state_sizes: dict = field(default_factory=dict)


def replay_frames(compiled: Compiled, frames: dict, crs: str | None = None, phrases=None,
                  progress=None, fastpath: bool | None = None) -> ReplayResult:
    """Run the phrases over canonical event frames (type → DataFrame).

    Phrases with a fast path (:mod:`spatec.automata.fastpath`) are evaluated
    by it, over all partitions at once, unless ``fastpath`` is False (or
    ``SPATEC_FASTPATH=0``); their state size is reported as 0."""
    program = compiled.program
    crs = choose_crs(program, frames, crs)
    proj = Projector(crs)
    frames = {t: df for t, df in frames.items() if t in program.events}
    final_w = max((int(df["_hi"].max()) for df in frames.values() if len(df)), default=0)
    fast = fastpath_enabled(fastpath)
    evs_cache: dict = {}

    def evs_by_type():
        if not evs_cache:
            evs_cache.update({t: to_evs(df, program, proj) for t, df in frames.items()})
        return evs_cache

    result = ReplayResult({}, crs)
    for plan in compiled.plans:
        if phrases and plan.name not in phrases:
            continue
        fp = fast_path(plan, program) if fast else None
        rows = None
        if fp is not None:
            df = frames.get(fp.type)
            rows = [] if df is None or not len(df) else fast_rows(fp, df, program, proj, final_w)
        if rows is not None:
            if progress:
                progress(plan.name, 0 if df is None else len(df), len(rows))
            df_out = rows_frame(plan, _dedupe(rows))
            result.frames[plan.name] = df_out
            result.counts[plan.name] = len(df_out)
            result.state_sizes[plan.name] = 0
            continue
        am = build(plan, program, proj)
        rows = []
        size = 0
        parts = partitions(plan, program, evs_by_type())
        for key, evs in parts.items():
            got, st = run_partition(am, evs, final_w, fastpath=False)
            size = max(size, st.size())
            rows.extend(output_row(am, c, proj, st) for c in got)
            if progress:
                progress(plan.name, len(evs), len(got))
        df = rows_frame(plan, _dedupe(rows))
        result.frames[plan.name] = df
        result.counts[plan.name] = len(df)
        result.state_sizes[plan.name] = size
    return result


def _dedupe(rows: list) -> list:
    """A composite found in two partitions (broadcast-only phrases) is reported once."""
    seen, out = set(), []
    for r in rows:
        if r["id"] in seen:
            continue
        seen.add(r["id"])
        out.append(r)
    return out

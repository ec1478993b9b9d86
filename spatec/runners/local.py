"""The local runner: every phrase evaluated in-process, partition by partition.

This is the reference runner: the others must give the same composites.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from spatec.automata.machine import build
from spatec.runners.common import (Compiled, choose_crs, output_row, partitions, rows_frame,
                                   run_partition, to_evs)
from spatec.spatial.crs import Projector


@dataclass
class ReplayResult:
    """What a replay produced: one frame per phrase, and how the input was used."""

    frames: dict                      # phrase → DataFrame of output rows
    crs: str
    counts: dict = field(default_factory=dict)   # phrase → composites
    state_sizes: dict = field(default_factory=dict)


def replay_frames(compiled: Compiled, frames: dict, crs: str | None = None, phrases=None,
                  progress=None) -> ReplayResult:
    """Run the phrases over canonical event frames (type → DataFrame)."""
    program = compiled.program
    crs = choose_crs(program, frames, crs)
    proj = Projector(crs)
    evs_by_type = {t: to_evs(df, program, proj) for t, df in frames.items() if t in program.events}
    final_w = max((max((e.hi for e in evs), default=None) for evs in evs_by_type.values() if evs),
                  default=0) if any(evs_by_type.values()) else 0
    result = ReplayResult({}, crs)
    for plan in compiled.plans:
        if phrases and plan.name not in phrases:
            continue
        am = build(plan, program, proj)
        rows = []
        size = 0
        parts = partitions(plan, program, evs_by_type)
        for key, evs in parts.items():
            got, st = run_partition(am, evs, final_w)
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

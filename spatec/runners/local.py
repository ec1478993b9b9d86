"""The local runner: every phrase evaluated in-process, partition by partition.

This is the reference runner: the others must give the same composites.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spatec.plan.program import Compiled, with_statistics
from spatec.runtime.batch import phrase_rows
from spatec.runtime.derived import BatchFlows, needed
from spatec.runtime.events import final_watermark, to_evs
from spatec.runtime.rows import rows_frame
from spatec.spatial.crs import Projector, choose_crs


@dataclass
class ReplayResult:
    """What a replay produced: one frame per phrase, and how the input was used."""

    frames: dict                      # phrase → DataFrame of output rows
    crs: str
    counts: dict = field(default_factory=dict)   # phrase → composites
    state_sizes: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)  # stage → wall time (ingest, match), where timed


class WrittenFrames(Mapping):
    """Phrase → its output rows, read back from the JSON lines or GeoParquet files a
    replay wrote (on first use): for runners that write the files without holding the rows."""

    def __init__(self, paths: dict, plans: dict):
        self._paths, self._plans, self._frames = dict(paths), plans, {}

    def __getitem__(self, name):
        if name not in self._frames:
            from spatec.runtime.rows import time_fields
            from spatec.sinks.files import read_jsonl_composites, read_parquet_composites

            plan = self._plans[name]
            path = self._paths[name]
            if str(path).endswith(".parquet"):
                df = read_parquet_composites(path)
            else:
                df = read_jsonl_composites(path, time_fields(plan))
            self._frames[name] = df if len(df) else rows_frame(plan, [])    # its columns, from the plan
        return self._frames[name]

    def __iter__(self):
        return iter(self._paths)

    def __len__(self):
        return len(self._paths)


def replay_frames(compiled: Compiled, frames: dict, crs: str | None = None, phrases=None,
                  progress=None, fastpath: bool | None = None, statistics: bool = True) -> ReplayResult:
    """Run the phrases over canonical event frames (type → DataFrame).

    Phrases with a fast path (:mod:`spatec.vector.fastpath`) are evaluated
    by it, over all partitions at once, unless ``fastpath`` is False (or
    ``SPATEC_FASTPATH=0``); their state size is reported as 0."""
    # the physical plans from a sample of the input (SPEC §10; statistics=False: the defaults)
    if statistics:
        compiled = with_statistics(compiled, frames)
    program = compiled.program
    crs = choose_crs(program, frames, crs)
    proj = Projector(crs)
    frames = {t: df for t, df in frames.items() if t in program.events}
    final_w = final_watermark(frames)
    evs_cache: dict = {}

    def evs_by_type():
        if not evs_cache:
            evs_cache.update({t: to_evs(df, program, proj) for t, df in frames.items()})
        return evs_cache

    result = ReplayResult({}, crs)
    run = needed(compiled, phrases)
    flows = BatchFlows([p for p in compiled.plans if p.name in run], final_w)
    for plan in compiled.plans:
        if plan.name not in run:
            continue
        produced = flows.produced(plan)
        rows, size = phrase_rows(plan, program, frames, proj, flows.watermark(plan), fastpath=fastpath,
                                 evs_by_type=evs_by_type, progress=progress, derived=flows.inputs(plan),
                                 produced=produced)
        flows.done(plan, produced)
        if phrases and plan.name not in phrases:
            continue
        df = rows_frame(plan, rows)
        result.frames[plan.name] = df
        result.counts[plan.name] = len(df)
        result.state_sizes[plan.name] = size
    return result

"""The local runner: every phrase evaluated in this process (the in-process executor,
:mod:`spatec.exec.inprocess`).

This is the reference runner: the others must give the same composites.
"""
from __future__ import annotations

from pathlib import Path

from spatec.exec.commit import WrittenFrames  # noqa: F401  (the runners' frames read back)
from spatec.exec.context import RunContext, Settings
from spatec.exec.decide import Decisions, IngestSummary
from spatec.exec.executor import Ingested, ReplayResult, replay
from spatec.exec.inprocess import InProcess
from spatec.plan.program import Compiled
from spatec.spatial.crs import choose_crs

__all__ = ["ReplayResult", "WrittenFrames", "local_replay", "replay_frames"]


def local_replay(compiled: Compiled, inputs, out, fmt: str = "jsonl", crs=None, phrases=None, ui=None,
                 tz: str | None = None, conf: dict | None = None) -> ReplayResult:
    """``spatec replay --runner local``: read, match and write in this process."""
    ctx = RunContext(compiled, tuple(inputs), Path(out), fmt, tz, crs, tuple(phrases) if phrases else None,
                     Settings.of(conf), cores=1, local=True)
    return replay(ctx, InProcess(), ui)


def replay_frames(compiled: Compiled, frames: dict, crs: str | None = None, phrases=None,
                  progress=None, fastpath: bool | None = None, statistics: bool = True) -> ReplayResult:
    """Run the phrases over canonical event frames (type → DataFrame), read already (the
    Python API's inputs): the composites as frames.

    Phrases with a fast path (:mod:`spatec.vector.fastpath`) are evaluated by it, over all
    partitions at once, unless ``fastpath`` is False (or ``SPATEC_FASTPATH=0``); their state
    size is reported as 0."""
    program = compiled.program
    frames = {t: df for t, df in frames.items() if t in program.events}
    crs = choose_crs(program, frames, crs)
    his = [int(df["_hi"].max()) for df in frames.values() if len(df)]
    ctx = RunContext(compiled, (), None, None, None, crs, tuple(phrases) if phrases else None)
    ingested = Ingested(IngestSummary(), {}, max(his) if his else None, events=frames)
    decisions = Decisions(crs, max(his) if his else 0, ingested.summary)
    done = InProcess(statistics=statistics, fastpath=fastpath, progress=progress).match(ctx, ingested, decisions,
                                                                                        None)
    return ReplayResult(done["frames"], crs, done["counts"], state_sizes=done["state_sizes"])

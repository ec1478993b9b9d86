"""Batch replay helpers shared by the runners and the tests: every input read into
canonical frames at once (:func:`ingest`), and ``spatec replay --runner local``
(:func:`replay_local`)."""
from __future__ import annotations

from pathlib import Path

from spatec.exec.decide import IngestSummary  # noqa: F401  (re-exported: the counts per input)
from spatec.exec.inprocess import phrase_events  # noqa: F401  (re-exported)
from spatec.plan.program import Compiled


def ingest(compiled: Compiled, inputs, out: Path | None = None, ui=None):
    """Read every input (``[(type, path)]``) into canonical frames by type, with the rule of
    every runner for copies across files and inputs; ``(frames, summary)``. With ``out``, the
    rejects are written to ``out/_rejects/<type>.jsonl``."""
    from spatec.events.read import write_rejects
    from spatec.exec.context import RunContext
    from spatec.exec.inprocess import ingest_results
    from spatec.exec.splits import plan_splits, read_split

    program = compiled.program
    ctx = RunContext(compiled, tuple(inputs), None, None)
    splits = plan_splits(program, list(inputs), ctx.settings.split_rows, 1)
    read = []
    for s in splits:
        if ui:
            ui.stage(f"reading {s.type} from {s.file}")
        read.append((s, read_split(s, program)))
    got = ingest_results(ctx, read)
    if ui:
        for row in got.summary.rows:
            ui.ingested(*row)
    rejects = got.rejected.get("frame")
    if out is not None and rejects is not None and len(rejects):
        write_rejects(rejects, out)
    return got.events, got.summary


def replay_local(compiled: Compiled, inputs, out: Path, fmt: str = "jsonl", crs=None, phrases=None, ui=None,
                 tz: str | None = None):
    """``spatec replay --runner local`` (:func:`spatec.runners.local.local_replay`)."""
    from spatec.runners.local import local_replay

    return local_replay(compiled, inputs, out, fmt=fmt, crs=crs, phrases=phrases, ui=ui, tz=tz)

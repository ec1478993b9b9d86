"""Batch replay plumbing shared by the runners: ingest every input (rejects
written and counted), run, write one output file per phrase."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from spatec.plan.program import Compiled
from spatec.runtime.rows import time_fields


@dataclass
class IngestSummary:
    """How many rows each input had, and what became of them."""

    rows: list = field(default_factory=list)   # (type, path, read, used, rejected)

    @property
    def read(self) -> int:
        return sum(r[2] for r in self.rows)

    @property
    def used(self) -> int:
        return sum(r[3] for r in self.rows)

    @property
    def rejected(self) -> int:
        return sum(r[4] for r in self.rows)


def ingest(compiled: Compiled, inputs, out: Path, ui=None):
    """Read every input into canonical frames by type; write rejects under ``out/_rejects``."""
    from spatec.events.read import read_events, write_rejects

    program = compiled.program
    frames: dict = {}
    summary = IngestSummary()
    rejects = []
    seen = seen_across(inputs)
    for type_name, path in inputs:
        if ui:
            ui.stage(f"reading {type_name} from {path}")
        res = read_events(path, program.events[type_name], tz=program.timezone, seen=seen.get(type_name))
        summary.rows.append((type_name, path, res.read, res.used, res.rejected))
        frames.setdefault(type_name, []).append(res.events)
        if res.rejected:
            rejects.append(res.rejects)
        if ui:
            ui.ingested(type_name, path, res.read, res.used, res.rejected)
    frames = {t: pd.concat(fs, ignore_index=True) if len(fs) > 1 else fs[0] for t, fs in frames.items()}
    if rejects:
        write_rejects(pd.concat(rejects, ignore_index=True), out)
    return frames, summary


def phrase_events(compiled: Compiled, frames: dict, phrases=None) -> dict:
    """Phrase → how many events it reads (of ``frames``: type → events), in the order the
    phrases run: the measure of matching's progress."""
    return {p.name: sum(len(frames[t]) for t in p.physical.types if t in frames)
            for p in compiled.plans if not phrases or p.name in phrases}


def seen_across(inputs) -> dict:
    """An empty set of ids seen for each type read from several inputs, to share across
    them: a copy of an event of an earlier input is then a duplicate (a reject,
    ``duplicate of <id>``), as a copy within one input is."""
    types = [t for t, _ in inputs]
    return {t: set() for t in types if types.count(t) > 1}


def write_outputs(compiled: Compiled, frames: dict, out: Path, fmt: str, tz: str | None = None) -> dict:
    from spatec.sinks.files import extension, writer

    write = writer(fmt)
    paths = {}
    for plan in compiled.plans:
        if plan.name not in frames:
            continue
        path = out / f"{plan.name}.{extension(fmt)}"
        write(frames[plan.name], path, time_fields(plan), tz)
        paths[plan.name] = path
    return paths


def replay_local(compiled: Compiled, inputs, out: Path, fmt: str = "jsonl", crs=None, phrases=None, ui=None,
                 tz: str | None = None):
    from spatec.runners.local import replay_frames

    frames, summary = ingest(compiled, inputs, out, ui)
    if ui:
        ui.stage("matching")
        ui.matching(phrase_events(compiled, frames, phrases))
    result = replay_frames(compiled, frames, crs=crs, phrases=phrases,
                           progress=ui.partition if ui else None)
    if ui:
        ui.matched()
    result.ingest = summary
    result.paths = write_outputs(compiled, result.frames, out, fmt, tz)
    return result

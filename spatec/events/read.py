"""Reading events: a path and an event declaration in, canonical events and rejects out.

>>> result = read_events("positions.csv.gz", decl, tz="Europe/London")   # doctest: +SKIP
>>> result.events, result.rejects, result.read == result.used + result.rejected  # doctest: +SKIP

:func:`read_events` reads everything at once (duplicates found across all
files); :func:`iter_events` yields one result per file or poll, carrying the
ids already seen so a copy in a later poll is still a duplicate — the shape a
streaming source needs. :func:`write_rejects` writes rejects where a run's
outputs go: ``<out>/_rejects/<TYPE>.jsonl``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Collection, Iterator, Optional, Union

import pandas as pd

from spatec.events.canonical import DUPLICATE, IngestResult, to_events
from spatec.events.formats import expand, read_csv, read_jsonl, read_parquet
from spatec.events.raw import RawBatch
from spatec.events.sirivm import read_polls
from spatec.frontend.ast import EventDecl

# One entry per format: a file (and the columns wanted, a hint) to its raw batches;
# an archive of polls gives one batch per poll.
READERS: dict[str, Callable[[str, Optional[Collection[str]]], Iterator[RawBatch]]] = {
    "csv": lambda p, cols: iter([read_csv(p, cols)]),
    "parquet": lambda p, cols: iter([read_parquet(p, cols)]),
    "jsonl": lambda p, cols: iter([read_jsonl(p, cols)]),
    "sirivm": read_polls,
}

PathLike = Union[str, os.PathLike]


def iter_batches(path: PathLike, fmt: str | None = None,
                 columns: Collection[str] | None = None) -> Iterator[RawBatch]:
    """The raw batches of every file a path means (file, directory or glob), in reading order.
    ``columns``: the columns that will be used (readers may skip loading the others)."""
    for file, f in expand(os.fspath(path), fmt):
        yield from READERS[f](file, columns)


def read_events(path: PathLike, decl: EventDecl, tz: str = "UTC", fmt: str | None = None,
                seen: set[str] | None = None) -> IngestResult:
    """Events of type ``decl`` from a file, a directory or a glob.

    ``fmt`` is one of ``csv``, ``parquet``, ``jsonl``, ``sirivm``; by default
    it comes from the file names (see :mod:`spatec.events.formats`). ``tz`` is the
    program's time zone, for times written without an offset. A declared
    attribute with no column in a file is a :class:`~spatec.errors.DataError`;
    bad records are rejects. ``seen`` (updated in place): ids of events already read
    from other inputs of the type — a copy of one of those is a duplicate here too.
    """
    return to_events(list(iter_batches(path, fmt, wanted_columns(decl))), decl, tz, seen)


def iter_events(path: PathLike, decl: EventDecl, tz: str = "UTC", fmt: str | None = None,
                seen: set[str] | None = None) -> Iterator[IngestResult]:
    """Like :func:`read_events`, one result per file (per poll for SIRI-VM).

    ``seen`` (updated in place) holds the ids accepted so far, so copies in
    later chunks are duplicates too; pass the same set to continue a stream.
    """
    seen = set() if seen is None else seen
    for batch in iter_batches(path, fmt, wanted_columns(decl)):
        yield to_events([batch], decl, tz, seen)


def reject_line(file, row, reason, record) -> str:
    """A reject as its line of ``_rejects/<TYPE>.jsonl`` (without the newline)."""
    return json.dumps({"file": file, "row": int(row), "reason": reason, "record": json.loads(record)},
                      ensure_ascii=False)


def wanted_columns(decl: EventDecl) -> list[str]:
    """The input columns the declaration reads: each attribute's (``from "COLUMN"``, or its name)."""
    return list(dict.fromkeys(a.source_column for a in decl.attrs))


def write_rejects(rejects: pd.DataFrame | IngestResult, out_dir: PathLike, append: bool = False) -> list[Path]:
    """Write rejects to ``out_dir/_rejects/<TYPE>.jsonl``, one JSON object a line:
    ``file``, ``row``, ``reason``, ``record`` (the raw record as a JSON value).

    Takes the ``rejects`` frame of an :class:`IngestResult` (or the result
    itself, or several frames concatenated: one file per type). Returns the
    files written; a type with no rejects writes nothing. ``append`` (live
    runs) leaves out duplicates (``duplicate of <id>``): they are counted, not listed.
    """
    if isinstance(rejects, IngestResult):
        rejects = rejects.rejects
    if append and len(rejects):
        # a live run: records a feed repeats in poll after poll are counted (``duplicates``),
        # not listed one by one (a SIRI-VM feed repeats most of its records: megabytes a minute)
        rejects = rejects[~rejects["reason"].astype(str).str.startswith(DUPLICATE)]
    target = Path(out_dir) / "_rejects"
    written = []
    for type_name, group in rejects.groupby("type", sort=True):
        target.mkdir(parents=True, exist_ok=True)
        path = target / f"{type_name}.jsonl"
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            for r in group.itertuples(index=False):
                f.write(reject_line(r.file, r.row, r.reason, r.record) + "\n")
        written.append(path)
    return written


def read_reject_files(out_dir: PathLike) -> pd.DataFrame:
    """The rejects a run wrote under ``out_dir/_rejects`` (every type's file) as one frame."""
    from spatec.events.canonical import empty_rejects

    rows = []
    for path in sorted((Path(out_dir) / "_rejects").glob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    rows.append((path.stem, r["file"], int(r["row"]), r["reason"], json.dumps(r["record"])))
    if not rows:
        return empty_rejects()
    return pd.DataFrame(rows, columns=["type", "file", "row", "reason", "record"])

"""One machine's merged output written where it ends: each range's part straight into its
phrase's one file, at its offset.

The merged output (:mod:`spatec.exec.commit`) is a phrase's parts end to end. Written as
parts and then copied into one file, every byte of it is written twice; for Stuck on 4
bus-days (1.4 GB of JSON lines) the copy took 4-7 s on the driver, a fifth of the replay.
Where the write tasks reach the driver's file system (the files exchange: every executor on
this machine) and the text's size is known before it is written, the copy goes: the match
tasks report each blob's bytes (:data:`~spatec.exec.tasks.MATCHED`'s ``size``), one small
aggregate sums them by range, the driver makes the file at its full size
(:func:`prepare`: GeoJSON's head and tail written), and each write task writes its range
at its offset (:func:`write_at`: its whole pages past the page cache,
:mod:`spatec.storage.direct`); the commit renames the file as it renames any.

The sizes are exact only where no composite is found by two tasks (the proximity groups of
:mod:`spatec.runners.spark.sedona` may find one twice, and a part writes it once): those
phrases keep the parts and the copy. A write task checks that what it writes is the size its
range was given (a mismatch is a bug, reported as one, never a shifted file).
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spatec.exec.parts import text_frame, text_runs
from spatec.storage.direct import PositionedWriter, pwrite_all

#: The formats whose parts are texts put end to end (GeoJSON: with its separator between).
FORMATS = ("jsonl", "geojson")


@dataclass(frozen=True)
class Layout:
    """Where a phrase's ranges go in its one file."""

    path: str
    offsets: dict           # range → its part's first byte
    sizes: dict             # range → its part's bytes
    total: int              # the file's bytes

    def fits(self, r: int, size: int) -> bool:
        return self.sizes.get(r, 0) == size


def part_size(text_bytes: int, rows: int, fmt: str) -> int:
    """A part's bytes from its texts' (``rows`` of them): GeoJSON's joined by its separator."""
    if fmt == "geojson" and rows:
        return text_bytes + (rows - 1) * len(text_frame(fmt)[1])
    return text_bytes


def layout(path: str, ranges: dict, fmt: str) -> Layout:
    """The layout of a file of parts (``ranges``: range → ``(text bytes, rows)``), as
    :func:`~spatec.exec.commit.concatenate` puts them: in range order, non-empty ones
    separated by the format's separator, between its head and tail."""
    head, between, tail = text_frame(fmt)
    offsets, sizes = {}, {}
    at, first = len(head), True
    for r in sorted(ranges):
        b, n = ranges[r]
        size = part_size(int(b), int(n), fmt)
        if not size:
            continue
        if not first:
            at += len(between)
        first = False
        offsets[r], sizes[r] = at, size
        at += size
    return Layout(path, offsets, sizes, at + len(tail))


def prepare(lay: Layout, fmt: str) -> None:
    """The file made at its full size, its head and tail written, its parts' bytes zero
    until the write tasks write them; the separators between parts written here."""
    head, between, tail = text_frame(fmt)
    with open(lay.path, "wb") as f:
        fd = f.fileno()
        try:        # (its blocks taken at once: the tasks' writes then fill them, 1.1 -> 0.7 s a 1.4 GB file)
            if lay.total:
                os.posix_fallocate(fd, 0, lay.total)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
        f.truncate(lay.total)
        pwrite_all(fd, head, 0)
        rs = sorted(lay.offsets)
        for r in rs[1:]:
            pwrite_all(fd, between, lay.offsets[r] - len(between))
        pwrite_all(fd, tail, lay.total - len(tail))


def text_pieces(table: pa.Table, fmt: str):
    """The bytes of a part (its ``value`` column, sorted), piece by piece, no copy of the
    JSON lines (which end with their newline: the column's bytes are the part's)."""
    if fmt == "jsonl":
        for chunk in table.column("value").chunks:
            if len(chunk):
                ends = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1,
                                     offset=4 * chunk.offset)
                yield memoryview(chunk.buffers()[2])[int(ends[0]):int(ends[-1])]
        return
    _head, between, _tail = text_frame(fmt)
    for a, lists, _n in text_runs(table.column("value")):
        if a:
            yield between
        yield pc.binary_join(lists, between.decode())[0].as_buffer()


def write_at(table: pa.Table, lay: Layout, r: int, fmt: str) -> int:
    """Range ``r``'s part (``table``, :func:`~spatec.exec.tasks.part_table`) written at its
    offset; its rows. Raises if its size is not the one its range was given."""
    size = part_size(int(pc.sum(pc.binary_length(table.column("value"))).as_py() or 0), table.num_rows, fmt)
    if not lay.fits(r, size):
        raise RuntimeError(f"spatec: range {r} of {os.path.basename(lay.path)} is {size} bytes where "
                           f"{lay.sizes.get(r, 0)} were laid out (a bug: please report it)")
    with PositionedWriter(lay.path, lay.offsets.get(r, 0)) as w:
        for piece in text_pieces(table, fmt):
            w.write(piece)
    return table.num_rows

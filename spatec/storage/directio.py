"""A file written in segments from several threads, around the page cache where it can be.

:func:`write_segments` is the one interface: the caller fills each segment's
bytes into a buffer it is handed (``fill(view, start, end)``); the segments are
written at their offsets, by a few threads, with ``O_DIRECT`` where the file
system takes it. A fresh page of page cache per 4 KB written costs kernel time
(on this project's VM, 0.9-1.4 s of it for a 346 MB output, a merge's largest
cost); written around it, from a buffer each thread keeps, the same bytes take
0.2 s of wall time and next to no CPU. Nothing reads such a file back soon.

:func:`read_into` is the matching vectored read (``preadv``), short reads resumed.
"""
from __future__ import annotations

import concurrent.futures
import errno
import mmap
import os
import threading
from typing import Callable

#: Bytes of the file that a thread fills and writes at a time (a multiple of :data:`ALIGN`).
SEGMENT = 4 << 20
#: Threads that fill and write segments, in any order.
THREADS = max(1, min(4, os.cpu_count() or 1))
#: Offsets, lengths and buffer addresses of direct writes are multiples of this.
ALIGN = 4096
#: Buffers per ``preadv``/``pwritev`` call (Linux's IOV_MAX is 1024).
IOV = 1024


def write_segments(path: str, total: int, fill: Callable[[memoryview, int, int], None],
                   segment: int = SEGMENT, direct: bool = True, threads: int = THREADS) -> None:
    """Write ``total`` bytes to ``path`` (created or truncated), segment by segment:
    ``fill(view, s0, s1)`` puts bytes ``[s0, s1)`` of the file at the start of ``view``.
    ``direct``: around the page cache when the file system allows it (and ``segment`` is
    a multiple of :data:`ALIGN`)."""
    out = _Output(path, direct and segment % ALIGN == 0)
    try:
        local = threading.local()

        def one(s0: int) -> None:
            s1 = min(s0 + segment, total)
            buf = getattr(local, "buf", None)
            if buf is None:      # page-aligned, kept from segment to segment
                local.buf = buf = mmap.mmap(-1, -(-segment // ALIGN) * ALIGN)
            view = memoryview(buf)
            fill(view, s0, s1)
            out.write(view, s1 - s0, s0)

        with concurrent.futures.ThreadPoolExecutor(max(1, threads)) as pool:
            for f in [pool.submit(one, s0) for s0 in range(0, total, segment)]:
                f.result()
    finally:
        out.close(total)


def read_into(fd: int, bufs: list, offset: int, name: str) -> None:
    """Fill ``bufs`` (writable views) from ``fd`` starting at ``offset``, in order; a read
    that finds the file ended is an error naming ``name``."""
    _vectored(os.preadv, fd, bufs, offset, name)


class _Output:
    """The file, written in segments at their offsets from any thread: around the page
    cache (``O_DIRECT``) when the file system takes it, each segment padded to
    :data:`ALIGN` and the file cut to its size at the end; through it otherwise, from
    the first write the file system refuses that way on, and for the rest of a short
    direct write (which could not resume at its unaligned end). Both descriptors stay
    open until :meth:`close`: a thread may be writing with the other when one falls back."""

    def __init__(self, path: str, direct: bool):
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        self.direct_fd = None
        if direct and hasattr(os, "O_DIRECT"):
            try:
                self.direct_fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
            except OSError:
                pass                            # (tmpfs, some network file systems)
        self.direct = self.direct_fd is not None

    def write(self, view: memoryview, n: int, offset: int) -> None:
        if self.direct:
            try:
                done = os.pwritev(self.direct_fd, [view[:-(-n // ALIGN) * ALIGN]], offset)
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                self.direct = False             # refused: through the page cache from now on
                done = 0
            if done >= n:
                return
            view, n, offset = view[done:], n - done, offset + done
        _vectored(os.pwritev, self.fd, [view[:n]], offset, self.path)

    def close(self, size: int) -> None:
        try:
            os.ftruncate(self.fd, size)         # the last segment's padding cut off
        finally:
            if self.direct_fd is not None:
                os.close(self.direct_fd)
            os.close(self.fd)


def _vectored(call, fd: int, bufs: list, offset: int, name: str) -> None:
    """``os.preadv`` or ``os.pwritev`` of ``bufs``, one after another from ``offset``, at most
    :data:`IOV` at a call, short reads and writes resumed (inside a buffer or between
    two); a read that finds the file ended is an error naming it."""
    i = 0
    while i < len(bufs):
        n = call(fd, bufs[i:i + IOV], offset)
        if not n:           # a read at the file's end; a write that wrote nothing would loop
            need = offset + sum(len(b) for b in bufs[i:])
            raise OSError(f"{name}: ends at byte {offset}, its keys go to {need}" if call is os.preadv
                          else f"{name}: no byte written at {offset} of {need}")
        offset += n
        # skip the buffers done whole; resume inside a buffer done in part
        while i < len(bufs) and n >= len(bufs[i]):
            n -= len(bufs[i])
            i += 1
        if n:
            bufs[i] = bufs[i][n:]

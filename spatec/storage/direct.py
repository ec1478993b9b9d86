"""Bytes written at an offset of a file, their whole pages past the page cache.

A write task of the in-place output (:mod:`spatec.exec.inplace`) writes its range, up to
hundreds of MB, once, and nothing reads it back while the replay runs. Written through the
page cache, every page of it is memory the kernel takes and fills first; on a virtual machine
that hands freed memory back to its host that is a fault per page (a 1.4 GB file: 4.6 s of
kernel time, where the disk takes it in 0.7 s). :class:`PositionedWriter` copies the bytes
into a page-aligned buffer (one a process, reused) and writes each full buffer with ``O_DIRECT``;
the unaligned bytes at the range's two ends (the pages it shares with its neighbours, or
with the file's head, tail and separators) go through the page cache, so two writers never
write one page directly. Where the file system refuses ``O_DIRECT`` (tmpfs, some network
file systems) or ``SPATEC_DIRECT_IO=0``, every byte goes through the page cache, as any
write does. Linux keeps the two kinds of write coherent for readers.
"""
from __future__ import annotations

import errno
import mmap
import os

#: The alignment of offsets, lengths and memory an ``O_DIRECT`` write needs (ext4, XFS: the
#: logical block size, at most a page).
ALIGN = 4096
#: The buffer each full write takes (a multiple of :data:`ALIGN`).
CHUNK = 8 << 20

#: Buffers no writer holds (a process's writers run one after another: one buffer, reused).
_free: list = []


def _take() -> memoryview:
    """A write buffer of :data:`CHUNK` bytes (anonymous memory: page-aligned), a free one if any."""
    while _free:
        buf = _free.pop()
        if len(buf) == CHUNK:
            return buf
    return memoryview(mmap.mmap(-1, CHUNK))


def direct_enabled() -> bool:
    return os.environ.get("SPATEC_DIRECT_IO", "1") != "0" and hasattr(os, "O_DIRECT")


class PositionedWriter:
    """Writes consecutive bytes from offset ``at`` of the existing file ``path``
    (:meth:`write` them, then :meth:`close`); never past what it is given."""

    def __init__(self, path: str, at: int):
        self.fd = os.open(path, os.O_WRONLY)
        self.dfd = None
        if direct_enabled():
            try:
                self.dfd = os.open(path, os.O_WRONLY | os.O_DIRECT)
            except OSError:
                self.dfd = None
        self.at = at            # the file offset of the buffer's first byte (or the next byte)
        self.fill = 0           # bytes in the buffer
        self.buf = _take() if self.dfd is not None else None

    def write(self, data) -> None:
        view = memoryview(data).cast("B")
        if self.buf is None:
            self.at = pwrite_all(self.fd, view, self.at)
            return
        if not self.fill and self.at % ALIGN:
            # the range's first, shared page: through the page cache
            n = min(len(view), ALIGN - self.at % ALIGN)
            self.at = pwrite_all(self.fd, view[:n], self.at)
            view = view[n:]
        while len(view):
            n = min(len(view), CHUNK - self.fill)
            self.buf[self.fill:self.fill + n] = view[:n]
            self.fill += n
            view = view[n:]
            if self.fill == CHUNK:
                self._flush(CHUNK)

    def _flush(self, n: int) -> None:
        """The buffer's first ``n`` bytes (a multiple of :data:`ALIGN`) written directly."""
        done = 0
        while done < n:
            try:
                got = os.pwrite(self.dfd, self.buf[done:n], self.at + done)
            except OSError as e:
                if e.errno != errno.EINVAL:      #: this file (or its range) takes no O_DIRECT
                    raise
                got = 0
            if got <= 0 or got % ALIGN:
                # (a short or refused direct write: the rest through the page cache)
                pwrite_all(self.fd, self.buf[done + max(got, 0):n], self.at + done + max(got, 0))
                break
            done += got
        rest = self.fill - n
        if rest:
            self.buf[:rest] = self.buf[n:self.fill]
        self.at += n
        self.fill = rest

    def close(self) -> None:
        try:
            if self.buf is not None and self.fill:
                whole = self.fill - self.fill % ALIGN
                if whole:
                    self._flush(whole)
                if self.fill:           # the range's last, shared page
                    self.at = pwrite_all(self.fd, self.buf[:self.fill], self.at)
                    self.fill = 0
        finally:
            os.close(self.fd)
            if self.dfd is not None:
                os.close(self.dfd)
            if self.buf is not None:
                _free.append(self.buf)
                self.buf = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def pwrite_all(fd: int, data, at: int) -> int:
    """``data`` (bytes-like) written at ``at`` through the page cache; the offset after it."""
    view = memoryview(data).cast("B")
    while len(view):
        n = os.pwrite(fd, view, at)
        view, at = view[n:], at + n
    return at

"""Waking a waiting runner as soon as a file lands in a directory (Linux inotify)."""
from __future__ import annotations

import os
import struct
import sys
from pathlib import Path
from typing import Any, Sequence


class DirWatch:
    """Wakes a waiting runner as soon as a name is created, renamed or written into one of
    some directories (Linux inotify, through libc; :meth:`of` is None elsewhere). A waiter
    that would otherwise sleep between two looks at the directories returns at once."""

    _IN_CLOSE_WRITE, _IN_MOVED_TO, _IN_CREATE, _IN_Q_OVERFLOW = 0x8, 0x80, 0x100, 0x4000
    _libc: Any = None

    def __init__(self, fd: int):
        self.fd = fd

    @classmethod
    def of(cls, paths: Sequence[Path]) -> "DirWatch | None":
        """A watch on ``paths`` (existing directories), or None where inotify is not to be had."""
        if not paths or not sys.platform.startswith("linux"):
            return None
        try:
            if cls._libc is None:
                import ctypes

                cls._libc = ctypes.CDLL(None, use_errno=True)
            fd = cls._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        mask = cls._IN_CLOSE_WRITE | cls._IN_MOVED_TO | cls._IN_CREATE
        for p in paths:
            if cls._libc.inotify_add_watch(fd, os.fsencode(p), mask) < 0:
                os.close(fd)
                return None
        return cls(fd)

    def wait(self, timeout: float) -> bool:
        """Up to ``timeout`` seconds, less if something happens in a directory (True then)."""
        import select

        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            while os.read(self.fd, 1 << 16):   # drain: only the wake-up matters
                pass
        except BlockingIOError:
            pass
        return True

    def names(self) -> tuple[set, set, bool]:
        """The names that have landed since the last call (without waiting); those of them
        known complete (renamed in, or closed by a writer); and whether some may be
        missing (the kernel's queue overflowed: list the directory)."""
        out: set = set()
        closed: set = set()
        overflow = False
        buf = b""
        try:
            while True:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    break
                buf += chunk
        except BlockingIOError:
            pass
        i = 0
        while i + 16 <= len(buf):   # struct inotify_event: wd, mask, cookie, len, name[len]
            _, mask, _, n = struct.unpack_from("iIII", buf, i)
            if mask & self._IN_Q_OVERFLOW:
                overflow = True
            elif n:
                name = os.fsdecode(buf[i + 16:i + 16 + n].split(b"\0", 1)[0])
                out.add(name)
                if mask & (self._IN_CLOSE_WRITE | self._IN_MOVED_TO):
                    closed.add(name)
                else:
                    closed.discard(name)   # created (again) after a close
            i += 16 + n
        return out, closed, overflow

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

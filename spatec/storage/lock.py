"""One run at a time in a directory: an advisory lock that the kernel drops with its process.

Two replays writing into one ``--out`` would interleave their files (the
atomic writes go through fixed temporary names) and one could exit 0 holding
the other's results; two live runs on one checkpoint would both deliver.
:class:`DirLock` takes ``flock`` on a hidden file in the directory, without
waiting: the second run is told at once which process holds it. A run killed
with ``kill -9`` leaves the file, not the lock.
"""
from __future__ import annotations

import os
from pathlib import Path

LOCK_NAME = ".spatec.lock"


class Busy(Exception):
    """Another process holds the directory (``pid``: what it wrote, if anything)."""

    def __init__(self, path: Path, pid: str):
        self.path, self.pid = path, pid
        super().__init__(f"{path} is in use by another spatec run" + (f" (pid {pid})" if pid else ""))


class DirLock:
    """``with DirLock(path):`` the directory is this process's until the block ends
    (:class:`Busy` at once if another process has it). Where ``fcntl`` is missing
    (Windows) nothing is locked."""

    def __init__(self, path):
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self) -> "DirLock":
        try:
            import fcntl
        except ImportError:     # pragma: no cover - not POSIX
            return self
        fd = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise Busy(self.path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)      # closing drops the lock
            self._fd = None

    def __enter__(self) -> "DirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

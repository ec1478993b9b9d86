"""One run at a time in a directory: an advisory lock that the kernel drops with its process.

Two replays writing into one ``--out`` would interleave their files (the
atomic writes go through fixed temporary names) and one could exit 0 holding
the other's results; two live runs on one checkpoint would both deliver.
:class:`DirLock` takes ``flock`` on a hidden file in the directory, without
waiting: the second run is told at once which process holds it. A run killed
with ``kill -9`` leaves the file, not the lock; but the lock goes only when the
last process holding it has exited, and a killed live run's forked checkpoint
writer (which dies with it, at idle priority: :mod:`spatec.storage.forked`) can
take a while to do so on a busy machine. So when the process named in the file
is gone, the lock is waited for (at most ``dying_wait`` seconds): what holds it
is a dying child of that run, never another run.
"""
from __future__ import annotations

import os
import time
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

    def __init__(self, path, dying_wait: float = 60.0):
        self.path = Path(path)
        self.dying_wait = dying_wait
        self._fd: int | None = None

    def acquire(self) -> "DirLock":
        try:
            import fcntl
        except ImportError:     # pragma: no cover - not POSIX
            return self
        fd = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        end = time.monotonic() + self.dying_wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                if _alive(holder) or time.monotonic() >= end:
                    os.close(fd)
                    raise Busy(self.path, holder) from None
                time.sleep(0.05)    # the run that wrote it is gone: a child of it is dying
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


def _alive(pid: str) -> bool:
    """Whether the process a lock file names still exists (True when it names none)."""
    try:
        n = int(pid)
    except ValueError:
        return True
    try:
        os.kill(n, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

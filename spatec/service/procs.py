"""What the service's own processes (a source's detector, the matcher, the embedded
nats-server) need of the operating system: dying with the service, a name in ``ps``, a
priority below the processes that deliver, and a stop flag that a killed process cannot
jam.

:class:`StopFlag` replaces ``multiprocessing.Event`` for "stop now": setting an Event
waits for every process sleeping in ``wait`` to acknowledge that it woke, so a child
killed while it waited (``kill``, or a ``SIGTERM`` to the whole process group as
``systemctl stop`` sends) left ``set`` — and the service's stop — blocked for ever. The
flag is a pipe: setting it writes a byte, which never waits for the reader; the child
sees it (or the service's end of the pipe closing) by polling its end.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal


def die_with_parent(name: str | None = None) -> None:
    """This process ends when its parent does; named ``name`` (15 bytes) in ``ps`` and ``top``
    when given (``spatec-detect``, ``spatec-match``: which of the service's processes is busy)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)                                       # PR_SET_PDEATHSIG
        if name:
            libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)    # PR_SET_NAME
    except OSError:
        pass


def lower_priority(increment: int) -> None:
    """This process ``increment`` below its priority (nice), every thread it has (numpy's and
    Arrow's native threads start as soon as they are imported) and every thread it makes."""
    if not increment:
        return
    base = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:              # no /proc: this thread (and those it makes) only
        tids = [0]
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, base + increment))
        except OSError:          # a thread that ended meanwhile
            pass


class StopFlag:
    """"Stop" from the service to one child process (given to it as an argument of its
    ``Process``): ``set`` in the service never blocks, whatever became of the child; the
    child's ``is_set`` and ``wait`` see it, or the service gone (its end of the pipe closed).
    ``set`` in the child stops the child only."""

    def __init__(self, ctx=None):
        ctx = ctx or multiprocessing.get_context("spawn")
        self._reader, self._writer = ctx.Pipe(duplex=False)
        self._set = False

    def __getstate__(self):          # (the child gets the reading end only)
        return {"_reader": self._reader, "_writer": None, "_set": self._set}

    def set(self) -> None:
        self._set = True
        w, self._writer = self._writer, None
        if w is not None:
            try:
                w.send_bytes(b"s")
            except OSError:          # the child is gone: nothing to tell
                pass
            w.close()

    def is_set(self) -> bool:
        return self.wait(0)

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the flag is set, waiting ``timeout`` seconds at most for it."""
        if self._set:
            return True
        if self._writer is not None:          # (the service's side: nothing to read)
            return False
        try:
            if self._reader.poll(timeout):
                self._set = True
        except (OSError, EOFError, ValueError):
            self._set = True
        return self._set

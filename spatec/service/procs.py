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

import contextlib
import ctypes
import multiprocessing
import os
import signal


#: the signals meant for the service, not for its children
SERVICE_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def starting_children():
    """Start the service's children inside: the service's signals are blocked in this thread
    meanwhile, so a child does not die of one before :func:`service_child` ignores it (a
    blocked signal stays blocked across ``exec``; one that came meanwhile is dropped there).
    The service itself still gets them: another of its threads takes them for it. (The
    resource tracker is started first: starting it unblocks these signals in the thread.)"""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SERVICE_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def service_child(name: str) -> None:
    """What each of the service's Python processes does first: it dies with the service
    (``SIGKILL``: what it has done is checkpointed, nothing is left to tidy), is named
    ``name`` in ``ps``, and leaves the signals meant for the service to the service — Ctrl-C
    reaches a terminal's whole process group and ``systemctl stop`` the whole control group;
    the service then tells each child to stop (:class:`StopFlag`) and waits for it, so a stop
    is orderly and nothing reports a child's death as a failure."""
    die_with_parent(name, signal.SIGKILL)
    for sig in SERVICE_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SERVICE_SIGNALS)     # (blocked by starting_children)


def die_with_parent(name: str | None = None, sig: int = signal.SIGTERM) -> None:
    """This process is sent ``sig`` when its parent ends; named ``name`` (15 bytes) in ``ps``
    and ``top`` when given (which of the service's processes is busy)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(sig))                                             # PR_SET_PDEATHSIG
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

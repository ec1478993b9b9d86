"""Writes done by a forked child from a copy-on-write image of the parent's memory.

A live run saves its state while it goes on: :func:`fork_write` forks, and the
child runs the write (pickling or encoding what the image holds, syncing) on
CPU time the parent leaves (``SCHED_IDLE``), dies with the parent (a killed
runner must not leave a writer behind while its successor reads the
directory), and exits 0 only when the write committed. The parent asks
:func:`reap` whether it has; a reader of the same directory first waits for
any child still writing it (:func:`wait_for`).
"""
from __future__ import annotations

import os
from typing import Callable

try:   # loaded here, not in a forked child
    import ctypes

    _LIBC = ctypes.CDLL(None)
except OSError:  # pragma: no cover
    _LIBC = None

# children (pid) of this process writing, by the directory they write in
_WRITERS: dict = {}


def available() -> bool:
    """Whether writes can be forked here (POSIX)."""
    return hasattr(os, "fork")


def fork_write(directory: str, write: Callable[[], None]) -> int:
    """Run ``write()`` in a forked child; its pid. The child exits 0 when ``write`` returned."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:   # the child: write, leave
        code = 1
        try:
            _die_with_parent(parent)
            _yield_cpu()
            write()
            code = 0
        finally:
            os._exit(code)
    _WRITERS[_key(directory)] = pid
    return pid


def reap(directory: str, pid: int, block: bool = False) -> bool | None:
    """The child's outcome: True (it committed), False (it failed), None (still running)."""
    got = _wait(pid, block)
    if got is not None:
        _WRITERS.pop(_key(directory), None)
    return got


def wait_for(directory: str) -> None:
    """Wait for a child of this process still writing in ``directory``."""
    pid = _WRITERS.pop(_key(directory), None)
    if pid is not None:
        _wait(pid, True)


def _key(directory: str) -> str:
    return os.path.realpath(directory)


def _wait(pid: int, block: bool) -> bool | None:
    try:
        got, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return False
    if got == 0:
        return None
    return os.waitstatus_to_exitcode(status) == 0


def _die_with_parent(parent: int) -> None:
    """In the child: be killed when the parent dies."""
    try:
        _LIBC.prctl(1, 9)   # PR_SET_PDEATHSIG, SIGKILL (Linux)
    except AttributeError:
        pass
    if os.getppid() != parent:
        os._exit(1)


def _yield_cpu() -> None:
    """In the child: run only on CPU time the parent leaves (SCHED_IDLE, else the lowest
    priority). A save of a busy run's changes takes a good part of a second of CPU; at the
    parent's priority it would take a core from the batches that follow the fork."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.nice(19)
        except OSError:
            pass

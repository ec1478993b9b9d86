"""The directory lock: a live run refused while another holds it, and never refused by the
dying forked writer of a run killed with kill -9 (the lock goes with the last process
holding it; that child is waited for, another run is not)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from spatec.storage.lock import Busy, DirLock

# a run that takes the lock, forks a writer that inherits it and outlives the run by
# HOLD seconds (as a killed run's idle-priority checkpoint writer can on a busy machine)
_RUN_WITH_WRITER = """
import os, sys, time
from spatec.storage.lock import DirLock
DirLock(sys.argv[1]).acquire()
if os.fork() == 0:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)        # the test reads the run's output to its end: not the writer's
    time.sleep(float(sys.argv[2]))
    os._exit(0)
print("forked", flush=True)
os._exit(0)          # the run is gone; its writer still holds the lock
"""

_HOLD = """
import sys, time
from spatec.storage.lock import DirLock
DirLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_the_lock_of_a_gone_run_is_waited_for_while_its_writer_dies(tmp_path):
    p = subprocess.run([sys.executable, "-c", _RUN_WITH_WRITER, str(tmp_path), "1.5"], capture_output=True,
                       text=True, timeout=60)
    assert p.stdout.strip() == "forked"
    with pytest.raises(Busy):            # without waiting, the writer's lock refuses the next run
        DirLock(tmp_path, dying_wait=0).acquire()
    t0 = time.monotonic()
    lock = DirLock(tmp_path).acquire()   # waits for the writer, then takes it
    try:
        assert time.monotonic() - t0 < 30
        assert (tmp_path / ".spatec.lock").read_text().strip() == str(__import__("os").getpid())
    finally:
        lock.release()


def test_a_live_holder_refuses_at_once(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with pytest.raises(Busy) as e:
            DirLock(tmp_path).acquire()
        assert time.monotonic() - t0 < 1 and e.value.pid == str(p.pid)
    finally:
        p.kill()
        p.wait()
    DirLock(tmp_path).acquire().release()     # kill -9: the lock went with it

"""The service's child processes: a stop flag a killed child cannot jam, a lower priority for
every thread (``spatec/service/procs.py``)."""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

from spatec.service.procs import StopFlag, lower_priority


def _wait_then_report(flag, out):
    out.put(("waiting", os.getpid()))
    out.put(("stopped", flag.wait(30)))


def _sleep_waiting(flag):
    flag.wait(60)


def test_a_child_sees_the_flag_set_and_setting_never_waits_for_a_dead_child():
    ctx = multiprocessing.get_context("spawn")
    flag, out = StopFlag(ctx), ctx.Queue()
    p = ctx.Process(target=_wait_then_report, args=(flag, out))
    p.start()
    assert out.get(timeout=60)[0] == "waiting"
    assert not flag.is_set()
    flag.set()
    assert out.get(timeout=30) == ("stopped", True)
    p.join(30)
    assert flag.is_set()
    # a child killed while it waits: setting its flag returns at once (an Event's set waited for ever)
    flag = StopFlag(ctx)
    p = ctx.Process(target=_sleep_waiting, args=(flag,))
    p.start()
    time.sleep(1.0)
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    done = threading.Event()
    threading.Thread(target=lambda: (flag.set(), done.set()), daemon=True).start()
    assert done.wait(5), "set() blocked on a dead child"


def _child_of_a_parent_that_goes(out):
    ctx = multiprocessing.get_context("spawn")
    flag = StopFlag(ctx)
    p = ctx.Process(target=_wait_then_report, args=(flag, out))
    p.start()
    time.sleep(0.5)
    os._exit(0)                    # its end of the pipe closes: the child stops


def test_the_service_gone_is_stop():
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=_child_of_a_parent_that_goes, args=(out,))
    p.start()
    p.join(60)
    got = [out.get(timeout=60), out.get(timeout=60)]
    assert got[0][0] == "waiting" and got[1] == ("stopped", True)


def _priorities(increment, out):
    import numpy  # noqa: F401 - (native threads made at import, before the priority changes)

    lower_priority(increment)
    t = threading.Thread(target=lambda: out.put(("thread", os.getpriority(os.PRIO_PROCESS, 0))))
    t.start()
    t.join()
    out.put(("tasks", sorted({int(open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[16])
                              for tid in os.listdir("/proc/self/task")})))


def test_lower_priority_takes_every_thread_and_those_made_after():
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    base = os.getpriority(os.PRIO_PROCESS, 0)
    p = ctx.Process(target=_priorities, args=(5, out))
    p.start()
    got = dict([out.get(timeout=60), out.get(timeout=60)])
    p.join(30)
    assert got == {"thread": base + 5, "tasks": [base + 5]}


CHILD = '''
import multiprocessing, os, signal, sys
from spatec.service.procs import service_child, starting_children

def masks():
    got = {l.split(":")[0]: int(l.split(":")[1], 16) for l in open("/proc/self/status")
           if l.startswith(("SigBlk", "SigIgn"))}
    bits = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    return {k: v & bits == bits for k, v in got.items()}

def child(q):
    first = masks()
    service_child("spatec-test")
    after = masks()
    os.kill(os.getpid(), signal.SIGTERM)      # the service's signal: not this child's
    os.kill(os.getpid(), signal.SIGINT)
    q.send((first, after, open("/proc/self/comm").read().strip()))

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    for _ in range(2):                         # (the first start also starts the resource tracker)
        got, q = ctx.Pipe(duplex=False)
        p = ctx.Process(target=child, args=(q,))
        with starting_children():
            p.start()
        print(got.recv() if got.poll(60) else None)
        p.join(30)
        print(p.exitcode)
'''


def test_the_service_s_signals_reach_the_service_not_its_children(tmp_path):
    """A child started in ``starting_children`` has SIGINT and SIGTERM blocked from its first
    instruction (a Ctrl-C while it starts is no traceback of its own), ignores them once it is
    a ``service_child`` (named, unblocked), and lives through both."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    want = ("({'SigBlk': True, 'SigIgn': False}, {'SigBlk': False, 'SigIgn': True}, 'spatec-test')", "0")
    assert lines[:4] == [*want, *want], r.stdout


class _Cycle:
    pass


def test_what_many_subscriptions_made_is_frozen_and_a_full_pass_frees_what_many_drops_left():
    """The matcher's collector policy (:class:`spatec.service.matcher.LongLived`): after many
    changes at once what exists is frozen (no full pass walks it: a cycle dropped then stays),
    a few changes freeze nothing, and once many were dropped one full pass frees their cycles."""
    import gc
    import weakref

    from spatec.service.matcher import LongLived

    gc.unfreeze()                       # (what another test in this process froze: ours to count)
    gc.collect()
    ll = LongLived()
    try:
        ll.changed(LongLived.MANY, 0, 1000)                # a few: nothing frozen
        assert gc.get_freeze_count() == 0
        a = _Cycle()
        a.me = a
        gone = weakref.ref(a)
        ll.changed(LongLived.MANY + 1, 0, 1000)            # many at once: frozen
        assert gc.get_freeze_count() > 0
        del a
        gc.collect()
        assert gone() is not None                          # frozen: no pass frees it
        ll.changed(0, 9_999, 50_000)                       # dropped, not yet many
        gc.collect()
        assert gone() is not None
        ll.changed(0, 2, 50_000)                           # 10,001 dropped: one full pass first
        assert gone() is None and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()

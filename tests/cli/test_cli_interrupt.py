"""Ctrl-C while Spark starts (issue 30): the JVM spatec launched never outlives it (the
kernel's parent-death signal, and an interrupted start ends it at once), and the terminal
gets one line, no Py4J traceback."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HOUR = REPO.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
SPATEC = Path(sys.executable).parent / "spatec"


def descendants(pid: int) -> set:
    children: dict = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                text = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            children.setdefault(int(text[text.rindex(")") + 2:].split()[1]), []).append(int(p))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        text = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return text[text.rindex(")") + 2:].split()[0] != "Z"


def comm(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return ""


@pytest.mark.slow
@pytest.mark.parametrize("when, after", [("start", 1.0), ("jvm", 0.3), ("jvm", 1.5), ("jvm", 3.0)])
def test_ctrl_c_during_spark_start_leaves_nothing_running(tmp_path, when, after):
    """Ctrl-C before the JVM is launched, and 0.3, 1.5 and 3 s after it appears (while its
    context and session are made, whatever this machine's speed: pyspark's own SIGINT handler
    is in place from the context on)."""
    if not HOUR.exists():
        pytest.skip(f"the Cambridge hour is not at {HOUR}")
    p = subprocess.Popen([str(SPATEC), "replay", str(REPO.parent / "shared" / "spec" / "examples" / "stuck.spatec"),
                          "--events", f"BusGPS={HOUR}", "--out", str(tmp_path / "out")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: set = set()
    end = time.time() + (after if when == "start" else 120)
    while time.time() < end and p.poll() is None:   # every process it started meanwhile (the JVM among them)
        seen |= descendants(p.pid)
        if when == "jvm" and end - time.time() > after and any(comm(k) == "java" for k in seen):
            end = time.time() + after
        time.sleep(0.05)
    assert p.poll() is None, "the replay ended before the Ctrl-C"
    assert when == "start" or any(comm(k) == "java" for k in seen), "no JVM was started"
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=120)[1]
    deadline = time.time() + 15
    while time.time() < deadline and any(alive(k) for k in seen):
        time.sleep(0.2)
    left = [k for k in seen if alive(k)]
    for k in left:
        os.kill(k, signal.SIGKILL)
    assert not left, f"still running after Ctrl-C: {left}"
    assert p.returncode in (130, 0), err
    assert "Traceback" not in err and "py4j" not in err.lower(), err[-2000:]

"""A full disk under ``--out`` (issue 30): one line saying so, exit code 1, no traceback; the
outputs an earlier run wrote there are as they were (a run commits its outputs only once
all are written). The disk is a small tmpfs mounted for the test (root only: skipped
elsewhere, saying why)."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
HOUR = SHARED / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
SPATEC = Path(sys.executable).parent / "spatec"


@pytest.fixture
def small_disk(tmp_path):
    where = tmp_path / "disk"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", f"spatec-{uuid.uuid4().hex[:6]}", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small file system here (needs root): {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def replay(program, out, *args):
    return subprocess.run([str(SPATEC), "replay", str(program), "--events", f"BusGPS={HOUR}", "--out", str(out),
                           "--quiet", *args], capture_output=True, text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["local", "spark"])
def test_a_full_disk_is_one_line_and_keeps_the_earlier_outputs(small_disk, runner):
    if not HOUR.exists():
        pytest.skip(f"the Cambridge hour is not at {HOUR}")
    out = small_disk / "out"
    args = ["--runner", runner] + (["--master", "local[2]"] if runner == "spark" else [])
    first = replay(SHARED / "spec" / "examples" / "hospital_to_station.spatec", out, *args)    # a few kB
    assert first.returncode == 0, first.stderr[-2000:]
    before = {p.name: p.read_bytes() for p in out.glob("*.jsonl")}
    assert before
    # Stuck on the hour writes ~16 MB: more than the disk holds
    second = replay(SHARED / "spec" / "examples" / "stuck.spatec", out, *args)
    assert second.returncode == 1, second.stderr[-2000:]
    assert "Traceback" not in second.stderr and "at org.apache" not in second.stderr, second.stderr[-2000:]
    last = second.stderr.strip().splitlines()[-1]
    assert last.startswith("spatec: error:") and "no space left" in last.lower(), second.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in out.glob("*.jsonl")} == before
    assert not [p for p in out.iterdir() if p.name.startswith(".spatec-run-")]      # nothing half written left
    os.sync()

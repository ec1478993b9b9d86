"""What a command checks before it reads any input (issue 16): options that name nothing,
a CRS that is not metric, outputs that cannot be written, an output directory another
run is writing. Each is one clear line and exit code 1, and no input is read."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spatec.cli.main import main
from spatec.datasets import synth

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STUCK = EXAMPLES / "stuck" / "stuck.spatec"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    df = synth.synthetic_trace(4, 1800, seed=5, bad_fraction=0.02)
    p = tmp_path_factory.mktemp("data") / "trace.csv"
    df.to_csv(p, index=False)
    return p


@pytest.fixture
def never_read(monkeypatch):
    """Fails the test if any input is read."""
    import spatec.events.read as read

    def boom(*a, **k):
        raise AssertionError("input was read before the options were checked")

    monkeypatch.setattr(read, "read_events", boom)
    monkeypatch.setattr(read, "iter_batches", boom)


def replay(trace, out, *extra):
    return main(["replay", str(STUCK), "--runner", "local", "--events", f"BusGPS={trace}", "--out", str(out),
                 "--quiet", *extra])


@pytest.mark.parametrize("extra, message", [
    (["--crs", "EPSG:4326"], "--crs EPSG:4326: CRS 'EPSG:4326' is not a projected CRS in metres"),
    (["--crs", "EPSG:99999"], "--crs EPSG:99999: unknown CRS 'EPSG:99999'"),
    (["--phrase", "Nope"], "--phrase Nope: the program has no such phrase (phrases: Stuck, StuckOnRoad)"),
    (["--phrase", "Stuk"], "did you mean Stuck?"),
])
def test_bad_options(trace, tmp_path, capsys, never_read, extra, message):
    assert replay(trace, tmp_path / "out", *extra) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_outputs_that_cannot_be_written(trace, tmp_path, capsys, never_read):
    f = tmp_path / "afile"
    f.write_text("x")
    cases = [(f, f"--out {f}: is a file, not a directory"),
             (f / "sub", f"--out {f / 'sub'}: cannot write there (Not a directory)"),
             (Path("/proc/self/nope"), "--out /proc/self/nope: cannot write there")]
    for out, message in cases:
        assert replay(trace, out) == 1
        assert message in capsys.readouterr().err
    assert replay(trace, tmp_path / "out", "--map", str(f / "map.html")) == 1
    assert "--map" in capsys.readouterr().err


def test_live_checks_before_the_first_poll(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    d = tmp_path / "in"
    d.mkdir()
    base = ["live", str(STUCK), "--source", f"BusGPS=dir://{d}", "--until-idle", "1", "--quiet"]
    cases = [(["--checkpoint", str(f)], f"--checkpoint {f}: is a file, not a directory"),
             (["--out", str(f / "x")], "cannot write there (Not a directory)"),
             (["--sink", f"jsonl://{f}"], f"--sink jsonl://{f}: {f}: is a file, not a directory"),
             (["--crs", "EPSG:4326"], "is not a projected CRS in metres"),
             (["--phrase", "Nope"], "--phrase Nope: the program has no such phrase")]
    for extra, message in cases:
        t0 = time.monotonic()
        assert main(base + extra) == 1
        assert message in capsys.readouterr().err
        assert time.monotonic() - t0 < 5     # not after --until-idle


# ------------------------------------------------------------------------------- one run per --out

_HOLD = """
import sys, time
from spatec.storage.lock import DirLock
DirLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(60)
"""


def hold(path: Path) -> subprocess.Popen:
    """Another process that holds ``path`` as a running replay would."""
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_run_into_a_busy_out_stops_at_once(trace, tmp_path, capsys):
    out = tmp_path / "out"
    assert replay(trace, out) == 0
    first = (out / "Stuck.jsonl").read_bytes()
    other = hold(out)
    try:
        assert replay(trace, out, "--phrase", "Stuck") == 1
        err = capsys.readouterr().err
        assert f"--out {out}: another spatec run is writing there (pid {other.pid})" in err
        assert (out / "Stuck.jsonl").read_bytes() == first      # nothing of the refused run
    finally:
        other.send_signal(signal.SIGKILL)       # kill -9: the lock goes with the process
        other.wait()
    assert replay(trace, out) == 0


_SNAPSHOT = """
import os, shutil, sys
import spatec.cli.replay_cmd as cmd
replay = cmd._replay
def replay_then_snapshot(*a, **k):
    rc = replay(*a, **k)
    shutil.copytree(os.environ["OUT"], os.environ["SNAP"])    # as the run ends, still holding --out
    return rc
cmd._replay = replay_then_snapshot
from spatec.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_two_concurrent_replays_each_exit_0_with_their_own_results(trace, tmp_path):
    """Two processes replay different inputs into one --out at once: each either is
    refused (exit 1, saying why) or exits 0 with exactly its own results there as it ends."""
    import pandas as pd

    df = pd.read_csv(trace)
    other = tmp_path / "other.csv"
    df[df["vehicle"] != df["vehicle"].iloc[0]].to_csv(other, index=False)
    inputs = [trace, other]
    want = []
    for i, data in enumerate(inputs):
        assert replay(data, tmp_path / f"alone{i}", "--phrase", "Stuck") == 0
        want.append((tmp_path / f"alone{i}" / "Stuck.jsonl").read_bytes())
    assert want[0] != want[1]
    out = tmp_path / "out"
    procs = []
    for i, data in enumerate(inputs):
        env = dict(os.environ, OUT=str(out), SNAP=str(tmp_path / f"snap{i}"))
        args = ["replay", str(STUCK), "--runner", "local", "--events", f"BusGPS={data}", "--out", str(out),
                "--quiet", "--phrase", "Stuck"]
        procs.append(subprocess.Popen([sys.executable, "-c", _SNAPSHOT, *args], env=env,
                                      stderr=subprocess.PIPE, text=True))
    rcs = [p.wait(timeout=300) for p in procs]
    errs = [p.stderr.read() for p in procs]
    assert 0 in rcs and set(rcs) <= {0, 1}, errs
    for i, (rc, err) in enumerate(zip(rcs, errs)):
        if rc == 0:
            assert (tmp_path / f"snap{i}" / "Stuck.jsonl").read_bytes() == want[i]
        else:
            assert "another spatec run is writing there" in err and "Traceback" not in err


def test_an_earlier_runs_rejects_do_not_stay(trace, tmp_path):
    out = tmp_path / "out"
    assert replay(trace, out) == 0
    assert (out / "_rejects" / "BusGPS.jsonl").exists()     # the trace has bad rows
    import pandas as pd

    clean = tmp_path / "clean.csv"
    df = pd.read_csv(trace)
    df[pd.to_numeric(df["lon"], errors="coerce").notna()].head(50).to_csv(clean, index=False)
    rc = replay(clean, out)
    assert rc == 0
    rejects = out / "_rejects" / "BusGPS.jsonl"
    assert not rejects.exists() or all(str(clean) == json.loads(l)["file"] for l in rejects.read_text().splitlines())
    assert os.path.exists(out / ".spatec.lock")

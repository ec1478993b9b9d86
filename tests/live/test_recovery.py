"""Crash and restart: a live run killed (SIGKILL) at several points while the feed plays,
restarted on the same checkpoint, delivers every alert of the batch replay exactly once."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from spatec.feeds.server import FeedServer
from spatec.plan.program import compile_program
from tests.live.conftest import (
    CRS,
    REPO,
    assert_same_alerts,
    batch_alerts,
    feed_events,
    late_ids,
    program_of,
    sink_alerts,
)


def live_cmd(program, url, sink, ck, runner="local", until_idle=None):
    cmd = [sys.executable, "-m", "spatec.cli.main", "live", str(program), "--source", f"BusGPS={url}",
           "--sink", f"jsonl://{sink}", "--checkpoint", str(ck), "--runner", runner, "--lateness", "2 min",
           "--trigger", "0", "--crs", CRS, "--quiet"]
    if until_idle is not None:
        cmd += ["--until-idle", str(until_idle)]
    return cmd


def start(cmd, log):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def kill_after(proc, srv, served: int, timeout: float = 120) -> None:
    """SIGKILL ``proc`` once the feed has handed out ``served`` polls."""
    t0 = time.monotonic()
    while srv.served < served:
        assert proc.poll() is None, "the live run ended before it was killed"
        assert time.monotonic() - t0 < timeout, "the live run made no progress"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_local_killed_and_restarted_delivers_each_alert_once(tmp_path, polls10):
    compiled = compile_program(program_of(tmp_path, "silent", "stuck", "hospital"))
    prog = tmp_path / "silent_stuck_hospital.spatec"
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    n = len(polls10)
    with FeedServer(polls10, speed=0) as srv, open(tmp_path / "live.log", "wb") as log:
        for at in (n // 6, n // 3, n // 2, 2 * n // 3):
            kill_after(start(live_cmd(prog, srv.source_url(), sink, ck), log), srv, at)
        final = start(live_cmd(prog, srv.source_url(), sink, ck, until_idle=1), log)
        assert final.wait(timeout=300) == 0, (tmp_path / "live.log").read_text()
    want = batch_alerts(compiled, feed_events(compiled, polls10), exclude=late_ids(ck))
    assert sum(map(len, want.values())) > 1000
    assert_same_alerts(sink_alerts(sink, compiled), want)

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


def test_batches_a_crash_cut_short_are_replayed_as_they_were(tmp_path, polls5):
    """Lateness depends on how the polls were cut into micro-batches (an event is late behind
    the watermark of the batches before its own). A run that dies after some batches, with
    no save since, is restarted on its checkpoint: the polls it had spooled are replayed in
    the same batches (``<checkpoint>/batches.log``), so the fixes it found late are late
    again and what it delivered is what the replay without them gives; not one batch of
    everything spooled, in which they would no longer be late."""
    from spatec.runners.live_local import open_local

    compiled = compile_program(program_of(tmp_path, "silent", "stuck"))
    ck, sink = tmp_path / "ck", tmp_path / "alerts"
    with FeedServer(polls5, speed=0) as srv:
        first = open_local(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], ck,
                           lateness=0, crs=CRS, max_polls=1, checkpoint_every=1e9, background=False)
        for _ in range(len(polls5) // 2):
            first.process(first.poll())      # one poll a batch; never saved: the process "dies" here
        late_first = late_ids(ck)
        assert late_first, "with no lateness some fixes come behind the watermark"
        first.sinks.close()
        again = open_local(compiled, [f"BusGPS={srv.source_url()}"], [f"jsonl://{sink}"], ck,
                           lateness=0, crs=CRS, max_polls=1)
        again.run(trigger=0, until_idle=1.5)
    late = late_ids(ck)
    assert late >= late_first
    want = batch_alerts(compiled, feed_events(compiled, polls5), exclude=late)
    assert sum(map(len, want.values())) > 100
    assert_same_alerts(sink_alerts(sink, compiled), want)

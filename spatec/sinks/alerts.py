"""Where live alerts go: the console, JSON lines files, webhooks.

A sink is named by a URL (``spatec live --sink URL``):

=============================  ===================================================
``console:``                   one line per alert on the terminal (rich);
                               ``console:?tz=ZONE``: its times in ZONE
``jsonl:///path/dir``          ``<dir>/<phrase>.jsonl``, appended and fsync'd
``http://host:port/path``      a webhook: one ``POST`` of the alert's JSON per
                               alert (``https`` too)
=============================  ===================================================

An alert is one composite as a JSON object, exactly as ``spatec replay``
writes it in JSON lines (``phrase``, ``id``, ``lo``, ``hi``, ``hull``,
``events``, then the emit fields; times as ISO 8601 UTC).

Exactly once. Every alert has its deterministic composite id. The
:class:`DeliveredLog` (``<checkpoint>/delivered.jsonl``) records each
``(sink, id)`` delivered, so a restart, or a batch run again after a crash,
never delivers an id twice; entries are dropped once the watermark has moved
far enough past the alert that it can no longer be produced again. A JSON
lines sink is its own record as well: on start it reads the ids already in
its files (and cuts a line a crash left half written), so even a crash between
writing and logging delivers nothing twice. A webhook is sent an
``Idempotency-Key: <id>`` header, for the one window no client can close (the
receiver answered but the process died before logging it). The log's lines
are written (to the operating system) before the next batch starts, and
synced to the disk by a thread of their own: a killed process loses none of
them, and a batch does not wait for the disk; only a crash of the machine
itself can lose the last ones, and then alerts of the last batches may be
delivered again (a JSON lines sink still skips them, from its own file).

Webhooks: each target has a queue of its own (a file, ``<checkpoint>/outbox/``)
and a thread that posts from it, so a slow receiver holds up nothing else; each
delivery is recorded as it succeeds. Connection errors, timeouts, 408, 429 and
5xx are retried with exponential backoff (``backoff * 2**k`` seconds,
``retries`` times); after the last try — or at once for any other 4xx — the
alert goes to the dead-letter file (``<checkpoint>/dead_letter.jsonl``) with
the error, and counts as handled. See :class:`WebhookSink`.
"""
from __future__ import annotations

import heapq
from collections import deque
import json
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _ascii_str
from pathlib import Path
from typing import Collection, Sequence
from urllib.parse import parse_qs, urlparse

import numpy as np
import pandas as pd

from spatec.errors import DataError
from spatec.sinks.files import json_rows

log = logging.getLogger("spatec.sinks")


def alert_json(rows: Sequence[dict], time_fields: Collection[str] = ()) -> list[dict]:
    """Output rows (``output_row``: times as int µs) → alerts as JSON-ready dicts."""
    if not rows:
        return []
    fast = _plain_alerts(rows, time_fields)
    if fast is not None:
        return fast
    return list(json_rows(pd.DataFrame(list(rows)), time_fields))


_I64 = (-(1 << 63), (1 << 63) - 1)


def _plain_alerts(rows: Sequence[dict], time_fields: Collection[str]) -> list[dict] | None:
    """:func:`alert_json` without the pandas frame, for rows whose columns pandas would keep as
    they are: every row with the same keys in the same order, each column all text (or None),
    all ints, all floats or all bools, times all ints. The same dicts the frame gives; None
    for anything else (the frame decides then)."""
    from spatec.events.timefmt import format_times
    from spatec.sinks.files import FIXED, events_dict, plain_value

    keys = tuple(rows[0])
    if not all(map(keys.__eq__, map(tuple, rows))) or not set(FIXED) <= set(keys):
        return None
    cols, times = {}, []
    for c in keys:
        vals = [r[c] for r in rows]
        types = set(map(type, vals))
        if c in ("lo", "hi") or c in time_fields:
            if not _ints64(types, vals):
                return None
            times.append((c, vals))
        elif c == "events":
            if types != {dict}:
                return None
            cols[c] = [events_dict(v) for v in vals]
        elif types <= _TEXT:
            cols[c] = vals
        elif _ints64(types, vals) or types == {float} or types == {bool}:
            cols[c] = [plain_value(v) for v in vals]
        else:
            return None
    if times:   # every time column in one call
        text = format_times(np.array([v for _, vals in times for v in vals], dtype=np.int64)).tolist()
        for k, (c, _) in enumerate(times):
            cols[c] = text[k * len(rows):(k + 1) * len(rows)]
    names = [*FIXED, *(c for c in keys if c not in FIXED)]
    return [dict(zip(names, values)) for values in zip(*(cols[n] for n in names))]


_TEXT = {str, type(None)}


def _ints64(types: set, vals: list) -> bool:
    """Every value a plain int within int64."""
    return types == {int} and min(vals) >= _I64[0] and max(vals) <= _I64[1]


def _fsync_append(path: Path, lines: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(lines))
        f.flush()
        os.fsync(f.fileno())


# ------------------------------------------------------------------------------ delivered ids

class _Syncer:
    """Syncs a file to the disk on a thread of its own, after each :meth:`request` (requests
    made while a sync runs are covered by one more). ``fdatasync`` releases the GIL, so the
    batches go on meanwhile."""

    def __init__(self, fd: int):
        self.fd = fd
        self._want = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="spatec-fsync", daemon=True)
        self._thread.start()

    def request(self) -> None:
        self._want.set()

    def _run(self) -> None:
        sync = getattr(os, "fdatasync", os.fsync)
        while True:
            self._want.wait()
            self._want.clear()
            try:
                sync(self.fd)
            except OSError as e:   # e.g. the file closed under us at the end
                if not self._stop:
                    log.warning("syncing the delivered log failed: %s", e)
            if self._stop:
                return

    def close(self) -> None:
        """Stop the thread, then sync once more here (a write made while its last sync ran)."""
        self._stop = True
        self._want.set()
        self._thread.join()
        getattr(os, "fdatasync", os.fsync)(self.fd)


def _log_line(sink: str, cid: str, hi: int) -> str:
    """``json.dumps({"sink": sink, "id": cid, "hi": hi}) + "\\n"``, spelt out (a line per alert)."""
    if type(sink) is str and type(cid) is str:
        return f'{{"sink": {_ascii_str(sink)}, "id": {_ascii_str(cid)}, "hi": {int.__repr__(hi)}}}\n'
    return json.dumps({"sink": sink, "id": cid, "hi": hi}) + "\n"


class DeliveredLog:
    """The ``(sink, id)`` pairs delivered so far, with each alert's ``hi`` (µs) for pruning.

    Pruning costs what it drops (a heap by ``hi``), and the file is rewritten
    only once it holds at least as many dropped entries as live ones."""

    def __init__(self, path: Path | None):
        self.path = Path(path) if path is not None else None
        self.hi: dict[tuple[str, str], int] = {}
        if self.path is not None and self.path.exists():
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    try:
                        d = json.loads(line)
                        self.hi[(d["sink"], d["id"])] = int(d["hi"])
                    except (ValueError, KeyError, TypeError):
                        continue  # a line cut by a crash
        self._heap = [(v, s, c) for (s, c), v in self.hi.items()]
        heapq.heapify(self._heap)
        self._stale = 0            # entries of the file no longer in self.hi
        self._new: list[str] = []
        self._f = None             # the file, open for appending once there is something to add
        self._syncer: _Syncer | None = None
        self._lock = threading.RLock()   # queued sinks record deliveries from their own threads

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self.hi

    def add(self, sink: str, cid: str, hi: int) -> None:
        hi = int(hi)
        with self._lock:
            self.hi[(sink, cid)] = hi
            heapq.heappush(self._heap, (hi, sink, cid))
            self._new.append(_log_line(sink, cid, hi))

    def flush(self) -> None:
        """Write the new lines (to the operating system: a killed process loses none); a
        thread of their own syncs them to the disk."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if self.path is not None and self._new:
            if self._f is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._f = open(self.path, "a", encoding="utf-8")
                self._syncer = _Syncer(self._f.fileno())
            self._f.write("".join(self._new))
            self._f.flush()
            self._syncer.request()
        self._new = []

    def close(self) -> None:
        """Flush, sync and close the file."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        self._flush()
        if self._f is not None:
            self._syncer.close()
            self._f.close()
            self._f = self._syncer = None

    def prune(self, before: int) -> int:
        """Forget alerts with ``hi < before``. Returns how many were dropped."""
        with self._lock:
            return self._prune(before)

    def _prune(self, before: int) -> int:
        n = 0
        heap = self._heap
        while heap and heap[0][0] < before:
            v, s, c = heapq.heappop(heap)
            if self.hi.get((s, c)) == v:
                del self.hi[(s, c)]
                n += 1
        if not n:
            return 0
        self._flush()
        self._stale += n
        if self.path is not None and self._stale >= len(self.hi):
            self._close()
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                for (s, c), v in self.hi.items():
                    f.write(json.dumps({"sink": s, "id": c, "hi": v}) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self._stale = 0
        return n


# ------------------------------------------------------------------------------ sinks

class AlertSink:
    """Base: ``deliver(alerts)`` returns the alerts it handled (delivered or dead-lettered)."""

    name = "sink"

    def already(self, known) -> list[tuple[str, int]]:
        """``(id, hi)`` of alerts this sink holds that ``known((sink, id))`` does not (JSON lines:
        the lines written after the last logged one, when a crash came between the two)."""
        return []

    def deliver(self, alerts: list[dict]) -> list[dict]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class ConsoleSink(AlertSink):
    """One line per alert. ``tz``: its times (``lo``, ``hi`` and every field that holds a
    time as spatec writes one, ISO 8601 UTC) shown in that zone, with the offset
    (``console:?tz=Europe/London``; ``spatec live`` gives the program's zone)."""

    name = "console:"       # (whatever the zone: the delivered log knows the sink by it)

    def __init__(self, console=None, tz: str | None = None):
        if console is None:
            from rich.console import Console

            console = Console(highlight=False, soft_wrap=True)
        self.console = console
        self.tz = None if tz in (None, "", "UTC") else tz

    def _time(self, v):
        if self.tz is None or not isinstance(v, str) or not _UTC_TEXT.match(v):
            return v
        from spatec.events.timefmt import format_times, parse_time

        return format_times([parse_time(v)], self.tz)[0]

    def deliver(self, alerts):
        for a in alerts:
            extra = {k: self._time(v) for k, v in a.items() if k not in ("phrase", "id", "lo", "hi", "hull", "events")}
            fields = "  ".join(f"{k}={v}" for k, v in extra.items())
            self.console.print(f"[bold]{a['phrase']}[/bold] {self._time(a['lo'])} .. {self._time(a['hi'])}  "
                               f"{fields}  [dim]{a['id']}[/dim]")
        return list(alerts)


#: A time as the sinks write one: ISO 8601 UTC, to the second or the microsecond.
_UTC_TEXT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z$")


class JsonlSink(AlertSink):
    """``<dir>/<phrase>.jsonl``, one alert a line, appended; fsync'd after each delivery."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.name = f"jsonl://{self.dir.resolve()}"
        self.dir.mkdir(parents=True, exist_ok=True)

    def already(self, known):
        from spatec.events.timefmt import parse_time

        out = []
        for p in sorted(self.dir.glob("*.jsonl")):
            _cut_partial_line(p)
            # lines are logged in the order written: read back from the end to the last logged one
            for line in _lines_backwards(p):
                try:
                    d = json.loads(line)
                    cid, hi = d["id"], parse_time(d["hi"])
                except (ValueError, KeyError, TypeError):
                    continue
                if known((self.name, cid)):
                    break
                out.append((cid, hi))
        return out

    def deliver(self, alerts):
        by_phrase: dict[str, list[str]] = {}
        for a in alerts:
            by_phrase.setdefault(a["phrase"], []).append(json.dumps(a, ensure_ascii=False, allow_nan=False) + "\n")
        for phrase, lines in by_phrase.items():
            _fsync_append(self.dir / f"{phrase}.jsonl", lines)
        return list(alerts)


def _lines_backwards(path: Path, block: int = 1 << 16):
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        pos, rest = f.tell(), b""
        while pos > 0:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            chunk = f.read(step) + rest
            lines = chunk.split(b"\n")
            rest = lines[0]
            for line in reversed(lines[1:]):
                if line.strip():
                    yield line.decode("utf-8", errors="replace")
        if rest.strip():
            yield rest.decode("utf-8", errors="replace")


def _cut_partial_line(path: Path) -> None:
    """Drop a last line without its newline (a write a crash interrupted)."""
    size = path.stat().st_size
    if not size:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        keep = data.rfind(b"\n") + 1
        f.truncate(keep)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook's redirect is an answer, never followed: following one would send the
    alert, and its headers, to a host nobody chose."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


@dataclass(frozen=True)
class Outcome:
    """One try of a delivery: ``ok``, else whether it is worth ``retry`` ing, and the error."""

    ok: bool
    retry: bool = False
    error: str = ""


OK = Outcome(True)


def post_alert(url: str, alert: dict, timeout: float, data: bytes | None = None) -> Outcome:
    """One ``POST`` of an alert's JSON with ``Idempotency-Key: <composite id>``. Connection
    errors, timeouts, 408, 429 and 5xx are worth retrying; a redirect is not followed (an
    error, not retried)."""
    body = data if data is not None else json.dumps(alert, ensure_ascii=False, allow_nan=False).encode("utf-8")
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Idempotency-Key": alert["id"]})
    try:
        with _OPENER.open(req, timeout=timeout) as r:
            r.read()
            if 300 <= r.status < 400:
                return Outcome(False, False, f"HTTP {r.status}: a redirect (not followed)")
            return OK
    except urllib.error.HTTPError as e:
        if 300 <= e.code < 400:
            return Outcome(False, False, f"HTTP {e.code}: a redirect to {e.headers.get('Location', '?')!r} "
                                         "(not followed)")
        retry = e.code in (408, 429) or e.code >= 500
        return Outcome(False, retry, f"HTTP {e.code} {e.reason}")
    except (urllib.error.URLError, OSError, ValueError) as e:
        return Outcome(False, True, f"{type(e).__name__}: {getattr(e, 'reason', e)}")


@dataclass(frozen=True)
class Retry:
    """How a delivery is tried: ``retries`` more times after the first, waiting ``backoff *
    2**k`` seconds (at most ``max_backoff``) before try ``k + 1``."""

    retries: int = 5
    backoff: float = 0.5
    max_backoff: float = 30.0

    def delay(self, tries: int) -> float:
        return min(self.backoff * (2 ** tries), self.max_backoff)


def delivery(retry: Retry):
    """The one retry loop of every push delivery (live's webhooks, the service's webhooks,
    NATS subjects and MQTT topics), written once without I/O: a generator that yields
    ``None`` to ask for a try and is sent its :class:`Outcome`, yields a delay to ask for a
    wait and is sent whether to stop; it returns ``(result, outcome, tries)``, result True
    (delivered), False (give up: dead-letter it) or None (stopped while waiting)."""
    tries = 0
    while True:
        out = yield None
        if out.ok:
            return True, out, tries + 1
        if not out.retry or tries >= retry.retries:
            return False, out, tries + 1
        if (yield retry.delay(tries)):
            return None, out, tries + 1
        tries += 1


def deliver_sync(send, retry: Retry, wait) -> tuple:
    """:func:`delivery` on a thread: ``send()`` → Outcome, ``wait(seconds)`` → stop?"""
    loop = delivery(retry)
    ask = next(loop)
    try:
        while True:
            ask = loop.send(send() if ask is None else wait(ask))
    except StopIteration as done:
        return done.value


async def deliver_async(send, retry: Retry, wait) -> tuple:
    """:func:`delivery` on an event loop: ``await send()`` → Outcome, ``await wait(s)`` → stop?"""
    loop = delivery(retry)
    ask = next(loop)
    try:
        while True:
            ask = loop.send((await send()) if ask is None else (await wait(ask)))
    except StopIteration as done:
        return done.value


def dead_letter(path: Path | None, sink: str, alert: dict, error: str, attempts: int) -> None:
    """Append an alert that could not be delivered to the dead-letter file (and log it)."""
    log.warning("%s: alert %s dead-lettered after %d attempt(s): %s", sink, alert["id"], attempts, error)
    if path is not None:
        _fsync_append(path, [json.dumps({"sink": sink, "error": error, "attempts": attempts,
                                         "at": time.time(), "alert": alert}) + "\n"])


class WebhookSink(AlertSink):
    """POST each alert as JSON from a queue of the target's own, on a thread of its own: a
    slow or failing receiver never holds up the batches or the other sinks.

    The queue is a file, ``<checkpoint>/outbox/<target>.jsonl``: :meth:`deliver` appends the
    alerts to it (written before the batch is committed) and returns; the worker posts them in
    order, retrying with exponential backoff (``backoff * 2**k`` s, at most ``max_backoff``,
    ``retries`` times; connection errors, timeouts, 408, 429, 5xx), then dead-letters
    (``<checkpoint>/dead_letter.jsonl``; any other 4xx at once). Each success (or dead
    letter) is recorded as it happens (``on_done``: the :class:`SinkSet` logs it as
    delivered). After a crash the outbox's alerts not recorded are posted again: the receiver
    sees an alert twice at most for the one request in flight when the process died, with the
    same ``Idempotency-Key``. :meth:`close` (SIGTERM) waits for the request in flight at most
    ``timeout`` seconds; what is queued stays in the outbox for the next start.
    """

    def __init__(self, url: str, dead_letter: Path | None, retries: int = 5, backoff: float = 0.5,
                 timeout: float = 10.0, max_backoff: float = 30.0, outbox: Path | None = None):
        from spatec.storage.atomic import safe_name

        self.url, self.name = url, url
        self.dead_letter = Path(dead_letter) if dead_letter is not None else None
        self.retry = Retry(retries, backoff, max_backoff)
        self.timeout = timeout
        self.attempts = 0
        self.dead = 0
        self.on_done = None                     # (sink name, alert) → None, from the worker thread
        base = Path(outbox) if outbox is not None else (
            self.dead_letter.parent / "outbox" if self.dead_letter is not None else None)
        self.outbox = base / f"{safe_name(url)}.jsonl" if base is not None else None
        self.queue: deque = deque()
        self.queued: set = set()
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._busy = False
        self._f = None
        self._dirty = False      # the outbox file holds alerts (delivered or not)
        self._thread: threading.Thread | None = None
        self.drain_on_close = True
        self.drain_timeout = 300.0

    def stop_now(self) -> None:
        """A signal: do not drain the queue on close."""
        self.drain_on_close = False
        self._stop.set()
        with self._cv:
            self._cv.notify_all()

    def already(self, known):
        """Queue again what the outbox holds that was never recorded as delivered."""
        if self.outbox is None or not self.outbox.exists():
            return []
        _cut_partial_line(self.outbox)
        keep = []
        for line in self.outbox.read_text(encoding="utf-8").splitlines():
            try:
                a = json.loads(line)
            except ValueError:
                continue
            if not known((self.name, a["id"])) and a["id"] not in self.queued:
                self.queued.add(a["id"])
                keep.append(a)
        self.queue.extend(keep)
        self._rewrite(keep)
        self._dirty = bool(keep)
        if keep:
            self._start()        # posted now, not only once a new alert arrives
        return []

    def _rewrite(self, alerts) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        tmp = self.outbox.with_name(self.outbox.name + ".tmp")
        tmp.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in alerts), encoding="utf-8")
        os.replace(tmp, self.outbox)

    def deliver(self, alerts):
        with self._cv:           # the worker empties the outbox file under this lock when it is done
            new = [a for a in alerts if a["id"] not in self.queued]
            if not new:
                return []
            if self.outbox is not None:
                if self._f is None:
                    self.outbox.parent.mkdir(parents=True, exist_ok=True)
                    self._f = open(self.outbox, "a", encoding="utf-8")
                self._f.write("".join(json.dumps(a, ensure_ascii=False, allow_nan=False) + "\n" for a in new))
                self._f.flush()          # in the operating system: a killed process loses none
                self._dirty = True
            for a in new:
                self.queued.add(a["id"])
                self.queue.append(a)
            self._cv.notify()
        self._start()
        return []

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"webhook {self.url}", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cv:
                while not self.queue and not self._stop.is_set():
                    if self._dirty and not self._busy:
                        self._rewrite([])       # everything delivered: the outbox starts again empty
                        self._dirty = False
                    self._cv.wait(0.5)
                if self._stop.is_set():
                    return
                a = self.queue[0]
                self._busy = True
            ok = self._send(a)
            with self._cv:
                self._busy = False
                if ok is None:
                    return                       # stopped while retrying: it stays queued
                self.queue.popleft()
                self.queued.discard(a["id"])
            if self.on_done is not None:
                self.on_done(self.name, a)

    def _send(self, a: dict):
        """True: delivered; False: dead-lettered; None: stopped first."""
        data = json.dumps(a, ensure_ascii=False, allow_nan=False).encode("utf-8")

        def send():
            self.attempts += 1
            return post_alert(self.url, a, self.timeout, data)

        result, out, tries = deliver_sync(send, self.retry, self._stop.wait)
        if result is False:
            self.dead += 1
            dead_letter(self.dead_letter, self.url, a, out.error, tries)
        return result

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until the queue is empty (tests, end of input)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self._stop.is_set():
            with self._cv:
                if not self.queue and not self._busy:
                    return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        """Stop the worker. At the end of input (``drain_on_close``) the queue is posted first
        (for at most ``drain_timeout`` s); on a signal (``stop_now``) only the request in flight
        is waited for, and the rest stays in the outbox for the next start."""
        if self.drain_on_close and self._thread is not None:
            self.drain(self.drain_timeout)
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(min(self.timeout, 5.0) + 0.5)
        with self._cv:
            if self._dirty and not self.queue and not self._busy:
                self._rewrite([])       # all posted: nothing for the next start to post again
                self._dirty = False
        if self._f is not None:
            self._f.close()
            self._f = None


def open_sink(url: str, checkpoint: Path | None, **webhook) -> AlertSink:
    """The sink a URL names (see the module docstring)."""
    u = urlparse(url)
    if u.scheme == "console":
        tz = parse_qs(u.query).get("tz", [None])[0]
        if tz is not None:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(tz)
            except (ZoneInfoNotFoundError, ValueError):
                raise DataError(f"--sink {url!r}: tz={tz!r} is not a time zone") from None
        return ConsoleSink(tz=tz)
    if u.scheme == "jsonl":
        path = u.path if not u.netloc else f"/{u.netloc}{u.path}"
        if not path:
            raise DataError(f"--sink {url!r}: jsonl: needs a directory, e.g. jsonl:///var/alerts")
        return JsonlSink(Path(path))
    if u.scheme in ("http", "https"):
        dl = Path(checkpoint) / "dead_letter.jsonl" if checkpoint is not None else None
        return WebhookSink(url, dl, **webhook)
    raise DataError(f"--sink {url!r}: unknown sink; expected console:, jsonl:///dir or http://host:port/path")


class SinkSet:
    """Every sink of a run and the delivered log: deliver each alert once per sink."""

    def __init__(self, sinks: Sequence[AlertSink], delivered: DeliveredLog, gate=None):
        self.sinks, self.log = list(sinks), delivered
        self.gate = gate              # alerts → the ones to deliver (the others are held back)
        self.delivered = 0
        self.skipped = 0
        for s in self.sinks:
            if hasattr(s, "on_done"):
                s.on_done = self._done   # before `already`: a queued sink starts posting its outbox there
            for cid, hi in s.already(self.log.__contains__):
                self.log.add(s.name, cid, hi)
        self.log.flush()

    def _done(self, name: str, alert: dict) -> None:
        """A queued sink delivered (or dead-lettered) an alert: record it now."""
        from spatec.events.timefmt import parse_time

        self.log.add(name, alert["id"], parse_time(alert["hi"]))
        self.log.flush()
        self.delivered += 1

    def deliver(self, alerts: list[dict], his: dict) -> int:
        """Deliver ``alerts`` (``his``: id → hi µs) to every sink that has not had them."""
        n = 0
        logged = self.log.hi
        if self.gate is not None:
            alerts = self.gate(alerts)
        for s in self.sinks:
            name = s.name
            todo = [a for a in alerts if (name, a["id"]) not in logged]
            self.skipped += len(alerts) - len(todo)
            if not todo:
                continue
            add = self.log.add
            for a in s.deliver(todo):
                cid = a["id"]
                add(name, cid, his[cid])
                n += 1
            self.log.flush()
        self.delivered += n
        return n

    def close(self) -> None:
        for s in self.sinks:     # first: a queued sink records what it finishes meanwhile
            s.close()
        self.log.close()

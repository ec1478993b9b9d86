"""The hub: alerts from the log to the subscriptions they match.

One task per process reads the alert stream (an ordered consumer whose messages are
queued by a callback and handled in batches) and for each alert asks the
:class:`~spatec.service.index.CoveringIndex` which subscriptions it goes to; each of those
gets the alert's log entry (sequence, composite id, its SSE frame, encoded once)
appended to its buffer, and its readers are woken. Every process does this for every
subscription, so any process can serve any subscriber.

Memory is bounded: the buffers hold the entries of the last :data:`WINDOW` alerts of the
log (older ones are dropped by a sweep), and a process that starts reads back only the
last :data:`RESTART_WINDOW` alerts before it serves. A reader whose cursor is older than
what the buffers hold — a client reconnecting after a long absence, a push subscription's
cursor after a restart — has the alerts in between read again from the log
(:meth:`Hub.from_log`) and tested against its own subscription: exactly what it missed,
nothing twice, whatever the window.

Isolation: a subscription whose filter or area fails (its test raises) is *suspended*
with the reason — visible in ``GET``, sent to its SSE readers as an ``error`` event, counted
in ``/status``, and stored with the subscription, so a restart never evaluates it again —
and every other subscription goes on. An entry the hub itself cannot handle is skipped
with a warning (never a crash loop on restart).

A subscription receives alerts from its ``start_seq`` on (the log's position when it was
made), whichever process made it.
"""
from __future__ import annotations

import asyncio
import bisect
import json
import logging
import re
import time
from collections import OrderedDict, deque

import shapely

from spatec.service.filters import STANDARD, field_types, values
from spatec.service.index import CoveringIndex

log = logging.getLogger("spatec.service")

#: alerts of the log the buffers hold (older ones are read from the log when asked for)
WINDOW = 100_000
#: alerts of the log a starting process reads back before serving
RESTART_WINDOW = 10_000
#: alerts one subscription's buffer holds at most
BUFFER = 100_000
#: s of work the hub does on the event loop before it lets other tasks run
SLICE = 0.005


class Entry:
    """One alert in the log: its sequence, composite id, JSON text and SSE frame (the
    parsed alert is made again when asked for: the window holds text only)."""

    __slots__ = ("seq", "id", "data", "frame", "_alert")

    def __init__(self, seq: int, cid: str, data: str, frame: bytes, alert: dict | None = None):
        self.seq, self.id, self.data, self.frame, self._alert = seq, cid, data, frame, alert

    @property
    def alert(self) -> dict:
        a = self._alert
        return a if a is not None else json.loads(self.data)


class SubState:
    """A subscription as the hub holds it: its record, compiled filter and area, readers'
    wake-up, and whether it is suspended (and why). Its alerts are those of the groups it
    has been in (:class:`~spatec.service.index.Group` holds the entries once for all its
    members): ``history`` lists them with the sequence from which each was its group."""

    def __init__(self, sub, flt, area, suspended: str | None = None):
        self.sub, self.filter, self.area = sub, flt, area
        self.history: list = []          # [(from sequence, group)], oldest first
        self.changed = asyncio.Event()
        self.gone = False
        self.suspended = suspended
        self.lock = asyncio.Lock()       # a renewal and a delete of it, one after the other
        self.since = 1                   # the first sequence the hub matched against it

    def after(self, seq: int) -> list[Entry]:
        """Its entries after sequence ``seq``, in log order."""
        out: list = []
        h = self.history
        start = self.sub.start_seq
        for k, (frm, g) in enumerate(h):
            until = h[k + 1][0] if k + 1 < len(h) else None
            lo = max(seq + 1, frm, start)
            if until is not None and lo >= until:
                continue
            i = bisect.bisect_left(g.seqs, lo)
            j = len(g.seqs) if until is None else bisect.bisect_left(g.seqs, until)
            out.extend(g.entries[i:j])
        return out

    @property
    def entries(self) -> list[Entry]:
        return self.after(0)

    def trim(self, before: int) -> None:
        """Forget the groups it was in before sequence ``before`` (but the current one)."""
        while len(self.history) > 1 and self.history[1][0] <= before:
            del self.history[0]


class Hub:
    """Subscriptions, the index and the buffers of one process (one event loop)."""

    def __init__(self, areas, program=None):
        self.areas = areas
        self.index = CoveringIndex()
        self.subs: dict[str, SubState] = {}
        self.seq_of: OrderedDict[str, int] = OrderedDict()   # composite id → sequence, the window's
        self.processed = 0                    # the last sequence handed to the subscriptions
        self.first = 1                        # the first sequence the buffers hold completely
        self.caught_up = asyncio.Event()      # set once the log as it was at start has been read
        self.reading: dict = {}               # sub id → readers waiting on it (SSE streams, pushers)
        self.on_suspend = None                # callable (sub id, reason): the service stores it
        self.latencies: list | None = None    # (decided, frames ready) per alert when measuring
        self.lags: deque = deque(maxlen=2000)  # s from decided to handed to the subscriptions, the last alerts
        self.skipped = 0                      # entries the hub could not handle
        self.handled = 0
        self._types: dict = {}
        self.program = program

    # -- subscriptions
    def put(self, sub, flt, area, suspended: str | None = None) -> SubState:
        """Install (or replace: a renewal, a new area) a subscription; what it received stays."""
        old = self.subs.get(sub.id)
        st = SubState(sub, flt, area, suspended)
        if old is not None:
            st.history, st.changed, st.lock, st.since = old.history, old.changed, old.lock, old.since
            if old.history:
                old.history[-1][1].readers.discard(old.changed)
        else:
            st.since = self.processed + 1
        self.subs[sub.id] = st
        if suspended is None:
            g = self.index.add(sub.id, sub.phrase, flt, area)
            if not st.history or st.history[-1][1] is not g:
                st.history = st.history + [(self.processed + 1, g)]
            if sub.id in self.reading:
                g.readers.add(st.changed)
            if g.error is not None:             # the same filter and area failed for another
                self._suspend([sub.id], g.error)
        else:
            self.index.remove(sub.id)
        if old is not None:
            old.changed.set()
        return st

    def read(self, sub_id: str, by: int) -> None:
        """A reader of ``sub_id`` begins (``by=1``) or ends (``-1``): a group's new entry wakes
        only the readers of its members."""
        n = self.reading.get(sub_id, 0) + by
        if n > 0:
            self.reading[sub_id] = n
        else:
            self.reading.pop(sub_id, None)
        st = self.subs.get(sub_id)
        if st is not None and st.history:
            g = st.history[-1][1]
            (g.readers.add if n > 0 else g.readers.discard)(st.changed)

    def drop(self, sub_id: str) -> None:
        st = self.subs.pop(sub_id, None)
        self.index.remove(sub_id)
        if st is not None:
            if st.history:
                st.history[-1][1].readers.discard(st.changed)
            st.gone = True
            st.changed.set()

    def _suspend(self, sids, reason: str) -> None:
        for sid in sids:
            st = self.subs.get(sid)
            if st is None or st.suspended is not None:
                continue
            st.suspended = reason
            self.index.remove(sid)
            if st.history:
                st.history[-1][1].readers.discard(st.changed)
            st.changed.set()
            log.warning("subscription %s suspended: %s", sid, reason)
            if self.on_suspend is not None:
                self.on_suspend(sid, reason)

    def lag_ms(self) -> dict:
        """Percentiles of the time from a composite's decision to its entry in the buffers."""
        if not self.lags:
            return {}
        xs = sorted(self.lags)
        return {q: round(xs[min(len(xs) - 1, int(f * len(xs)))] * 1e3, 1) for q, f in
                (("p50", 0.5), ("p99", 0.99), ("max", 1.0))}

    def suspended(self) -> int:
        return sum(1 for st in self.subs.values() if st.suspended is not None)

    # -- alerts
    def types_of(self, phrase) -> dict:
        t = self._types.get(phrase)
        if t is None:
            try:
                t = field_types(self.program, phrase) if self.program is not None else dict(STANDARD)
            except KeyError:       # a phrase of another version of the program: the standard fields
                t = dict(STANDARD)
            self._types[phrase] = t
        return t

    def handle(self, seq: int, data: str, decided: float | None = None) -> Entry | None:
        """Hand one log entry to the subscriptions it matches (None: already handled, or
        not an alert)."""
        if seq <= self.processed:
            return None
        self.processed = seq
        try:
            return self._handle(seq, data, decided)
        except Exception:  # noqa: BLE001 - never a crash (nor a crash loop on restart) for one entry
            self.skipped += 1
            log.exception("log entry %d could not be handled; skipped", seq)
            return None

    def _handle(self, seq: int, data: str, decided) -> Entry | None:
        try:
            alert = json.loads(data)
        except ValueError:
            self.skipped += 1
            log.warning("log entry %d is not an alert; skipped", seq)
            return None
        if not isinstance(alert, dict):
            self.skipped += 1
            return None
        cid = str(alert.get("id", ""))
        e = Entry(seq, cid, data, sse_frame(cid, data))
        self.seq_of[cid] = seq
        env = values(alert, self.types_of(alert.get("phrase")))
        w = alert.get("hull")
        try:
            lonlat = shapely.from_wkt(w) if isinstance(w, str) and w else None   # parsed once
        except Exception:  # noqa: BLE001 - a hull that is no WKT: a place unknown (REFERENCE decision 3)
            log.warning("alert %s: its hull is not WKT; matched as having no known place", cid)
            lonlat = None
        matched, failed = self.index.match(alert, env, lambda: self.areas.hull_of(lonlat), lonlat)
        for g in failed:
            self._suspend(list(g.members), f"its {'filter' if g.filter is not None else 'area'} failed on "
                                           f"alert {cid}: {g.error}")
        for g in matched:
            g.add_entry(e)          # once for all its members (each reads it from its history)
        if decided is not None:
            now = time.time()
            self.lags.append(now - decided)
            if self.latencies is not None:
                self.latencies.append((decided, now))
        self.handled += 1
        return e

    def sweep(self) -> None:
        """Keep the window: entries and ids older than :data:`WINDOW` alerts are forgotten."""
        first = max(1, self.processed - WINDOW + 1)
        if first <= self.first:
            return
        self.first = first
        while self.seq_of:
            cid, seq = next(iter(self.seq_of.items()))
            if seq >= first:
                break
            self.seq_of.popitem(last=False)
        for g in self.index.groups.values():
            g.trim(first, BUFFER)
        for st in self.subs.values():
            st.trim(first)

    async def follow(self, broker, stop: asyncio.Event) -> None:
        """Read the alert stream until ``stop`` (from the last :data:`RESTART_WINDOW` alerts
        at the first start; from where it was after a restart of this task)."""
        from nats.js.api import ConsumerConfig, DeliverPolicy

        from spatec.service.broker import ALERTS

        info = await broker.js.stream_info(ALERTS)
        last_at_start = info.state.last_seq
        if self.processed == 0:
            start = max(info.state.first_seq or 1, last_at_start - RESTART_WINDOW + 1, 1)
            self.first = start
            self.processed = start - 1
        else:
            start = self.processed + 1
        if self.processed >= last_at_start:
            self.caught_up.set()
        queue: deque = deque()
        ready = asyncio.Event()

        async def got(msg):
            queue.append(msg)
            ready.set()

        cfg = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start)
        sub = await broker.js.subscribe("spatec.alerts.>", cb=got, ordered_consumer=True, config=cfg,
                                        pending_msgs_limit=-1, pending_bytes_limit=-1)
        try:
            while not stop.is_set():
                try:
                    await asyncio.wait_for(ready.wait(), 0.5)
                except asyncio.TimeoutError:
                    if not self.caught_up.is_set():
                        info = await broker.js.stream_info(ALERTS)
                        if self.processed >= info.state.last_seq:
                            self.caught_up.set()
                    continue
                ready.clear()
                t0 = time.monotonic()
                while queue:
                    msg = queue.popleft()
                    seq = msg.metadata.sequence.stream
                    h = msg.headers or {}
                    decided = _float(h.get("Spatec-Decided"))
                    self.handle(seq, msg.data.decode("utf-8", "replace"), decided)
                    if not self.caught_up.is_set() and seq >= last_at_start:
                        self.caught_up.set()
                    if time.monotonic() - t0 > SLICE:      # let the HTTP side in
                        await asyncio.sleep(0)
                        t0 = time.monotonic()
                self.sweep()
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # noqa: BLE001 - already closed
                pass

    async def from_log(self, broker, st: SubState, after: int, upto: int):
        """The entries of ``st``'s subscription with sequences in ``(after, upto)``, read again
        from the log and tested against it (a reader older than the buffers)."""
        from nats.js.api import ConsumerConfig, DeliverPolicy

        if upto <= after + 1:
            return
        queue: asyncio.Queue = asyncio.Queue(maxsize=1000)
        cfg = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1)

        async def got(msg):
            await queue.put(msg)

        sub = await broker.js.subscribe("spatec.alerts.>", cb=got, ordered_consumer=True, config=cfg)
        try:
            while True:
                try:
                    msg = await asyncio.wait_for(queue.get(), 10)
                except asyncio.TimeoutError:
                    return                       # the log ends before `upto` (trimmed meanwhile)
                seq = msg.metadata.sequence.stream
                if seq >= upto:
                    return
                data = msg.data.decode("utf-8", "replace")
                try:
                    alert = json.loads(data)
                    cid = str(alert.get("id", ""))
                    if self.matches(st, alert):
                        yield Entry(seq, cid, data, sse_frame(cid, data), alert)
                except Exception:  # noqa: BLE001 - as the hub: the entry is skipped
                    continue
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # noqa: BLE001 - already closed
                pass

    def matches(self, st: SubState, alert: dict) -> bool:
        """Whether one alert goes to one subscription (the index's test, for that one)."""
        sub = st.sub
        if sub.phrase is not None and alert.get("phrase") != sub.phrase:
            return False
        if st.filter is not None and not st.filter.test(values(alert, self.types_of(alert.get("phrase")))):
            return False
        return st.area is None or st.area.test(self.areas.hull(alert.get("hull")))


def _float(v) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def sse_frame(cid: str, data: str, event: str = "alert") -> bytes:
    """The SSE frame of an alert, byte for byte as sse-starlette encodes one (``id:``,
    ``event:``, ``data:`` lines, CRLF), made without its encoder: one a composite."""
    cid = _LINE_BREAK.sub("", cid)
    lines = "".join(f"data: {chunk}\r\n" for chunk in _LINE_BREAK.split(data))
    return f"id: {cid}\r\nevent: {event}\r\n{lines}\r\n".encode("utf-8")


def latest(entries: list[Entry], key: str) -> list[Entry]:
    """One entry per value of ``key`` (the last), in log order: the shortest sequence that
    leaves a "latest per key" view as the whole sequence would."""
    last: dict = {}
    for e in entries:
        last[json.dumps(e.alert.get(key), sort_keys=True)] = e
    return sorted(last.values(), key=lambda e: e.seq)

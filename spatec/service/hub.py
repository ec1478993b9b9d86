"""The hub: alerts from the log to the subscriptions they match.

One task per process reads the alert stream from its first message (an ordered consumer),
and for each alert asks the :class:`~spatec.service.index.CoveringIndex` which
subscriptions it goes to; each of those gets the alert's log entry (sequence, composite id,
the SSE frame's data, encoded once) appended to its buffer, and its readers are woken.
Every process does this for every subscription, so any process can serve any subscriber,
and a subscriber's buffer after a restart is rebuilt from the log exactly as it was: a
client that reconnects with ``Last-Event-ID`` (a composite id) gets the entries after it,
in log order, nothing twice.

A subscription receives alerts from its ``start_seq`` on (the log's position when it was
made), whichever process made it.
"""
from __future__ import annotations

import asyncio
import bisect
import json
import logging
import time
from dataclasses import dataclass

from spatec.service.index import CoveringIndex

log = logging.getLogger("spatec.service")

#: alerts a subscription's buffer keeps (the oldest go first)
BUFFER = 100_000


@dataclass(frozen=True, slots=True)
class Entry:
    """One alert in the log."""

    seq: int
    id: str
    data: str          # the alert's JSON text
    alert: dict
    frame: bytes       # its SSE frame, encoded once for every subscriber


class SubState:
    """A subscription as the hub holds it: its record, buffer and readers' wake-up."""

    def __init__(self, sub, flt, area):
        self.sub, self.filter, self.area = sub, flt, area
        self.seqs: list[int] = []
        self.entries: list[Entry] = []
        self.changed = asyncio.Event()
        self.gone = False

    def append(self, e: Entry) -> None:
        self.seqs.append(e.seq)
        self.entries.append(e)
        if len(self.entries) > BUFFER + BUFFER // 4:
            del self.seqs[:-BUFFER], self.entries[:-BUFFER]
        self.changed.set()

    def after(self, seq: int) -> list[Entry]:
        return self.entries[bisect.bisect_right(self.seqs, seq):]


class Hub:
    """Subscriptions, the index and the buffers of one process (one event loop)."""

    def __init__(self, areas, places_of=None):
        self.areas = areas
        self.index = CoveringIndex()
        self.subs: dict[str, SubState] = {}
        self.seq_of: dict[str, int] = {}      # composite id → log sequence (resume by Last-Event-ID)
        self.processed = 0                    # the last sequence handed to the subscriptions
        self.caught_up = asyncio.Event()      # set once the log as it was at start has been read
        self.listeners: list = []             # callables (entry, matched ids): push deliveries, the page
        self.latencies: list | None = None    # (decided, frames ready) per alert when measuring

    # -- subscriptions
    def put(self, sub, flt, area) -> SubState:
        old = self.subs.get(sub.id)
        st = SubState(sub, flt, area)
        if old is not None:                   # a renewal or a new area: the buffer stays
            st.seqs, st.entries, st.changed = old.seqs, old.entries, old.changed
        self.subs[sub.id] = st
        self.index.add(sub.id, sub.phrase, flt, area)
        if old is not None:
            old.changed.set()
        return st

    def drop(self, sub_id: str) -> None:
        st = self.subs.pop(sub_id, None)
        self.index.remove(sub_id)
        if st is not None:
            st.gone = True
            st.changed.set()

    # -- alerts
    def handle(self, seq: int, data: str, decided: float | None = None) -> Entry | None:
        if seq <= self.processed:
            return None
        self.processed = seq
        try:
            alert = json.loads(data)
        except ValueError:
            log.warning("log entry %d is not an alert; skipped", seq)
            return None
        cid = alert.get("id", "")
        e = Entry(seq, cid, data, alert, sse_frame(cid, data))
        self.seq_of[e.id] = seq
        matched = self.index.match(alert, lambda: self.areas.hull(alert.get("hull")))
        subs = self.subs
        for sid in matched:
            st = subs.get(sid)
            if st is not None and st.sub.start_seq <= seq:
                st.append(e)
        for f in self.listeners:
            f(e, matched)
        if self.latencies is not None and decided is not None:
            self.latencies.append((decided, time.time()))
        return e

    async def follow(self, broker, stop: asyncio.Event) -> None:
        """Read the alert stream from its start until ``stop``."""
        from nats.js.api import DeliverPolicy

        from spatec.service.broker import ALERTS

        info = await broker.js.stream_info(ALERTS)
        last_at_start = info.state.last_seq
        if last_at_start == 0:
            self.caught_up.set()
        sub = await broker.js.subscribe("spatec.alerts.>", ordered_consumer=True, deliver_policy=DeliverPolicy.ALL)
        try:
            while not stop.is_set():
                try:
                    msg = await sub.next_msg(timeout=0.5)
                except asyncio.TimeoutError:
                    if not self.caught_up.is_set():
                        info = await broker.js.stream_info(ALERTS)
                        if self.processed >= info.state.last_seq:
                            self.caught_up.set()
                    continue
                except Exception:  # noqa: BLE001 - the subscription closed with the connection
                    if stop.is_set():
                        break
                    raise
                seq = msg.metadata.sequence.stream
                decided = None
                h = msg.headers or {}
                if "Spatec-Decided" in h:
                    decided = float(h["Spatec-Decided"])
                self.handle(seq, msg.data.decode("utf-8"), decided)
                if not self.caught_up.is_set() and seq >= last_at_start:
                    self.caught_up.set()
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # noqa: BLE001 - already closed
                pass


def sse_frame(cid: str, data: str, event: str = "alert") -> bytes:
    """The SSE frame of an alert (as sse-starlette encodes one)."""
    from sse_starlette.sse import ServerSentEvent

    return ServerSentEvent(data=data, id=cid, event=event).encode()


def latest(entries: list[Entry], key: str) -> list[Entry]:
    """One entry per value of ``key`` (the last), in log order: the shortest sequence that
    leaves a "latest per key" view as the whole sequence would."""
    last: dict = {}
    for e in entries:
        last[json.dumps(e.alert.get(key), sort_keys=True)] = e
    return sorted(last.values(), key=lambda e: e.seq)

"""The hub: alerts from the log to the subscriptions they match.

Matching (:class:`~spatec.service.matcher.Matching`: the covering index, each alert's
values, hull and SSE frame) runs in the service in a process of its own
(:class:`~spatec.service.matcher.MatcherProcess`, :meth:`Hub.follow_matcher`): it reads the
alert log and says, per batch of alerts, which groups of subscriptions each one goes to.
The hub, on the event loop that serves HTTP and SSE, only appends each alert's entry
(sequence, composite id, JSON text, SSE frame: made once) to the buffers of those groups
(:class:`Buffer`, one for all the members of a group) and wakes their readers. Every
process does this for every subscription, so any process can serve any subscriber. Tests
and the index's benchmark match in-process (:meth:`Hub.handle`): the same buffers.

Memory is bounded: the buffers hold the entries of the last :data:`WINDOW` alerts of the
log (older ones are dropped by a sweep), and a process that starts reads back only the
last :data:`RESTART_WINDOW` alerts before it serves. A reader whose cursor is older than
what the buffers hold — a client reconnecting after a long absence, a push subscription's
cursor after a restart, a subscription the matcher took in only some alerts after it was
made — has the alerts in between read again from the log (:meth:`Hub.from_log`) and
tested against its own subscription: exactly what it missed, nothing twice, whatever the
window.

Isolation: a subscription whose filter or area fails (its test raises) is *suspended*
with the reason — visible in ``GET``, sent to its SSE readers as an ``error`` event, counted
in ``/status``, and stored with the subscription, so a restart never evaluates it again —
and every other subscription goes on. An entry that cannot be handled is skipped with a
warning (never a crash loop on restart).

A subscription receives alerts from its ``start_seq`` on (the log's position when it was
made), whichever process made it.
"""
from __future__ import annotations

import asyncio
import bisect
import gc
import json
import logging
import time
from collections import OrderedDict, deque

from spatec.service.filters import values
from spatec.service.matcher import Matching, MatcherProcess, sse_frame
from spatec.service.stages import Stages

log = logging.getLogger("spatec.service")

#: alerts of the log the buffers hold (older ones are read from the log when asked for)
WINDOW = 100_000
#: alerts of the log a starting process reads back before serving
RESTART_WINDOW = 10_000
#: alerts one subscription's buffer holds at most
BUFFER = 100_000
#: s of work the hub does on the event loop before it lets other tasks run
SLICE = 0.005
#: alerts the window moves by between two trims of the buffers
TRIM = 2_000


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


class Buffer:
    """The entries a group of subscriptions (one filter and area) has matched, held once for
    all its members, and the wake-ups of its members' waiting readers."""

    __slots__ = ("gid", "seqs", "entries", "readers", "members")

    def __init__(self, gid: int):
        self.gid = gid
        self.seqs: list = []
        self.entries: list = []
        self.readers: set = set()
        self.members: set = set()

    def add_entry(self, e: Entry) -> None:
        self.seqs.append(e.seq)
        self.entries.append(e)
        for ev in self.readers:
            ev.set()

    def add_entries(self, es: list) -> None:
        """Entries of one batch, in log order (readers woken once)."""
        self.seqs.extend([e.seq for e in es])
        self.entries.extend(es)
        for ev in self.readers:
            ev.set()

    def trim(self, before: int, most: int) -> None:
        """Forget entries older than sequence ``before``, and all but the last ``most``."""
        i = bisect.bisect_left(self.seqs, before) if self.seqs and self.seqs[0] < before else 0
        i = max(i, len(self.seqs) - most)
        if i > 0:
            del self.seqs[:i], self.entries[:i]


class SubState:
    """A subscription as the hub holds it: its record, compiled filter and area (for reading
    the log again: :meth:`Hub.matches`), readers' wake-up, and whether it is suspended (and
    why). Its alerts are those of the groups it has been in: ``history`` lists their
    :class:`Buffer` s with the sequence from which each was its group."""

    def __init__(self, sub, flt, area, suspended: str | None = None, lazy: bool = False):
        self.sub, self.filter, self.area = sub, flt, area
        self.lazy = lazy                 # filter and area not compiled yet (:meth:`Hub.matches` does)
        self.history: list = []          # [(from sequence, buffer)], oldest first
        self.changed = asyncio.Event()
        self.gone = False
        self.suspended = suspended
        self.lock = asyncio.Lock()       # a renewal and a delete of it, one after the other
        self.since = 1                   # the first sequence the buffers hold for it completely
        self.version = 0                 # of what the matcher was last told about it

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

    def current(self) -> "Buffer | None":
        return self.history[-1][1] if self.history else None


class Hub:
    """Subscriptions and the buffers of one process (one event loop); matching in-process
    (``handle``) or by a matcher process (``follow_matcher``)."""

    def __init__(self, areas, program=None):
        self.areas = areas
        self.program = program
        self.matching = Matching(areas, program)     # in-process matching (no matcher process)
        self.matcher: MatcherProcess | None = None
        self.remote = False                          # matched by a matcher process (once one is started)
        self.pending: set = set()                    # sub ids the matcher has not yet put in a group
        self.buffers: dict[int, Buffer] = {}        # group id → its buffer
        self.subs: dict[str, SubState] = {}
        self.pushed: set = set()                     # ids of the subscriptions delivered by push, not SSE
        self._suspended_ids: set = set()
        self.seq_of: OrderedDict[str, int] = OrderedDict()   # composite id → sequence, the window's
        self.processed = 0                    # the last sequence handed to the subscriptions
        self.first = 1                        # the first sequence the buffers hold completely
        self.caught_up = asyncio.Event()      # set once the log as it was at start has been read
        self.reading: dict = {}               # sub id → readers waiting on it (SSE streams, pushers)
        self.on_suspend = None                # callable (sub id, reason): the service stores it
        self.compiler = None                  # callable (record) -> (filter, area), for ``put(lazy=True)``
        self.latencies: list | None = None    # (decided, frames ready) per alert when measuring
        self.lags: deque = deque(maxlen=2000)  # s from decided to handed to the subscriptions, the last alerts
        self.stages = Stages()                # where that time goes (matcher, pipe, hub)
        self.skipped = 0                      # entries the hub could not handle
        self.handled = 0
        self._trimmed = 1                     # the window's first sequence when the buffers were last trimmed
        self._trimming: asyncio.Task | None = None

    @property
    def index(self):
        """The in-process index (tests and the index's benchmark)."""
        return self.matching.index

    def groups(self) -> int:
        """Groups with members (subscriptions with one filter and area)."""
        return sum(1 for b in self.buffers.values() if b.members)

    # -- subscriptions
    def put(self, sub, flt, area, suspended: str | None = None, lazy: bool = False) -> SubState:
        """Install (or replace: a renewal, a new area) a subscription; what it received stays.
        ``lazy``: its filter and area are compiled (by :attr:`compiler`) when this process first
        needs them — never, while a matcher process matches (it compiles its own)."""
        old = self.subs.get(sub.id)
        unfit = None
        if lazy and not self.remote and suspended is None:
            try:
                flt, area = self.compiler(sub)
            except Exception as e:  # noqa: BLE001 - a record the program no longer accepts
                suspended = unfit = f"it no longer fits the program: {type(e).__name__}: {e}"
            lazy = False
        st = SubState(sub, flt, area, suspended, lazy)
        if old is not None:
            st.history, st.changed, st.lock, st.since, st.version = (old.history, old.changed, old.lock, old.since,
                                                                     old.version)
        else:
            st.since = self.processed + 1
        self.subs[sub.id] = st
        (self._suspended_ids.add if suspended is not None else self._suspended_ids.discard)(sub.id)
        if getattr(sub, "deliver", {"sse": True}).get("sse"):
            self.pushed.discard(sub.id)
        else:
            self.pushed.add(sub.id)
        st.version += 1
        if suspended is None:
            if self.remote:                           # (none while it is started again: it is told then)
                self.pending.add(sub.id)
                if self.matcher is not None:
                    self.matcher.send(("put", sub.id, st.version, sub.phrase, sub.where, sub.area, sub.certainly))
            else:
                gid, err = self.matching.put(sub.id, sub.phrase, flt, area)
                self.joined(sub.id, st.version, gid, self.processed + 1, err)
        else:
            self._leave(st)
        if old is not None:
            old.changed.set()
        if unfit is not None and self.on_suspend is not None:
            self.on_suspend(sub.id, unfit)
        return st

    def joined(self, sid: str, version: int, gid: int, frm: int, error: str | None) -> None:
        """The matcher put subscription ``sid`` (as of its ``version``) in group ``gid`` for the
        alerts from sequence ``frm`` on (``error``: the group failed already)."""
        st = self.subs.get(sid)
        if st is None or st.version != version or st.suspended is not None:
            return                                    # told something newer meanwhile
        self.pending.discard(sid)
        if gid == 0:                                  # the matcher could not make it
            self._suspend([sid], error or "it could not be matched")
            return
        buf = self.buffers.get(gid)
        if buf is None:
            buf = self.buffers[gid] = Buffer(gid)
        cur = st.current()
        if cur is not buf:
            if cur is not None:
                self._left(cur, st)
            elif frm > st.since:                      # a new one: what came before is read from the log
                st.since = frm
            st.history = st.history + [(frm, buf)]
            buf.members.add(sid)
            if sid in self.reading:
                buf.readers.add(st.changed)
        if error is not None:
            self._suspend([sid], error)
        st.changed.set()

    def _left(self, buf: Buffer, st: SubState) -> None:
        buf.members.discard(st.sub.id)
        buf.readers.discard(st.changed)
        if not buf.members and self.buffers.get(buf.gid) is buf:
            del self.buffers[buf.gid]                 # its entries stay in its members' histories

    def _leave(self, st: SubState) -> None:
        """No more alerts for it: out of the matching and of its group."""
        if self.remote:
            self.pending.discard(st.sub.id)
            if self.matcher is not None:
                self.matcher.send(("drop", st.sub.id))
        else:
            self.matching.drop(st.sub.id)
        cur = st.current()
        if cur is not None:
            cur.members.discard(st.sub.id)
            cur.readers.discard(st.changed)

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
            g = st.current()
            (g.readers.add if n > 0 else g.readers.discard)(st.changed)

    def drop(self, sub_id: str) -> None:
        st = self.subs.pop(sub_id, None)
        self.pushed.discard(sub_id)
        self._suspended_ids.discard(sub_id)
        if st is None:
            self.matching.drop(sub_id)
            return
        st.version += 1
        self._leave(st)
        st.gone = True
        st.changed.set()

    def _suspend(self, sids, reason: str) -> None:
        for sid in sids:
            st = self.subs.get(sid)
            if st is None or st.suspended is not None:
                continue
            st.suspended = reason
            self._suspended_ids.add(sid)
            st.version += 1
            self._leave(st)
            st.changed.set()
            log.warning("subscription %s suspended: %s", sid, reason)
            if self.on_suspend is not None:
                self.on_suspend(sid, reason)

    def set_crs(self, crs: str) -> None:
        if self.matcher is not None:
            self.matcher.send(("crs", crs))

    def lag_ms(self) -> dict:
        """Percentiles of the time from a composite's decision to its entry in the buffers."""
        if not self.lags:
            return {}
        xs = sorted(self.lags)
        return {q: round(xs[min(len(xs) - 1, int(f * len(xs)))] * 1e3, 1) for q, f in
                (("p50", 0.5), ("p99", 0.99), ("max", 1.0))}

    def suspended(self) -> int:
        """Subscriptions suspended (counted as they are: ``/status`` asks often)."""
        return len(self._suspended_ids)

    # -- alerts
    def handle(self, seq: int, data: str, decided: float | None = None) -> Entry | None:
        """Match one log entry in-process and hand it to the subscriptions it goes to (None:
        already handled, or not an alert)."""
        if seq <= self.processed:
            return None
        try:
            got = self.matching.match(data)
        except Exception:  # noqa: BLE001 - never a crash (nor a crash loop on restart) for one entry
            log.exception("log entry %d could not be handled; skipped", seq)
            got = None
        if got is None:
            self.processed = seq
            self.skipped += 1
            return None
        cid, frame, gids, failed = got
        return self.deliver(seq, cid, data, frame, decided, gids, failed)

    def deliver(self, seq: int, cid: str | None, data: str, frame: bytes, decided, gids, failed=()) -> Entry | None:
        """One matched log entry: its entry appended to the buffers of groups ``gids``; the
        members of groups in ``failed`` (``(gid, reason)``) suspended (``cid`` None: an entry
        that was no alert)."""
        if seq <= self.processed:
            return None
        self.processed = seq
        if cid is None:
            self.skipped += 1
            log.warning("log entry %d is not an alert; skipped", seq)
            return None
        for gid, reason in failed:
            buf = self.buffers.get(gid)
            if buf is not None:
                self._suspend(list(buf.members), reason)
        e = Entry(seq, cid, data, frame)
        self.seq_of[cid] = seq
        bufs = self.buffers
        for gid in gids:
            buf = bufs.get(gid)
            if buf is not None:
                buf.add_entry(e)      # once for all its members (each reads it from its history)
        if decided is not None:
            now = time.time()
            self.lags.append(now - decided)
            if self.latencies is not None:
                self.latencies.append((decided, now))
        self.handled += 1
        return e

    async def deliver_batch(self, rows: list, groups: list) -> None:
        """A batch of matched log entries (``rows``: ``(seq, cid, data, frame, decided)``,
        ``cid`` None for an entry that was no alert; ``groups``: ``(group id, [row, ...])``):
        each group's buffer gets its entries at once (one subscription's alerts stay in log
        order: they are one buffer's), the event loop let in between groups now and then."""
        entries: list = [None] * len(rows)
        last = self.processed
        decided_at = []
        for i, (seq, cid, data, frame, decided) in enumerate(rows):
            if seq <= self.processed:
                continue
            last = max(last, seq)
            if cid is None:
                self.skipped += 1
                log.warning("log entry %d is not an alert; skipped", seq)
                continue
            entries[i] = e = Entry(seq, cid, data, frame)
            self.seq_of[cid] = seq
            self.handled += 1
            if decided is not None:
                decided_at.append(decided)
        bufs = self.buffers
        t0 = time.monotonic()
        for gid, idx in groups:
            buf = bufs.get(gid)
            if buf is None:
                continue
            es = [entries[i] for i in idx]
            if None in es:
                es = [e for e in es if e is not None]
            if es:
                buf.add_entries(es)
            if time.monotonic() - t0 > SLICE:          # let the HTTP side in
                await asyncio.sleep(0)
                t0 = time.monotonic()
        self.processed = max(self.processed, last)
        if decided_at:
            now = time.time()
            self.lags.extend(now - d for d in decided_at)
            if self.latencies is not None:
                self.latencies.extend((d, now) for d in decided_at)

    def sweep(self) -> None:
        """Keep the window: ids older than :data:`WINDOW` alerts are forgotten at once; the
        buffers' older entries every :data:`TRIM` alerts, by a task that lets the event loop
        in (at 100,000 subscriptions a pass over them all takes tens of milliseconds).
        Nothing older than ``first`` is read from a buffer meanwhile (readers older than it
        read the log), so trimming late changes what is kept, not what is delivered."""
        first = max(1, self.processed - WINDOW + 1)
        if first <= self.first:
            return
        self.first = first
        while self.seq_of:
            cid, seq = next(iter(self.seq_of.items()))
            if seq >= first:
                break
            self.seq_of.popitem(last=False)
        if first - self._trimmed >= TRIM and (self._trimming is None or self._trimming.done()):
            self._trimmed = first
            try:
                self._trimming = asyncio.get_running_loop().create_task(self._trim(first))
            except RuntimeError:           # no event loop (in-process use): at once
                for _ in self._trim_steps(first):
                    pass

    async def _trim(self, first: int) -> None:
        t0 = time.monotonic()
        for _ in self._trim_steps(first):
            if time.monotonic() - t0 > SLICE:
                await asyncio.sleep(0)
                t0 = time.monotonic()

    def _trim_steps(self, first: int):
        for g in list(self.buffers.values()):
            g.trim(first, BUFFER)
            yield
        for st in list(self.subs.values()):
            st.trim(first)
            for _, g in st.history[:-1]:
                g.trim(first, BUFFER)
            yield

    async def follow_matcher(self, broker_url: str, crs: str, program, stop: asyncio.Event,
                             loaded: asyncio.Event | None = None) -> None:
        """Start the matcher process (from the last :data:`RESTART_WINDOW` alerts of the log at
        the first start; from where the hub is after a restart), tell it every subscription
        (and that it has been told all once ``loaded`` is set: the stored ones are in the hub),
        and apply what it sends until ``stop``. Raises when the process dies (the supervisor
        starts it again)."""
        from spatec.service.broker import ALERTS, Broker

        if self.processed == 0:
            b = await Broker(broker_url).connect(setup=False)
            try:
                info = await b.js.stream_info(ALERTS)
            finally:
                await b.close()
            start = max(info.state.first_seq or 1, info.state.last_seq - RESTART_WINDOW + 1, 1)
            self.first = start
            self.processed = start - 1
        start = self.processed + 1
        m = MatcherProcess(program, broker_url, crs, start).start()
        self.remote = True
        ready = None
        try:
            self.buffers = {}                              # group ids are the new process's
            if self.areas.proj.crs != crs:                 # decided meanwhile
                m.send(("crs", self.areas.proj.crs))
            for st in self.subs.values():
                if st.suspended is None:
                    st.version += 1
                    self.pending.add(st.sub.id)
                    m.send(("put", st.sub.id, st.version, st.sub.phrase, st.sub.where, st.sub.area,
                            st.sub.certainly))
            self.matcher = m                               # from now on each one is told as it comes
            if loaded is not None and not loaded.is_set():
                # the stored ones are told as they load (the matcher takes them in meanwhile);
                # it matches no alert before they all are
                async def when_loaded():
                    await loaded.wait()
                    m.send(("ready",))
                ready = asyncio.create_task(when_loaded())
            else:
                m.send(("ready",))
            while not stop.is_set():
                try:
                    msg = await asyncio.wait_for(m.inbox.get(), 1.0)
                except asyncio.TimeoutError:
                    if not m.alive():
                        raise RuntimeError(f"the matcher process exited ({m.proc.exitcode})") from None
                    continue
                if msg is None:
                    if stop.is_set():
                        return
                    raise RuntimeError(f"the matcher process ended its pipe (exit code {m.proc.exitcode})")
                await self._apply(msg)
        finally:
            if ready is not None:
                ready.cancel()
            self.matcher = None
            await asyncio.to_thread(m.close)

    async def _apply(self, msg) -> None:
        kind = msg[0]
        if kind == "alerts":
            _, rows, failed, groups, (came, sent), received = msg
            if failed:
                for gid, reason in failed:
                    buf = self.buffers.get(gid)
                    if buf is not None:
                        self._suspend(list(buf.members), reason)
            await self.deliver_batch(rows, groups)
            self.stages.batch(rows, came, sent, received, time.time())
            self.sweep()
        elif kind == "in":
            t0 = time.monotonic()
            for sid, ver, gid, frm, err in msg[1]:
                self.joined(sid, ver, gid, frm, err)
                if time.monotonic() - t0 > SLICE:
                    await asyncio.sleep(0)
                    t0 = time.monotonic()
            if len(msg[1]) >= 1000 and not self.pending:
                # many taken in (a start): what they made (buffers, histories) stays for the
                # service's life, so it is no work for the collector's full passes from now on
                gc.freeze()
        elif kind == "caught_up":
            self.caught_up.set()

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
                    pass
                if seq + 1 >= upto:
                    return
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
        if st.lazy:
            st.filter, st.area = self.compiler(sub)
            st.lazy = False
        if st.filter is not None and not st.filter.test(values(alert, self.matching.types_of(alert.get("phrase")))):
            return False
        return st.area is None or st.area.test(self.areas.hull(alert.get("hull")))


def latest(entries: list[Entry], key: str) -> list[Entry]:
    """One entry per value of ``key`` (the last), in log order: the shortest sequence that
    leaves a "latest per key" view as the whole sequence would."""
    last: dict = {}
    for e in entries:
        last[json.dumps(e.alert.get(key), sort_keys=True)] = e
    return sorted(last.values(), key=lambda e: e.seq)

"""The service: one process of ``spatec serve``, tying the parts together on one event loop.

- the broker (:mod:`~spatec.service.broker`): an embedded nats-server unless ``--broker``,
  watched (restarted, disk-full reported and recovered);
- the subscriptions (:mod:`~spatec.service.subscriptions`) from the ``spatec_subs`` bucket,
  watched, so every process knows every subscription; leases lapse by a heap of expiries;
- the hub (:mod:`~spatec.service.hub`): the alert stream to the subscriptions' buffers, matched
  by a process of its own (:mod:`~spatec.service.matcher`);
- the engine (:mod:`~spatec.service.engine`): the sources this process owns, polled and
  detected;
- push deliveries (:mod:`~spatec.service.delivery`): webhooks, NATS subjects, MQTT
  topics, each subscription's by one process at a time;
- positions for the operations page, from the input stream.

Every long-running task is supervised: a task that fails is logged, started again with
backoff (1 s to 30 s) and reported in ``/status`` (``healthy`` false, the task's error and
restarts) until it has run for :data:`HEALTHY_AFTER` seconds again. Nothing a request
asks for runs on the event loop if it can take long: filters and areas are checked on a
thread, ``GET /program`` is made once.
"""
from __future__ import annotations

import asyncio
import gc
import hashlib
import heapq
import json
import logging
import os
import secrets
import socket
import time
from pathlib import Path

from spatec.service.areas import Areas
from spatec.service.broker import SUBS, Broker, BrokerWatch, BucketWatch, EmbeddedNats, kv_many, kv_update
from spatec.service.hub import Hub
from spatec.service.snapshot import Snapshot
from spatec.service.subscriptions import Checker, PushPolicy, RequestError, Subscription
from spatec.spatial.crs import Projector, utm_epsg

log = logging.getLogger("spatec.service")

OWN_EVERY = 1.0        # s between two ownership rounds
WATCH_EVERY = 1.0      # s between two looks at the broker
CRS_EVERY = 0.2        # s between two looks for enough input to decide the CRS, until it is
POSITION_POLLS = 5     # of a backlog of polls, the last ones shown on the page
POSITIONS_EVERY = 1.0  # s between two looks at new polls for the page
HEALTHY_AFTER = 30.0   # s a restarted task must run before it counts as healthy again
BULK_CHUNK = 2000      # bucket writes sent at once (bulk create and delete, lapsed leases)
SNAPSHOT_QUIET = 2.0   # s without a change to the subscriptions before their snapshot is written
SNAPSHOT_EVERY = 60.0  # s at most between two snapshots while they keep changing


class Unavailable(Exception):
    """The broker cannot take the request now (503)."""


class Service:
    def __init__(self, compiled, sources: list[str], state: Path, broker_url: str | None = None,
                 lateness: int = 120_000_000, trigger: float = 0.5, checkpoint_every: float | None = None,
                 member: str | None = None, outage=None, tokens=None, policy: PushPolicy | None = None,
                 live: dict | None = None, crs: str | None = None):
        self.compiled, self.program = compiled, compiled.program
        self.sources = list(sources)
        self.state = Path(state)
        self.state.mkdir(parents=True, exist_ok=True)
        self.broker_url = broker_url
        self.lateness, self.trigger, self.checkpoint_every = lateness, trigger, checkpoint_every
        self.live = live or {}
        self.member = member or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.crs = crs or self.program.crs          # None: chosen from the input (engine.decide_crs)
        self.areas = Areas(self.program, Projector(self.crs or _provisional_crs(self.program)))
        self.checker = Checker(self.program, self.areas, policy)
        self.tokens = tokens
        self.hub = Hub(self.areas, self.program)
        #: told to stop by a signal (SIGINT, SIGTERM), before :meth:`stop` runs: what the same
        #: signal did to a child meanwhile (a matcher still starting) is no failure
        self.signalled = False
        self.hub.on_suspend = self._suspended
        self.hub.compiler = self.checker.compiled    # a subscription's filter and area, when first needed here
        self.snapshot = Snapshot(self.state)
        self._subs_seq = 0                   # the bucket's stream: the last message applied to the hub
        self._stream = None                  # the bucket's stream: when it was made (a snapshot is of one)
        self._snap = {"seq": None, "subscriptions": None, "bytes": None, "at": None}   # the last one written
        self._snap_read = None               # what the start read from a snapshot (None: the bucket whole)
        self.outage = outage             # --outage: the detectors' feed-outage gate (None: off)
        self.nats: EmbeddedNats | None = None
        self.broker: Broker | None = None
        self.watch: BrokerWatch | None = None
        self.engine = None
        self.delivery = None
        self.positions: dict = {}            # source (vehicle) → [lon, lat, t µs]
        self.positions_changed = asyncio.Event()
        self.position_readers = 0            # positions streams open
        self.positions_asked = -1e9          # when GET /positions was last asked
        self.stop_event = asyncio.Event()
        self.loaded = asyncio.Event()        # the subscriptions stored at start are installed
        self.tasks: list = []
        self.health: dict = {}               # task name → {"restarts", "error", "failed_at"}
        self.loop = None
        self._expiry: list = []              # heap of (expires, sub id)
        self._places_cache: dict = {}
        self._doc: tuple | None = None       # GET /program: (bytes, etag, crs)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        from spatec.service.delivery import Deliveries
        from spatec.service.engine import Engine

        self.loop = asyncio.get_running_loop()
        url = self.broker_url
        if url is None:
            port_file = self.state / "nats" / "port"
            port = int(port_file.read_text()) if port_file.exists() else None
            # started from the loop's own thread: the server is sent SIGTERM when the thread that
            # started it ends (PR_SET_PDEATHSIG), which must be the process's main thread
            self.nats = EmbeddedNats(self.state / "nats", port).start()
            port_file.write_text(str(self.nats.port))
            url = self.nats.url
        self.url = url
        self.broker = await Broker(url).connect()
        self.watch = BrokerWatch(self.broker, self.nats, self.state / "nats" if self.nats else None)
        self.delivery = Deliveries(self)
        self.engine = Engine(self.compiled, self.sources, self.broker, self.state, self.lateness, self.trigger,
                             self.checkpoint_every, self.member, outage=self.outage, crs=self.crs, live=self.live)
        self.hub.remote = True          # matched by the matcher process: none in this one's own index
        self._supervise("subscriptions", self._watch_subscriptions)
        # the matcher process starts while the stored subscriptions load; it is told them once loaded
        self._supervise("hub", lambda: self.hub.follow_matcher(self.url, self.areas.proj.crs, self.program,
                                                               self.stop_event, self.loaded))
        try:
            await asyncio.wait_for(self.loaded.wait(), 120)
        except asyncio.TimeoutError:
            log.warning("the stored subscriptions did not load within 120 s; serving meanwhile")
        self._supervise("leases", self._sweep)
        self._supervise("owners", self._own)
        self._supervise("crs", self._choose_crs)
        self._supervise("renewals", self._renew)
        self._supervise("broker-watch", self._watch_broker)
        self._supervise("positions", self._follow_positions)
        self._supervise("snapshot", self._keep_snapshot)

    async def stop(self) -> None:
        """Stop within seconds: runners checkpoint, pushers stop after the request in flight."""
        self.stop_event.set()

        async def bounded(what, coro, limit):
            try:
                await asyncio.wait_for(coro, limit)
            except Exception as e:  # noqa: BLE001 - stopping goes on whatever fails
                log.warning("stopping: %s did not end cleanly (%s)", what, type(e).__name__)

        if self.engine is not None:
            await bounded("the detectors", self.engine.stop(), 20)
        if self.delivery is not None:
            await bounded("the deliveries", self.delivery.stop(), 5)
        for t in self.tasks:
            t.cancel()
        await bounded("the tasks", asyncio.gather(*self.tasks, return_exceptions=True), 5)
        if self.loaded.is_set() and self._stream is not None:
            await bounded("the subscriptions' snapshot", self._write_snapshot(), 20)
        if self.broker is not None:
            await bounded("the broker connection", self.broker.close(), 5)
        if self.nats is not None:
            await asyncio.to_thread(self.nats.stop)

    def _supervise(self, name: str, factory) -> None:
        """Run ``factory()`` until the service stops: a failure is logged, reported and
        followed by a new start after a backoff."""
        h = self.health.setdefault(name, {"restarts": 0, "error": None, "failed_at": None})

        async def run():
            backoff = 1.0
            while not self.stop_event.is_set():
                t0 = time.monotonic()
                try:
                    await factory()
                    if self.stop_event.is_set():
                        return
                    raise RuntimeError("it ended")
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - reported, started again
                    if self.signalled or self.stop_event.is_set():
                        return             # stopping: a child the same signal reached first
                    h["restarts"] += 1
                    h["error"] = f"{type(e).__name__}: {e}"
                    h["failed_at"] = time.monotonic()
                    if time.monotonic() - t0 > 60:
                        backoff = 1.0
                    log.error("%s failed (%s); starting it again in %.0f s", name, h["error"], backoff,
                              exc_info=h["restarts"] == 1)
                try:
                    await asyncio.wait_for(self.stop_event.wait(), backoff)
                except asyncio.TimeoutError:
                    pass
                backoff = min(backoff * 2, 30.0)

        self.tasks.append(asyncio.create_task(run(), name=name))

    async def _every(self, seconds: float, step, needs_broker: bool = True) -> None:
        """``await step()`` every ``seconds`` until the service stops (while the broker is ok)."""
        while not self.stop_event.is_set():
            if not needs_broker or self.watch.ok:
                await step()
            try:
                await asyncio.wait_for(self.stop_event.wait(), seconds)
            except asyncio.TimeoutError:
                pass

    async def _own(self) -> None:
        async def step():
            if self.signalled:                 # stopping: no detector started again meanwhile
                return
            await self.engine.step(self.loop)
            if self.engine.crs is not None and self.engine.crs != self.areas.proj.crs:
                self.set_crs(self.engine.crs)
            await self.delivery.step()
        await self._every(OWN_EVERY, step)

    async def _choose_crs(self) -> None:
        """While the CRS is not decided, look for enough input to decide it every
        :data:`CRS_EVERY` s: the detectors wait for it, and what comes meanwhile is decided in
        one burst once they start (the sooner, the smaller)."""
        async def step():
            if self.engine.crs is None and not self.signalled:
                crs = await self.engine.decide_crs()
                if crs is not None and crs != self.areas.proj.crs:
                    self.set_crs(crs)
        await self._every(CRS_EVERY, step)

    async def _renew(self) -> None:
        await self._every(OWN_EVERY, self.engine.renew)

    async def _watch_broker(self) -> None:
        await self._every(WATCH_EVERY, self.watch.check, needs_broker=False)

    def set_crs(self, crs: str) -> None:
        """Measure areas and hulls in the detectors' CRS (decided once, from the input)."""
        log.info("areas are measured in %s from now on", crs)
        self.crs = crs
        self.areas.set_crs(crs)
        self.hub.set_crs(crs)
        self._doc = None

    def need_broker(self) -> None:
        if self.watch is None or not self.watch.ok:
            st = self.watch.status() if self.watch is not None else {"state": "starting", "error": None}
            raise Unavailable(f"the broker is {st['state']}" + (f": {st['error']}" if st.get("error") else "")
                              + "; try again later")

    # ------------------------------------------------------------------ subscriptions in the hub
    def _install(self, sub: Subscription) -> None:
        """Put a (new, changed or stored) subscription in the hub. Its filter and area are
        compiled where they are used: by the matcher process, which suspends it if it no longer
        fits the program, and here only if the log is read again for it (decision 57)."""
        self.hub.put(sub, None, None, suspended=sub.suspended, lazy=True)
        heapq.heappush(self._expiry, (sub.expires, sub.id))

    async def _watch_subscriptions(self) -> None:
        """Every subscription of the bucket: first the stored ones (a snapshot and the bucket's
        messages since it, or the bucket whole: :mod:`~spatec.service.snapshot`), installed a
        slice at a time, then each change as it comes."""
        if not self.loaded.is_set():
            info = await self.broker.js.stream_info(f"KV_{SUBS}")
            self._stream = info.created.isoformat() if info.created is not None else ""
            snap = await asyncio.to_thread(self.snapshot.read, self._stream, info.state.last_seq)
            w = await BucketWatch(self.broker.js, SUBS, after=snap[0] if snap else None).start()
        else:                                # started again: the messages since the last one applied
            w = await BucketWatch(self.broker.js, SUBS, after=self._subs_seq).start()
        try:
            if not self.loaded.is_set():
                ents = await w.loaded()
                if snap:
                    seq, records = snap
                    log.info("%d subscription(s) from the snapshot (bucket sequence %d), %d message(s) since",
                             len(records), seq, len(ents))
                    self._snap_read = {"seq": seq, "subscriptions": len(records), "since": len(ents)}
                else:
                    seq, records = 0, {}
                for ent in ents:                    # in the stream's order: the last one of a key wins
                    sub = self._record(ent)
                    if sub is None:
                        records.pop(ent.key, None)
                    else:
                        records[sub.id] = sub
                    seq = max(seq, ent.seq)
                await self._load(list(records.values()))
                self._subs_seq = max(self._subs_seq, seq)
                if snap and not ents and len(self.hub.subs) == len(records):
                    self._snap.update(seq=seq, subscriptions=len(records), at=time.monotonic())   # (it is current)
                self.loaded.set()
            else:
                for ent in await w.loaded():
                    await self._apply(ent)
            while not self.stop_event.is_set():
                try:
                    ent = await asyncio.wait_for(w.changes.get(), 5)
                except asyncio.TimeoutError:
                    continue
                await self._apply(ent)
        finally:
            await w.stop()

    @staticmethod
    def _record(ent) -> Subscription | None:
        """The subscription a bucket entry holds (None: deleted, or no subscription record)."""
        if ent.operation is not None or not ent.value:
            return None
        try:
            return Subscription.from_json(json.loads(ent.value))
        except Exception:  # noqa: BLE001 - not a subscription record: skipped
            log.warning("bucket entry %s is not a subscription; ignored", ent.key)
            return None

    async def _load(self, records) -> None:
        now = time.time()
        subs = [s for s in records if s.expires > now]
        t0 = time.monotonic()
        for sub in subs:
            self._install(sub)
            if time.monotonic() - t0 > 0.005:
                await asyncio.sleep(0)
                t0 = time.monotonic()
        if subs:
            log.info("%d subscription(s) loaded", len(subs))
            gc.collect()
            gc.freeze()          # what stays for the service's life is no work for every collection

    async def _apply(self, ent) -> None:
        self._subs_seq = max(self._subs_seq, ent.seq)
        if ent.operation is not None or not ent.value:
            self.hub.drop(ent.key)
            return
        try:
            sub = Subscription.from_json(json.loads(ent.value))
        except Exception:  # noqa: BLE001 - not a subscription record
            return
        cur = self.hub.subs.get(sub.id)
        if cur is not None and cur.sub == sub:
            return
        if sub.expires <= time.time():
            return
        self._install(sub)

    # ------------------------------------------------------------------ the subscriptions' snapshot
    async def _keep_snapshot(self) -> None:
        """Write the snapshot once the subscriptions have not changed for
        :data:`SNAPSHOT_QUIET` s (or every :data:`SNAPSHOT_EVERY` s while they keep changing)."""
        await self.loaded.wait()
        seen, since = None, time.monotonic()
        while not self.stop_event.is_set():
            mark = (self._subs_seq, len(self.hub.subs))
            if mark != seen:
                seen, since = mark, time.monotonic()
            written = (self._snap["seq"], self._snap["subscriptions"])
            now = time.monotonic()
            if mark != written and (now - since >= SNAPSHOT_QUIET or now - (self._snap["at"] or 0) >= SNAPSHOT_EVERY):
                await self._write_snapshot()
            try:
                await asyncio.wait_for(self.stop_event.wait(), 0.5)
            except asyncio.TimeoutError:
                pass

    async def _write_snapshot(self) -> None:
        seq, records = self._subs_seq, [st.sub for st in self.hub.subs.values()]   # (records are never changed in place)
        size = await asyncio.to_thread(self.snapshot.write, records, seq, self._stream)
        self._snap.update(seq=seq, subscriptions=len(records), bytes=size, at=time.monotonic())

    async def _sweep(self) -> None:
        while not self.stop_event.is_set():
            now = time.time()
            lapsed = []
            while self._expiry and self._expiry[0][0] <= now:
                _, sid = heapq.heappop(self._expiry)
                st = self.hub.subs.get(sid)
                if st is not None and st.sub.expires <= now:
                    log.info("subscription %s: lease lapsed", sid)
                    self.hub.drop(sid)
                    lapsed.append(sid)
            for i in range(0, len(lapsed), BULK_CHUNK):
                await kv_many(self.broker.nc, SUBS, [(sid, None, None) for sid in lapsed[i:i + BULK_CHUNK]])
            try:
                await asyncio.wait_for(self.stop_event.wait(), 0.5)
            except asyncio.TimeoutError:
                pass

    def _suspended(self, sid: str, reason: str) -> None:
        """A subscription was suspended: store it so, so that no process evaluates it again."""
        st = self.hub.subs.get(sid)
        if st is None or self.loop is None:
            return
        sub = Subscription.from_json(st.sub.to_json())
        sub.suspended = reason
        st.sub = sub

        async def store():
            try:
                await self._store(sub)
            except Exception as e:  # noqa: BLE001 - it stays suspended here; logged
                log.warning("subscription %s: storing its suspension failed (%s)", sid, type(e).__name__)

        self.loop.create_task(store())

    # ------------------------------------------------------------------ requests
    def owned(self, ident, sub_id: str):
        """The subscription ``sub_id`` of ``ident`` (KeyError otherwise: another's is not found either)."""
        st = self.hub.subs.get(sub_id)
        if st is None or st.sub.owner != ident.name:
            raise KeyError(sub_id)
        return st

    async def subscribe(self, ident, req, recent: int = 0) -> Subscription:
        """A new subscription of ``ident``: alerts decided from now on, and the last ``recent``
        ones of the log that it matches."""
        self.need_broker()
        start = max(self.hub.first, self.hub.processed + 1 - max(0, int(recent)))
        sub = await asyncio.to_thread(self.checker.new, req, start, ident.name, ident.page)
        await self.broker.subs.create(sub.id, json.dumps(sub.to_json()).encode(), msg_ttl=_ttl(sub.lease))
        self._install(sub)
        return sub

    async def subscribe_many(self, ident, reqs) -> list:
        """Bulk: each a :class:`Subscription` or its :class:`RequestError`, in order."""
        self.need_broker()
        start = self.hub.processed + 1

        def check():
            out = []
            for r in reqs:
                if isinstance(r, RequestError):
                    out.append(r)
                    continue
                try:
                    out.append(self.checker.new(r, start, ident.name, ident.page))
                except RequestError as e:
                    out.append(e)
            self.areas.prepare([self.areas.area(s.area, s.certainly) for s in out
                                if isinstance(s, Subscription) and s.area is not None])
            return out

        made = await asyncio.to_thread(check)
        out = list(made)
        todo = [(i, s) for i, s in enumerate(made) if isinstance(s, Subscription)]
        for k in range(0, len(todo), BULK_CHUNK):
            chunk = todo[k:k + BULK_CHUNK]
            got = await kv_many(self.broker.nc, SUBS, [(s.id, json.dumps(s.to_json()).encode(), _ttl(s.lease))
                                                       for _, s in chunk])
            for (i, sub), g in zip(chunk, got):
                if g is True:
                    out[i] = sub
                    self._install(sub)
                else:
                    out[i] = RequestError(f"not stored: {type(g).__name__}", status=503)
        return out

    async def renew(self, ident, sub_id: str, req) -> Subscription:
        self.need_broker()
        st = self.owned(ident, sub_id)
        async with st.lock:
            st = self.owned(ident, sub_id)            # a DELETE may have ended it meanwhile
            if req.area is not None:
                new = await asyncio.to_thread(self.checker.renewal, st.sub, req)
            else:
                new = self.checker.renewal(st.sub, req)
            await self._store(new)
            if sub_id not in self.hub.subs:
                raise KeyError(sub_id)
            self._install(new)
        return new

    async def _store(self, sub: Subscription) -> None:
        """Write a subscription over its stored record (compare and set, again if another
        write came first); KeyError if it is no longer stored."""
        from nats.js.errors import KeyDeletedError, KeyNotFoundError

        kv = self.broker.subs
        data = json.dumps(sub.to_json()).encode()
        for _ in range(8):
            try:
                e = await kv.get(sub.id)
            except (KeyNotFoundError, KeyDeletedError):
                raise KeyError(sub.id) from None
            if e.operation is not None or not e.value:
                raise KeyError(sub.id)
            try:
                await kv_update(self.broker.js, SUBS, sub.id, data, e.revision, _ttl(sub.lease))
                return
            except Exception as ex:  # noqa: BLE001 - "wrong last sequence": another write came first
                if "wrong last sequence" not in str(ex).lower():
                    raise
        raise RequestError("the subscription was changed by other requests meanwhile; try again", status=409)

    async def unsubscribe(self, ident, sub_id: str) -> bool:
        self.need_broker()
        try:
            st = self.owned(ident, sub_id)
        except KeyError:
            return False
        async with st.lock:
            if sub_id not in self.hub.subs:
                return False
            await self.broker.subs.purge(sub_id)
            self.hub.drop(sub_id)
        return True

    async def unsubscribe_many(self, ident, ids) -> tuple[int, list]:
        self.need_broker()
        mine, missing = [], []
        for sid in dict.fromkeys(ids):
            st = self.hub.subs.get(sid)
            (mine if st is not None and st.sub.owner == ident.name else missing).append(sid)
        for sid in mine:
            self.hub.drop(sid)
        for k in range(0, len(mine), BULK_CHUNK):
            await kv_many(self.broker.nc, SUBS, [(sid, None, None) for sid in mine[k:k + BULK_CHUNK]])
        return len(mine), missing

    def listing(self, ident, limit: int, after: str | None) -> list[dict]:
        mine = sorted(sid for sid, st in self.hub.subs.items() if st.sub.owner == ident.name
                      and (after is None or sid > after))
        return [self.public(self.hub.subs[sid]) for sid in mine[:limit]]

    def public(self, st) -> dict:
        d = st.sub.public()
        d["suspended"] = st.suspended
        return d

    # ------------------------------------------------------------------ what the page and clients read
    def program_doc(self) -> tuple[bytes, str]:
        """``GET /program`` as bytes and its ETag: made once (again when the CRS is decided)."""
        if self._doc is None:
            from spatec.frontend.schema import json_schema

            places = []
            for name in self.program.places:
                loc = self.areas.patterns.region(name)
                places.append({"type": "Feature", "properties": {"name": name},
                               "geometry": json.loads(_geojson(loc, self.areas.proj))})
            doc = {"timezone": self.program.timezone, "crs": self.crs,
                   "phrases": {p.name: json_schema(self.program, p) for p in self.program.phrases},
                   "per": {p.name: p.phrase.per for p in self.program.phrases},
                   "units": {p.name: emit_units(self.program, p) for p in self.program.phrases},
                   "places": {"type": "FeatureCollection", "features": places}}
            body = json.dumps(doc).encode()
            self._doc = (body, '"' + hashlib.sha1(body).hexdigest()[:20] + '"')
        return self._doc

    def places_of(self, entry) -> list[str]:
        cache = self._places_cache
        got = cache.get(entry.seq)
        if got is None:
            got = cache[entry.seq] = self.areas.place_names(self.areas.hull(entry.alert.get("hull")))
            if len(cache) > 10_000:
                cache.pop(next(iter(cache)))
        return got

    def status(self) -> dict:
        now = time.monotonic()
        tasks = {}
        problems = []
        for name, h in self.health.items():
            failing = h["failed_at"] is not None and now - h["failed_at"] < HEALTHY_AFTER
            tasks[name] = {"state": "failing" if failing else "running", "restarts": h["restarts"],
                           "error": h["error"]}
            if failing:
                problems.append(f"{name}: {h['error']}")
        broker = self.watch.status() if self.watch is not None else {"state": "starting"}
        if broker.get("state") != "ok":
            problems.append(f"broker: {broker.get('state')}" + (f" ({broker['error']})" if broker.get("error") else ""))
        engine = self.engine.status() if self.engine is not None else None
        if self.engine is not None and not self.engine.healthy():
            problems += [f"detector {sid}: {f['error']}" for sid, f in (engine.get("failures") or {}).items()]
        if self.delivery is not None:
            problems += [f"pusher {sid}: {f['error']}" for sid, f in self.delivery.failures.items()]
        return {"healthy": not problems, "problems": problems, "member": self.member, "broker": broker,
                "crs": self.crs, "subscriptions": len(self.hub.subs), "suspended": self.hub.suspended(),
                "groups": self.hub.groups(), "log": self.hub.processed, "window_first": self.hub.first,
                "alerts_handled": self.hub.handled, "alerts_skipped": self.hub.skipped,
                "decided_to_hub_ms": self.hub.lag_ms(), "stages_ms": self.hub.stages.ms(), "tasks": tasks,
                "snapshot": {"read": self._snap_read, "written": {k: self._snap[k] for k in ("seq", "subscriptions")},
                             "current": self._snap["seq"] == self._subs_seq and self._snap["subscriptions"] == len(self.hub.subs)},
                "matcher": {"pid": self.hub.matcher.proc.pid if self.hub.matcher is not None else None,
                            "pending": len(self.hub.pending)},
                "engine": engine, "pushed": self.delivery.sent if self.delivery else 0,
                "dead_letters": self.delivery.dead if self.delivery else 0}

    # ------------------------------------------------------------------ positions (the page)
    async def _follow_positions(self) -> None:
        from nats.js.api import ConsumerConfig, DeliverPolicy

        from spatec.service.broker import INPUT

        try:
            info = await self.broker.js.stream_info(INPUT)
            start = max(1, info.state.last_seq - 50)
        except Exception:  # noqa: BLE001 - no stream yet
            start = 1
        cfg = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start)
        sub = await self.broker.js.subscribe("spatec.input.>", ordered_consumer=True, config=cfg)
        decl_of = {}
        try:
            while not self.stop_event.is_set():
                try:
                    msgs = [await sub.next_msg(timeout=0.5)]
                except asyncio.TimeoutError:
                    continue
                except Exception:  # noqa: BLE001 - nats-py's own TimeoutError, or closed
                    if self.stop_event.is_set():
                        break
                    continue
                # a backlog (a restart, a feed caught up) is shown by its last polls only: positions
                # are for people, and parsing every poll would take the CPU from the detectors
                while sub.pending_msgs and len(msgs) < 1000:
                    try:
                        msgs.append(await sub.next_msg(timeout=0.001))
                    except Exception:  # noqa: BLE001 - none waiting
                        break
                if not self.positions_wanted():
                    await asyncio.sleep(POSITIONS_EVERY)
                    continue
                last = {}
                for msg in msgs:                  # the latest poll of each source
                    last[msg.subject] = msg
                for msg in list(last.values())[-POSITION_POLLS:]:
                    try:
                        got = await asyncio.to_thread(self._positions_of, msg.subject, msg.data, decl_of)
                    except Exception:  # noqa: BLE001 - a poll that is not positions: nothing to show
                        continue
                    if got:
                        self.positions.update(got)
                        self.positions_changed.set()
                await asyncio.sleep(POSITIONS_EVERY)
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # noqa: BLE001 - closed
                pass

    def positions_wanted(self) -> bool:
        """Whether anyone looks at positions (a page's stream, or a GET in the last 2 minutes):
        polls are parsed for them only then."""
        return self.position_readers > 0 or time.monotonic() - self.positions_asked < 120

    def _positions_of(self, subject: str, data: bytes, decl_of: dict) -> dict:
        import time as _time

        from spatec.feeds.ingest import live_events
        from spatec.feeds.sources import Item, feed_batch
        from spatec.service.engine import input_subject, source_id

        if not decl_of:
            from spatec.feeds.sources import parse_source

            for s in self.sources:
                sp = parse_source(s)
                decl_of[input_subject(source_id(sp))] = (self.program.events[sp.type], sp.kind)
        decl, kind = decl_of.get(subject, (None, None))
        if decl is None:
            return {}
        item = Item(subject, 0, subject, _time.time(), [feed_batch(kind, subject, data)])
        df = live_events(item, decl, self.program.timezone, set(), self.live.get("max_ahead", 300_000_000)).events
        if not len(df):
            return {}
        df = df.dropna(subset=["_lon", "_lat"])
        return {str(s): [float(x), float(y), int(t)] for s, x, y, t in
                zip(df["_source"], df["_lon"], df["_lat"], df["_t"])}


def emit_units(program, info) -> dict:
    """The unit of each plain-number emit field, where the program says it: ``X / 1 m``
    (or ``/ 1 min``, ``/ 1 km``...) is in that unit, an event's ``lon``/``lat`` (its place's
    point) in degrees. For the page: numbers shown rounded to their unit."""
    from spatec.frontend import ast as A

    out = {}
    types = dict(info.schema)
    for f in info.phrase.emit:
        e = f.expr
        if types.get(f.name) != "number":
            continue
        if isinstance(e, A.BinOp) and e.op == "/" and isinstance(e.right, A.Quantity) and e.right.value == 1:
            out[f.name] = e.right.unit
        elif isinstance(e, A.Attr):
            decl = program.events.get(info.vars.get(e.var, ""))
            place = getattr(decl, "place", None) if decl is not None else None
            if place is not None and e.name in (getattr(place, "lon", None), getattr(place, "lat", None)):
                out[f.name] = "deg"
    return out


def _provisional_crs(program) -> str:
    """A CRS to hold areas in until the service's is decided: the UTM zone of the program's
    places, or of Cambridge's (the areas are projected again once it is decided)."""
    from shapely import wkt as shp_wkt

    pts = [(p.lon, p.lat) if p.kind == "circle" else tuple(shp_wkt.loads(p.wkt).centroid.coords[0])
           for p in program.places.values()]
    if not pts:
        return utm_epsg(0.12, 52.2)
    return utm_epsg(sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts))


def _geojson(loc, proj) -> str:
    """A stamp (metres) as a GeoJSON polygon in lon/lat."""
    import numpy as np
    import shapely

    g = loc.geom if loc.r == 0 else shapely.buffer(loc.geom, loc.r, quad_segs=16)

    def inv(c):
        x, y = proj.inverse(c[:, 0], c[:, 1])
        return np.column_stack([x, y])

    return shapely.to_geojson(shapely.transform(g, inv))


def _ttl(lease: float) -> int:
    """The bucket entry's TTL: the lease, whole seconds (rounded up)."""
    return max(1, int(-(-lease // 1)))

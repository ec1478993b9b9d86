"""The service: one process of ``spatec serve``, tying the parts together on one event loop.

- the broker (:mod:`~spatec.service.broker`): an embedded nats-server unless ``--broker``;
- the subscriptions (:mod:`~spatec.service.subscriptions`) from the ``spatec_subs`` bucket,
  watched, so every process knows every subscription; leases swept every second;
- the hub (:mod:`~spatec.service.hub`): the alert stream to the subscriptions' buffers;
- the engine (:mod:`~spatec.service.engine`): the sources this process owns, polled and
  detected;
- push deliveries (:mod:`~spatec.service.delivery`): webhooks, NATS subjects, MQTT
  topics, each subscription's by one process at a time;
- positions for the operations page, from the input stream.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import time
from pathlib import Path

from spatec.service.areas import Areas, service_crs
from spatec.service.broker import SUBS, Broker, EmbeddedNats, kv_update
from spatec.service.hub import Hub
from spatec.service.subscriptions import Checker, RequestError, Subscription
from spatec.spatial.crs import Projector

log = logging.getLogger("spatec.service")

SWEEP_EVERY = 0.5      # s between two lease sweeps
OWN_EVERY = 1.0        # s between two ownership rounds
POSITION_POLLS = 5     # of a backlog of polls, the last ones shown on the page
POSITIONS_EVERY = 0.5  # s between two looks at new polls for the page


class Service:
    def __init__(self, compiled, sources: list[str], state: Path, broker_url: str | None = None,
                 lateness: int = 120_000_000, trigger: float = 0.5, checkpoint_every: float | None = None,
                 member: str | None = None, quality=None):
        self.compiled, self.program = compiled, compiled.program
        self.sources = list(sources)
        self.state = Path(state)
        self.state.mkdir(parents=True, exist_ok=True)
        self.broker_url = broker_url
        self.lateness, self.trigger, self.checkpoint_every = lateness, trigger, checkpoint_every
        self.member = member or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.proj = Projector(service_crs(self.program))
        self.areas = Areas(self.program, self.proj)
        self.checker = Checker(self.program, self.areas)
        self.hub = Hub(self.areas)
        self.quality = quality
        self.nats: EmbeddedNats | None = None
        self.broker: Broker | None = None
        self.engine = None
        self.delivery = None
        self.positions: dict = {}            # source (vehicle) → [lon, lat, t µs]
        self.positions_changed = asyncio.Event()
        self.stop_event = asyncio.Event()
        self.tasks: list = []
        self.loop = None
        self._places_cache: dict = {}

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
        self.broker = await Broker(url).connect()
        await self._load_subscriptions()
        self.tasks.append(asyncio.create_task(self.hub.follow(self.broker, self.stop_event), name="hub"))
        self.tasks.append(asyncio.create_task(self._watch_subscriptions(), name="subs-watch"))
        self.tasks.append(asyncio.create_task(self._sweep(), name="leases"))
        self.delivery = Deliveries(self)
        self.tasks.append(asyncio.create_task(self._own(), name="owners"))
        self.tasks.append(asyncio.create_task(self._follow_positions(), name="positions"))
        self.engine = Engine(self.compiled, self.sources, self.broker, self.state, self.lateness, self.trigger,
                             self.checkpoint_every, self.member, gate=self.quality, crs=self.proj.crs)

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
        if self.broker is not None:
            await bounded("the broker connection", self.broker.close(), 5)
        if self.nats is not None:
            await asyncio.to_thread(self.nats.stop)

    async def _own(self) -> None:
        while not self.stop_event.is_set():
            try:
                if self.engine is not None:
                    await self.engine.step(self.loop)
                await self.delivery.step()
            except Exception:  # noqa: BLE001 - logged; tried again next round
                log.exception("ownership round failed")
            try:
                await asyncio.wait_for(self.stop_event.wait(), OWN_EVERY)
            except asyncio.TimeoutError:
                pass

    # ------------------------------------------------------------------ subscriptions
    def _install(self, sub: Subscription) -> None:
        try:
            flt, area = self.checker.compiled(sub)
        except Exception as e:  # noqa: BLE001 - a stored subscription the program no longer accepts
            log.warning("subscription %s no longer fits the program (%s); ignored", sub.id, e)
            return
        self.hub.put(sub, flt, area)

    async def _load_subscriptions(self) -> None:
        kv = self.broker.subs
        try:
            keys = await kv.keys()
        except Exception:  # noqa: BLE001 - nats-py raises NoKeysError for an empty bucket
            keys = []
        now = time.time()
        for k in keys:
            try:
                e = await kv.get(k)
            except Exception:  # noqa: BLE001 - gone meanwhile
                continue
            sub = Subscription.from_json(json.loads(e.value))
            if sub.expires > now:
                self._install(sub)

    async def _watch_subscriptions(self) -> None:
        kv = self.broker.subs
        w = await kv.watch(">", include_history=False)
        try:
            async for ent in w:
                if ent is None:
                    continue
                if ent.operation is not None or not ent.value:
                    self.hub.drop(ent.key)
                    continue
                sub = Subscription.from_json(json.loads(ent.value))
                cur = self.hub.subs.get(sub.id)
                if cur is None or cur.sub != sub:
                    if sub.expires > time.time():
                        self._install(sub)
        finally:
            await w.stop()

    async def _sweep(self) -> None:
        while not self.stop_event.is_set():
            now = time.time()
            for sid, st in list(self.hub.subs.items()):
                if st.sub.expires <= now:
                    log.info("subscription %s: lease lapsed", sid)
                    self.hub.drop(sid)
                    try:
                        await self.broker.subs.purge(sid)
                    except Exception:  # noqa: BLE001 - already gone
                        pass
            try:
                await asyncio.wait_for(self.stop_event.wait(), SWEEP_EVERY)
            except asyncio.TimeoutError:
                pass

    async def subscribe(self, body: dict) -> Subscription:
        await self.hub.caught_up.wait()
        sub = self.checker.new(body, start_seq=self.hub.processed + 1)
        await self.broker.subs.create(sub.id, json.dumps(sub.to_json()).encode(), msg_ttl=_ttl(sub.lease))
        self._install(sub)
        return sub

    async def renew(self, sub_id: str, body: dict | None) -> Subscription:
        from spatec.service.subscriptions import parse_lease

        st = self.hub.subs.get(sub_id)
        if st is None:
            raise KeyError(sub_id)
        sub = Subscription.from_json(st.sub.to_json())
        body = body or {}
        unknown = set(body) - {"lease", "area", "certainly"}
        if unknown:
            raise RequestError(f"a renewal may change lease, area and certainly; not {', '.join(sorted(unknown))}",
                               field_name=sorted(unknown)[0])
        if "lease" in body:
            sub.lease = parse_lease(body["lease"])
        if "area" in body or "certainly" in body:
            probe = self.checker.new({"phrase": sub.phrase, "area": body.get("area", sub.area),
                                      "certainly": body.get("certainly", sub.certainly)}, sub.start_seq)
            sub.area, sub.certainly = probe.area, probe.certainly
        sub.expires = time.time() + sub.lease
        await self._store(sub)
        self._install(sub)
        return sub

    async def _store(self, sub: Subscription) -> None:
        kv = self.broker.subs
        e = await kv.get(sub.id)
        await kv_update(self.broker.js, SUBS, sub.id, json.dumps(sub.to_json()).encode(), e.revision, _ttl(sub.lease))

    async def unsubscribe(self, sub_id: str) -> bool:
        if sub_id not in self.hub.subs:
            return False
        self.hub.drop(sub_id)
        await self.broker.subs.purge(sub_id)
        return True

    # ------------------------------------------------------------------ what the page and clients read
    def program_doc(self) -> dict:
        from spatec.frontend.schema import json_schema

        places = []
        for name in self.program.places:
            loc = self.areas.patterns.region(name)
            places.append({"type": "Feature", "properties": {"name": name},
                           "geometry": json.loads(_geojson(loc, self.proj))})
        return {"timezone": self.program.timezone,
                "phrases": {p.name: json_schema(self.program, p) for p in self.program.phrases},
                "per": {p.name: p.phrase.per for p in self.program.phrases},
                "places": {"type": "FeatureCollection", "features": places}}

    def places_of(self, entry) -> list[str]:
        cache = self._places_cache
        got = cache.get(entry.seq)
        if got is None:
            got = cache[entry.seq] = self.areas.place_names(self.areas.hull(entry.alert.get("hull")))
            if len(cache) > 10_000:
                cache.pop(next(iter(cache)))
        return got

    def status(self) -> dict:
        return {"member": self.member, "broker": self.broker.url if self.broker else None,
                "subscriptions": len(self.hub.subs), "groups": len(self.hub.index.groups),
                "log": self.hub.processed, "engine": self.engine.status() if self.engine else None,
                "pushed": self.delivery.sent if self.delivery else 0,
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
        while not self.stop_event.is_set():
            try:
                msgs = [await sub.next_msg(timeout=0.5)]
            except asyncio.TimeoutError:
                continue
            except Exception:  # noqa: BLE001 - closed
                break
            # a backlog (a restart, a feed caught up) is shown by its last polls only: positions
            # are for people, and parsing every poll would take the CPU from the detectors
            while len(msgs) < 1000:
                try:
                    msgs.append(await sub.next_msg(timeout=0.001))
                except Exception:  # noqa: BLE001 - none waiting
                    break
            for msg in msgs[-POSITION_POLLS:]:
                try:
                    got = await asyncio.to_thread(self._positions_of, msg.subject, msg.data, decl_of)
                except Exception:  # noqa: BLE001 - a poll that is not positions: nothing to show
                    continue
                if got:
                    self.positions.update(got)
                    self.positions_changed.set()
            await asyncio.sleep(POSITIONS_EVERY)

    def _positions_of(self, subject: str, data: bytes, decl_of: dict) -> dict:
        from spatec.events.canonical import to_events
        from spatec.feeds.sources import feed_batch
        from spatec.service.engine import input_subject, source_id

        if not decl_of:
            from spatec.feeds.sources import parse_source

            for s in self.sources:
                sp = parse_source(s)
                decl_of[input_subject(source_id(sp))] = (self.program.events[sp.type], sp.kind)
        decl, kind = decl_of.get(subject, (None, None))
        if decl is None:
            return {}
        res = to_events([feed_batch(kind, subject, data)], decl, self.program.timezone, set())
        df = res.events
        if not len(df):
            return {}
        df = df.dropna(subset=["_lon", "_lat"])
        return {str(s): [float(x), float(y), int(t)] for s, x, y, t in
                zip(df["_source"], df["_lon"], df["_lat"], df["_t"])}


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

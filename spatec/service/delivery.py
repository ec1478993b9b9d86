"""Push deliveries: webhooks, NATS subjects, MQTT topics.

A push subscription is delivered by one process at a time: the one holding its key in
the ``spatec_owners`` bucket (claimed when free, renewed every second). Its pusher (an
asyncio task of its own, so a slow target holds up nobody else) takes the subscription's
alerts from its cursor — the log sequence of the last alert delivered, kept in the
``spatec_cursors`` bucket and written as each delivery succeeds; a cursor older than the
hub's buffers is served from the log itself (:meth:`~spatec.service.hub.Hub.from_log`) —
and sends each alert with its composite id (webhook: ``Idempotency-Key``; NATS:
``Nats-Msg-Id``; MQTT: the alert's JSON, whose ``id`` is the composite id).

Retries, backoff and the dead letter are the one delivery layer of every push, live's
webhook sinks included (:func:`spatec.sinks.alerts.delivery`): connection errors,
timeouts, 408, 429 and 5xx are tried again after ``backoff * 2**k`` seconds; after the
last try, or at once for a redirect or another 4xx, the alert goes to
``<state>/dead_letter.jsonl``. A process that dies mid-delivery leaves the cursor at the
last success: the next owner sends again at most the one alert that was in flight.

A pusher that fails (its target cannot even be made) is restarted with backoff, and
``/status`` says so while it fails.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from urllib.parse import urlparse

from spatec.service.broker import OWNERS, kv_update
from spatec.service.engine import OWNER_TTL
from spatec.sinks.alerts import OK, Outcome, Retry, dead_letter, deliver_async, post_alert

log = logging.getLogger("spatec.service")

RETRY = Retry(retries=5, backoff=0.5, max_backoff=30.0)
TIMEOUT = 10.0
RESTART_BACKOFF = (1.0, 60.0)       # s: first and longest wait before a failed pusher starts again


class Deliveries:
    def __init__(self, service, retry: Retry = RETRY):
        self.svc = service
        self.retry = retry
        self.pushers: dict[str, tuple] = {}     # sub id → (revision, task)
        self.failures: dict[str, dict] = {}     # sub id → {"error", "restarts", "next"}
        self.sent = 0
        self.dead = 0

    async def step(self) -> None:
        kv = self.svc.broker.owners
        hub = self.svc.hub
        now = time.monotonic()
        for sid in list(self.pushers):
            rev, task = self.pushers[sid]
            if sid not in hub.subs or task.done():
                if task.done() and not task.cancelled() and task.exception() is not None:
                    self._failed(sid, task.exception(), now)
                task.cancel()
                del self.pushers[sid]
                try:
                    await kv.delete(f"push.{sid}")
                except Exception:  # noqa: BLE001 - gone already
                    pass
                continue
            try:
                new = await kv_update(self.svc.broker.js, OWNERS, f"push.{sid}", self.svc.member.encode(), rev,
                                      OWNER_TTL)
                self.pushers[sid] = (new, task)
            except Exception:  # noqa: BLE001 - lost it
                task.cancel()
                del self.pushers[sid]
        for sid in list(self.failures):
            if sid not in hub.subs:
                del self.failures[sid]
        for sid in list(hub.pushed):          # (not a pass over every subscription: at 100,000, tens of ms)
            st = hub.subs.get(sid)
            if st is None or sid in self.pushers or st.sub.deliver.get("sse") or st.suspended is not None:
                continue
            f = self.failures.get(sid)
            if f is not None and f["next"] > now:
                continue
            try:
                rev = await kv.create(f"push.{sid}", self.svc.member.encode(), msg_ttl=OWNER_TTL)
            except Exception:  # noqa: BLE001 - another process delivers it
                continue
            self.pushers[sid] = (rev, asyncio.create_task(self._push(sid), name=f"push {sid}"))

    def _failed(self, sid: str, e: BaseException, now: float) -> None:
        f = self.failures.setdefault(sid, {"restarts": 0})
        f["restarts"] += 1
        f["error"] = f"{type(e).__name__}: {e}"
        f["next"] = now + min(RESTART_BACKOFF[0] * 2 ** (f["restarts"] - 1), RESTART_BACKOFF[1])
        log.warning("the pusher of subscription %s failed (%s); starting it again in %.0f s", sid, f["error"],
                    f["next"] - now)

    async def stop(self) -> None:
        for sid, (_, task) in list(self.pushers.items()):
            task.cancel()
        await asyncio.gather(*(t for _, t in self.pushers.values()), return_exceptions=True)
        for sid in list(self.pushers):
            try:
                await self.svc.broker.owners.delete(f"push.{sid}")
            except Exception:  # noqa: BLE001 - gone already
                pass
        self.pushers.clear()

    async def _push(self, sid: str) -> None:
        svc = self.svc
        hub, cursors = svc.hub, svc.broker.cursors
        try:
            cursor = int((await cursors.get(sid)).value)
        except Exception:  # noqa: BLE001 - nothing delivered yet
            cursor = hub.subs[sid].sub.start_seq - 1
        target = None
        hub.read(sid, 1)
        try:
            while sid in hub.subs:
                st = hub.subs[sid]
                if st.suspended is not None:
                    return
                complete = max(hub.first, st.since)
                if cursor + 1 < complete:           # older than the buffers hold for it: from the log
                    todo = [e async for e in hub.from_log(svc.broker, st, cursor, complete)]
                    if not todo:
                        cursor = complete - 1
                        continue
                else:
                    todo = st.after(cursor)
                if not todo:
                    st.changed.clear()
                    if not st.after(cursor):
                        try:
                            await asyncio.wait_for(st.changed.wait(), 1.0)
                        except asyncio.TimeoutError:
                            pass
                    continue
                if target is None:
                    target = await asyncio.to_thread(_Target.of, st.sub.deliver, svc.broker)
                for e in todo:
                    ok = await self._send(target, e, st.sub.deliver)
                    cursor = e.seq
                    await cursors.put(sid, str(cursor).encode())
                    if ok:
                        self.sent += 1
                    if sid not in hub.subs:
                        break
                self.failures.pop(sid, None)
        finally:
            hub.read(sid, -1)
            if target is not None:
                await asyncio.to_thread(target.close)

    async def _send(self, target, e, deliver) -> bool:
        stop = self.svc.stop_event

        async def wait(seconds: float) -> bool:
            try:
                await asyncio.wait_for(stop.wait(), seconds)
            except asyncio.TimeoutError:
                pass
            return stop.is_set()

        result, out, tries = await deliver_async(lambda: target.send(e), self.retry, wait)
        if result is None:
            raise asyncio.CancelledError       # stopping: the cursor stays before this alert
        if result is False:
            self.dead += 1
            await asyncio.to_thread(dead_letter, self.svc.state / "dead_letter.jsonl", json.dumps(deliver),
                                    e.alert, out.error, tries)
        return result


class _Target:
    """Where a push subscription's alerts go."""

    @staticmethod
    def of(deliver: dict, broker) -> "_Target":
        kind, v = next(iter(deliver.items()))
        if kind == "webhook":
            return _Webhook(v)
        if kind == "nats":
            return _Nats(v, broker)
        return _Mqtt(v["url"], v["topic"])

    async def send(self, e) -> Outcome:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Webhook(_Target):
    def __init__(self, url: str):
        self.url = url

    async def send(self, e) -> Outcome:
        return await asyncio.to_thread(post_alert, self.url, {"id": e.id}, TIMEOUT, e.data.encode("utf-8"))


class _Nats(_Target):
    def __init__(self, subject: str, broker):
        self.subject, self.broker = subject, broker

    async def send(self, e) -> Outcome:
        try:
            await self.broker.nc.publish(self.subject, e.data.encode("utf-8"), headers={"Nats-Msg-Id": e.id})
            await self.broker.nc.flush(timeout=TIMEOUT)
            return OK
        except Exception as ex:  # noqa: BLE001 - retried
            return Outcome(False, True, f"{type(ex).__name__}: {ex}")


class _Mqtt(_Target):
    """MQTT 3.1.1, QoS 1 (paho-mqtt), one connection per subscription."""

    def __init__(self, url: str, topic: str):
        import paho.mqtt.client as mqtt

        u = urlparse(url)
        self.topic = topic
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
        self.client.connect(u.hostname or "127.0.0.1", u.port or 1883, keepalive=30)
        self.client.loop_start()

    async def send(self, e) -> Outcome:
        def pub():
            try:
                info = self.client.publish(self.topic, e.data.encode("utf-8"), qos=1)
                info.wait_for_publish(TIMEOUT)
                return OK if info.is_published() else Outcome(False, True, "not acknowledged")
            except Exception as ex:  # noqa: BLE001 - retried
                return Outcome(False, True, f"{type(ex).__name__}: {ex}")

        return await asyncio.to_thread(pub)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()

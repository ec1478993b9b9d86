"""Detection inside the service: sources polled into the input log, the local live runner
reading that log, its alerts published to the alert log.

Work is split by source. Each source has an owner: the process holding its key in the
``spatec_owners`` bucket (a short TTL, renewed every second by a task of its own; a process
owns at most its fair share of the sources, so two processes split two sources). The owner
runs the source in a process of its own (:class:`Detector`: a core of its own, and nothing
that happens to it can happen to the service), with two parts:

- a **poller** that fetches the feed (asking numbered feeds for the poll after the last
  one in the log, ``?after=N``) and publishes each poll to the input stream with
  ``Nats-Msg-Id`` = source and poll number: no poll is lost or logged twice, whoever
  polls, across restarts and take-overs;
- a **detector**: :class:`~spatec.runners.live_local.LocalLive` over a
  :class:`LogSource` (the source's polls from the input stream, its offset a stream
  sequence), with a sink that publishes each alert to the alert stream with
  ``Nats-Msg-Id`` = the composite id and waits for the server's acknowledgement before the
  batch is committed. Its checkpoint is in ``<state>/runners/<source>``.

The metric CRS the detectors measure in (and the hub's areas) is replay's rule (the UTM
zone of the median position, REFERENCE decision 6) over the first :data:`CRS_SPAN` of the
input log, unless the program or ``--crs`` names one; the first process to decide it
writes it to the ``spatec_meta`` bucket, and every process and every later start uses
that one (REFERENCE decision 50). Detection waits for it; the input is logged meanwhile.

A source's process that fails is started again (its runner from its checkpoint), with
backoff (1 s to 60 s), and ``/status`` reports it while it fails.

When an owner dies its keys lapse (:data:`OWNER_TTL`) and another process takes the source:
its detector reads the source's input from the log (from its own checkpoint, or from the
log's start) and publishes what it decides; composites the dead owner had already published
are dropped by JetStream's duplicate detection. Nothing is lost, nothing is logged twice.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from spatec.feeds.sources import HttpFeedSource, Item, SourceSpec, feed_batch, parse_source
from spatec.service.broker import INPUT, OWNERS, kv_update, token
from spatec.service.procs import StopFlag, starting_children

log = logging.getLogger("spatec.service")

OWNER_TTL = 6          # s: an owner's key lapses this long after its last renewal (renewed every second)
POLLS_PER_BATCH = 50   # polls a detector takes from the log per micro-batch at most
PUBLISH_TIMEOUT = 30.0  # s for the broker to acknowledge a batch's alerts
CRS_SPAN = 120_000_000  # µs of event time of input the service's CRS is chosen from ...
CRS_POLLS = 200         # ... or this many polls ...
CRS_WAIT = 120.0        # ... or what came in this many seconds after the first poll
CRS_LOOK = 0.1          # s between two looks for it while it is not decided (the input waits meanwhile)
RESTART_BACKOFF = (1.0, 60.0)


class Throttled:
    """A warning logged at its first occurrence, then at most once a minute with a count."""

    def __init__(self, every: float = 60.0):
        self.every, self.last, self.count = every, -float("inf"), 0

    def __call__(self, msg: str, *args) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last >= self.every:
            more = f" ({self.count - 1} more since)" if self.count > 1 and self.last > -float("inf") else ""
            log.warning(msg + more, *args)
            self.last, self.count = now, 0


def input_subject(source_id: str) -> str:
    return f"spatec.input.{token(source_id)}"


def alert_subject(phrase: str) -> str:
    return f"spatec.alerts.{token(phrase)}"


def call(loop, coro, timeout: float = 30.0):
    """Run a coroutine on the service's event loop from a thread; its result."""
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


# ------------------------------------------------------------------------------ the poller

class Poller:
    """Fetches one HTTP feed into the input stream (a thread)."""

    def __init__(self, spec: SourceSpec, broker, loop, spool: Path, interval: float, stats: dict):
        self.spec, self.broker, self.loop, self.interval = spec, broker, loop, interval
        self.id = source_id(spec)
        self.subject = input_subject(self.id)
        self.feed = HttpFeedSource(spec, spool)
        self.stats = stats
        self.stop = threading.Event()
        self.logged = 0          # the input stream's sequence of the last poll this poller logged
        self.thread = threading.Thread(target=self._run, name=f"poll {spec.url}", daemon=True)

    def start(self) -> "Poller":
        self.thread.start()
        return self

    def _last_logged(self):
        from nats.js.errors import NotFoundError

        try:
            m = call(self.loop, self.broker.js.get_last_msg(INPUT, self.subject))
        except NotFoundError:
            return None
        self.logged = m.seq
        h = m.headers or {}
        return int(h["X-Poll-Seq"]) if h.get("X-Poll-Seq", "").lstrip("-").isdigit() else None

    def _run(self) -> None:
        feed = self.feed
        try:
            feed.server_seq = self._last_logged()
        except Exception as e:  # noqa: BLE001 - the broker went away while starting
            log.warning("%s: cannot read the input log (%s)", self.spec.url, e)
            return
        last_body = None
        failed = Throttled()
        while not self.stop.is_set():
            t0 = time.monotonic()
            got = feed.fetch()
            again = False
            if got is not None and got[0]:
                body, server = got
                if server is None and body == last_body:
                    pass             # an unnumbered feed that has not changed
                elif server is not None and feed.server_seq is not None and server <= feed.server_seq:
                    pass             # a poll it had already (a feed that loops, or starts again): no hurry
                else:
                    last_body = body
                    feed.note_seq(server)
                    self.stats["skipped_polls"] = feed.skipped
                    msg_id = f"{self.id}#{server}" if server is not None else \
                        f"{self.id}#sha1:{hashlib.sha1(body).hexdigest()}"
                    headers = {"Nats-Msg-Id": msg_id, "Spatec-Received": repr(time.time())}
                    if server is not None:
                        headers["X-Poll-Seq"] = str(server)
                    try:
                        ack = call(self.loop, self.broker.js.publish(self.subject, body, headers=headers))
                    except Exception as e:  # noqa: BLE001 - the poll is asked for again
                        failed("%s: logging a poll failed (%s)", self.spec.url, type(e).__name__)
                        self.stop.wait(0.5)
                        continue
                    self.logged = ack.seq
                    feed.server_seq = server
                    self.stats["polls"] = self.stats.get("polls", 0) + 1
                    # a numbered feed may have more waiting: ask again at once (not after a repeat)
                    again = server is not None and not getattr(ack, "duplicate", False)
            if again:
                continue
            wait = self.interval - (time.monotonic() - t0)
            self.stop.wait(max(wait, 0.02))


def source_id(spec: SourceSpec) -> str:
    return f"{spec.type}@{spec.url}"


# ------------------------------------------------------------------------------ the detector's source

class LogSource:
    """A source's polls from the input stream, for :class:`LocalLive` (its offset: the stream
    sequence of the last poll used)."""

    def __init__(self, spec: SourceSpec, broker, loop, columns=None, gate=None):
        self.spec, self.broker, self.loop, self.columns = spec, broker, loop, columns
        self.gate = gate
        self.id = source_id(spec)
        self.subject = input_subject(self.id)
        self.fmt = spec.kind
        self.committed = 0
        self.next = 1
        self._failed = Throttled()

    def restore(self, offset) -> None:
        self.committed = int((offset or {}).get("seq", 0))
        self.next = self.committed + 1

    def offset(self) -> dict:
        return {"seq": self.committed}

    def pending(self) -> list:
        return []

    def poll(self) -> list[Item]:
        """The polls logged since the last call (up to :data:`POLLS_PER_BATCH`), as one item: the
        runner types them in one go (a backlog after a restart or a take-over is read fast)."""
        return self._merged(self._polls())

    def logged(self, offsets) -> list[Item]:
        """After a restart: the batches the batch log names (``offsets``: each batch's last
        stream sequence), read again from the stream and merged as :meth:`poll` merged them."""
        out = []
        for last in sorted(o for o in offsets if o >= self.next):
            polls = []
            while self.next <= last:
                got = self._polls(upto=last)
                if not got:
                    break
                polls += got
            out += self._merged(polls)
        return out

    def _merged(self, items: list) -> list[Item]:
        if len(items) <= 1:
            return items
        last = items[-1]
        return [Item(self.id, last.offset, last.name, last.arrived,
                     [b for it in items for b in it.batches], last.server)]

    def _polls(self, upto: int | None = None) -> list[Item]:
        from nats.js.errors import NotFoundError

        out = []
        for _ in range(POLLS_PER_BATCH):
            try:
                m = call(self.loop, self.broker.js.get_msg(INPUT, seq=self.next, subject=self.subject, next=True))
            except NotFoundError:
                break
            except Exception as e:  # noqa: BLE001 - the broker is away: try again next batch
                self._failed("%s: reading the input log failed (%s)", self.spec.url, type(e).__name__)
                time.sleep(0.2)
                break
            if upto is not None and m.seq > upto:
                break
            h = m.headers or {}
            received = float(h.get("Spatec-Received", time.time()))
            server = int(h["X-Poll-Seq"]) if h.get("X-Poll-Seq", "").isdigit() else None
            name = f"{self.spec.url}#{server if server is not None else m.seq}"
            item = Item(self.id, m.seq, name, received, [feed_batch(self.fmt, name, m.data, received, self.columns)],
                        server)
            if self.gate is not None:
                self.gate.saw(self.spec.type, item)
            out.append(item)
            self.next = m.seq + 1
        return out

    def commit(self, items) -> None:
        for it in items:
            if it.source == self.id and it.offset > self.committed:
                self.committed = it.offset

    def release(self, upto=None) -> None:
        pass


# ------------------------------------------------------------------------------ the detector's sink

class LogSink:
    """Publishes alerts to the alert stream (``Nats-Msg-Id`` = composite id) and waits for the
    server to have them; only then are they handled (and the batch may be committed)."""

    name = "nats-log"

    def __init__(self, broker, loop):
        self.broker, self.loop = broker, loop

    def already(self, known):
        return []

    def deliver(self, alerts: list[dict]) -> list[dict]:
        if not alerts:
            return []
        return call(self.loop, self._publish(alerts), timeout=120.0)

    async def _publish(self, alerts):
        """Every alert sent at once (JetStream's asynchronous publish: one reply subscription,
        no round trip between two), then every acknowledgement awaited."""
        js = self.broker.js
        now = repr(time.time())
        acks = []
        for a in alerts:
            acks.append(await js.publish_async(alert_subject(a["phrase"]),
                                               json.dumps(a, ensure_ascii=False, allow_nan=False).encode(),
                                               headers={"Nats-Msg-Id": a["id"], "Spatec-Decided": now}))
        await asyncio.wait_for(asyncio.gather(*acks), PUBLISH_TIMEOUT)
        return list(alerts)

    def close(self) -> None:
        pass


class Detector:
    """One source's poller and live runner, in a process of its own: it has a core of its own
    (the service's event loop never waits for it), and whatever happens to it cannot happen to
    the service; it logs the feed, reads its input from the log and publishes to the log, so
    it needs nothing but the broker. It writes what it has done to ``<runner>/status.json``
    (every quarter second) and, if it fails, why to ``<runner>/error.txt``; it dies with the
    service. It runs ``live["nice"]`` below the service's priority (``--detector-nice``, 10):
    on a machine whose cores are all busy, the matcher and the HTTP process that deliver
    what it has decided go first, and it still has every cycle they leave (at 100,000
    subscriptions on two cores, p99 from decision to SSE frame after the feed's first 3 s
    41-88 ms against 49-203 ms at the same priority, from the fix served to the frame 161-271
    against 182-421 ms: ``bench/bench_serve.py``, README)."""

    def __init__(self, compiled, spec: SourceSpec, broker_url: str, state: Path, lateness: int, trigger: float,
                 checkpoint_every: float | None, outage=None, crs: str | None = None, live: dict | None = None):
        import multiprocessing

        self.spec = spec
        self.dir = Path(state) / "runners" / token(source_id(spec))
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "error.txt").unlink(missing_ok=True)
        ctx = multiprocessing.get_context("spawn")
        self.stop = StopFlag(ctx)
        self.proc = ctx.Process(target=_detect, name=f"spatec detect {spec.url}", daemon=True,
                                args=(compiled, spec, broker_url, str(self.dir), lateness, trigger, checkpoint_every,
                                      outage, crs, live or {}, self.stop, str(Path(state) / "spool")))
        self.reported = False
        self.ok_since: float | None = None

    def start(self) -> "Detector":
        """Start it (from the event loop's thread: the process dies with the thread that made it)."""
        self.ok_since = time.monotonic()
        with starting_children():
            self.proc.start()
        return self

    def alive(self) -> bool:
        return self.proc.is_alive()

    @property
    def error(self) -> str | None:
        code = self.proc.exitcode
        if code is None or (code == 0 and not (self.dir / "error.txt").exists()):
            return None
        try:
            return (self.dir / "error.txt").read_text(encoding="utf-8").strip().splitlines()[-1]
        except (OSError, IndexError):
            return f"the detector's process exited ({code})"

    def status(self) -> dict:
        try:
            return json.loads((self.dir / "status.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def join(self, timeout: float) -> None:
        self.proc.join(timeout)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)


def _detect(compiled, spec, broker_url: str, directory: str, lateness: int, trigger: float, checkpoint_every,
            outage, crs, live: dict, stop, spool: str) -> None:
    """A source's process: an event loop thread for the broker, the poller that logs the feed,
    and — once the service's CRS is known (given, or in the ``spatec_meta`` bucket) — the
    local live runner over the log."""
    import logging as logging_
    import traceback

    from spatec.events.read import wanted_columns
    from spatec.runners.live_local import LocalLive
    from spatec.service.broker import Broker
    from spatec.service.procs import lower_priority, service_child
    from spatec.service.quality import OutageGate
    from spatec.sinks.alerts import DeliveredLog, SinkSet

    service_child("spatec-detect")
    live = dict(live)
    lower_priority(int(live.pop("nice", 0)))
    logging_.basicConfig(level=logging_.WARNING, format="spatec: %(name)s: %(message)s")
    d = Path(directory)
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="detector-loop", daemon=True).start()
    stats: dict = {}
    parts: dict = {"runner": None, "src": None, "poller": None}

    def status() -> None:
        runner, src, poller = parts["runner"], parts["src"], parts["poller"]
        doc = {"logged": poller.logged if poller is not None else 0, "pid": os.getpid(),
               "nice": os.getpriority(os.PRIO_PROCESS, 0), **stats}
        if runner is not None:
            st = runner.state
            doc.update({**dict(st.counts), "batches": st.batches, "watermark": st.watermark,
                        "offset": src.committed, "lateness_s": runner.lateness / 1e6})
        tmp = d / ".status.json.tmp"
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        os.replace(tmp, d / "status.json")

    def keep_writing():
        while not stop.wait(0.25):
            try:
                status()
            except (RuntimeError, OSError):      # the counts changed while read: next time
                pass

    try:
        broker = call(loop, Broker(broker_url).connect(setup=False))
        parts["poller"] = poller = Poller(spec, broker, loop, Path(spool), max(trigger, 0.05), stats).start()
        threading.Thread(target=keep_writing, name="detector-status", daemon=True).start()
        while crs is None and not stop.is_set():
            try:
                crs = call(loop, broker.meta.get("crs")).value.decode()
            except Exception:  # noqa: BLE001 - not decided yet: the service decides it from this log
                stop.wait(CRS_LOOK)
        if stop.is_set():
            poller.stop.set()
            return
        gate = OutageGate(compiled, outage) if outage is not None else None
        cols = wanted_columns(compiled.program.events[spec.type])
        parts["src"] = src = LogSource(spec, broker, loop, cols, gate)
        sinks = SinkSet([LogSink(broker, loop)], DeliveredLog(d / "delivered.jsonl"), gate=gate)
        parts["runner"] = runner = LocalLive(compiled, [src], sinks, d, d, lateness=lateness, crs=crs,
                                             checkpoint_every=checkpoint_every, **live)
        if gate is not None:
            gate.bind(runner, d)
        runner.run(trigger=trigger, stop=stop)
        poller.stop.set()
        poller.thread.join(15)
        status()
    except BaseException as e:  # noqa: BLE001 - written for the service to report
        (d / "error.txt").write_text(traceback.format_exc() + f"\n{type(e).__name__}: {e}\n", encoding="utf-8")
        logging_.getLogger("spatec.service").error("the detector of %s failed: %s: %s", spec.url, type(e).__name__, e)
        os._exit(1)


# ------------------------------------------------------------------------------ ownership

@dataclass
class _CrsSample:
    """The input log's first polls read so far, to choose the CRS from (:meth:`Engine.decide_crs`)."""

    seq: int = 1                  # the next log entry to read
    n: int = 0                    # polls read
    first_at: float | None = None
    lo: int | None = None         # the events' earliest and latest time, µs
    hi: int | None = None
    frames: dict = field(default_factory=dict)    # event type → the typed events
    seen: set = field(default_factory=set)


class Engine:
    """Which sources this process runs, kept in step with the ``spatec_owners`` bucket."""

    def __init__(self, compiled, sources: list[str], broker, state: Path, lateness: int, trigger: float,
                 checkpoint_every: float | None, member: str, outage=None, crs: str | None = None,
                 live: dict | None = None):
        self.compiled, self.broker, self.state = compiled, broker, Path(state)
        self.crs = crs or compiled.program.crs   # None: chosen from the input (decide_crs)
        self.specs = [parse_source(s) for s in sources]
        for sp in self.specs:
            if sp.kind == "dir":
                from spatec.errors import SpatecError

                raise SpatecError(f"--source {sp.url}: spatec serve polls HTTP feeds (sirivm+http://, "
                                  "gtfsrt+http://); a directory source is for spatec live")
        self.lateness, self.trigger, self.checkpoint_every = lateness, trigger, checkpoint_every
        self.member, self.outage = member, outage
        self.live = dict(live or {})
        self.owned: dict[str, Detector] = {}   # source id → its process
        self.revs: dict[str, int] = {}         # source id → the revision of its owner key
        self.lost: set = set()                 # sources whose key this process could not renew
        self._member_rev = 0
        self.failures: dict[str, dict] = {}    # source id → {"error", "restarts", "next"}
        self.stats: dict = {}
        self._sample = _CrsSample()            # the input log's first polls read so far
        self._deciding = asyncio.Lock()

    def fair_share(self, members: int) -> int:
        return -(-len(self.specs) // max(1, members))

    # -- the CRS
    async def decide_crs(self) -> str | None:
        """The service's metric CRS: given, or already decided (by any process), or chosen now
        from the input log's first polls when there are enough (None: not yet)."""
        if self.crs is not None:
            return self.crs
        async with self._deciding:
            return await self._decide_crs()

    async def _decide_crs(self) -> str | None:
        if self.crs is not None:
            return self.crs
        meta = self.broker.meta
        try:
            self.crs = (await meta.get("crs")).value.decode()
            return self.crs
        except Exception:  # noqa: BLE001 - not decided yet
            pass
        got = await asyncio.to_thread(self._sample_crs)
        if got is None:
            return None
        try:
            await meta.create("crs", got.encode())
        except Exception:  # noqa: BLE001 - another process decided first: its choice holds
            got = (await meta.get("crs")).value.decode()
        log.info("the service measures in %s (from its first input)", got)
        self.crs = got
        return got

    def _sample_crs(self) -> str | None:
        """The CRS chosen from the input log's first polls once there are enough (each poll read
        once: what was read before is kept), else None."""
        from nats.js.errors import NotFoundError

        from spatec.events.canonical import to_events
        from spatec.spatial.crs import choose_crs

        program = self.compiled.program
        s = self._sample
        loop = self.loop
        while s.n < CRS_POLLS:
            try:
                m = call(loop, self.broker.js.get_msg(INPUT, seq=s.seq, subject="spatec.input.>", next=True))
            except NotFoundError:
                break
            s.seq = m.seq + 1
            s.n += 1
            h = m.headers or {}
            received = float(h.get("Spatec-Received", time.time()))
            s.first_at = received if s.first_at is None else s.first_at
            sp = next((sp for sp in self.specs if input_subject(source_id(sp)) == m.subject), None)
            if sp is None:
                continue
            decl = program.events[sp.type]
            ev = to_events([feed_batch(sp.kind, m.subject, m.data, received)], decl, program.timezone, s.seen).events
            if len(ev):
                s.frames.setdefault(sp.type, []).append(ev)
                s.lo = int(ev["_hi"].min()) if s.lo is None else min(s.lo, int(ev["_hi"].min()))
                s.hi = int(ev["_hi"].max()) if s.hi is None else max(s.hi, int(ev["_hi"].max()))
        if not s.frames:
            return None
        enough = (s.hi - s.lo >= CRS_SPAN or s.n >= CRS_POLLS
                  or (s.first_at is not None and time.time() - s.first_at >= CRS_WAIT))
        if not enough:
            return None
        import pandas as pd

        return choose_crs(program, {t: pd.concat(fs, ignore_index=True) for t, fs in s.frames.items()})

    # -- ownership
    async def renew(self) -> None:
        """Renew this process's membership and the sources it owns (every second, in a task of
        its own: starting a runner, however slow, never lets an owner's key lapse)."""
        await self._heartbeat()
        for sid in list(self.owned):
            rev = self.revs.get(sid)
            if rev is None:
                continue
            try:
                self.revs[sid] = await kv_update(self.broker.js, OWNERS, f"src.{token(sid)}", self.member.encode(),
                                                 rev, OWNER_TTL)
            except Exception as e:  # noqa: BLE001 - lost it (lapsed, or taken by another process)
                if sid in self.owned:
                    log.warning("lost the source %s (%s); stopping its detector", sid, type(e).__name__)
                    self.revs.pop(sid, None)
                    self.lost.add(sid)

    async def step(self, loop) -> None:
        """Take or give up sources toward this process's fair share; start again a detector that
        failed; stop what was lost."""
        self.loop = loop
        kv = self.broker.owners
        for sid in list(self.lost):
            self.lost.discard(sid)
            if sid in self.owned:
                await self._release(sid, delete=False)
        members = await self._members()
        await self._supervise(loop)
        fair = self.fair_share(members)
        while len(self.owned) > fair:
            sid = sorted(self.owned)[-1]
            log.info("giving source %s to another process (fair share %d)", sid, fair)
            await self._release(sid, delete=True)
        if len(self.owned) >= fair:
            return
        for sp in self.specs:
            if len(self.owned) >= fair:
                break
            sid = source_id(sp)
            if sid in self.owned:
                continue
            try:
                self.revs[sid] = await kv.create(f"src.{token(sid)}", self.member.encode(), msg_ttl=OWNER_TTL)
            except Exception:  # noqa: BLE001 - another process owns it
                continue
            log.info("running source %s", sid)
            det = await self._detector(sp, loop, self.crs)
            if det is not None:
                det.start()
                self.owned[sid] = det
            else:
                self.revs.pop(sid, None)
                try:
                    await kv.delete(f"src.{token(sid)}")
                except Exception:  # noqa: BLE001 - gone already
                    pass

    async def _detector(self, sp: SourceSpec, loop, crs: str):
        sid = source_id(sp)
        try:
            return Detector(self.compiled, sp, self.broker.url, self.state, self.lateness, self.trigger,
                            self.checkpoint_every, self.outage, crs, self.live)
        except Exception as e:  # noqa: BLE001 - reported, tried again with backoff
            self._failed(sid, e)
            return None

    def _failed(self, sid: str, e) -> None:
        f = self.failures.setdefault(sid, {"restarts": 0})
        f["restarts"] += 1
        f["error"] = e if isinstance(e, str) else f"{type(e).__name__}: {e}"
        f["next"] = time.monotonic() + min(RESTART_BACKOFF[0] * 2 ** (f["restarts"] - 1), RESTART_BACKOFF[1])
        log.error("the detector of %s failed (%s); starting it again in %.0f s", sid, f["error"],
                  f["next"] - time.monotonic())

    async def _supervise(self, loop) -> None:
        """A source's process that is not running (it failed) is started again, from its
        checkpoint, after its backoff."""
        now = time.monotonic()
        if self.crs is None:
            await self.decide_crs()            # (the processes wait for it in the broker)
        for sid, det in list(self.owned.items()):
            if det.alive():
                if det.ok_since is not None and now - det.ok_since > 30 and sid in self.failures:
                    del self.failures[sid]             # running well again
                continue
            if not det.reported:
                det.reported = True
                self._failed(sid, det.error or f"its process exited ({det.proc.exitcode})")
            f = self.failures.get(sid)
            if f is not None and f["next"] > now:
                continue
            sp = next(sp for sp in self.specs if source_id(sp) == sid)
            new = await self._detector(sp, loop, self.crs)
            if new is not None and sid in self.owned and sid not in self.lost:
                new.start()
                self.owned[sid] = new

    async def _members(self) -> int:
        """How many processes are alive (each renews its ``member.`` key, in :meth:`renew`)."""
        if not self._member_rev:
            await self._heartbeat()
        try:
            keys = [k for k in await self.broker.owners.keys() if k.startswith("member.")]
        except Exception:  # noqa: BLE001 - no keys (cannot happen after the heartbeat, but harmless)
            return 1
        return max(1, len(keys))

    async def _heartbeat(self) -> None:
        """This process's ``member.`` key, made or renewed (one writer: :meth:`renew`, and
        :meth:`_members` once before the first renewal)."""
        kv = self.broker.owners
        key = f"member.{token(self.member)}"
        if self._member_rev:
            try:
                self._member_rev = await kv_update(self.broker.js, OWNERS, key, b"1", self._member_rev, OWNER_TTL)
                return
            except Exception:  # noqa: BLE001 - lapsed or rewritten: make it again below
                self._member_rev = 0
        try:
            self._member_rev = await kv.create(key, b"1", msg_ttl=OWNER_TTL)
        except Exception:  # noqa: BLE001 - exists (written before this process knew its revision)
            e = await kv.get(key)
            self._member_rev = await kv_update(self.broker.js, OWNERS, key, b"1", e.revision, OWNER_TTL)

    async def _release(self, sid: str, delete: bool) -> None:
        det = self.owned.pop(sid)
        self.revs.pop(sid, None)
        det.stop.set()
        if det.proc.pid is not None:
            await asyncio.to_thread(det.join, 30)
        if delete:
            try:
                await self.broker.owners.delete(f"src.{token(sid)}")
            except Exception:  # noqa: BLE001 - already gone
                pass

    async def stop(self) -> None:
        for sid in list(self.owned):
            await self._release(sid, delete=True)
        try:
            await self.broker.owners.delete(f"member.{token(self.member)}")
        except Exception:  # noqa: BLE001 - already gone
            pass

    def healthy(self) -> bool:
        """No detector failing (one still waiting for the CRS is not a failure)."""
        return not self.failures and all(det.alive() for det in self.owned.values())

    def status(self) -> dict:
        out = {"owned": sorted(self.owned), "crs": self.crs, **self.stats}
        now = time.monotonic()
        if self.failures:
            out["failures"] = {sid: {"error": f["error"], "restarts": f["restarts"],
                                     "retry_in_s": round(max(0.0, f["next"] - now), 1)}
                               for sid, f in self.failures.items()}
        for sid, det in self.owned.items():
            st = {"offset": 0, "watermark": None, "logged": 0, **det.status()}
            for k in ("polls", "skipped_polls"):
                if k in st:
                    out[k] = out.get(k, 0) + st.pop(k)
            out.setdefault("runners", {})[sid] = {**st, "running": det.alive(), "error": det.error}
        return out

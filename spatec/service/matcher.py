"""Matching: which subscriptions each alert of the log goes to, off the HTTP event loop.

:class:`Matching` is the work itself — the subscriptions' groups in a
:class:`~spatec.service.index.CoveringIndex`, and for each alert its values, hull and SSE
frame made once and the groups it matches. It has no I/O: the hub runs it in-process
(tests, benchmarks of the index) or, in the service, in a process of its own
(:class:`MatcherProcess`), so that matching 100,000 subscriptions costs the event loop that
serves HTTP and SSE nothing but appending the matched groups' entries.

The matcher process reads the alert log itself (an ordered consumer from the sequence the
hub asks for) and is told the subscriptions by the hub, in order, over a pipe:

- to it: ``("put", sid, version, phrase, where, area, certainly)``, ``("drop", sid)``,
  ``("crs", crs)``, and ``("ready",)`` after the subscriptions the hub had when it started
  the process (no alert is matched before: each of those is in its group from the first);
- from it: ``("in", [(sid, version, group id, from sequence, error), ...])`` — each
  subscription is in that group for every alert from that sequence on (the alerts before were matched
  without it: the hub reads them from the log for a reader that needs them), ``error``
  when the group has already failed; ``("alerts", [(seq, cid, data, frame, decided), ...],
  [(group id, reason), ...], [(group id, [row, ...]), ...], ([received, ...], sent))`` per
  batch of alerts (``cid`` None: an entry that is no alert, skipped; then each group with the
  rows it matched, in order: the hub appends a batch to a group's buffer at once, not alert
  by alert; last when each row came from the log and when the batch was sent, wall clock,
  for the hub's measures of where the time goes);
  ``("caught_up",)`` once the log as it was at its start has been matched.

Everything it says about a sequence comes after what it said about the sequences before
(one pipe, one writer), so the hub applies it as it comes. A group whose test raises is
reported with the reason and never tested again (the hub suspends its members). The
process dies with the service (``PR_SET_PDEATHSIG``, and a thread that looks at its
parent twice a second); the hub's supervisor starts it again, with backoff, from the hub's position.
"""
from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import re
import threading
import time
from collections import deque

import numpy as np
import shapely

from spatec.service.filters import STANDARD, field_types, values
from spatec.service.index import CoveringIndex
from spatec.service.procs import StopFlag, starting_children

log = logging.getLogger("spatec.service")

#: alerts matched at most before their results are sent (and commands looked at again): at
#: 100,000 subscriptions a batch of 32 costs about 5 ms, 0.16 ms an alert (256: 40 ms, 0.155 ms),
#: so the first alert of a detector's batch waits for 31 others at most, not for 255
BATCH = 32


class Matching:
    """The index and the per-alert work of matching (one process: no locks)."""

    def __init__(self, areas, program=None):
        self.areas, self.program = areas, program
        self.index = CoveringIndex()
        self._types: dict = {}

    def put(self, sid: str, phrase, flt, area) -> tuple[int, str | None]:
        """Put a subscription in its group: (group id — the hub knows groups by it —, the
        group's error if it has failed)."""
        g = self.index.add(sid, phrase, flt, area)
        return g.gid, g.error

    def drop(self, sid: str) -> None:
        self.index.remove(sid)

    def types_of(self, phrase) -> dict:
        t = self._types.get(phrase)
        if t is None:
            try:
                t = field_types(self.program, phrase) if self.program is not None else dict(STANDARD)
            except KeyError:       # a phrase of another version of the program: the standard fields
                t = dict(STANDARD)
            self._types[phrase] = t
        return t

    def match(self, data: str):
        """``(composite id, SSE frame, matched group ids, [(group id, reason)])`` of one log
        entry, or None if it is no alert. Raises only for an entry it cannot handle."""
        got = self.match_batch([data])[0]
        if isinstance(got, Exception):
            raise got
        return got

    def match_batch(self, datas: list) -> list:
        """:meth:`match` of many log entries at once (their hulls parsed and projected in one
        call each, the groups with an area matched for all of them together): per entry its
        result, None, or the exception it raised."""
        res: list = [None] * len(datas)
        todo = []                                 # (entry, alert, cid, frame, env)
        for k, data in enumerate(datas):
            try:
                alert = json.loads(data)
            except ValueError:
                continue
            if not isinstance(alert, dict):
                continue
            try:
                cid = str(alert.get("id", ""))
                todo.append((k, alert, cid, sse_frame(cid, data), values(alert, self.types_of(alert.get("phrase")))))
            except Exception as e:  # noqa: BLE001 - that entry's own
                res[k] = e
        if not todo:
            return res
        wkts = [w if isinstance(w, str) and w else None for w in (t[1].get("hull") for t in todo)]
        try:
            lonlats = shapely.from_wkt(np.array(wkts, dtype=object)).tolist()     # parsed once, in one call
        except Exception:  # noqa: BLE001 - one is no WKT: each alone
            lonlats = [self._lonlat(w, t[2]) for w, t in zip(wkts, todo)]
        hulls = self.areas.hulls_of(lonlats)
        items = [(t[1], t[4], _given(h), g) for t, h, g in zip(todo, hulls, lonlats)]
        got = self.index.match_many(items, ids=True)
        for (k, _, cid, frame, _), r in zip(todo, got):
            if isinstance(r, Exception):
                res[k] = r
                continue
            matched, failed = r
            bad = [(g.gid, f"its {'filter' if g.filter is not None else 'area'} failed on alert {cid}: "
                                 f"{g.error}") for g in failed]
            res[k] = (cid, frame, matched, bad)
        return res

    @staticmethod
    def _lonlat(w, cid):
        try:
            return shapely.from_wkt(w) if w is not None else None
        except Exception:  # noqa: BLE001 - a hull that is no WKT: a place unknown (REFERENCE decision 3)
            log.warning("alert %s: its hull is not WKT; matched as having no known place", cid)
            return None


def _given(loc):
    """A hull function that gives ``loc`` (or raises it: the exception making it raised)."""
    def hull():
        if isinstance(loc, Exception):
            raise loc
        return loc
    return hull


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class LongLived:
    """The collector kept off the index: what many subscriptions made at once (a start, a bulk
    create, every area projected again) stays for the service's life, so it is frozen
    (``gc.freeze``) and no full pass of the collector walks it again — at 100,000
    subscriptions a full pass holds the matcher 0.2-0.9 s, alerts waiting. Once many were
    dropped since, one full pass first (what they left in cycles is freed), then frozen again."""

    #: changes at once beyond which what they made is frozen
    MANY = 100

    def __init__(self):
        self.dropped = 0

    def changed(self, made: int, dropped: int, groups: int, ready: bool = False) -> None:
        self.dropped += dropped
        if self.dropped > max(10_000, groups // 10):
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.dropped = 0
        elif made > self.MANY or ready:
            gc.freeze()


def sse_frame(cid: str, data: str, event: str = "alert") -> bytes:
    """The SSE frame of an alert, byte for byte as sse-starlette encodes one (``id:``,
    ``event:``, ``data:`` lines, CRLF), made without its encoder: one a composite."""
    cid = _LINE_BREAK.sub("", cid)
    lines = "".join(f"data: {chunk}\r\n" for chunk in _LINE_BREAK.split(data))
    return f"id: {cid}\r\nevent: {event}\r\n{lines}\r\n".encode("utf-8")


# ------------------------------------------------------------------------------ the process

class MatcherProcess:
    """The matcher's process, seen from the hub: commands go out through a sender thread
    (the event loop never waits for the pipe), results come in through a reader thread
    onto ``inbox`` (an asyncio queue)."""

    def __init__(self, program, broker_url: str, crs: str, start_seq: int):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.stop = StopFlag(ctx)
        self.proc = ctx.Process(target=_run, name="spatec match", daemon=True,
                                args=(program, broker_url, crs, start_seq, child, self.stop, os.getpid()))
        self._child = child
        self._out: deque = deque()
        self._wake = threading.Event()
        self.inbox: asyncio.Queue | None = None
        self.closed = False

    def start(self) -> "MatcherProcess":
        """Start it (from the event loop's thread: the process dies with the thread that made it)."""
        loop = asyncio.get_running_loop()
        self.inbox = asyncio.Queue()
        with starting_children():
            self.proc.start()
        self._child.close()
        threading.Thread(target=self._send_loop, name="matcher-send", daemon=True).start()
        threading.Thread(target=self._recv_loop, args=(loop,), name="matcher-recv", daemon=True).start()
        return self

    def send(self, msg: tuple) -> None:
        self._out.append(msg)
        self._wake.set()

    def _send_loop(self) -> None:
        while not self.closed:
            self._wake.wait(0.5)
            self._wake.clear()
            batch = []
            while self._out:
                batch.append(self._out.popleft())
            if batch:
                try:
                    self.conn.send(batch)
                except (OSError, ValueError):      # the process is gone: the supervisor sees it
                    return

    def _recv_loop(self, loop) -> None:
        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError, ValueError):
                msg = None
            if msg is not None and msg[0] == "alerts":
                msg = msg + (time.time(),)         # (when it came: the hub's measure of the pipe)
            try:
                loop.call_soon_threadsafe(self.inbox.put_nowait, msg)
            except RuntimeError:                   # the loop is closed
                return
            if msg is None:
                return

    def alive(self) -> bool:
        return self.proc.is_alive()

    def close(self, timeout: float = 5.0) -> None:
        """Stop it (and wait for it: no orphan)."""
        self.closed = True
        self._wake.set()
        self.stop.set()
        self.proc.join(timeout)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        try:
            self.conn.close()
        except OSError:
            pass


def _run(program, broker_url: str, crs: str, start_seq: int, conn, stop, parent: int) -> None:
    """The matcher's process: commands from the pipe, the alert log from the broker."""
    import logging as logging_

    from spatec.service.areas import Areas
    from spatec.service.filters import Filters
    from spatec.service.procs import service_child
    from spatec.spatial.crs import Projector

    service_child("spatec-match")
    logging_.basicConfig(level=logging_.WARNING, format="spatec: %(name)s: %(message)s")

    def watchdog():
        """Whatever the loop waits for (a broker that died with the service): out when the
        service is gone, or 3 s after being told to stop."""
        told_at = None
        while True:
            if os.getppid() != parent:
                os._exit(0)
            if stop.is_set():
                told_at = told_at or time.monotonic()
                if time.monotonic() - told_at > 3.0:
                    os._exit(0)
            time.sleep(0.5)

    threading.Thread(target=watchdog, name="matcher-watchdog", daemon=True).start()
    areas = Areas(program, Projector(crs))
    filters = Filters(program)
    m = Matching(areas, program)
    commands: deque = deque()
    told = [False]            # the hub's subscriptions at its start received ("ready")
    compiled: dict = {}       # (phrase, where) → Filter

    def read_commands():
        while True:
            try:
                commands.extend(conn.recv())
            except (EOFError, OSError):
                stop.set()
                return

    threading.Thread(target=read_commands, name="matcher-commands", daemon=True).start()

    collector = LongLived()

    def apply(next_seq: int) -> None:
        made, joins = [], []      # the areas matched one by one to project (again), the joins
        changed, ready = 0, False   # areas put or projected again; the hub's "ready" among them
        puts = drops = 0
        while commands:
            cmd = commands.popleft()
            if cmd[0] == "put":
                puts += 1
                _, sid, ver, phrase, where, spec, certainly = cmd
                try:
                    flt = None
                    if where:                  # the same text, the same filter: compiled once
                        flt = compiled.get((phrase, where))
                        if flt is None:
                            flt = compiled[(phrase, where)] = filters.compile(phrase, where)
                            if len(compiled) > 100_000:
                                compiled.pop(next(iter(compiled)))
                    area = areas.area(spec, certainly) if spec is not None else None
                    gid, err = m.put(sid, phrase, flt, area)
                except Exception as e:  # noqa: BLE001 - it fits no more: the hub suspends it
                    m.drop(sid)
                    gid, err = 0, f"it no longer fits the program: {type(e).__name__}: {e}"
                else:
                    if area is not None:
                        changed += 1
                        if not m.index.in_table(sid):
                            made.append(area)
                joins.append((sid, ver, gid, next_seq, err))
            elif cmd[0] == "drop":
                drops += 1
                m.drop(cmd[1])
            elif cmd[0] == "crs":
                if cmd[1] != areas.proj.crs:   # every area projected again, in one call
                    areas.set_crs(cmd[1])
                    made.extend(m.index.loose_areas())
                    changed += len(m.index.groups)
            elif cmd[0] == "ready":
                told[0] = ready = True         # (the tables made now, before the first alert)
        # the areas matched one by one projected in one call; the area tables' rows by the
        # tables, at once: many once told all (or the telling ends), before the next alert
        if made:
            areas.prepare(made)
        if told[0] and (changed > 100 or ready):
            m.index.prepare()
        collector.changed(puts + changed, drops, len(m.index.groups), ready)
        if joins:
            conn.send(("in", joins))

    async def main():
        from nats.js.api import ConsumerConfig, DeliverPolicy

        from spatec.service.broker import ALERTS, Broker

        broker = await Broker(broker_url).connect(setup=False)
        info = await broker.js.stream_info(ALERTS)
        last_at_start = info.state.last_seq
        start = max(start_seq, info.state.first_seq or 1, 1)
        caught_up = start > last_at_start
        if caught_up:
            conn.send(("caught_up",))
        queue: deque = deque()
        ready = asyncio.Event()

        async def got(msg):
            queue.append((msg, time.time()))
            ready.set()

        cfg = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start)
        await broker.js.subscribe("spatec.alerts.>", cb=got, ordered_consumer=True, config=cfg,
                                  pending_msgs_limit=-1, pending_bytes_limit=-1)
        next_seq = start
        last_look = time.monotonic()
        while not stop.is_set():
            apply(next_seq)
            if not queue or not told[0]:
                ready.clear()
                try:
                    await asyncio.wait_for(ready.wait(), 0.02 if commands else 0.2)
                except asyncio.TimeoutError:
                    pass
                if time.monotonic() - last_look > 1.0:
                    last_look = time.monotonic()
                    if os.getppid() != parent:
                        return
                    if not caught_up:
                        info = await broker.js.stream_info(ALERTS)
                        if next_seq > info.state.last_seq:
                            caught_up = True
                            conn.send(("caught_up",))
                continue
            out, failed = [], []
            batch = []                             # (seq, data, decided)
            came = []                              # when each was received
            while queue and len(batch) < BATCH:
                msg, t_in = queue.popleft()
                seq = msg.metadata.sequence.stream
                if seq < next_seq:
                    continue
                next_seq = seq + 1
                batch.append((seq, msg.data.decode("utf-8", "replace"),
                              _float((msg.headers or {}).get("Spatec-Decided"))))
                came.append(t_in)
            try:
                results = m.match_batch([d for _, d, _ in batch])
            except Exception as e:  # noqa: BLE001 - never a crash (nor a crash loop on restart): entries skipped
                results = [e] * len(batch)
            groups: dict = {}                      # group id → the rows it matched
            for row, ((seq, data, decided), got_) in enumerate(zip(batch, results)):
                if isinstance(got_, Exception):
                    log.error("log entry %d could not be matched; skipped: %s: %s", seq, type(got_).__name__, got_)
                    got_ = None
                if got_ is None:
                    out.append((seq, None, data, b"", decided))
                    continue
                cid, frame, gids, bad = got_
                out.append((seq, cid, data, frame, decided))
                for gid in gids:
                    rows = groups.get(gid)
                    if rows is None:
                        groups[gid] = [row]
                    else:
                        rows.append(row)
                failed.extend(bad)
            conn.send(("alerts", out, failed, list(groups.items()), (came, time.time())))
            if not caught_up and next_seq > last_at_start:
                caught_up = True
                conn.send(("caught_up",))
            await asyncio.sleep(0)
        await broker.close()

    try:
        asyncio.run(main())
    except (BrokenPipeError, EOFError, KeyboardInterrupt):
        pass


def _float(v) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None

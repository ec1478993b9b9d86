"""Live detection in-process: polls and files in, alerts out, state checkpointed.

Each micro-batch (every ``trigger`` seconds, or as soon as input arrives when
``trigger`` is 0) takes what the sources have — a poll of each HTTP feed, the
new complete files of each directory — and:

1. ingests it: the same readers, typing, rejects and duplicate rule as a batch
   replay (:func:`spatec.events.canonical.to_events`, with the ids seen so far);
2. sets aside late events: ``hi`` below the watermark as it stood before the
   batch (written to ``<out>/late/<TYPE>.jsonl``, counted, never used);
3. advances the watermark: the largest ``hi`` seen in the whole input, less
   the allowed lateness (one for every key, SPEC §4);
4. routes each phrase's events to the run state of their key, as
   :func:`spatec.runtime.routing.partitions` does for a replay, but
   incrementally: events of a type without the key (broadcast) go to every key
   seen so far and are kept in a buffer, pruned by the watermark, that a key
   appearing later is given first;
5. runs :func:`spatec.automata.step.step` with the global watermark on every
   key that has new events, and on every key whose first pending decision
   the watermark has reached (a heap of decision times,
   :func:`spatec.automata.step.next_decision`: a key waiting for an absence
   is not stepped at every batch, only when its decision is due);
6. hands the decided composites, as alerts, to the sinks (each id once per
   sink, across restarts: see :mod:`spatec.sinks.alerts`); the hulls of a
   batch's composites are written as WKT all at once;
7. checkpoints (see below), then lets the sources forget what the checkpoint
   covers.

Checkpoints. The state (every run state, the watermark, the source offsets,
the ids seen) is saved at most every ``checkpoint_every`` seconds (default
:data:`CHECKPOINT_EVERY`, 10 s; 0: after every batch), incrementally: ``state.ck`` plus segments, a
full snapshot then one delta per save with only the keys changed (or
dropped) since the save before. With ``background`` (the default where
``os.fork`` exists) a save is written by a forked child process from a
copy-on-write image of the state, so the batches go on while it encodes and
syncs; the sources are released (spooled polls deleted) only once the save
that covers them has completed. Input between the last completed save and a
crash is read again after a restart (HTTP polls from the spool, files not
yet marked done): detection is at least once, delivery exactly once, as the
sinks skip every id already delivered. Late events and rejects of input read
twice may be written twice to their outputs.

A crash anywhere is safe: on restart the last completed save is loaded and
the input after it is read again; alerts already delivered are not
delivered again.

End of input. With ``until_idle`` the run stops once no input has arrived for
that many seconds, and treats the input as over: like a batch replay at its
end, the watermark goes to the last event time and everything is decided
except absences whose window reaches past it. Without it the run goes on
until stopped (SIGINT, SIGTERM), and leaves undecided what the watermark has
not decided yet.

Phrases over phrases (SPEC §8): the phrases run in flow order; the composites
a producer decides in a batch (or while its keys are pruned) are events for
the phrases that read them in the same batch, and each phrase is stepped with
its own watermark, the global one at most its producers' frontiers
(:class:`spatec.runtime.derived.LiveFlows`). The end of input decides as a
replay does (REFERENCE decision 33), so live and replay report the same set.

Broadcast events are kept while they could still be part of a composite with
an event to come: for the phrase's span bound plus its longest absence window
(all of them for a phrase without a span bound). A composite made only of
broadcast events for a key that first shows up after that is not reported
(a replay would report it: it sees every key at once).
"""
from __future__ import annotations

import gc
import logging
import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from spatec.automata.machine import NEG_INF
from spatec.events.read import wanted_columns, write_rejects
from spatec.feeds.ingest import MAX_AHEAD, live_events
from spatec.feeds.lateness import AutoLateness
from spatec.feeds.sources import DirSource, HttpFeedSource
from spatec.plan.program import Compiled
from spatec.runtime.checkpoint import (
    FULL_EVERY,
    BatchLog,
    Checkpoint,
    CheckpointError,
    LiveState,
    fingerprint,
)
from spatec.runtime.derived import LiveFlows, needed, unique_events
from spatec.runtime.events import to_evs
from spatec.runtime.keyed import (
    KeyedPhrase,
    KeyedState,
    advance,
    late_texts,
    prune_key,
    write_late,
)
from spatec.runtime.routing import route
from spatec.sinks.alerts import SinkSet, alert_json
from spatec.sinks.encoding import hulls_wkt
from spatec.spatial.crs import Projector, choose_crs
from spatec.storage import forked
from spatec.storage.watch import DirWatch

log = logging.getLogger("spatec.live")

HOUSEKEEPING_ROUND = 5.0       # s over which every key is pruned once (a slice of the keys per batch; 2 s cost
#                                a tenth of the CPU at 10,000 positions/s, for buffers a few entries shorter) ...
HOUSEKEEPING_SLICES = 20       # ... and in no fewer batches than this (no batch prunes more than 1/20)
HOUSEKEEPING_MIN = 16          # keys pruned per batch at least (while a round has keys left)
IDLE_WAIT = 0.002              # s between two looks at sources that had nothing (directories only)
IDLE_WAIT_HTTP = 0.05          # s between two polls of an HTTP feed that had nothing
# s between two checkpoint saves, by default. A save forks the runner: the fork and the
# copy-on-write faults of the batch after it cost the runner about 20 ms of CPU at 10,000
# positions/s (more as the state grows), two slow batches and the queue behind them; every
# 10 s that is a fraction of a percent of the alerts, every second a few percent (the p99). A
# crash reads again at most this much input (alerts are still delivered once).
CHECKPOINT_EVERY = 10.0
GC_FREEZE_EVERY = 1.0          # s between two freezes of what survived the young collections
# s between two full garbage collections (everything unfrozen): a safety net against cycles
# frozen with the state. At 10,000 positions/s one walks ~1.2 M objects in ~0.4 s (a stall of
# the batches) and has found no garbage (bench_live's workload, 15 s of input), so it is rare.
GC_FULL_EVERY = 3600.0


# ------------------------------------------------------------------------------ run-time events

# ------------------------------------------------------------------------------ hulls


# ------------------------------------------------------------------------------ the runner

class LocalLive:
    """The local live runner (``spatec live --runner local``).

    ``sources``: objects of :mod:`spatec.feeds.sources` (``poll``, ``pending``,
    ``commit``, ``restore``, ``offset``, ``id``, ``spec.type``); ``sinks``: a
    :class:`~spatec.sinks.alerts.SinkSet`; ``out``: where late events and
    rejects go (the checkpoint directory when there is one).
    ``checkpoint_every``: seconds between two saves (0: after every batch);
    ``background``: saves written by a forked child (default: where there is fork);
    ``freeze_gc``: keep the garbage collector off the run state (see :meth:`_gc`).
    """

    def __init__(self, compiled: Compiled, sources: Sequence, sinks: SinkSet, checkpoint: Path | None,
                 out: Path, lateness: int = 0, crs: str | None = None, phrases=None,
                 seen_retention: int | None = None, on_batch: Callable | None = None, max_polls: int = 1,
                 checkpoint_every: float | None = None, background: bool | None = None, freeze_gc: bool = True,
                 max_ahead: int | None = MAX_AHEAD, auto_lateness: bool = False):
        self.compiled, self.program = compiled, compiled.program
        self.sources, self.sinks = list(sources), sinks
        self.ck = Checkpoint(checkpoint)
        #: the batches made since the last save, replayed as they were after a crash
        self.batch_log = BatchLog(self.ck.dir) if self.ck.dir is not None else None
        self.out = Path(out)
        self.lateness = int(lateness)
        self.max_ahead = max_ahead          # µs an event may be ahead of its input's clock (spatec.feeds.ingest)
        self.auto_lateness = AutoLateness(self.lateness) if auto_lateness else None
        self.crs_override = crs
        # the phrases asked for and every phrase whose composites they read (in flow order);
        # only those asked for are reported
        run = needed(compiled, phrases)
        self.plans = [p for p in compiled.plans if p.name in run]
        self.report = {p.name for p in self.plans if not phrases or p.name in phrases}
        self.flows = LiveFlows(self.plans)
        self.seen_retention = seen_retention if seen_retention is not None else max(self.lateness, 600_000_000)
        self.on_batch = on_batch
        self.max_polls = max_polls
        self.checkpoint_every = CHECKPOINT_EVERY if checkpoint_every is None else float(checkpoint_every)
        self.background = forked.available() if background is None else bool(background and forked.available())
        self.phrases: list[KeyedPhrase] = []
        self.kstates: dict = {}                    # phrase → KeyedState (over the LiveState's keys)
        self.proj: Projector | None = None
        self._seen_set: set = set()
        self._seen_batches: deque = deque()       # (largest hi, ids) per batch, oldest first: pruning seen ids
        self._dirty, self._dropped, self._new_seen, self._full = set(), set(), {}, True
        self._saving = None                        # the save being written by a child
        self._last_save = -float("inf")
        self._hk: list | None = None               # housekeeping: the keys still to prune this round
        self._hk_total = self._hk_left = 0         # keys in this round; those not yet pruned
        self._hk_last = time.monotonic()           # when the last slice was pruned
        self.freeze_gc = freeze_gc
        self._last_freeze = self._last_full_gc = time.monotonic()
        self._young_gc_only = False                # in run(): only generation 0 collected automatically
        self.state = self._restore()

    # ------------------------------------------------------------------ state
    def _restore(self) -> LiveState:
        fp = fingerprint(self.compiled)
        st = self.ck.load()
        if st is None:
            st = LiveState(fp, self.lateness)
        elif st.fingerprint != fp:
            raise CheckpointError(f"{self.ck.state_path}: the checkpoint is of another program (or another "
                                  "version of it); use a new checkpoint directory")
        elif self.auto_lateness is not None:       # auto: where the run before had it grow to
            self.lateness = st.lateness = self.auto_lateness.value = max(st.lateness, self.lateness)
        elif st.lateness != self.lateness:
            log.warning("checkpoint lateness %s µs, run with %s µs: using the new value",
                        st.lateness, self.lateness)
            st.lateness = self.lateness
        for s in self.sources:
            s.restore(st.offsets.get(s.id))
        self._seen_set = set(st.seen)
        if st.seen:
            self._seen_batches.append((max(st.seen.values()), list(st.seen)))
        self._full = not st.segments
        if st.crs or self.crs_override or self.program.crs:
            self._start(st, st.crs or self.crs_override or self.program.crs)
        return st

    def _start(self, st: LiveState, crs: str) -> None:
        st.crs = crs
        self.proj = Projector(crs)
        self.phrases = [KeyedPhrase(p, self.program, self.proj) for p in self.plans]
        for ph in self.phrases:
            ph.consumed = ph.name in self.flows.consumed
            ks = self.kstates[ph.name] = KeyedState(st.keys.setdefault(ph.name, {}),
                                                    st.bcast.setdefault(ph.name, []), heap=[])
            for k, rs in ks.keys.items():
                if rs.pending:
                    ks.schedule(ph.am, k, rs)

    def _keyed(self, ph: KeyedPhrase) -> KeyedState:
        """The phrase's keyed state, over the LiveState's keys and broadcast buffer (which a
        restore or a test may have replaced)."""
        ks = self.kstates[ph.name]
        ks.keys, ks.bcast = self.state.keys[ph.name], self.state.bcast[ph.name]
        return ks

    @property
    def watermark(self) -> int:
        return self.state.watermark

    # ------------------------------------------------------------------ one micro-batch
    def pending(self) -> list:
        """Input fetched before a restart and not yet used (spooled HTTP polls)."""
        out = []
        for s in self.sources:
            out.extend(s.pending())
        return out

    def poll(self) -> list:
        """What the sources have now: up to ``max_polls`` polls of each HTTP feed (a feed that
        has several waiting, after a pause or a restart, is caught up in fewer batches)."""
        out = []
        for s in self.sources:
            for _ in range(max(1, self.max_polls)):
                got = s.poll()
                out.extend(got)
                if not got or not isinstance(s, HttpFeedSource):
                    break
        return out

    def process(self, items: Sequence, logged: bool = False) -> list[dict]:
        """Ingest ``items``, advance the watermark, run every phrase; deliver and checkpoint.
        Returns the alerts delivered (as JSON dicts). ``logged``: a batch of the batch log,
        replayed after a restart (:class:`~spatec.runtime.checkpoint.BatchLog`)."""
        st = self.state
        if self.batch_log is not None and items:
            if logged:
                self.batch_log.replayed()
            else:
                self.batch_log.append(items)
        t_start = time.time()
        frames, arrival = self._ingest(items)
        if self.proj is None:
            if not any(len(df) for df in frames.values()):
                self._commit(items)
                return []
            self._start(st, choose_crs(self.program, frames, self.crs_override))
        wm_prev = st.watermark
        if self.auto_lateness is not None and frames:     # --lateness auto (spatec.feeds.lateness)
            his = [df["_hi"].to_numpy() for df in frames.values() if len(df)]
            if his:
                self.lateness = st.lateness = self.auto_lateness.observe(
                    min(h.min() for h in his), None if st.max_hi == NEG_INF else st.max_hi)
        evs_by_type = {}
        for t, df in frames.items():
            if not len(df):
                continue
            late = df["_hi"].to_numpy() < wm_prev
            if late.any():
                self._write_late(t, df[late], wm_prev)
                df = df[~late]
            if not len(df):
                continue
            evs_by_type[t] = to_evs(df, self.program, self.proj)
            mx = int(df["_hi"].max())
            if mx > st.max_hi:
                st.max_hi = mx
        if st.max_hi != NEG_INF:
            st.watermark = max(st.watermark, st.max_hi - self.lateness)
        found: list = []
        self._run_phrases(evs_by_type, found, arrival)
        st.batches += 1
        delivered, trig = self._deliver(found)
        # after the delivery: pruning idle keys is not on the way of this batch's alerts
        more: list = []
        self._housekeeping(more)
        if more:
            d2, t2 = self._deliver(more)
            delivered, trig = delivered + d2, {**trig, **t2}
        self._commit(items)
        if self.on_batch is not None:
            self.on_batch(items, delivered, trig, t_start)
        self._gc()
        return delivered

    def _gc(self) -> None:
        """Keep Python's cyclic garbage collector off the run state: once a second, collect the
        young generations and freeze what survives (the run state is mostly Ev, PM and lists,
        freed by reference counting when dropped). Otherwise every full collection walks the
        whole state — hundreds of milliseconds at a million objects, on the way of some batch's
        alerts. A full collection of everything still runs every GC_FULL_EVERY seconds.

        During :meth:`run` only the youngest generation is collected automatically (a few
        hundred objects, each time: short-lived cycles); what outlives it is frozen here without
        a collection. Collecting a second's survivors (about a hundred thousand objects at
        10,000 positions/s, none of them garbage: the run state is acyclic) takes tens of
        milliseconds, on the way of the next batch."""
        if not self.freeze_gc:
            return
        now = time.monotonic()
        if now - self._last_freeze < GC_FREEZE_EVERY:
            return
        self._last_freeze = now
        if now - self._last_full_gc >= GC_FULL_EVERY:
            self._last_full_gc = now
            gc.unfreeze()
            t0 = time.perf_counter()
            found = gc.collect()
            log.info("full garbage collection: %d unreachable object(s) in %.0f ms", found,
                     (time.perf_counter() - t0) * 1e3)
        elif not self._young_gc_only:
            gc.collect(1)
        gc.freeze()

    def _ingest(self, items):
        st = self.state
        frames: dict[str, list] = {}
        arrival: dict[str, float] = {}
        new_ids, top = [], NEG_INF
        for it in items:
            decl = self.program.events.get(self._type_of(it))
            if decl is None:
                continue
            res = live_events(it, decl, self.program.timezone, self._seen_set, self.max_ahead)
            st.counts["read"] += res.read
            st.counts["used"] += res.used
            st.counts["rejected"] += res.rejected
            st.counts["duplicates"] += res.duplicates
            if res.rejected:
                write_rejects(res.rejects, self.out, append=True)
            if res.used:
                frames.setdefault(decl.name, []).append(res.events)
                ids, his = res.events["_id"].tolist(), res.events["_hi"].tolist()
                if self.on_batch is not None:   # (only on_batch is told when the input arrived)
                    arrival.update(dict.fromkeys(ids, it.arrived))
                pairs = dict(zip(ids, his))
                st.seen.update(pairs)
                self._new_seen.update(pairs)
                new_ids += ids
                top = max(top, max(his))
        if new_ids:
            self._seen_batches.append((top, new_ids))
        out = {t: (pd.concat(fs, ignore_index=True) if len(fs) > 1 else fs[0]) for t, fs in frames.items()}
        return out, arrival

    def _type_of(self, item) -> str:
        for s in self.sources:
            if s.id == item.source:
                return s.spec.type
        raise KeyError(item.source)

    def _run_phrases(self, evs_by_type, found, arrival, produced: dict | None = None) -> None:
        """Every phrase in flow order over a batch's events, each with its own watermark; the
        composites of a phrase that another reads are events for it (``produced``: producer →
        events already decided, by housekeeping)."""
        produced = dict(produced or {})
        for ph in self.phrases:
            wm = self.flows.watermark(ph.plan, self.state.watermark)
            evs = self.flows.inputs(ph.plan, produced, evs_by_type)
            by_key, bnew = route(ph.physical, evs)
            ks = self._keyed(ph)
            done = advance(ph, ks, by_key, bnew, wm, self.flows.moved(ph.plan, wm))
            self.flows.done(ph.plan, ph.am, ks.keys.values(), ks.bcast, wm)
            if done.events:
                produced[ph.name] = unique_events(produced.get(ph.name, []) + done.events)
            self._dirty.update((ph.name, k) for k in done.touched)
            if done.late:  # not expected: every key's watermark trails the phrase's
                self.state.counts["late"] += len(done.late)
                log.warning("%s: %d event(s) behind a key's watermark dropped", ph.name, len(done.late))
            self._collect(ph, done.found, found, arrival)

    def _collect(self, ph: KeyedPhrase, got, found, arrival) -> None:
        """Decided composites with their rows (the hull made later, for the whole batch at
        once), and when the input that completed each arrived."""
        for c, row in got:
            t = max((arrival[e.id] for e in c.events if e.id in arrival), default=None) if arrival else None
            found.append((ph, c, row, t))

    def _housekeeping(self, found) -> None:
        """Prune a slice of the keys (every key once a round: HOUSEKEEPING_ROUND seconds, or
        HOUSEKEEPING_SLICES batches if they are further apart; also keys without new input),
        drop empty ones; after a whole round, forget old ids."""
        st = self.state
        wm = st.watermark
        if wm == NEG_INF:
            return
        now = time.monotonic()
        if self._hk is None:
            self._hk = [(ph, k) for ph in self.phrases for k in st.keys[ph.name]]
            self._hk_total = self._hk_left = len(self._hk)
        # the round's share for the time since the last slice (a round takes HOUSEKEEPING_ROUND
        # seconds, however many batches come in that time), at most 1/HOUSEKEEPING_SLICES of it
        share = self._hk_total * (now - self._hk_last) / HOUSEKEEPING_ROUND
        self._hk_last = now
        n = max(HOUSEKEEPING_MIN, min(int(share) + 1, -(-self._hk_total // HOUSEKEEPING_SLICES)))
        # the round's keys are taken from the end of the list (not copied at each slice)
        end = self._hk_left
        self._hk_left = max(0, end - n)
        produced: dict = {}
        for ph, k in self._hk[self._hk_left:end]:
            # (the watermark the phrase was stepped with: the global one, at most its producers' frontiers)
            done = prune_key(ph, self._keyed(ph), k, self.flows.watermark(ph.plan, wm))
            self._collect(ph, done.found, found, {})
            if done.events:
                produced.setdefault(ph.name, []).extend(done.events)
            self._dirty.update((ph.name, k) for k in done.touched)
            for k in done.dropped:
                self._dirty.discard((ph.name, k))
                self._dropped.add((ph.name, k))
        if produced:
            # what pruning decided in a producer goes on to the phrases that read it now (it is
            # in no saved state otherwise)
            self._run_phrases({}, found, {}, {p: unique_events(e) for p, e in produced.items()})
        if self._hk_left:
            return
        self._hk = None
        cut = wm - self.seen_retention
        while self._seen_batches and self._seen_batches[0][0] < cut:
            for i in self._seen_batches.popleft()[1]:
                st.seen.pop(i, None)
                self._seen_set.discard(i)
        # a phrase over phrases decides by its own watermark, behind the global one
        cut = min((self.flows.stepped.get(ph.name, NEG_INF) - ph.retention for ph in self.phrases),
                  default=wm) - self.lateness - 600_000_000
        if all(ph.horizon is not None for ph in self.phrases) and cut > NEG_INF:
            self.sinks.log.prune(cut)

    def _deliver(self, found) -> tuple[list[dict], dict]:
        if len(self.report) < len(self.phrases):     # (producers run only for the phrases asked for)
            found = [f for f in found if f[0].name in self.report]
        if not found:
            return [], {}
        hulls = hulls_wkt([c for _, c, _, _ in found], self.proj)
        out, his, trig = [], {}, {}
        by_phrase: dict = {}
        for (ph, c, row, t), h in zip(found, hulls):
            if c.id in his:
                continue   # found by two keys (a composite of broadcast events only)
            row["hull"] = h
            his[c.id] = int(c.hi)
            trig[c.id] = t
            by_phrase.setdefault(ph.name, (ph, []))[1].append(row)
        for ph, rows in by_phrase.values():
            out.extend(alert_json(rows, ph.time_fields))
        self.state.counts["alerts"] += len(out)
        self.sinks.deliver(out, his)
        return out, trig

    # ------------------------------------------------------------------ checkpoints
    def _commit(self, items, force: bool = False, full: bool = False) -> None:
        for s in self.sources:
            s.commit(items)
        if self.ck.dir is None:
            for s in self.sources:
                s.release()
            return
        self._reap(block=force)
        if force or (self._saving is None and time.monotonic() - self._last_save >= self.checkpoint_every):
            self._save(background=self.background and not force, full=full)

    def _save(self, background: bool, full: bool = False) -> None:
        st = self.state
        full = full or self._full or (st.saves % FULL_EVERY == FULL_EVERY - 1) or not st.segments
        name, segments = self.ck.names(st, full)
        # the source offsets are taken only here, when a save needs them (a directory's is
        # the sorted list of every file done)
        offsets = {s.id: s.offset() for s in self.sources}
        st.offsets.update(offsets)
        undo = dirty, dropped, new_seen = (self._dirty, self._dropped, self._new_seen)
        self._dirty, self._dropped, self._new_seen, self._full = set(), set(), {}, False
        self._last_save = time.monotonic()
        logged = self.batch_log.processed() if self.batch_log is not None else 0   # the batches it covers
        if background:
            # the segment is made in the child, from the image of the state at the fork (the
            # keys changed since the last save: thousands a second at a high rate)
            pid = forked.fork_write(str(self.ck.dir), lambda: self.ck.write(
                st, self.ck.segment(st, dirty, dropped, new_seen, full), name, segments))
            self._saving = (pid, offsets, undo, st.segments, st.saves, logged)
            st.segments, st.saves = segments, st.saves + 1
            return
        seg = self.ck.segment(st, dirty, dropped, new_seen, full)
        try:
            self.ck.write(st, seg, name, segments)
        except BaseException:
            self._failed(undo)
            raise
        st.segments, st.saves = segments, st.saves + 1
        self._saved(offsets, logged)

    def _saved(self, offsets: dict, logged: int) -> None:
        """A save is on disk: release the input it covers, forget the batches it covers."""
        for s in self.sources:
            s.release(offsets.get(s.id))
        if self.batch_log is not None:
            self.batch_log.drop_first(logged)

    def _reap(self, block: bool = False) -> None:
        """Whether the save a child was writing has completed: then release what it covers."""
        if self._saving is None:
            return
        pid, offsets, undo, segments, saves, logged = self._saving
        ok = forked.reap(str(self.ck.dir), pid, block)
        if ok is None:
            return
        self._saving = None
        if ok:
            self._saved(offsets, logged)
            return
        log.warning("a checkpoint save failed; the next one is a full snapshot")
        self.state.segments, self.state.saves = segments, saves
        self._failed(undo)

    def _failed(self, undo) -> None:
        dirty, dropped, new_seen = undo
        self._dirty |= dirty
        self._dropped |= dropped
        self._new_seen = {**new_seen, **self._new_seen}
        self._full = True

    def checkpoint(self) -> None:
        """Save now, in this process (waiting for a save under way first)."""
        self._commit([], force=True)

    def _write_late(self, type_name: str, df: pd.DataFrame, wm: int) -> None:
        self.state.counts["late"] += write_late(self.out, type_name, late_texts(df, self.program, wm))

    # ------------------------------------------------------------------ end of input
    def finish(self) -> list[dict]:
        """The input is over: decide what the end of input decides (as a replay does at its end)."""
        st = self.state
        found: list = []
        if self.proj is not None and st.max_hi != NEG_INF:
            final_w = max(st.max_hi, st.watermark)
            produced: dict = {}
            for ph in self.phrases:
                ks = self._keyed(ph)
                # a phrase over phrases: at most its producers' frontiers at the end (decision 33)
                w = self.flows.watermark(ph.plan, final_w)
                by_key, bnew = route(ph.physical, self.flows.inputs(ph.plan, produced, {}))
                done = advance(ph, ks, by_key, bnew, w, True, final=True)
                self.flows.done(ph.plan, ph.am, ks.keys.values(), ks.bcast, w, final=True)
                if done.events:
                    produced[ph.name] = unique_events(done.events)
                self._collect(ph, done.found, found, {})
            st.watermark = final_w
        st.finished = True
        delivered, trig = self._deliver(found)
        self._commit([], force=True, full=True)
        if self.on_batch is not None:
            self.on_batch([], delivered, trig, time.time())
        return delivered

    # ------------------------------------------------------------------ the loop
    def run(self, trigger: float = 1.0, until_idle: float | None = None, stop: threading.Event | None = None,
            max_batches: int | None = None) -> Counter:
        """Micro-batches until ``stop`` is set, or (``until_idle``) no input for that long."""
        stop = stop or threading.Event()
        thresholds = gc.get_threshold()
        if self.freeze_gc:
            # the older generations are left to _gc (see there)
            gc.set_threshold(thresholds[0], 1 << 30, 1 << 30)
            self._young_gc_only = True
        # directories only: the wait between two looks ends as soon as a file lands in one
        dirs = [s.path for s in self.sources if isinstance(s, DirSource)]
        watch = DirWatch.of(dirs) if dirs and len(dirs) == len(self.sources) else None
        try:
            return self._loop(trigger, until_idle, stop, max_batches, watch)
        finally:
            gc.set_threshold(*thresholds)
            self._young_gc_only = False
            if watch is not None:
                watch.close()
            for s in self.sources:
                if isinstance(s, DirSource):
                    s.close()

    def _loop(self, trigger, until_idle, stop, max_batches, watch) -> Counter:
        items = self.pending()
        if self.batch_log is not None and self.batch_log.entries:
            # what the batches logged since the last save took, as each source has it again
            for s in self.sources:
                items += s.logged([o for e in self.batch_log.entries for src, o in e if src == s.id])
        if items:
            log.info("replaying %d spooled poll(s) from before the restart", len(items))
            for batch, logged in (self.batch_log.replay(items) if self.batch_log is not None else [(items, False)]):
                self.process(batch, logged=logged)
        last_input = time.monotonic()
        idle = IDLE_WAIT_HTTP if any(isinstance(s, HttpFeedSource) for s in self.sources) else IDLE_WAIT
        n = 0
        finished = False
        while not stop.is_set():
            t0 = time.monotonic()
            items = self.poll()
            if items:
                self.process(items)
                last_input = time.monotonic()
                n += 1
                if max_batches is not None and n >= max_batches:
                    break
            elif until_idle is not None and time.monotonic() - last_input >= until_idle:
                self.finish()
                finished = True
                break
            else:
                self._reap()
            wait = trigger - (time.monotonic() - t0)
            if not items:
                wait = max(wait, min(idle, until_idle or idle))
            if wait > 0:
                if watch is not None and wait <= idle:
                    watch.wait(wait)    # (a stop is seen within `idle`)
                else:
                    stop.wait(wait)
        if not finished and self.state.batches:
            self.checkpoint()       # a clean stop: save what the last batches did
        self.sinks.close()
        return self.state.counts

    def close(self) -> None:
        """Wait for a save under way (a runner that is dropped without ``run`` ending)."""
        self._reap(block=True)


def open_local(compiled: Compiled, sources: Sequence[str], sinks: Sequence[str], checkpoint: Path | None,
               out: Path | None = None, lateness: int = 0, crs: str | None = None, phrases=None,
               webhook: dict | None = None, on_batch: Callable | None = None, max_polls: int = 1,
               checkpoint_every: float | None = None, background: bool | None = None, **live) -> LocalLive:
    """A :class:`LocalLive` from ``TYPE=URL`` source specs and sink URLs (what the CLI takes); ``live``:
    more :class:`LocalLive` settings (``max_ahead``, ``auto_lateness``)."""
    from spatec.errors import SpatecError
    from spatec.feeds.sources import open_source, parse_source
    from spatec.sinks.alerts import DeliveredLog, open_sink

    program = compiled.program
    out = Path(out) if out is not None else Path(checkpoint)
    state_dir = Path(checkpoint) if checkpoint is not None else out
    srcs = []
    for s in sources:
        spec = parse_source(s)
        if spec.type not in program.events:
            known = ", ".join(sorted(program.events)) or "none"
            raise SpatecError(f"--source {s!r}: the program declares no event type {spec.type} (declared: {known})")
        srcs.append(open_source(spec, state_dir / "spool", wanted_columns(program.events[spec.type])))
    if not srcs:
        raise SpatecError("no input: give at least one --source TYPE=URL, e.g. BusGPS=sirivm+http://127.0.0.1:8080/")
    sink_set = SinkSet([open_sink(u, state_dir, **(webhook or {})) for u in sinks],
                       DeliveredLog(Path(checkpoint) / "delivered.jsonl" if checkpoint is not None else None))
    return LocalLive(compiled, srcs, sink_set, checkpoint, out, lateness=lateness, crs=crs, phrases=phrases,
                     on_batch=on_batch, max_polls=max_polls, checkpoint_every=checkpoint_every,
                     background=background, **live)

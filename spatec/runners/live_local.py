"""Live detection in-process: polls and files in, alerts out, state checkpointed.

Each micro-batch (every ``trigger`` seconds, or as soon as input arrives when
``trigger`` is 0) takes what the sources have — a poll of each HTTP feed, the
new complete files of each directory — and:

1. ingests it: the same readers, typing, rejects and duplicate rule as a batch
   replay (:func:`spatec.io.canonical.to_events`, with the ids seen so far);
2. sets aside late events: ``hi`` below the watermark as it stood before the
   batch (written to ``<out>/late/<TYPE>.jsonl``, counted, never used);
3. advances the watermark: the largest ``hi`` seen in the whole input, less
   the allowed lateness (one for every key, SPEC §4);
4. routes each phrase's events to the run state of their key, as
   :func:`spatec.runners.common.partitions` does for a replay, but
   incrementally: events of a type without the key (broadcast) go to every key
   seen so far and are kept in a buffer, pruned by the watermark, that a key
   appearing later is given first;
5. runs :func:`spatec.automata.step.step` with the global watermark on every
   key that has new events or waits for a decision;
6. hands the decided composites, as alerts, to the sinks (each id once per
   sink, across restarts: see :mod:`spatec.io.alert_sinks`);
7. saves the checkpoint — every run state, the watermark, the source offsets,
   the ids seen — atomically (temporary file, then rename), then lets the
   sources forget what was used.

A crash anywhere in that sequence is safe: on restart the state of the last
completed batch is loaded, HTTP polls fetched since are read again from the
spool and files not yet marked done are read again; alerts already delivered
are not delivered again.

End of input. With ``until_idle`` the run stops once no input has arrived for
that many seconds, and treats the input as over: like a batch replay at its
end, the watermark goes to the last event time and everything is decided
except absences whose window reaches past it. Without it the run goes on
until stopped (SIGINT, SIGTERM), and leaves undecided what the watermark has
not decided yet.

Broadcast events are kept while they could still be part of a composite with
an event to come: for the phrase's span bound plus its longest absence window
(all of them for a phrase without a span bound). A composite made only of
broadcast events for a key that first shows up after that is not reported
(a replay would report it: it sees every key at once).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from spatec.automata.machine import NEG_INF, RunState, build
from spatec.automata.step import step
from spatec.io.alert_sinks import SinkSet, alert_json
from spatec.io.canonical import to_events
from spatec.io.feeds import HttpFeedSource
from spatec.io.sources import write_rejects
from spatec.runners.common import (Compiled, choose_crs, event_order, keyed_types, output_row,
                                   phrase_types, time_fields, to_evs)
from spatec.spatial import stamps as S
from spatec.spatial.crs import Projector

log = logging.getLogger("spatec.live")

CHECKPOINT_VERSION = 1
STATE_FILE = "state.pkl"
HOUSEKEEPING_EVERY = 20        # batches between full prunes of idle keys, seen ids and the delivered log


def fingerprint(compiled: Compiled) -> str:
    """What a checkpoint's run states depend on: the plans of the program's phrases."""
    return hashlib.sha256(repr(compiled.plans).encode("utf-8")).hexdigest()[:16]


@dataclass
class LiveState:
    """Everything a live run carries from one micro-batch to the next (pickled as the checkpoint)."""

    fingerprint: str
    lateness: int
    crs: str | None = None
    watermark: int = NEG_INF
    max_hi: int = NEG_INF
    keys: dict = field(default_factory=dict)       # phrase → {key → RunState}
    bcast: dict = field(default_factory=dict)      # phrase → [Ev] (broadcast events still useful)
    offsets: dict = field(default_factory=dict)    # source id → offset
    seen: dict = field(default_factory=dict)       # event id → hi (duplicates across polls)
    counts: Counter = field(default_factory=Counter)
    batches: int = 0
    finished: bool = False
    segments: list = field(default_factory=list)   # the checkpoint's segment files, oldest first
    version: int = CHECKPOINT_VERSION


def _disc(x, y, r):
    return S.Loc.disc(x, y, r)


class _StatePickler(pickle.Pickler):
    """Discs (every GPS fix's stamp) as three floats, not as a WKB geometry: the state of a
    live run is mostly discs, and it is pickled after every batch."""

    def reducer_override(self, obj):
        if type(obj) is S.Loc and obj._xy is not None:
            return _disc, (obj._xy[0], obj._xy[1], obj.r)
        return NotImplemented


class Checkpoint:
    """A live run's directory: the run state, ``delivered.jsonl``, ``spool/``, ``late/``, ``_rejects/``.

    The run state is ``state.pkl`` (watermark, offsets, counters, broadcast
    buffers, the list of segments) plus ``segments/<n>.pkl``: a full snapshot
    of every key's run state and the ids seen, then one delta per batch with
    only the keys that batch changed and the ids it added. A save writes its
    segment, then ``state.pkl`` through a temporary file and a rename: the
    rename is the commit, and segments no ``state.pkl`` names are left-overs
    of a crash, deleted. A full snapshot is taken at every housekeeping, which
    also bounds the number of deltas.
    """

    def __init__(self, directory: Path | None):
        self.dir = Path(directory) if directory is not None else None
        if self.dir is not None:
            (self.dir / "segments").mkdir(parents=True, exist_ok=True)

    @property
    def state_path(self) -> Path | None:
        return self.dir / STATE_FILE if self.dir is not None else None

    def load(self) -> LiveState | None:
        p = self.state_path
        if p is None or not p.exists():
            return None
        with open(p, "rb") as f:
            st = pickle.load(f)
        if getattr(st, "version", None) != CHECKPOINT_VERSION:
            raise ValueError(f"{p}: checkpoint version {getattr(st, 'version', None)}, "
                             f"this spatec writes {CHECKPOINT_VERSION}")
        for name in st.segments:
            with open(self.dir / "segments" / name, "rb") as f:
                seg = pickle.load(f)
            if seg["full"]:
                st.keys = {ph: {} for ph in seg["phrases"]}
                st.seen = {}
            for (ph, k), rs in seg["keys"].items():
                st.keys.setdefault(ph, {})[k] = rs
            st.seen.update(seg["seen"])
        self._clean(st.segments)
        return st

    def save(self, st: LiveState, dirty=(), new_seen=None, full: bool = False) -> None:
        if self.dir is None:
            return
        if full or not st.segments:
            seg = {"full": True, "phrases": list(st.keys),
                   "keys": {(ph, k): rs for ph, ks in st.keys.items() for k, rs in ks.items()},
                   "seen": st.seen}
        else:
            seg = {"full": False, "keys": {(ph, k): st.keys[ph][k] for ph, k in dirty if k in st.keys[ph]},
                   "seen": new_seen or {}}
        name = f"{st.batches:012d}-{len(st.segments)}.pkl"
        _atomic_pickle(self.dir / "segments" / name, seg)
        segments = [name] if seg["full"] else [*st.segments, name]
        keys, seen, st.keys, st.seen, st.segments = st.keys, st.seen, {}, {}, segments
        try:
            _atomic_pickle(self.state_path, st)
        finally:
            st.keys, st.seen = keys, seen
        self._clean(segments)

    def _clean(self, keep) -> None:
        keep = set(keep)
        for q in (self.dir / "segments").iterdir():
            if q.name not in keep:
                q.unlink(missing_ok=True)


def _atomic_pickle(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        _StatePickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class _Phrase:
    """One phrase's automaton and how its events are routed to keys."""

    def __init__(self, plan, program, proj):
        self.plan = plan
        self.name = plan.name
        self.am = build(plan, program, proj)
        self.types = phrase_types(plan, program)
        self.keyed = keyed_types(plan, program, self.types)
        self.key = plan.key if self.keyed else ()
        self.time_fields = time_fields(plan)
        am = self.am
        span = am.S
        stamp = am.type_len.get(None) or 0
        # how long after the watermark an event can still be part of a composite to come
        self.horizon = None if span is None else span + am.max_window + 2 * stamp + am.G
        # how far behind the deciding watermark a decided composite's hi can be
        self.retention = (span or 0) + am.max_window + 2 * stamp + am.G


class LocalLive:
    """The local live runner (``spatec live --runner local``).

    ``sources``: objects of :mod:`spatec.io.feeds` (``poll``, ``pending``,
    ``commit``, ``restore``, ``offset``, ``id``, ``spec.type``); ``sinks``: a
    :class:`~spatec.io.alert_sinks.SinkSet`; ``out``: where late events and
    rejects go (the checkpoint directory when there is one).
    """

    def __init__(self, compiled: Compiled, sources: Sequence, sinks: SinkSet, checkpoint: Path | None,
                 out: Path, lateness: int = 0, crs: str | None = None, phrases=None,
                 seen_retention: int | None = None, on_batch: Callable | None = None, max_polls: int = 1):
        self.compiled, self.program = compiled, compiled.program
        self.sources, self.sinks = list(sources), sinks
        self.ck = Checkpoint(checkpoint)
        self.out = Path(out)
        self.lateness = int(lateness)
        self.crs_override = crs
        self.plans = [p for p in compiled.plans if not phrases or p.name in phrases]
        self.seen_retention = seen_retention if seen_retention is not None else max(self.lateness, 600_000_000)
        self.on_batch = on_batch
        self.max_polls = max_polls
        self.phrases: list[_Phrase] = []
        self.proj: Projector | None = None
        self._seen_set: set = set()
        self._dirty, self._new_seen, self._full = set(), {}, True
        self.state = self._restore()

    # ------------------------------------------------------------------ state
    def _restore(self) -> LiveState:
        fp = fingerprint(self.compiled)
        st = self.ck.load()
        if st is None:
            st = LiveState(fp, self.lateness)
        elif st.fingerprint != fp:
            raise ValueError(f"{self.ck.state_path}: the checkpoint is of another program (or another "
                             "version of it); use a new checkpoint directory")
        elif st.lateness != self.lateness:
            log.warning("checkpoint lateness %s µs, run with %s µs: using the new value",
                        st.lateness, self.lateness)
            st.lateness = self.lateness
        for s in self.sources:
            s.restore(st.offsets.get(s.id))
        self._seen_set = set(st.seen)
        if st.crs or self.crs_override or self.program.crs:
            self._start(st, st.crs or self.crs_override or self.program.crs)
        return st

    def _start(self, st: LiveState, crs: str) -> None:
        st.crs = crs
        self.proj = Projector(crs)
        self.phrases = [_Phrase(p, self.program, self.proj) for p in self.plans]
        for ph in self.phrases:
            st.keys.setdefault(ph.name, {})
            st.bcast.setdefault(ph.name, [])

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

    def process(self, items: Sequence) -> list[dict]:
        """Ingest ``items``, advance the watermark, run every phrase; deliver and checkpoint.
        Returns the alerts delivered (as JSON dicts)."""
        st = self.state
        t_start = time.time()
        self._dirty, self._new_seen, self._full = set(), {}, False
        frames, arrival = self._ingest(items)
        if self.proj is None:
            if not any(len(df) for df in frames.values()):
                self._commit(items)
                return []
            self._start(st, choose_crs(self.program, frames, self.crs_override))
        wm_prev = st.watermark
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
            evs = to_evs(df, self.program, self.proj)
            evs_by_type[t] = evs
            mx = int(df["_hi"].max())
            if mx > st.max_hi:
                st.max_hi = mx
        if st.max_hi != NEG_INF:
            st.watermark = max(st.watermark, st.max_hi - self.lateness)
        alerts, his, trig = [], {}, {}
        for ph in self.phrases:
            self._run_phrase(ph, evs_by_type, wm_prev, alerts, his, trig, arrival)
        st.batches += 1
        if st.batches % HOUSEKEEPING_EVERY == 0:
            self._housekeeping(alerts, his, trig)
        delivered = self._deliver(alerts, his)
        self._commit(items)
        if self.on_batch is not None:
            self.on_batch(items, delivered, trig, t_start)
        return delivered

    def _ingest(self, items):
        st = self.state
        frames: dict[str, list] = {}
        arrival: dict[str, float] = {}
        for it in items:
            decl = self.program.events.get(self._type_of(it))
            if decl is None:
                continue
            res = to_events(it.batches, decl, self.program.timezone, self._seen_set)
            st.counts["read"] += res.read
            st.counts["used"] += res.used
            st.counts["rejected"] += res.rejected
            st.counts["duplicates"] += res.duplicates
            if res.rejected:
                write_rejects(res.rejects, self.out, append=True)
            if res.used:
                frames.setdefault(decl.name, []).append(res.events)
                for i, hi in zip(res.events["_id"].tolist(), res.events["_hi"].tolist()):
                    arrival[i] = it.arrived
                    st.seen[i] = self._new_seen[i] = hi
        out = {t: (pd.concat(fs, ignore_index=True) if len(fs) > 1 else fs[0]) for t, fs in frames.items()}
        return out, arrival

    def _type_of(self, item) -> str:
        for s in self.sources:
            if s.id == item.source:
                return s.spec.type
        raise KeyError(item.source)

    def _run_phrase(self, ph: _Phrase, evs_by_type, wm_prev, alerts, his, trig, arrival) -> None:
        st = self.state
        wm = st.watermark
        states = st.keys[ph.name]
        by_key: dict = {}
        bnew = []
        for t in ph.types:
            for ev in evs_by_type.get(t, ()):
                if not ph.key:
                    by_key.setdefault((), []).append(ev)
                elif t in ph.keyed:
                    k = tuple(ev.attrs.get(a) for a in ph.key)
                    if any(v is None for v in k):
                        continue   # no key value: relates to no other event (as in a replay)
                    by_key.setdefault(k, []).append(ev)
                else:
                    bnew.append(ev)
        buf = st.bcast[ph.name]
        todo = set(by_key)
        if bnew:
            todo |= set(states)
        if wm != wm_prev:
            todo |= {k for k, s in states.items() if s.pending}
        for k in todo:
            rs = states.get(k)
            evs = list(by_key.get(k, ()))
            if rs is None:
                rs = states[k] = RunState()
                evs = list(buf) + evs
            evs += bnew
            evs.sort(key=event_order)
            npending = len(rs.pending)
            got, late = step(ph.am, rs, evs, watermark=wm)
            if evs or got or len(rs.pending) != npending:
                # a key only given a newer watermark need not be saved: its old one is behind
                # the global watermark, which is what late input is judged by
                self._dirty.add((ph.name, k))
            if late:  # not expected: every key's watermark trails the global one
                st.counts["late"] += len(late)
                log.warning("%s: %d event(s) behind a key's watermark dropped", ph.name, len(late))
            self._collect(ph, rs, got, alerts, his, trig, arrival)
        if bnew:
            buf.extend(bnew)
        if buf and ph.horizon is not None:
            cut = wm - ph.horizon
            buf[:] = [e for e in buf if e.hi >= cut]

    def _collect(self, ph: _Phrase, rs: RunState, got, alerts, his, trig, arrival) -> None:
        for c in got:
            if c.id in his:
                continue   # found by two keys (a composite of broadcast events only)
            row = output_row(ph.am, c, self.proj, rs)
            alerts.append((ph, row))
            his[c.id] = int(c.hi)
            trig[c.id] = max((arrival[e.id] for e in c.events if e.id in arrival), default=None)

    def _housekeeping(self, alerts, his, trig) -> None:
        """Prune every key (also those without new input), drop empty ones, forget old ids."""
        st = self.state
        wm = st.watermark
        if wm == NEG_INF:
            return
        self._full = True
        for ph in self.phrases:
            states = st.keys[ph.name]
            for k, rs in list(states.items()):
                rs.since_prune = 1 << 30   # let step prune this key now
                got, _ = step(ph.am, rs, [], watermark=wm)
                self._collect(ph, rs, got, alerts, his, trig, {})
                if ph.keyed == ph.types and rs.size() == 0:
                    # a fresh state is the same as an empty one (no broadcast events to give it again)
                    del states[k]
        cut = wm - self.seen_retention
        old = [i for i, hi in st.seen.items() if hi < cut]
        for i in old:
            del st.seen[i]
            self._seen_set.discard(i)
        retention = max((ph.retention for ph in self.phrases), default=0) + self.lateness + 600_000_000
        if all(ph.horizon is not None for ph in self.phrases):
            self.sinks.log.prune(wm - retention)

    def _deliver(self, alerts, his) -> list[dict]:
        if not alerts:
            return []
        out = []
        by_phrase: dict = {}
        for ph, row in alerts:
            by_phrase.setdefault(ph.name, (ph, []))[1].append(row)
        for ph, rows in by_phrase.values():
            out.extend(alert_json(rows, ph.time_fields))
        self.state.counts["alerts"] += len(out)
        self.sinks.deliver(out, his)
        return out

    def _commit(self, items) -> None:
        st = self.state
        for s in self.sources:
            s.commit(items)
            st.offsets[s.id] = s.offset()
        self.ck.save(st, self._dirty, self._new_seen, self._full)
        for s in self.sources:
            s.release()

    def _write_late(self, type_name: str, df: pd.DataFrame, wm: int) -> None:
        from spatec.io.sinks import _plain
        from spatec.io.timefmt import format_time

        self.state.counts["late"] += len(df)
        path = self.out / "late" / f"{type_name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        cols = [c for c in df.columns if c not in ("_type",)]
        with open(path, "a", encoding="utf-8") as f:
            for rec in df[cols].to_dict("records"):
                rec = {k: _plain(v) for k, v in rec.items()}
                for c in ("_t", "_lo", "_hi"):
                    rec[c] = format_time(int(rec[c]))
                rec["watermark"] = format_time(int(wm))
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    # ------------------------------------------------------------------ end of input
    def finish(self) -> list[dict]:
        """The input is over: decide what the end of input decides (as a replay does at its end)."""
        st = self.state
        alerts, his, trig = [], {}, {}
        if self.proj is not None and st.max_hi != NEG_INF:
            final_w = max(st.max_hi, st.watermark)
            for ph in self.phrases:
                for k, rs in st.keys[ph.name].items():
                    got, _ = step(ph.am, rs, [], watermark=final_w, final=True)
                    self._collect(ph, rs, got, alerts, his, trig, {})
            st.watermark = final_w
        st.finished = True
        delivered = self._deliver(alerts, his)
        self.ck.save(st, full=True)
        if self.on_batch is not None:
            self.on_batch([], delivered, trig, time.time())
        return delivered

    # ------------------------------------------------------------------ the loop
    def run(self, trigger: float = 1.0, until_idle: float | None = None, stop: threading.Event | None = None,
            max_batches: int | None = None) -> Counter:
        """Micro-batches until ``stop`` is set, or (``until_idle``) no input for that long."""
        stop = stop or threading.Event()
        items = self.pending()
        if items:
            log.info("replaying %d spooled poll(s) from before the restart", len(items))
            self.process(items)
        last_input = time.monotonic()
        n = 0
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
                break
            wait = trigger - (time.monotonic() - t0)
            if not items:
                wait = max(wait, min(0.05, until_idle or 0.05))
            if wait > 0:
                stop.wait(wait)
        self.sinks.close()
        return self.state.counts


def open_local(compiled: Compiled, sources: Sequence[str], sinks: Sequence[str], checkpoint: Path | None,
               out: Path | None = None, lateness: int = 0, crs: str | None = None, phrases=None,
               webhook: dict | None = None, on_batch: Callable | None = None, max_polls: int = 1) -> LocalLive:
    """A :class:`LocalLive` from ``TYPE=URL`` source specs and sink URLs (what the CLI takes)."""
    from spatec.errors import SpatecError
    from spatec.io.alert_sinks import DeliveredLog, open_sink
    from spatec.io.feeds import open_source, parse_source

    program = compiled.program
    out = Path(out) if out is not None else Path(checkpoint)
    state_dir = Path(checkpoint) if checkpoint is not None else out
    srcs = []
    for s in sources:
        spec = parse_source(s)
        if spec.type not in program.events:
            known = ", ".join(sorted(program.events)) or "none"
            raise SpatecError(f"--source {s!r}: the program declares no event type {spec.type} (declared: {known})")
        srcs.append(open_source(spec, state_dir / "spool", [a.name for a in program.events[spec.type].attrs]))
    if not srcs:
        raise SpatecError("no input: give at least one --source TYPE=URL, e.g. BusGPS=sirivm+http://127.0.0.1:8080/")
    sink_set = SinkSet([open_sink(u, state_dir, **(webhook or {})) for u in sinks],
                       DeliveredLog(Path(checkpoint) / "delivered.jsonl" if checkpoint is not None else None))
    return LocalLive(compiled, srcs, sink_set, checkpoint, out, lateness=lateness, crs=crs, phrases=phrases,
                     on_batch=on_batch, max_polls=max_polls)

"""One keyed runtime: a phrase's events routed to keys, each key's run state stepped
with the global watermark, decisions fired when they are due, broadcast buffers
kept and pruned. Every live runner uses it: the local one with all keys in a dict,
the Spark one with a state group's keys in a store that decodes a key's state
when it is touched (:class:`KeyedState` takes any mutable mapping).

A batch (:func:`advance`) steps:

- every key with new events, in event-time order (a key seen for the first time
  is given the broadcast events still buffered first);
- every key when broadcast events arrive (types without the phrase's key);
- every key whose first pending decision the new watermark has reached (a heap
  of decision times, :func:`spatec.automata.step.next_decision`: a key waiting
  for an absence is not stepped at every batch, only when its decision is due).

Broadcast events are kept while they could still be part of a composite with an
event to come: for the phrase's span bound plus its longest absence window (all
of them for a phrase without a span bound).

Late events (behind the watermark as it stood before their batch) never reach
:func:`advance`: the runner sets them aside at ingest and writes them with
:func:`write_late`, one record format for every runner.
"""
from __future__ import annotations

import heapq
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import MutableMapping

from spatec.automata.machine import NEG_INF, RunState, build
from spatec.automata.step import next_decision, step
from spatec.events.timefmt import format_time
from spatec.runtime.derived import derived_event
from spatec.runtime.events import event_order
from spatec.runtime.rows import output_row, time_fields

_COUNTER = itertools.count()


class KeyedPhrase:
    """One phrase at run time, shared by all its keys: the automaton bound to a projection,
    its routing (``physical``) and the bounds that prune what is kept."""

    def __init__(self, plan, program, proj):
        self.plan = plan
        self.name = plan.name
        self.physical = plan.physical
        self.am = build(plan, program, proj)
        self.proj = proj
        self.time_fields = time_fields(plan)
        #: another phrase reads its composites (SPEC §8): steps also hand them on as events
        self.consumed = False
        #: every type the phrase reads is keyed: an empty state is the same as a fresh one
        self.all_keyed = not self.physical.broadcast
        am = self.am
        span = am.S
        stamp = am.type_len.get(None) or 0
        #: how long after the watermark an event can still be part of a composite to come
        self.horizon = None if span is None else span + am.max_window + 2 * stamp + am.G
        #: how far behind the deciding watermark a decided composite's hi can be
        self.retention = (span or 0) + am.max_window + 2 * stamp + am.G


@dataclass
class KeyedState:
    """The run state of some keys of one phrase: each key's :class:`RunState`, the broadcast
    events still useful, and the keys waiting for a decision (key → the watermark that
    decides the first, with a heap of them to find the due ones)."""

    keys: MutableMapping = field(default_factory=dict)
    bcast: list = field(default_factory=list)
    due: dict = field(default_factory=dict)
    heap: list | None = None

    def schedule(self, am, k, rs: RunState) -> None:
        """Note when key ``k`` next has something to decide."""
        d = next_decision(am, rs)
        if d is None:
            self.due.pop(k, None)
        elif self.due.get(k) != d:
            self.due[k] = d
            if self.heap is not None:
                heapq.heappush(self.heap, (d, next(_COUNTER), k))

    def pop_due(self, wm: int) -> set:
        """Keys whose first pending decision the watermark ``wm`` has reached."""
        if self.heap is None:        # (a state decoded without its heap: made from ``due``)
            self.heap = [(d, next(_COUNTER), k) for k, d in self.due.items()]
            heapq.heapify(self.heap)
        out = set()
        heap, due = self.heap, self.due
        while heap and heap[0][0] <= wm:
            d, _, k = heapq.heappop(heap)
            if due.get(k) == d:
                del due[k]
                out.add(k)
        return out

    def forget(self, k) -> None:
        """Drop key ``k`` (an empty state, the same as a fresh one)."""
        self.keys.pop(k, None)
        self.due.pop(k, None)


@dataclass
class Stepped:
    """What :func:`advance` did: the decided composites with their output rows (hull not
    yet made: :func:`~spatec.sinks.encoding.hulls_wkt` does a batch's at once), events a
    key found behind its own watermark (not expected: keys trail the global one), and
    the keys stepped and dropped; for a phrase whose composites another reads, the
    composites as events (:func:`~spatec.runtime.derived.derived_event`)."""

    found: list = field(default_factory=list)       # (composite, row)
    events: list = field(default_factory=list)
    late: list = field(default_factory=list)
    touched: set = field(default_factory=set)
    dropped: set = field(default_factory=set)


def advance(ph: KeyedPhrase, ks: KeyedState, by_key: dict, bnew: list, wm: int, wm_moved: bool,
            final: bool = False, drop_empty: bool = False) -> Stepped:
    """One batch of a phrase's events (``by_key``: key → events; ``bnew``: broadcast events)
    with the global watermark ``wm`` (``wm_moved``: it moved since the batch before;
    ``final``: the end of input, everything decidable is decided). ``drop_empty``: drop a
    key whose state is empty after its step (a phrase without broadcast types)."""
    out = Stepped()
    todo = set(by_key)
    if bnew:
        todo.update(ks.keys)
    if final:
        todo.update(ks.keys)
        ks.due.clear()
        ks.heap = None
    elif wm_moved and ks.due:
        todo |= ks.pop_due(wm)
    am, keys, buf = ph.am, ks.keys, ks.bcast
    for k in todo:
        rs = keys.get(k)
        evs = by_key.get(k, [])
        if rs is None:
            rs = RunState()
            keys[k] = rs
            evs = list(buf) + evs
        if bnew:
            evs = evs + bnew
        if len(evs) > 1:
            evs.sort(key=event_order)
        npending = len(rs.pending)
        got, late = step(am, rs, evs, watermark=wm, final=final)
        if evs or got or len(rs.pending) != npending:
            # a key only given a newer watermark need not be saved: its old one is behind
            # the global watermark, which is what late input is judged by
            out.touched.add(k)
        if late:
            out.late.extend(late)
        for c in got:
            # the row now (emit fields read the key's state as it is now), the hull later
            out.found.append((c, output_row(am, c, ph.proj, rs, hull=False)))
            if ph.consumed:
                out.events.append(derived_event(am, c, rs))
        if drop_empty and ph.all_keyed and rs.empty():
            ks.forget(k)
            out.dropped.add(k)
            out.touched.discard(k)
            continue
        if not final and (rs.pending or rs.runs or k in ks.due):
            ks.schedule(am, k, rs)
    if bnew:
        buf.extend(bnew)
    if buf and ph.horizon is not None and wm != NEG_INF:
        cut = wm - ph.horizon
        buf[:] = [e for e in buf if e.hi >= cut]
    return out


def prune_key(ph: KeyedPhrase, ks: KeyedState, k, wm: int) -> Stepped:
    """Housekeeping of one key: decide what the watermark decides, prune its buffers, and
    drop it when its state is empty and the phrase has no broadcast types."""
    out = Stepped()
    rs = ks.keys.get(k)
    if rs is None:
        return out
    rs.since_prune = 1 << 30   # let step prune this key now
    got, _ = step(ph.am, rs, [], watermark=wm)
    for c in got:
        out.found.append((c, output_row(ph.am, c, ph.proj, rs, hull=False)))
        if ph.consumed:
            out.events.append(derived_event(ph.am, c, rs))
    if got:
        out.touched.add(k)
    if ph.all_keyed and rs.empty():
        ks.forget(k)
        out.dropped.add(k)
        out.touched.discard(k)
    return out


# ------------------------------------------------------------------------------ late events

def late_record(ev, watermark: int, origin: dict | None = None) -> dict:
    """A late event as written to ``late/<TYPE>.jsonl``: its id, source and stamps (ISO
    8601 UTC), its attributes, where it came from when known (``_file``, ``_row``) and the
    watermark it was behind."""
    rec = {"_id": ev.id, "_source": ev.source, "_t": format_time(int(ev.t)), "_lo": format_time(int(ev.lo)),
           "_hi": format_time(int(ev.hi))}
    rec.update(ev.attrs)
    if origin:
        rec.update(origin)
    rec["watermark"] = format_time(int(watermark))
    return rec


def late_texts(df, program, watermark: int) -> list:
    """:func:`late_record`'s JSON text for each canonical event row of one type in ``df``
    (with its ``_file`` and ``_row`` when the frame has them), formatted a column at a time:
    the same text, without making each row a run-time event first (a live feed that is late
    by much spent a sixth of its detector's time on that)."""
    import numpy as np

    from spatec.events.timefmt import format_times
    from spatec.runtime.events import attribute_names, python_values, source_values

    n = len(df)
    if n == 0:
        return []
    names = attribute_names(program, df["_type"].iloc[0])
    cols = [("_id", df["_id"].tolist()), ("_source", source_values(df))]
    cols += [(c, format_times(df[c].to_numpy(np.int64)).tolist()) for c in ("_t", "_lo", "_hi")]
    cols += [(a, python_values(df[a])) for a in names]
    if "_file" in df.columns and "_row" in df.columns:
        cols += [("_file", df["_file"].tolist()), ("_row", df["_row"].to_numpy(np.int64).tolist())]
    keys = [k for k, _ in cols]
    wm = format_times(np.array([int(watermark)], dtype=np.int64))[0]
    dumps = _LATE_JSON.encode
    out = []
    for vals in zip(*(v for _, v in cols)):
        rec = dict(zip(keys, vals))
        rec["watermark"] = wm
        out.append(dumps(rec))
    return out


def write_late(out_dir: Path, type_name: str, records) -> int:
    """Append late records (:func:`late_record`, or their JSON texts) to
    ``<out_dir>/late/<type_name>.jsonl``; how many."""
    path = Path(out_dir) / "late" / f"{type_name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "a", encoding="utf-8") as f:
        for rec in records:
            f.write((rec if isinstance(rec, str) else late_text(rec)) + "\n")
            n += 1
    return n


def late_text(rec: dict) -> str:
    """A late record's line in ``late/<TYPE>.jsonl`` (UTF-8 text, numpy scalars as numbers)."""
    return _LATE_JSON.encode(rec)


def _plain(v):
    """JSON for attribute values json does not know (numpy scalars)."""
    item = getattr(v, "item", None)
    return item() if item is not None else str(v)


_LATE_JSON = json.JSONEncoder(ensure_ascii=False, default=_plain)

"""Phrases as event types at run time (SPEC §8): a producer's decided composites become
events of the type named after it, and each such derived stream has a watermark of its
own, the producer's *frontier*.

A derived event: type = the phrase, id = the composite's id, no source, ``t = lo..hi`` =
the composite's time stamp (``t = hi``), location stamp = its convex hull (exact: the
composite's own stamp, never a polygon read back from text), attributes = the emit
values as conditions compute them (:func:`~spatec.runtime.rows.emit_values`). A phrase
with ``as event source F time G`` gives its events the source and the stamp those emit
fields say (:func:`derived_event`).

The frontier of a producer P is the least ``lo`` that a composite still undecided in P
could have. In a batch replay the producers run first, so only its value at the end of
the input is needed (:func:`end_frontier`): the least ``lo`` of the composites P leaves
undecided (absences whose window reaches past the data, runs not complete;
:func:`~spatec.automata.step.undecided_low`), and at most P's own final watermark, which
is its input's, at most the frontiers of the phrases P reads (:func:`input_watermark`).
A phrase decides by that watermark at the end of the input too (REFERENCE decision 33),
which is what a live runner knows.

Live (:class:`LiveFlows`, the local live runner; REFERENCE decision 36): the phrases run in
flow order in every micro-batch; a producer's decided composites are handed as events to the
phrases that read them in the same batch, and each phrase is stepped with its own watermark,
the global one at most its producers' frontiers. A producer's frontier while the input goes on
(:func:`live_frontier`) is a lower bound of the ``lo`` of every composite it may still decide:
its pending composites, open runs and buffered partial matches, and what an event still to
come could start (the watermark it was stepped with, less the longest stamp of an input
event). At the end of the input it is :func:`end_frontier`, as in a batch replay, so that
live and batch report the same set. Spark batch (staged exchange) runs the producers in Spark
tasks, which hand on their composites as events and their undecided ``lo``, and the phrases
over phrases on the driver (REFERENCE decision 37); Spark live does not run phrases over
phrases yet (:func:`~spatec.plan.support.require_flow` refuses them).
"""
from __future__ import annotations

import json

from spatec.automata.machine import NEG_INF, Composite, Ev, RunState
from spatec.automata.runs import floor as runs_floor
from spatec.automata.step import undecided_low
from spatec.runtime.rows import emit_values


def derived_event(am, c: Composite, state: RunState | None = None) -> Ev:
    """Composite ``c`` of ``am``'s phrase as an event of the type named after the phrase.

    With ``as event`` (SPEC §8; :class:`~spatec.frontend.program.AsEventInfo`) its source is
    the text of its source fields' values and its time stamp the emit fields named by
    ``time``, which lie within the composite's ``[lo, hi]`` (the checker allows only times of
    its own events): every ``lo`` of a derived event is still at least its producer's frontier."""
    attrs = emit_values(am, c, state)
    ae = am.plan.as_event
    if ae is None:
        return Ev(am.name, c.id, None, c.hi, c.lo, c.hi, c.loc, attrs)
    lo = attrs[ae.low]
    hi = attrs[ae.high] if ae.high is not None else lo
    return Ev(am.name, c.id, source_text(attrs, ae.source), hi, lo, hi, c.loc, attrs)


def source_text(attrs: dict, fields: tuple):
    """The source of a derived event: its field's value as text (as an input event's source
    is), several fields' as a JSON array of their texts; None (no source) when there is no
    field or a value is missing."""
    if not fields:
        return None
    texts = []
    for f in fields:
        v = attrs.get(f)
        if v is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        texts.append(v if isinstance(v, str) else str(v))
    if len(texts) == 1:
        return texts[0]
    return json.dumps(texts, ensure_ascii=False, separators=(",", ":"))


def derived_from_rows(am, rows, evs_by_id: dict) -> list:
    """Derived events of a fast path's output rows (every leaf a bound variable, so that the
    rows' ``events`` name every constituent): the composites made again from the events."""
    slots = sorted(am.plan.leaves, key=lambda l: l.slot)
    out = []
    for r in rows:
        ids = r["events"]
        bindings = {v: evs_by_id[i] for v, i in ids.items()}
        evs = [bindings[l.var] for l in slots]
        c = Composite(am.name, r["id"], int(r["lo"]), int(r["hi"]), None, bindings, evs)
        out.append(derived_event(am, c))
    return out


def input_watermark(plan, watermark: int, frontiers: dict) -> int:
    """The watermark a phrase decides by: the input's, and at most the frontier of each
    phrase whose composites it reads (``frontiers``: phrase → its frontier)."""
    w = watermark
    for t in plan.physical.derived:
        w = min(w, frontiers.get(t, NEG_INF))
    return w


def end_frontier(final: int, lows) -> int:
    """A producer's frontier at the end of the input: its final watermark ``final``, or the
    least ``lo`` of a composite it leaves undecided (``lows``: per key, or None)."""
    return min([final] + [x for x in lows if x is not None])


class Produced:
    """What a batch evaluation of a producer hands on: its composites as events, and the least
    ``lo`` of a composite it left undecided (None: none)."""

    def __init__(self):
        self.events: list = []
        self.low: int | None = None

    def add_low(self, low: int | None) -> None:
        if low is not None and (self.low is None or low < self.low):
            self.low = low


def needed(compiled, phrases=None) -> set:
    """The phrases to run for ``phrases`` (None: all): those and every producer they read."""
    names = [p.name for p in compiled.plans]
    if not phrases:
        return set(names)
    inputs = compiled.program.flow.inputs
    todo, out = [n for n in phrases if n in names], set()
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo.extend(inputs.get(n, ()))
    return out


class BatchFlows:
    """The flow graph of a batch replay: each phrase runs after the phrases it reads, given
    their composites as events and a final watermark at most their frontiers."""

    def __init__(self, plans, final_watermark: int):
        """``plans``: the phrases run (every producer before the phrases that read it)."""
        self.final = final_watermark
        self.consumed = {t for p in plans for t in p.physical.derived}
        self.events: dict = {}          # producer → its composites as events
        self.frontiers: dict = {}       # producer → its frontier at the end

    def produced(self, plan) -> Produced | None:
        """Where the phrase's composites go, if another phrase reads them."""
        return Produced() if plan.name in self.consumed else None

    def watermark(self, plan) -> int:
        return input_watermark(plan, self.final, self.frontiers)

    def inputs(self, plan) -> dict:
        return {t: self.events.get(t, []) for t in plan.physical.derived}

    def done(self, plan, produced: Produced | None) -> None:
        if produced is None:
            return
        self.events[plan.name] = unique_events(produced.events)
        self.frontiers[plan.name] = end_frontier(self.watermark(plan), [produced.low])


def live_frontier(am, states, bcast, watermark: int) -> int:
    """A producer's frontier while the input goes on: a lower bound of the ``lo`` of every
    composite it may still decide, given its keys' run ``states`` and its broadcast buffer
    ``bcast`` after a step with ``watermark``. A composite still to come is pending, an open
    run, grows from a buffered partial match or broadcast event, or has an event still to
    come: an input event's ``hi`` is at least the watermark (else it is late), its ``lo`` at
    most the longest input stamp before; a derived event's ``lo`` is at least its producer's
    frontier, which bounds ``watermark`` already. NEG_INF while input stamps are unbounded."""
    longest = am.type_len.get(None)
    if watermark == NEG_INF or longest is None:
        return NEG_INF
    return held_low(states, bcast, watermark - longest)


def held_low(states, bcast, low: int) -> int:
    """The least of ``low`` and the ``lo`` of what keys' run ``states`` and a broadcast buffer
    ``bcast`` hold that a composite may still grow from (pending and buffered partial matches,
    broadcast events, open runs): :func:`live_frontier`'s bound from the state alone."""
    for e in bcast:
        if e.lo < low:
            low = e.lo
    for rs in states:
        for pm in rs.pending:
            if pm.lo < low:
                low = pm.lo
        for pms in rs.buffers.values():
            for pm in pms:
                if pm.lo < low:
                    low = pm.lo
        low = runs_floor(rs, low)     # open runs and events not yet settled into one
    return low


class LiveFlows:
    """The flow graph of a live run: each phrase's watermark (the global one, at most the
    frontiers of the phrases it reads) and the producers' frontiers, recomputed from their run
    state after each step (nothing of it is checkpointed: a restored state gives it again)."""

    def __init__(self, plans):
        self.consumed = {t for p in plans for t in p.physical.derived}
        self.frontiers: dict = {}       # producer → its frontier after its last step
        self.stepped: dict = {}         # phrase → the watermark it was last stepped with

    def watermark(self, plan, watermark: int) -> int:
        return input_watermark(plan, watermark, self.frontiers)

    def moved(self, plan, watermark: int) -> bool:
        """Whether ``watermark`` is not the one the phrase was last stepped with."""
        return self.stepped.get(plan.name) != watermark

    @staticmethod
    def inputs(plan, produced: dict, evs_by_type: dict) -> dict:
        """A batch's events for the phrase: the input's, and the composites of the phrases it
        reads decided in this batch (``produced``: producer → events)."""
        got = {t: produced[t] for t in plan.physical.derived if produced.get(t)}
        return {**evs_by_type, **got} if got else evs_by_type

    def done(self, plan, am, states, bcast, watermark: int, final: bool = False) -> None:
        """The phrase was stepped with ``watermark`` (``final``: at the end of the input)."""
        self.stepped[plan.name] = watermark
        if plan.name not in self.consumed:
            return
        if final:
            self.frontiers[plan.name] = end_frontier(watermark, [undecided_low(am, rs) for rs in states])
        else:
            self.frontiers[plan.name] = max(self.frontiers.get(plan.name, NEG_INF),
                                            live_frontier(am, states, bcast, watermark))


def unique_events(evs: list) -> list:
    """Derived events with one of each id (a composite of broadcast events only is found by
    every key), in event-time order."""
    seen, out = set(), []
    for e in evs:
        if e.id not in seen:
            seen.add(e.id)
            out.append(e)
    out.sort(key=lambda e: (e.hi, e.lo, e.id))
    return out

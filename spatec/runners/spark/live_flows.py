"""Phrases over phrases in the Spark live runner (SPEC §8; REFERENCE decision 38).

The phrases that read input events run in the streaming query, keyed by (phrase, bucket)
as before. A bucket of a phrase that another reads also hands on, with each micro-batch's
output, the composites it decided as events (``kind="event"``) and what its state still
holds back (``kind="low"``: the least ``lo`` of its pending and buffered partial matches,
broadcast buffer and open runs, :func:`~spatec.runtime.derived.held_low`; at the end of
input the least ``lo`` it leaves undecided). The driver's ``foreachBatch`` then steps the
phrases over phrases with the keyed runtime of every runner
(:func:`~spatec.runtime.keyed.advance`), in flow order, each with its own watermark
(:class:`~spatec.runtime.derived.LiveFlows`, decision 36): a producer's frontier is the
batch's watermark less its longest input stamp, and at most what each of its buckets
holds back. A bucket not called in a batch holds what it held when it was last called
(its state changes only when it is called), so the frontier is never above the local
runner's.

**Restarts.** Spark runs a micro-batch again after a crash (same id, same input); the
driver's state is saved after each batch under ``<checkpoint>/derived/<batch id>.pickle``
(the last two kept, written atomically), and a batch starts from the state saved by the
batch before it, so a batch run twice is applied once. Alerts delivered twice are dropped
by the sinks' delivered log, as for every phrase.
"""
from __future__ import annotations

import base64
import pickle
from pathlib import Path

from spatec.automata.machine import NEG_INF
from spatec.automata.step import undecided_low
from spatec.runtime.derived import LiveFlows, held_low, unique_events
from spatec.runtime.keyed import KeyedPhrase, KeyedState, advance
from spatec.runtime.routing import route
from spatec.storage.atomic import atomic_bytes

#: "holds nothing back": the ``hi`` of a bucket's ``low`` row when its state is empty
NOTHING = 1 << 62


def event_payload(ev) -> str:
    """A derived event as the text column of the query's output."""
    return base64.b64encode(pickle.dumps(ev, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")


def event_back(payload: str):
    return pickle.loads(base64.b64decode(payload))


def bucket_low(am, states, bcast, final: bool) -> int:
    """What a producer's bucket holds back after a step: the least ``lo`` of a composite its
    ``states`` may still decide (at the end of input: leave undecided); NOTHING if none."""
    if final:
        lows = [x for x in (undecided_low(am, rs) for rs in states) if x is not None]
        return min(lows, default=NOTHING)
    return held_low(states, bcast, NOTHING)


class DriverFlows:
    """The phrases over phrases of a live query, stepped on the driver after each micro-batch.

    ``plans``: every phrase run (flow order); ``streamed``: the names of those the query
    runs; ``report``: the phrases whose alerts are delivered."""

    def __init__(self, compiled, plans, streamed, report, proj, checkpoint: Path):
        self.program = compiled.program
        self.flows = LiveFlows(plans)
        self.report = set(report)
        self.consumers = [p for p in plans if p.name not in streamed]
        #: producers in the query: their longest input stamp bounds their frontier
        self.longest = {}
        for p in plans:
            if p.name in streamed and p.name in self.flows.consumed:
                self.longest[p.name] = KeyedPhrase(p, self.program, proj).am.type_len.get(None)
        self.phrases = []
        for p in self.consumers:
            ph = KeyedPhrase(p, self.program, proj)
            ph.consumed = p.name in self.flows.consumed
            self.phrases.append(ph)
        self.dir = Path(checkpoint) / "derived"
        self.state = self._fresh()
        self.applied = None     # the batch id the state in memory is after

    @staticmethod
    def _fresh() -> dict:
        return {"batch": -1, "keys": {}, "bcast": {}, "due": {}, "lows": {}, "frontiers": {}, "stepped": {},
                "wm": NEG_INF}

    # ------------------------------------------------------------------ state
    def _load_before(self, batch_id: int) -> None:
        """The state saved by the last batch before ``batch_id`` (a fresh one if none)."""
        best = None
        if self.dir.exists():
            for f in self.dir.glob("*.pickle"):
                try:
                    n = int(f.stem)
                except ValueError:
                    continue
                if n < batch_id and (best is None or n > best[0]):
                    best = (n, f)
        self.state = pickle.loads(best[1].read_bytes()) if best else self._fresh()
        self.flows.frontiers = dict(self.state["frontiers"])
        self.flows.stepped = dict(self.state["stepped"])

    def _save(self, batch_id: int) -> None:
        st = self.state
        st["batch"] = batch_id
        st["frontiers"], st["stepped"] = dict(self.flows.frontiers), dict(self.flows.stepped)
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_bytes(self.dir / f"{batch_id}.pickle", pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL))
        for f in self.dir.glob("*.pickle"):
            if f.stem.isdigit() and int(f.stem) < batch_id - 1:
                f.unlink(missing_ok=True)
        self.applied = batch_id

    def _keyed(self, name: str) -> KeyedState:
        st = self.state
        return KeyedState(st["keys"].setdefault(name, {}), st["bcast"].setdefault(name, []),
                          st["due"].setdefault(name, {}))

    # ------------------------------------------------------------------ a batch
    def batch(self, batch_id: int, rows: list) -> list:
        """One micro-batch's ``event`` and ``low`` rows (dicts of the query's output): the
        phrases over phrases stepped; ``[(phrase, composite, row, arrived)]`` decided."""
        if self.applied != batch_id - 1:
            self._load_before(batch_id)
        st = self.state
        produced: dict = {}
        arrival: dict = {}
        for r in rows:
            if r["kind"] == "event":
                produced.setdefault(r["phrase"], []).append(event_back(r["payload"]))
                arrival[r["id"]] = r["arrived"]
            elif r["kind"] == "low":
                wm, final = (int(x) for x in r["payload"].split(":"))
                st["wm"] = max(st["wm"], wm)
                st["lows"].setdefault(r["phrase"], {})[r["id"]] = (int(r["hi"]), bool(final))
        found = self._step({p: unique_events(e) for p, e in produced.items()}, arrival, st["wm"], False)
        self._save(batch_id)
        return found

    def finish(self, final_w: int) -> list:
        """The end of input (every bucket of the query has decided at ``final_w``, the last
        event time): the phrases over phrases decide what the end decides, each at most its
        producers' frontiers (what their buckets left undecided), as a replay at its end."""
        if self.state.get("finished"):
            return []
        found = self._step({}, {}, final_w, True)
        self.state["finished"] = True
        self._save(self.state["batch"] + 1)
        return found

    def _frontier(self, name: str, wm: int, final: bool) -> int:
        lows = self.state["lows"].get(name, {})
        if final:
            # the end of input: what the buckets called at the end leave undecided
            return min([wm] + [low for low, fin in lows.values() if fin and low != NOTHING])
        longest = self.longest.get(name)
        if wm == NEG_INF or longest is None:
            return NEG_INF
        return min([wm - longest] + [low for low, _fin in lows.values()])

    def _step(self, produced: dict, arrival: dict, wm: int, final: bool) -> list:
        for name in self.longest:
            f = self._frontier(name, wm, final)
            self.flows.frontiers[name] = f if final else max(self.flows.frontiers.get(name, NEG_INF), f)
        found = []
        for ph in self.phrases:
            w = self.flows.watermark(ph.plan, wm)
            by_key, bnew = route(ph.physical, self.flows.inputs(ph.plan, produced, {}))
            ks = self._keyed(ph.name)
            done = advance(ph, ks, by_key, bnew, w, self.flows.moved(ph.plan, w), final=final, drop_empty=True)
            self.flows.done(ph.plan, ph.am, ks.keys.values(), ks.bcast, w, final=final)
            if done.events:
                produced[ph.name] = unique_events(done.events)
                for e in produced[ph.name]:
                    arrival.setdefault(e.id, None)
            if done.late:
                # not expected: a phrase over phrases decides behind its producers' frontiers
                raise RuntimeError(f"{ph.name}: {len(done.late)} derived event(s) behind its watermark")
            if ph.name in self.report:
                for c, row in done.found:
                    t = max((arrival[e.id] for e in c.events if arrival.get(e.id) is not None), default=None)
                    found.append((ph, c, row, t))
        return found

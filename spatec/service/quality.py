"""Live input quality: a feed outage is not every bus going silent.

An absence (``A ; not X within D``, ``A ; not X ; B``) is decided by the watermark: nothing
that would negate it arrived. When the *feed* stops — the server is down, the client
cannot reach it — nothing arrives for any source, and once the feed comes back the
watermark jumps past every window that was open: each bus would be reported silent.

Rule (lang/REFERENCE.md, "Feed outages"): the input's latest event time normally moves
in small steps, poll by poll. When one poll moves it from H1 to H2 with
``H2 - H1`` above the outage threshold (``--outage``; ``auto``: three times the median
step seen so far, at least :data:`MIN_OUTAGE`), event time ``(H1, H2)`` is a *feed
outage*: the input says nothing about it. A composite of a phrase with an absence whose
window — ``[lo, hi + D]`` (the longest ``within D`` of its absences; ``D = 0`` for an
absence between two events) — meets an outage is *held back*: not delivered, counted
(``held_outage``) and written to ``<runner>/held/<phrase>.jsonl``. Composites without an
absence are delivered as usual (what arrived is true).
"""
from __future__ import annotations

import json
import logging
import statistics
from collections import deque
from pathlib import Path

import numpy as np

from spatec.frontend import ast as A

log = logging.getLogger("spatec.quality")

MIN_OUTAGE = 60_000_000      # µs
STEPS = 200                  # latest-time steps the median is taken over


def absence_window(match) -> int | None:
    """The longest ``within D`` (µs) of the absences of a match; 0 for absences between
    events only; None without an absence."""
    best = None
    stack = [match]
    while stack:
        m = stack.pop()
        if isinstance(m, A.Binary):
            for side in (m.left, m.right):
                if isinstance(side, A.Not) and not _pattern_only(side.operand):
                    w = side.within.micros() if side.within is not None else 0
                    best = w if best is None else max(best, w)
            stack += [m.left, m.right]
        elif isinstance(m, (A.Not, A.Certainly)):
            stack.append(m.operand if isinstance(m, A.Not) else m.pattern)
    return best


def _pattern_only(m) -> bool:
    """Whether a match is made of patterns only (``not at centre`` is no absence)."""
    if isinstance(m, A.EventRef):
        return False
    if isinstance(m, A.Binary):
        return _pattern_only(m.left) and _pattern_only(m.right)
    if isinstance(m, A.Not):
        return _pattern_only(m.operand)
    if isinstance(m, A.Certainly):
        return _pattern_only(m.pattern)
    return True


class OutageGate:
    """Holds back absences over feed outages for one runner (see the module docstring).

    The runner's source tells it of every poll it hands on (:meth:`saw`, in order, before
    the batch is processed); the runner's :class:`~spatec.sinks.alerts.SinkSet` calls it with
    each batch's alerts. ``bind(runner, out)`` once (counts, the held-back file)."""

    def __init__(self, compiled, threshold="auto", type_name: str | None = None):
        from spatec.events.timefmt import parse_time

        self.parse_time = parse_time
        self.tz = compiled.program.timezone
        self.threshold = threshold                       # "auto" or seconds
        self.windows = {p.name: absence_window(p.phrase.match) for p in compiled.program.phrases}
        self.time_attr = {}
        for name, decl in compiled.program.events.items():
            if decl.time is not None:
                self.time_attr[name] = (decl.time.high or decl.time.low).attr
        self.outages: list[tuple[int, int]] = []
        self.steps: deque = deque(maxlen=STEPS)
        self.last = None                                  # the input's latest event time so far
        self.runner = None
        self.out: Path | None = None
        self.held = 0

    def bind(self, runner, out: Path | None = None) -> "OutageGate":
        self.runner, self.out = runner, Path(out) if out is not None else None
        return self

    def limit(self) -> int:
        if self.threshold != "auto":
            return int(float(self.threshold) * 1e6)
        if len(self.steps) < 5:
            return max(MIN_OUTAGE, 3 * max(self.steps, default=0))
        return max(MIN_OUTAGE, 3 * int(statistics.median(self.steps)))

    def saw(self, type_name: str, item) -> None:
        """A poll handed on: its latest event time moves the input's on (or reveals an outage)."""
        attr = self.time_attr.get(type_name)
        if attr is None:
            return
        from spatec.events.timefmt import parse_times

        top = None
        for b in item.batches:
            i = b.names.get(attr)
            if i is None or not b.table.num_rows:
                continue
            got = parse_times(b.table.column(i), self.tz)
            good = ~got.missing
            if got.errors:
                good[list(got.errors)] = False
            us = np.asarray(got.values)[good]
            if len(us):
                t = int(us.max())
                top = t if top is None or t > top else top
        if top is None:
            return
        if self.last is not None and top > self.last:
            step = top - self.last
            if step > self.limit():
                self.outages.append((self.last, top))
                log.warning("feed outage: no input for %.0f s of event time (%s .. %s); absences over it are "
                            "held back", step / 1e6, _iso(self.last), _iso(top))
            else:
                self.steps.append(step)
        if self.last is None or top > self.last:
            self.last = top

    def __call__(self, alerts: list[dict]) -> list[dict]:
        if not self.outages or not alerts:
            return alerts
        keep, held = [], []
        for a in alerts:
            w = self.windows.get(a.get("phrase"))
            if w is not None and self._meets(self.parse_time(a["lo"]), self.parse_time(a["hi"]) + w):
                held.append(a)
            else:
                keep.append(a)
        if held:
            self.held += len(held)
            if self.runner is not None:
                self.runner.state.counts["held_outage"] += len(held)
            if self.out is not None:
                for a in held:
                    p = self.out / "held" / f"{a['phrase']}.jsonl"
                    p.parent.mkdir(parents=True, exist_ok=True)
                    with open(p, "a", encoding="utf-8") as f:
                        f.write(json.dumps(a, ensure_ascii=False) + "\n")
        return keep

    def _meets(self, lo: int, hi: int) -> bool:
        return any(a < hi and lo < b for a, b in self.outages)


def _iso(t: int) -> str:
    from spatec.events.timefmt import format_time

    return format_time(int(t))

"""Where an alert's time goes between its decision and its subscribers' buffers.

Per batch of alerts the matcher says when each alert came from the log and when it sent the
batch; the hub's reader thread notes when the batch came through the pipe, and the hub when
it had appended it to the buffers. :class:`Stages` keeps the last alerts' times of each
step (``/status``'s ``stages_ms``: p50, p99, max in milliseconds):

- ``log``: decided (the ``Spatec-Decided`` header) to read from the log by the matcher;
- ``match``: in the matcher, from read to its batch sent (waiting for the batch included);
- ``pipe``: sent to received by the HTTP process;
- ``hub``: received to appended to the buffers (the event loop's wait included).

With ``SPATEC_SERVE_TRACE=PATH`` it also appends one JSON line per batch to ``PATH``:
``[[composite id, decided, read, sent, received, appended], ...]`` (seconds, wall clock),
for a benchmark to join with the times its SSE readers read each frame.
"""
from __future__ import annotations

import json
import os
from collections import deque

#: alerts whose times are kept for the percentiles
KEPT = 5000
NAMES = ("log", "match", "pipe", "hub")


class Stages:
    def __init__(self, trace: str | None = None):
        self.steps = {n: deque(maxlen=KEPT) for n in NAMES}
        path = trace if trace is not None else os.environ.get("SPATEC_SERVE_TRACE")
        self._trace = open(path, "a", buffering=1) if path else None   # noqa: SIM115 - line by line: read while it runs

    def batch(self, rows: list, came: list, sent: float, received: float, done: float) -> None:
        """One batch's times (``rows`` as the matcher sends them; ``came``: each row's read time)."""
        log, match = self.steps["log"], self.steps["match"]
        for (_, cid, _, _, decided), t in zip(rows, came):
            if decided is not None and cid is not None:
                log.append(t - decided)
            match.append(sent - t)
        self.steps["pipe"].append(received - sent)
        self.steps["hub"].append(done - received)
        if self._trace is not None:
            self._trace.write(json.dumps([[cid, decided, t, sent, received, done]
                                          for (_, cid, _, _, decided), t in zip(rows, came) if cid is not None]))
            self._trace.write("\n")

    def ms(self) -> dict:
        out = {}
        for n, xs in self.steps.items():
            if xs:
                s = sorted(xs)
                out[n] = {q: round(s[min(len(s) - 1, int(f * len(s)))] * 1e3, 1)
                          for q, f in (("p50", 0.5), ("p99", 0.99), ("max", 1.0))}
        return out

    def close(self) -> None:
        if self._trace is not None:
            self._trace.close()
            self._trace = None

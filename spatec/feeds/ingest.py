"""The ingest of live input, shared by every live runner (``spatec live`` local and Spark,
``spatec serve``'s detectors): a poll or file typed as a batch replay types it
(:func:`spatec.events.canonical.to_events`), then **event time that cannot be hijacked**.

One event stamped far in the future would move the input's watermark there — the largest
event time seen, less the lateness — and every real event after it would be late, every
absence decided at once. So an event whose time (``hi``) is more than ``max_ahead`` after
its *reference* is a reject with its reason, and never counts for the watermark. The
reference is the earlier of the wall clock when the input arrived and the feed's own
clock when the feed has one (a SIRI-VM poll's ``ts``, a GTFS-realtime header's
``timestamp``): a live feed is checked against now, a recording replayed years later
against the time it was recorded.

``max_ahead`` is ``--max-ahead`` (default :data:`MAX_AHEAD`, 5 minutes: GPS receivers'
clocks run a little ahead, never minutes); ``None`` turns the check off.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from spatec.events.canonical import IngestResult, to_events
from spatec.events.timefmt import format_time

#: µs an event may be ahead of its reference, by default
MAX_AHEAD = 300_000_000
AHEAD = "ahead of "     # the start of the reason of such a reject


def live_events(item, decl, tz: str, seen: set | None, max_ahead: int | None = MAX_AHEAD) -> IngestResult:
    """An item's (poll's, file's) events of ``decl``, with those too far ahead rejected."""
    res = to_events(item.batches, decl, tz, seen)
    return reject_ahead(res, item, max_ahead, seen)


def reference(item) -> tuple[int, str]:
    """An item's reference time (µs) and what it is, for the reason of a reject."""
    wall = int(item.arrived * 1e6)
    clocks = [b.clock for b in item.batches if getattr(b, "clock", None) is not None]
    if clocks and min(clocks) * 1e6 < wall:
        return int(min(clocks) * 1e6), "the feed's own time"
    return wall, "the wall clock when it arrived"


def reject_ahead(res: IngestResult, item, max_ahead: int | None, seen: set | None = None) -> IngestResult:
    """``res`` with the events more than ``max_ahead`` µs after the item's reference moved to
    its rejects (and out of ``seen``)."""
    ev = res.events
    if max_ahead is None or not len(ev):
        return res
    ref, what = reference(item)
    hi = ev["_hi"].to_numpy()
    bad = hi > ref + int(max_ahead)
    if not bad.any():
        return res
    gone = ev[bad]
    if seen is not None:
        seen.difference_update(gone["_id"].tolist())
    rows = _records(item.batches, gone)
    reasons = [f"{AHEAD}{what} ({format_time(ref)}) by {(h - ref) / 1e6:,.0f} s, more than the {max_ahead / 1e6:g} s "
               f"allowed (--max-ahead): a clock error, never the input's event time; its time {format_time(h)}"
               for h in gone["_hi"].tolist()]
    rejects = pd.DataFrame({"type": [res.type] * len(gone), "file": gone["_file"].tolist(),
                            "row": np.asarray(gone["_row"].to_numpy(), dtype=np.int64), "reason": reasons,
                            "record": rows})
    all_rejects = pd.concat([res.rejects, rejects], ignore_index=True) if res.rejected else rejects
    return IngestResult(res.type, ev[~bad].reset_index(drop=True), all_rejects, res.read)


def _records(batches, gone: pd.DataFrame) -> list[str]:
    """The raw records (JSON) of some events, from the batches they were read from."""
    out = []
    by_file = {b.file: b for b in batches}
    for f, row, eid in zip(gone["_file"].tolist(), gone["_row"].tolist(), gone["_id"].tolist()):
        b = by_file.get(f)
        idx = np.flatnonzero(b.rows == row) if b is not None else []
        out.append(b.records([int(idx[0])])[0] if len(idx) else json.dumps({"_id": eid}))
    return out


def parse_max_ahead(text: str) -> int | None:
    """``--max-ahead``: µs, or None for ``off``."""
    from spatec.events.timefmt import parse_duration

    if text.strip().lower() == "off":
        return None
    return int(parse_duration(text) * 1e6)

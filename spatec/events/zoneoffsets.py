"""A time zone's UTC offsets at many instants at once, without a call per instant.

A zone's offset is piecewise constant in UTC time: it changes only at the zone's
transitions (a daylight-saving change, a change of the zone's standard time). So
the offset of every instant in one UTC hour is the offset at the hour's start,
unless the offset at the next hour's start differs; then the transition is found
to the second by bisection, and the instants before it get the first offset, the
others the second. :mod:`zoneinfo` is asked once per distinct hour (and about
twelve times more per hour with a transition), and its answers are kept per zone.

The one thing assumed: within one hour a zone's offset does not change and change
back (no two transitions of a zone less than an hour apart that cancel out); no
zone of the tz database has such a pair (``tests/events/test_zoneoffsets.py``
checks the transition tables it can read). Transitions fall on whole seconds.

>>> import numpy as np
>>> utc_offsets(np.array([1572136200_000000, 1572139800_000000]), "Europe/London").tolist()
[3600000000, 0]
"""
from __future__ import annotations

import datetime as _dt
from functools import lru_cache
from zoneinfo import ZoneInfo

import numpy as np

US = 1_000_000
HOUR = 3600
#: Hours whose offsets are kept per zone, at most (older ones are forgotten first).
KEPT = 1 << 16
#: Instants handled here: 1800-01-01 to 2200-01-01 UTC (outside, :func:`utc_offsets` says None).
LOW_S = -5_364_662_400
HIGH_S = 7_258_118_400


class _Hours:
    """One zone's offsets (µs) at the start of each hour asked about, and each such
    hour's transition second (None: no change within the hour)."""

    def __init__(self, tz: str) -> None:
        self.zone = ZoneInfo(tz)
        self.starts: dict[int, int] = {}
        self.changes: dict[int, int | None] = {}

    def offset(self, sec: int) -> int:
        """The zone's offset (µs) at ``sec`` seconds since the epoch, from :mod:`zoneinfo`."""
        off = _dt.datetime.fromtimestamp(sec, self.zone).utcoffset()
        return off // _dt.timedelta(microseconds=1)

    def start(self, hour: int) -> int:
        got = self.starts.get(hour)
        if got is None:
            if len(self.starts) >= KEPT:
                self.starts.clear()
                self.changes.clear()
            got = self.starts[hour] = self.offset(hour * HOUR)
        return got

    def change(self, hour: int) -> int | None:
        """The first second of ``hour`` with the next hour's offset, if it differs."""
        if hour in self.changes:
            return self.changes[hour]
        before, after = self.start(hour), self.start(hour + 1)
        at = None
        if before != after:
            lo, hi = hour * HOUR, (hour + 1) * HOUR      # offset(lo) == before, offset(hi) == after
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self.offset(mid) == before:
                    lo = mid
                else:
                    hi = mid
            at = hi
        self.changes[hour] = at
        return at


@lru_cache(maxsize=32)
def _hours(tz: str) -> _Hours:
    return _Hours(tz)


def utc_offsets(us: np.ndarray, tz: str) -> np.ndarray | None:
    """The UTC offset (µs, int64) of the IANA zone ``tz`` at each instant of ``us``
    (int64 µs since the epoch, UTC), as :mod:`zoneinfo` gives it; None when an
    instant lies outside 1800-2200 (the caller then asks per instant)."""
    us = np.asarray(us, dtype=np.int64)
    if not len(us):
        return np.zeros(0, np.int64)
    secs = np.floor_divide(us, US)
    if secs.min() < LOW_S or secs.max() >= HIGH_S:
        return None
    hours, at = np.unique(np.floor_divide(secs, HOUR), return_inverse=True)
    table = _hours(tz)
    before = np.array([table.start(int(h)) for h in hours], dtype=np.int64)
    after = before.copy()
    change = np.full(len(hours), np.iinfo(np.int64).max, dtype=np.int64)
    for i, h in enumerate(hours):
        c = table.change(int(h))
        if c is not None:
            change[i] = c
            after[i] = table.start(int(h) + 1)
    at = at.reshape(-1)
    return np.where(secs < change[at], before[at], after[at])

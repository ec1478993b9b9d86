"""``--lateness auto``: the allowed lateness from the feed's own delays.

A live run decides by the watermark, the latest event time seen less the lateness; an
event whose time is behind it when it arrives is late, and is not used (a replay of the
same input uses it: that is when live alerts differ from the replay's). A feed's *delay*
for one event is how far behind the input's latest event time (before the event's batch)
the event's time is: 0 for most fixes of a live bus feed, seconds for a few, minutes for
a vehicle whose modem was out of reach.

With ``auto`` the lateness starts at :data:`START` and grows to the largest delay seen so
far plus a tenth (rounded up to 10 s), at most ``cap`` (``--max-lateness``, default
:data:`CAP`). It never shrinks: the watermark cannot go back, and a smaller lateness would
make the feed's next slow event late again. So only an event later than every one before
it can still be late, and the count of late events (``late`` in the counts, ``late/`` in
the output) says how often that happened. The value reached is kept in the checkpoint.
"""
from __future__ import annotations

import math

START = 120_000_000        # µs
FLOOR = 30_000_000
CAP = 900_000_000
STEP = 10_000_000


class AutoLateness:
    """The lateness of one live run (µs), grown from the delays it observes."""

    def __init__(self, current: int = START, cap: int = CAP):
        self.cap = int(cap)
        self.value = min(self.cap, max(FLOOR, int(current)))
        self.worst = 0             # the largest delay seen (µs)

    def observe(self, earliest: int, latest_before: int | None) -> int:
        """The earliest ``hi`` (µs) of one batch's events and the input's latest event time
        before it: the lateness from now on."""
        if latest_before is None:
            return self.value
        d = int(latest_before) - int(earliest)
        if d > self.worst:
            self.worst = d
            want = math.ceil(d * 1.1 / STEP) * STEP
            self.value = min(self.cap, max(self.value, want))
        return self.value


def parse_lateness(text: str) -> tuple[int, bool]:
    """``--lateness``: ``(µs, auto)``; ``auto`` starts at :data:`START`."""
    from spatec.events.timefmt import parse_duration

    if text.strip().lower() == "auto":
        return START, True
    return int(parse_duration(text) * 1e6), False

"""Keyed join buffers (the planner's join access, :mod:`spatec.plan.order`): a join whose
access is ``source`` or ``near`` keeps each side's partial matches in buffers keyed
``(join id, side, key)``, and a new partial match is tried only against the buffers of the
keys it can meet, and first checked against the access's conjunct on the two events (before
the join's relation, which for ``;=`` compares hulls). Every key holds its partial matches in arrival order, as the one buffer
of a join that scans does; the join still checks every relation and condition, so a keyed
access only skips partial matches that cannot pass them.
"""
from __future__ import annotations

import math

from spatec.spatial import stamps as S

#: the key of the ``near`` bucket that is always looked at: stamps that are not points, or
#: points wider than the grid allows for
WIDE = "*"


class SourceAccess:
    """Buffers per source of the variable a ``successive`` conjunct links across the join."""

    __slots__ = ("slots", "reverse")

    def __init__(self, slots, reverse: bool = False):
        self.slots = slots
        self.reverse = reverse

    def reject(self, left, right, ctx) -> bool:
        """Whether the conjunct ``successive(X, Y)`` is false for this pair (as the join's
        condition would compute it: same function, same history)."""
        x, y = left.ev[self.slots[0]], right.ev[self.slots[1]]
        return ctx.successive((y, x) if self.reverse else (x, y)) is not True

    def store(self, side: str, pm):
        return pm.ev[self.slots[0] if side == "L" else self.slots[1]].source

    def probe(self, side: str, pm, buffers, nid):
        return (pm.ev[self.slots[0] if side == "L" else self.slots[1]].source,)


class NearAccess:
    """Buffers per cell of a square grid (side ``cell``) of the point of the variable a
    ``distance(X, Y) < D`` conjunct reads on each side: two points closer than
    ``D + rX + rY <= cell`` lie in the same or neighbouring cells."""

    __slots__ = ("slots", "cell", "rmax", "metres", "strict")

    def __init__(self, slots, cell: float, metres: float, strict: bool = True):
        self.slots = slots
        # a hair wider than needed, so that rounding in x / cell never puts two points that
        # are exactly `cell` apart two cells apart
        self.cell = cell * (1 + 1e-9) + 1e-6
        self.rmax = (cell - metres) / 2
        self.metres = metres
        self.strict = strict

    def reject(self, left, right, ctx) -> bool:
        """Whether the conjunct ``distance(X, Y) < D`` (``<=``) is false for this pair (as the
        join's condition computes it)."""
        d = S.distance(left.ev[self.slots[0]].loc, right.ev[self.slots[1]].loc)
        return not (d < self.metres) if self.strict else not (d <= self.metres)

    def _cell(self, loc):
        xy = loc.xy
        if xy is None or loc.r > self.rmax:
            return None
        x, y = xy[0] / self.cell, xy[1] / self.cell
        if not (math.isfinite(x) and math.isfinite(y)):
            return None
        return (math.floor(x), math.floor(y))

    def store(self, side: str, pm):
        c = self._cell(pm.ev[self.slots[0] if side == "L" else self.slots[1]].loc)
        return WIDE if c is None else c

    def probe(self, side: str, pm, buffers, nid):
        c = self._cell(pm.ev[self.slots[0] if side == "L" else self.slots[1]].loc)
        if c is None:   # a wide stamp: every key of the other side
            oside = "R" if side == "L" else "L"
            return [k[2] for k in buffers if len(k) == 3 and k[0] == nid and k[1] == oside]
        x, y = c
        return ((x - 1, y - 1), (x, y - 1), (x + 1, y - 1), (x - 1, y), (x, y), (x + 1, y),
                (x - 1, y + 1), (x, y + 1), (x + 1, y + 1), WIDE)


def accesses(joins) -> dict:
    """join id → its access object, from the physical plan's ``joins``."""
    out = {}
    for j in joins:
        if j.kind == "source":
            out[j.join] = SourceAccess(tuple(j.slots), j.reverse)
        elif j.kind == "near":
            out[j.join] = NearAccess(tuple(j.slots), j.cell, j.metres, j.strict)
    return out

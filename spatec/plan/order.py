"""Join access from the conditions placed at a join (SPEC §10): a physical pass.

A join combines each new partial match with the buffered partial matches of its other
side. Scanning the whole buffer costs as many checks as the buffer holds; when a conjunct
placed at the join can only hold between partial matches that agree on something cheap to
compute, the join's buffers are kept per that value and a new partial match looks only at
the matching ones. The conjunct is still checked as before: the access only skips partial
matches for which it cannot hold, so the composites are the same (the meaning does not
depend on the order, SPEC §10; relations between composites are still checked over all
their constituents, at the same node of the operator tree).

Two accesses, chosen per join by the estimated number of candidates they leave
(:mod:`spatec.plan.statistics`):

- ``source``: a conjunct ``successive(..., X, Y, ...)`` with X bound on one side and Y on
  the other holds only when X and Y have the same source (SPEC §4: each is the next event
  of the same type and source); buffers are kept per source of that side's variable;
- ``near``: a conjunct ``distance(X, Y) < D`` (or ``<=``) between point events: buffers are
  kept per cell of a square grid of side ``D`` + both stamps' widening, and a new partial
  match looks at the nine cells around its own (stamps of any other shape: one bucket that
  is always looked at).

Either also checks its conjunct on the two events first, before the join's relation (a
``;=`` compares hulls, which costs more), as the conjunction would: the same decision, made
earlier. Without either, the join scans (``scan``). The choice is data on the phrase's
:class:`~spatec.plan.physical.PhysicalPlan` (``joins``), shown by ``spatec explain``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from spatec.frontend import ast as A
from spatec.frontend.printer import print_expr
from spatec.plan.nodes import Join, definite_vars, walk_nodes
from spatec.plan.predicates import distance_below
from spatec.plan.statistics import DEFAULTS, estimate_join, node_rates, selectivity


@dataclass(frozen=True)
class JoinAccess:
    """How join ``join`` finds the partial matches of its other side to try."""

    join: int
    #: "source" | "near" | "scan"
    kind: str
    #: the variables the access reads, left side's first; their slots (for the automaton)
    vars: tuple = ()
    slots: tuple = ()
    #: metres: the grid's cell side (``near``): the distance bound plus twice the larger
    #: widening of the two types' point stamps; and the distance bound itself
    cell: Optional[float] = None
    metres: Optional[float] = None
    #: the conjunct names the right side's variable first (``successive(Y, X)``)
    reverse: bool = False
    #: ``distance(X, Y) < D`` (True) or ``<= D`` (False)
    strict: bool = True
    #: the conjunct that allows it (printed)
    because: str = ""
    #: estimates: partial matches per second arriving at each side, and the fraction of the
    #: other side's buffer a new partial match is tried against under this access
    rates: tuple = ()
    tried: float = 1.0

    def describe(self) -> str:
        if self.kind == "source":
            return f"by source of {self.vars[0]}/{self.vars[1]} ({self.because})"
        if self.kind == "near":
            return f"by {self.cell:g} m grid cell of {self.vars[0]}/{self.vars[1]} ({self.because})"
        return "scan the other side"


def order_joins(program, plan, phys):
    """The physical pass: ``phys.joins`` (one :class:`JoinAccess` per join with conditions
    that allow a keyed access; of several, the one leaving the fewest candidates), from
    ``phys.estimates``; also the estimates themselves (``phys.rates``: partial matches per
    second each node passes up; ``phys.selectivities``: each join condition's)."""
    stats = phys.estimates or DEFAULTS
    slot_of = {}
    for leaf in plan.leaves:
        if leaf.bound and leaf.run is None:
            slot_of.setdefault(leaf.var, []).append(leaf.slot)
    out = []
    for n in walk_nodes(plan.root):
        if not isinstance(n, Join) or not n.preds:
            continue
        left, right = definite_vars(n.left), definite_vars(n.right)
        options = []
        for c in n.preds:
            for opt in _options(program, plan, c, left, right, slot_of):
                options.append(opt)
        if not options:
            continue
        scored = [(estimate_join(stats, plan, n, o), i, o) for i, o in enumerate(options)]
        (rates, tried), _, best = min(scored, key=lambda x: (x[0][1], x[1]))
        out.append(dataclasses.replace(best, join=n.id, rates=rates, tried=tried))
    rates = node_rates(stats, plan)
    sels = tuple((n.id, print_expr(c), selectivity(stats, plan, c))
                 for n in walk_nodes(plan.root) if isinstance(n, Join) for c in n.preds)
    return dataclasses.replace(phys, joins=tuple(out), rates=tuple(sorted(rates.items())), selectivities=sels)


def _options(program, plan, c, left, right, slot_of):
    """The accesses conjunct ``c`` allows at a join of sides binding ``left`` / ``right``."""
    text = print_expr(c)
    if isinstance(c, A.Call) and c.func == "successive":
        names = [a.name if isinstance(a, A.Var) else None for a in c.args]
        for a, b in zip(names, names[1:]):
            pair = _sides(a, b, left, right, slot_of)
            if pair is not None:
                yield JoinAccess(0, "source", pair[0], pair[1], because=text, reverse=pair[0][0] != a)
    below = distance_below(c)
    if below is not None:
        a, b, d, strict = below
        pair = _sides(a, b, left, right, slot_of)
        widen = max((_widen(program, plan.vars.get(v)) for v in pair[0]), default=0.0) if pair else 0.0
        if pair is not None and d + 2 * widen > 0:     # (a grid of cells of side 0 finds nothing)
            yield JoinAccess(0, "near", pair[0], pair[1], cell=d + 2 * widen, metres=d, because=text,
                             strict=strict)


def _sides(a, b, left, right, slot_of):
    """((left var, right var), (left slot, right slot)) when one of a, b is bound by each side
    (by one leaf each), else None."""
    if a is None or b is None or len(slot_of.get(a, ())) != 1 or len(slot_of.get(b, ())) != 1:
        return None
    if a in left and b in right:
        return (a, b), (slot_of[a][0], slot_of[b][0])
    if b in left and a in right:
        return (b, a), (slot_of[b][0], slot_of[a][0])
    return None


def _widen(program, type_name) -> float:
    """Metres a point event of ``type_name`` is widened by (0 for other stamps: they go to the
    bucket always looked at, so any cell side is safe for them)."""
    decl = program.events.get(type_name) if type_name is not None else None
    pc = getattr(decl, "place", None)
    if pc is None or pc.widen is None:
        return 0.0
    return pc.widen.metres()

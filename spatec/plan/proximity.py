"""Physical pass ``proximity``: whether a phrase without a key is two nearby events, so
that a runner may cut it by a distance join instead of running it as one partition.

A phrase with no key whose root relates two events (``A op B``) of types placed at
points, local in time (every match within its span, depending on its own two events
only: then the matches among any subset of the events are matches of the whole), and
that asks ``overlap`` of the two (``||=``, ``;=``, ``overlap(A, B)``: 0 m) or
``distance(A, B) < D`` (or ``<=``, either side) has a bound: how far apart the two
events' location stamps can be in a match. Every match is then a pair of events whose
centres lie within that bound and both radii, and within ``span_bound`` in time: the
Spark runner finds such pairs with a Sedona distance join
(:func:`spatec.runners.spark.sedona.proximity_groups`) and matches groups of nearby
events apart ("any two buses, whatever their line, within 50 m at the same time").
"""
from __future__ import annotations

import dataclasses

from spatec.frontend import ast as A
from spatec.frontend.check import Program
from spatec.plan.nodes import Join, Leaf, PhrasePlan
from spatec.plan.physical import PhysicalPlan
from spatec.plan.predicates import distance_below


def proximity(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> PhysicalPlan:
    return dataclasses.replace(phys, proximity=proximity_bound(program, plan, phys))


def proximity_bound(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> float | None:
    """Metres (see the module), or None for a phrase a distance join cannot cut."""
    root = plan.root
    if phys.key or not phys.local_in_time or not isinstance(root, Join):
        return None
    if not (isinstance(root.left, Leaf) and isinstance(root.right, Leaf)):
        return None
    for leaf in (root.left, root.right):
        decl = program.events.get(leaf.type) if leaf.type is not None else None
        if decl is None or decl.place is None or decl.place.lon is None:
            return None
    pair = {root.left.var, root.right.var}
    bound = 0.0 if root.op.endswith("=") else None
    for c in root.preds:
        got = _distance_bound(c, pair)
        if got is not None:
            bound = got if bound is None else min(bound, got)
    return bound


def _distance_bound(c, pair: set) -> float | None:
    if isinstance(c, A.Call) and c.func == "overlap" and len(c.args) == 2 and \
            all(isinstance(a, A.Var) for a in c.args) and {a.name for a in c.args} == pair:
        return 0.0
    below = distance_below(c)
    if below is not None and {below[0], below[1]} == pair:
        return below[2]
    return None

"""Physical pass ``prefilter_regions``: the regions one of which each event of a type must
possibly meet to be of any use to the phrase, so that a runner may drop the others
before matching (a spatial join of the events against the regions).

Only types whose every use is a positive leaf restricted by a space pattern are
filtered: a type that is negated, bound in ``successive`` or read by an unfiltered
leaf is not (absences and ``successive`` need the events that match no positive
leaf). Results are the same with and without the pre-filter.
"""
from __future__ import annotations

import dataclasses

from spatec.frontend import ast as A
from spatec.frontend.check import Program
from spatec.frontend.printer import print_match
from spatec.plan.nodes import Leaf, PhrasePlan, walk_nodes
from spatec.plan.physical import PhysicalPlan, Region, is_successive


def prefilter_regions(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> PhysicalPlan:
    blocked, regions = set(), {}
    for n in walk_nodes(plan.root):
        if getattr(n, "absence", None) is not None:
            blocked |= {l.type for l in n.absence.leaves}
    if any(is_successive(c) for c in plan.deferred) or any(is_successive(f.expr) for f in plan.emit):
        blocked |= set(plan.vars.values())
    for n in walk_nodes(plan.root):
        if not isinstance(n, Leaf):
            continue
        if n.type is None:
            return dataclasses.replace(phys, prefilter=())
        if any(is_successive(c) for c in n.preds):
            blocked.add(n.type)
        need = None
        for f in n.filters:
            need = necessary(f)
            if need is not None:
                break
        if need is None:
            blocked.add(n.type)
        else:
            regions.setdefault(n.type, {}).update((r.name, r) for r in need)
    out = tuple((t, tuple(r[k] for k in sorted(r))) for t, r in sorted(regions.items()) if t not in blocked)
    return dataclasses.replace(phys, prefilter=out)


def necessary(p) -> tuple | None:
    """Regions an event must possibly meet to satisfy pattern ``p`` (one of them); None: no such set."""
    if isinstance(p, A.AtPlace):
        return (Region(p.place, p),)
    if isinstance(p, A.NearPlace):
        return (Region(f"{p.place}_{p.distance.metres():g}m", p),)
    if isinstance(p, A.InShape):
        return (Region(print_match(p), p),)
    if isinstance(p, A.Certainly):
        return necessary(p.pattern)   # certainly inside implies possibly
    if isinstance(p, A.Binary) and p.op in ("and", "or"):
        a, b = necessary(p.left), necessary(p.right)
        if p.op == "and":
            return a if a is not None else b
        return a + b if a is not None and b is not None else None
    return None

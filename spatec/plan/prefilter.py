"""Physical pass ``prefilter_regions``: the regions one of which each event of a type must
possibly meet to be of any use to the phrase, so that a runner may drop the others
before matching (a spatial join of the events against the regions).

Only types whose every use is a leaf restricted by a space pattern are filtered,
the negated leaf of an absence included: a type bound in ``successive``, read by
an unfiltered leaf or cut into runs is not (``successive`` and runs need the
events that match no leaf: a run's patterns restrict the run, and an event that
fails them ends it). An absence's X restricted to a region (``not (BusGPS -> X and
(at hospital or at station))``) is blocked only by events in it: one elsewhere
cannot be an X, and when the absence is decided depends on the input's time,
which the runners take from every event (the final watermark), not from the
filtered ones. A place set is one pre-filter region of many places (``at stops``:
an event must possibly meet one of them; the runners join the events against every
place of the set, Sedona's broadcast index join where the events are Spark rows).
Results are the same with and without the pre-filter.
"""
from __future__ import annotations

import dataclasses

from spatec.frontend import ast as A
from spatec.frontend.check import Program
from spatec.frontend.printer import print_match
from spatec.plan.nodes import Leaf, PhrasePlan, walk_nodes
from spatec.plan.physical import PhysicalPlan, Region, is_successive
from spatec.plan.types import is_derived


def prefilter_regions(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> PhysicalPlan:
    blocked, regions = set(), {}
    if any(is_successive(c) for c in plan.deferred) or any(is_successive(f.expr) for f in plan.emit):
        blocked |= set(plan.vars.values())
    leaves = []
    for n in walk_nodes(plan.root):
        if isinstance(n, Leaf):
            leaves.append(n)
        elif getattr(n, "absence", None) is not None:
            leaves += n.absence.leaves          # (the negated X: its events that can be an X)
    for n in leaves:
        if n.type is None:
            return dataclasses.replace(phys, prefilter=())
        if any(is_successive(c) for c in n.preds) or n.run is not None:
            blocked.add(n.type)
        need = None
        for f in n.filters:
            need = necessary(f, program.place_sets)
            if need is not None:
                break
        if need is None:
            blocked.add(n.type)
        else:
            regions.setdefault(n.type, {}).update((r.name, r) for r in need)
    # a phrase's composites are made by the runner, not read: nothing to filter before matching
    out = tuple((t, tuple(r[k] for k in sorted(r))) for t, r in sorted(regions.items())
                if t not in blocked and not is_derived(program, t))
    return dataclasses.replace(phys, prefilter=out)


def necessary(p, sets=()) -> tuple | None:
    """Regions an event must possibly meet to satisfy pattern ``p`` (one of them); None: no such
    set (``sets``: the names of place sets: a set is one region, any of its places). Without
    recursion."""
    got = A.trampoline(_necessary(p, sets))
    return None if got is None else tuple(got)


def _necessary(p, sets):
    # a list of regions or None, as a generator for A.trampoline (chains of any length)
    if isinstance(p, A.AtPlace) and p.place in sets:
        return [Region(p.place, A.AtPlace(p.place, span=p.span))]       # (any of its places)
    if isinstance(p, A.AtPlace):
        return [Region(p.place, A.AtPlace(p.place, span=p.span))]
    if isinstance(p, A.NearPlace):
        return [Region(f"{p.place}_{p.distance.metres():g}m", p)]
    if isinstance(p, A.InShape):
        return [Region(print_match(p), p)]
    if isinstance(p, A.Certainly):
        return (yield _necessary(p.pattern, sets))   # certainly inside implies possibly
    if isinstance(p, A.Binary) and p.op in ("and", "or"):
        a = yield _necessary(p.left, sets)
        b = yield _necessary(p.right, sets)
        if p.op == "and":
            return a if a is not None else b
        if a is None or b is None:
            return None
        a.extend(b)
        return a
    return None

"""Physical passes ``route_keys`` and ``source_history``: which event types a phrase reads,
which of them go to the key of their values and which to every key, and when a
partition also needs other partitions' events of its sources (``successive``)."""
from __future__ import annotations

import dataclasses

from spatec.frontend.check import Program
from spatec.plan.nodes import Leaf, PhrasePlan, walk_nodes
from spatec.plan.physical import PhysicalPlan, is_successive
from spatec.plan.types import attr_names, derived_types, source_attrs


def route_keys(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> PhysicalPlan:
    """Types read (a leaf of any type reads every declared type: a pattern alone matches
    input events, never another phrase's composites); keyed: those with every key
    attribute (all of them without a key); the rest broadcast. With no keyed type the
    phrase has no key: its events form one partition."""
    types = set()
    for n in walk_nodes(plan.root):
        if isinstance(n, Leaf):
            types.add(n.type)
        if getattr(n, "absence", None) is not None:
            types |= {l.type for l in n.absence.leaves}
    if None in types:
        types = (types - {None}) | set(program.events)
    if not plan.key:
        keyed = set(types)
    else:
        keyed = {t for t in types if all(k in attr_names(program, t) for k in plan.key)}
    return dataclasses.replace(phys, types=tuple(sorted(types)), key=tuple(plan.key) if keyed else (),
                               keyed=tuple(sorted(keyed)), broadcast=tuple(sorted(types - keyed)),
                               derived=derived_types(program, types))


def source_history(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> PhysicalPlan:
    """``successive`` means nothing of the same type and source between (SPEC §4): under a
    key that is not the source, a partition also needs, as history only, the events of its
    sources that the key sent to other partitions."""
    exprs = list(plan.deferred)
    for n in walk_nodes(plan.root):
        exprs += list(n.preds)
        if getattr(n, "absence", None) is not None:
            exprs += list(n.absence.conds)
    successive = any(is_successive(e) for e in exprs)
    history = ()
    if phys.key and successive:
        history = tuple(t for t in phys.keyed if (source_attrs(program, t)
                                                 and tuple(phys.key) != source_attrs(program, t)))
    return dataclasses.replace(phys, successive=successive, source_history=history)

"""Physical pass ``attributes_read``: the attributes of each type a phrase reads (in any
condition, absence, ``emit``, its key, its source), so that a runner may move and
convert only those."""
from __future__ import annotations

import dataclasses

from spatec.frontend import ast as A
from spatec.frontend.check import Program
from spatec.plan.nodes import PhrasePlan, walk_nodes
from spatec.plan.physical import PhysicalPlan


def attributes_read(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> PhysicalPlan:
    exprs = list(plan.deferred) + [f.expr for f in plan.emit]
    for n in walk_nodes(plan.root):
        exprs += list(n.preds)
        if getattr(n, "absence", None) is not None:
            exprs += list(n.absence.conds)
    named = {x.name for e in exprs for x in A.walk(e) if isinstance(x, A.Attr)} | set(plan.key)
    out = []
    for t in phys.types:
        decl = program.events[t]
        want = set(named)
        if decl.source is not None:
            want.add(decl.source.attr)
        out.append((t, tuple(a.name for a in decl.attrs if a.name in want)))
    return dataclasses.replace(phys, attributes=tuple(out))

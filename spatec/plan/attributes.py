"""Physical pass ``attributes_read``: the attributes of each type a phrase reads (in any
condition, absence, ``emit``, its key, its source), so that a runner may move and
convert only those."""
from __future__ import annotations

import dataclasses

from spatec.frontend import ast as A
from spatec.frontend.check import Program
from spatec.plan.nodes import PhrasePlan, walk_nodes
from spatec.plan.physical import PhysicalPlan
from spatec.plan.types import attr_names, source_attrs


def attributes_read(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> PhysicalPlan:
    exprs = list(plan.deferred) + [f.expr for f in plan.emit]
    for n in walk_nodes(plan.root):
        exprs += list(n.preds)
        if getattr(n, "absence", None) is not None:
            exprs += list(n.absence.conds)
        run = getattr(n, "run", None)
        if run is not None and run.cond is not None:
            exprs.append(run.cond)
    named = {x.name for e in exprs for x in A.walk(e) if isinstance(x, A.Attr)} | set(plan.key) \
        | set(plan.run_keys)
    out = []
    for t in phys.types:
        want = set(named)
        want.update(source_attrs(program, t))
        out.append((t, tuple(a for a in attr_names(program, t) if a in want)))
    return dataclasses.replace(phys, attributes=tuple(out))

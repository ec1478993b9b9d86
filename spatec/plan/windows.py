"""Physical pass ``time_windows``: whether a phrase's matches are local in time, so that a
runner may cut its events into stretches of time matched apart.

When every match lies within ``span_bound`` and depends on its own events only (no
absence, no ``successive``, no negated leaf), the matches that start in ``[t0, t1)``
are exactly those among the events that start in ``[t0, t1 + span]``.
"""
from __future__ import annotations

import dataclasses

from spatec.frontend.check import Program
from spatec.plan.nodes import After, PhrasePlan, walk_nodes
from spatec.plan.physical import PhysicalPlan


def time_windows(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> PhysicalPlan:
    local = plan.span_bound is not None and not plan.deferred and not plan.negated and not any(
        isinstance(n, After) or getattr(n, "absence", None) is not None for n in walk_nodes(plan.root))
    return dataclasses.replace(phys, local_in_time=local)

"""Checked phrase → plan: the planner's passes, in the order they run.

Logical passes (the operator tree and where each condition is decided):

1. :func:`~spatec.plan.normalise.normalise`: the match's syntax tree becomes an
   operator tree of leaves, joins, ``or`` and the absence forms, patterns pushed
   to the nodes they restrict;
2. :func:`~spatec.plan.predicates.place_predicates`: each ``where`` conjunct goes to
   the lowest node that binds its variables (or its absence); ``successive`` also
   decided at the end;
3. :func:`~spatec.plan.partition.partition_key`: from ``per``, or inferred from
   equality conjuncts.

Physical passes (:data:`PHYSICAL`: each ``(program, plan, physical) -> physical``),
which fill the phrase's :class:`~spatec.plan.physical.PhysicalPlan`: the evaluator
(a fast path or the automaton), key routing, source history for ``successive``, the
leaf pre-filter's regions, whether the phrase may be cut into stretches of time,
whether a keyless phrase of two nearby events may be cut by a distance join
(``proximity``), the attributes it reads, and how each join finds its candidates, chosen
by estimated rates and selectivities (``order_joins``, SPEC §10: from a sample of the input
when the runner has it, :func:`~spatec.plan.program.with_statistics`, else the declared
defaults).
"""
from __future__ import annotations

import dataclasses

from spatec.frontend import ast as A
from spatec.frontend.check import PhraseInfo, Program
from spatec.plan.attributes import attributes_read
from spatec.plan.evaluator import choose_evaluator
from spatec.plan.nodes import Leaf, PhrasePlan, walk_nodes
from spatec.plan.normalise import normalise
from spatec.plan.order import order_joins
from spatec.plan.partition import needs_one_partition, partition_key, per_equalities
from spatec.plan.physical import PhysicalPlan
from spatec.plan.predicates import place_predicates, split_conjuncts
from spatec.plan.prefilter import prefilter_regions
from spatec.plan.proximity import proximity
from spatec.plan.routing import route_keys, source_history
from spatec.plan.runs import runs_share, runs_split
from spatec.plan.statistics import DEFAULTS
from spatec.errors import UnsupportedError
from spatec.plan.support import require_backend
from spatec.plan.windows import time_windows

#: The physical passes, in the order they run (a later pass may read what an earlier set).
PHYSICAL = (
    choose_evaluator,
    route_keys,
    source_history,
    prefilter_regions,
    time_windows,
    proximity,
    attributes_read,
    order_joins,
)


def plan_phrase(program: Program, info: PhraseInfo, stats=None) -> PhrasePlan:
    plan = logical_plan(program, info)
    return dataclasses.replace(plan, physical=physical_plan(program, plan, stats))


def logical_plan(program: Program, info: PhraseInfo) -> PhrasePlan:
    p = info.phrase
    root = normalise(program, p.match, info.runs)
    conjuncts = split_conjuncts(p.where)
    one_partition = p.per is not None and needs_one_partition(program, p.per, root)
    run_keys = runs_share(program, info, p.per)
    if one_partition or run_keys:
        conjuncts = conjuncts + per_equalities(program, info, p.per)
    root, deferred = place_predicates(root, conjuncts, info)
    key, key_source = partition_key(program, info, root, conjuncts)
    if one_partition:
        key, key_source = (), "per, as conditions (a match may hold no keyed event)"
    elif run_keys:
        key, key_source = (), "per, as conditions (runs are cut per source, and the key is not the source)"
    elif key and runs_split(program, info, key):
        key, key_source = (), "none (the inferred key is not the source that runs are cut by)"
    leaves = tuple(sorted((n for n in walk_nodes(root) if isinstance(n, Leaf)), key=lambda l: l.slot))
    gaps = [_gap(d) for d in program.events.values()]
    return PhrasePlan(
        name=p.name, root=root, leaves=leaves, vars=dict(info.vars), negated=dict(info.negated),
        key=key, key_source=key_source, within=p.within.micros() if p.within else None,
        span_bound=info.span_bound, deferred=tuple(deferred), emit=p.emit, schema=tuple(info.schema),
        max_gap=max(gaps, default=0), types=info.types, places=dict(info.places), run_keys=run_keys,
        as_event=info.as_event)


def physical_plan(program: Program, plan: PhrasePlan, stats=None) -> PhysicalPlan:
    """The physical passes over ``plan``; ``stats``: the estimates they choose by
    (:mod:`spatec.plan.statistics`; None: the declared defaults)."""
    phys = PhysicalPlan(plan.name, estimates=stats if stats is not None else DEFAULTS)
    for rule in PHYSICAL:
        phys = rule(program, plan, phys)
    return phys


def plan_program(program: Program, mode: str = "batch", stats=None) -> list[PhrasePlan]:
    require_backend(program, mode)
    out = []
    for info in program.phrases:
        try:
            out.append(plan_phrase(program, info, stats))
        except RecursionError:
            # a backstop: every pass walks the tree without recursion (REFERENCE, decision 35)
            raise UnsupportedError(
                "match expressions nested this deep", mode,
                f"phrase {info.name}: its match expression is nested too deep for the planner "
                "(a pass recursed on the tree's depth: please report it)") from None
    return out


def _gap(decl: A.EventDecl) -> int:
    """hi - t for events of this type (µs): how far an event's stamp reaches past its local time."""
    tc = decl.time
    if tc is None:
        return 0
    if tc.high is None:
        return tc.widen.micros() if tc.widen is not None else 0
    return 0  # t is the upper end itself

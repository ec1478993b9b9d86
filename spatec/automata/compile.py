"""A phrase's automaton as plain data (:class:`AutomatonSpec`), compiled from its plan.

After Flink CEP's ``NFACompiler``: the compiler derives the detector tree's structure
once (which node feeds which, how events of each type enter it, which partial
matches each buffer may drop and when) as frozen data that prints, compares and
serialises (:mod:`spatec.plan.data`); :func:`spatec.automata.machine.bind` then turns
a spec into the :class:`~spatec.automata.machine.Automaton` that runs, with its
patterns and conditions compiled for one projection. The spec carries what binding
needs (the places its patterns name, the time zone), so it can be shipped to another
process and bound there, and its :meth:`~AutomatonSpec.fingerprint` is what a
checkpoint of per-key run states is valid for.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from spatec.frontend import ast as A
from spatec.frontend.bounds import stamp_length
from spatec.plan import data
from spatec.plan.nodes import After, Join, Leaf, Or, PhrasePlan, walk_nodes
from spatec.plan.types import type_length


@dataclass(frozen=True)
class AutomatonSpec:
    """The detector tree of one phrase, as data (shared by every key)."""

    plan: PhrasePlan
    timezone: str
    places: tuple            # ((name, PlaceDecl), ...): the places its patterns name
    parent: tuple            # ((child node id, parent node id, side "L"/"R"), ...)
    succ_chains: tuple       # variables of each `successive(...)` decided at the end
    needs_history: bool      # some condition uses `successive`: keep each source's local times
    has_or: bool             # a composite may be found twice (once per branch)
    type_len: tuple          # ((type or None: any, largest stamp length µs or None), ...)
    span: Optional[int]      # largest stamp length of a match (µs); None: unbounded
    max_window: int          # longest absence window (µs)
    rules: tuple             # (((join id, side), ((rule, value), ...)), ...): how a buffered match dies
    place_sets: tuple = ()   # ((name, PlaceSet), ...): the place sets its patterns name (SPEC §9)

    @property
    def name(self) -> str:
        return self.plan.name

    def fingerprint(self) -> str:
        """What a per-key run state of this automaton depends on (16 hex digits)."""
        return data.fingerprint(self)


def compile_automaton(plan: PhrasePlan, program) -> AutomatonSpec:
    """The automaton of ``plan`` as data (``program``: its declarations and places)."""
    nodes = list(walk_nodes(plan.root))
    parent = []
    for n in nodes:
        if isinstance(n, (Join, Or)):
            parent += [(n.left.id, n.id, "L"), (n.right.id, n.id, "R")]
        elif isinstance(n, After):
            parent.append((n.left.id, n.id, "L"))
    negs = [n.absence for n in nodes if isinstance(n, (Join, After)) and n.absence is not None]
    succ_chains = tuple(tuple(chain_name(a) for a in c.args) for c in plan.deferred
                        if isinstance(c, A.Call) and c.func == "successive")
    needs_history = plan.physical.successive
    lens = {t: stamp_length(d) for t, d in program.events.items()}
    values = list(lens.values())
    # a leaf of any type matches input events only (never another phrase's composites)
    lens[None] = None if any(x is None for x in values) else max(values, default=0)
    for t in plan.physical.derived:
        lens[t] = type_length(program, t)
    span = plan.span_bound if plan.span_bound is not None else plan.within
    max_window = max([neg.window or 0 for neg in negs], default=0)
    names = sorted(_place_names(nodes, negs, plan))
    sets = getattr(program, "place_sets", {})
    spec = AutomatonSpec(plan, program.timezone, tuple((p, program.places[p]) for p in names if p in program.places),
                         tuple(parent), succ_chains, needs_history, any(isinstance(n, Or) for n in nodes),
                         tuple(lens.items()), span, max_window, (),
                         tuple((p, sets[p]) for p in names if p in sets))
    return AutomatonSpec(**{**spec.__dict__, "rules": _prune_rules(spec, nodes, dict(lens))})


def chain_name(a) -> str:
    """A ``successive`` argument as a chain entry: a variable's name, or ``R.first``/``R.last``."""
    if isinstance(a, A.Attr):
        return f"{a.var}.{a.name if a.member is None else a.member}"
    return a.name


def _place_names(nodes, negs, plan) -> set:
    out = set()
    filters = [f for n in nodes for f in n.filters] + [f for neg in negs for l in neg.leaves for f in l.filters]
    filters += [n.run.filter for n in nodes if getattr(n, "run", None) is not None and n.run.filter is not None]
    for f in filters:
        for x in A.walk(f):
            if isinstance(x, (A.AtPlace, A.NearPlace)):
                out.add(x.place)
    return out


def _prune_rules(spec: AutomatonSpec, nodes: list, type_len: dict) -> tuple:
    """For each (join, side): how a buffered partial match becomes useless."""
    var_slots = {}
    for l in spec.plan.leaves:
        if l.bound:
            var_slots.setdefault(l.var, l.slot)
    rules = []
    lens = node_lens(nodes, spec.plan.within, type_len)
    for n in nodes:
        if not isinstance(n, Join):
            continue
        for side, mine, other in (("L", n.left, n.right), ("R", n.right, n.left)):
            r = []
            if n.op in A.CONC_OPS:
                ol = lens[other.id]
                if ol is not None:
                    r.append(("conc", ol))
            if side == "R" and n.op in A.SEQ_OPS:
                r.append(("seq_right", True))
            if not spec.succ_chains:
                rules.append(((n.id, side), tuple(r)))
                continue     # (the variables below each side: only for `successive`)
            mv, ov = _vars(mine), _vars(other)
            succ = []
            for chain in spec.succ_chains:
                for a, b in zip(chain, chain[1:]):
                    if a not in var_slots or b not in var_slots:
                        continue   # a run's member: no early pruning by it
                    if a in mv and b in ov:
                        succ.append(("next", var_slots[a]))
                    elif b in mv and a in ov:
                        succ.append(("prev", var_slots[b]))
            if succ and isinstance(other, Leaf):
                # only when the partner is one event: a partner made of several
                # could still complete later around an event already seen
                r.append(("succ", tuple(succ)))
            rules.append(((n.id, side), tuple(r)))
    return tuple(rules)


def node_len(n, within: int | None, type_len: dict) -> int | None:
    """Largest stamp length of a match of node ``n`` (µs), None if unbounded."""
    return node_lens(walk_nodes(n), within, type_len)[n.id]


def node_lens(nodes, within: int | None, type_len: dict) -> dict:
    """:func:`node_len` of each of ``nodes`` (children before parents, as
    :func:`~spatec.plan.nodes.walk_nodes` gives them), by node id; without recursion."""
    out = {}
    for n in nodes:
        if isinstance(n, Leaf):
            x = None if n.run is not None else type_len.get(n.type)   # a run's stamp has no bound
        elif isinstance(n, Or):
            a, b = out[n.left.id], out[n.right.id]
            x = None if a is None or b is None else max(a, b)
        elif isinstance(n, After):
            x = out[n.left.id]
        elif isinstance(n, Join) and n.op in A.CONC_OPS and n.absence is None:
            a, b = out[n.left.id], out[n.right.id]
            x = None if a is None or b is None else a + b
        else:
            x = None
        if within is not None:
            x = within if x is None else min(x, within)
        out[n.id] = x
    return out


def _vars(n) -> set:
    return {l.var for l in walk_nodes(n) if isinstance(l, Leaf) and l.bound}

"""Which events a phrase reads and which key each goes to (SPEC §4: ``per KEY``)."""
from __future__ import annotations

from spatec.frontend.check import Program
from spatec.plan.nodes import Leaf, PhrasePlan, walk_nodes
from spatec.runtime.events import event_order


def phrase_types(plan: PhrasePlan, program: Program) -> set:
    """Event types a phrase reads (None among leaves: every type)."""
    types = set()
    for n in walk_nodes(plan.root):
        if isinstance(n, Leaf):
            types.add(n.type)
        if getattr(n, "absence", None) is not None:
            types |= {l.type for l in n.absence.leaves}
    if None in types:
        return set(program.events)
    return types


def keyed_types(plan: PhrasePlan, program: Program, types) -> set:
    """Types that carry every key attribute (partitioned); the others are broadcast."""
    if not plan.key:
        return set(types)
    out = set()
    for t in types:
        names = {a.name for a in program.events[t].attrs}
        if all(k in names for k in plan.key):
            out.add(t)
    return out


def partitions(plan: PhrasePlan, program: Program, evs_by_type: dict, history: dict | None = None) -> dict:
    """key value → events (broadcast types in every partition), each sorted by event time.

    ``history`` (type → events): events of other partitions, held elsewhere
    (another Spark group), that ``successive`` may need as history only."""
    types = phrase_types(plan, program)
    keyed = keyed_types(plan, program, types)
    parts: dict = {}
    broadcast = []
    for t in types:
        for ev in evs_by_type.get(t, ()):
            if not plan.key:
                parts.setdefault((), []).append(ev)
            elif t in keyed:
                k = tuple(ev.attrs.get(a) for a in plan.key)
                if any(v is None for v in k):
                    continue  # an event with no key value relates to no other (SPEC: shares its value)
                parts.setdefault(k, []).append(ev)
            else:
                broadcast.append(ev)
    if broadcast:
        if not parts and not keyed:
            parts[()] = []
        for k in parts:
            parts[k] = parts[k] + broadcast
    if needs_source_history(plan, program):
        _add_source_history(plan, program, parts, evs_by_type, types, history or {})
    for k in parts:
        parts[k].sort(key=event_order)
    return parts


def needs_source_history(plan: PhrasePlan, program: Program) -> bool:
    """A phrase using ``successive`` partitioned by something other than the source:
    partitions need other partitions' events of their sources as history."""
    if not plan.key or not uses_successive(plan):
        return False
    for t in phrase_types(plan, program):
        decl = program.events.get(t)
        if decl is not None and decl.source is not None and tuple(plan.key) != (decl.source.attr,):
            return True
    return False


def uses_successive(plan: PhrasePlan) -> bool:
    from spatec.frontend import ast as A

    exprs = list(plan.deferred)
    for n in walk_nodes(plan.root):
        exprs += list(n.preds)
        if getattr(n, "absence", None) is not None:
            exprs += list(n.absence.conds)
    return any(isinstance(x, A.Call) and x.func == "successive" for e in exprs for x in A.walk(e))


def _add_source_history(plan: PhrasePlan, program: Program, parts: dict, evs_by_type: dict, types,
                        history: dict) -> None:
    """``successive`` means nothing of the same type and source between (SPEC §4):
    when the partition key is not the source, a partition also needs, as history
    only, the events of its sources that the key sent to other partitions."""
    from spatec.automata.machine import HistoryEv

    for t in types:
        decl = program.events.get(t)
        if decl is None or decl.source is None or tuple(plan.key) == (decl.source.attr,):
            continue
        by_source: dict = {}
        for ev in list(evs_by_type.get(t, ())) + list(history.get(t, ())):
            if ev.source is not None:
                by_source.setdefault(ev.source, []).append(ev)
        for k, evs in parts.items():
            mine = {id(e) for e in evs}
            sources = {e.source for e in evs if e.type == t and e.source is not None}
            extra = [HistoryEv(e.type, e.id, e.source, e.t, e.lo, e.hi, e.loc, e.attrs)
                     for s in sources for e in by_source[s] if id(e) not in mine]
            evs.extend(extra)

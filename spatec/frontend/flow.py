"""The program's phrases as a flow graph (SPEC §8): a phrase that matches another
phrase's name consumes its composites. The graph must be acyclic; producers
are checked (and later evaluated) before their consumers.

Everything here is a loop over explicit stacks and queues: a chain of 10,000
phrases each consuming the one before is fine.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from spatec.errors import Span
from spatec.frontend import ast as A


@dataclass(frozen=True)
class Cycle:
    """Phrases that consume each other's composites: ``path[0] → path[1] → ... → path[0]``."""

    path: tuple          # phrase names; path[0] is the first of them in the program
    span: Span           # where path[0] names path[1]


def references(p: A.Phrase, names) -> list[tuple[str, Span]]:
    """(phrase name, span of the name) for each use of another phrase's name in ``p``'s match."""
    out = []
    for n in A.walk(p.match):
        if isinstance(n, (A.EventRef, A.Run)) and n.type in names:
            out.append((n.type, n.type_span if n.type_span.line else n.span))
    return out


def flow(phrases: list[A.Phrase]) -> tuple[list[str], dict, list[Cycle]]:
    """(order, inputs, cycles) for phrases with distinct names.

    ``order`` lists every phrase, producers before consumers and otherwise in
    program order; phrases on or after a cycle come last, in program order.
    ``inputs`` maps each phrase to the phrases it consumes.
    """
    index = {p.name: i for i, p in enumerate(phrases)}
    refs = {p.name: references(p, index) for p in phrases}
    inputs = {name: tuple(dict.fromkeys(r for r, _ in rs)) for name, rs in refs.items()}
    consumers: dict = {name: [] for name in index}
    for name, ins in inputs.items():
        for i in ins:
            consumers[i].append(name)
    waiting = {name: len(ins) for name, ins in inputs.items()}
    ready = [index[n] for n, k in waiting.items() if k == 0]
    heapq.heapify(ready)
    order: list = []
    while ready:
        name = phrases[heapq.heappop(ready)].name
        order.append(name)
        for c in consumers[name]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, index[c])
    left = [p.name for p in phrases if waiting[p.name] > 0]
    cycles = _cycles(left, inputs, index, refs)
    return order + left, inputs, cycles


def _cycles(left: list, inputs: dict, index: dict, refs: dict) -> list[Cycle]:
    """One cycle per strongly connected component of the phrases left unordered."""
    if not left:
        return []
    members = set(left)
    out = []
    for comp in _components(left, inputs, members):
        start = min(comp, key=index.get)
        if len(comp) == 1 and start not in inputs[start]:
            continue  # downstream of a cycle, not on one
        path = _path_back(start, inputs, set(comp))
        span = next(s for name, s in refs[start] if name == path[1])
        out.append(Cycle(tuple(path[:-1]), span))
    out.sort(key=lambda c: index[c.path[0]])
    return out


def _path_back(start: str, inputs: dict, comp: set) -> list:
    """The shortest path start → ... → start along ``inputs`` inside one component."""
    prev: dict = {}
    queue = [start]
    for name in queue:
        for nxt in inputs[name]:
            if nxt not in comp:
                continue
            if nxt == start:
                path = [start]
                while name != start:
                    path.append(name)
                    name = prev[name]
                path.append(start)
                # path is start, ..., built backwards from the last step: reverse the inner part
                return [start] + path[1:-1][::-1] + [start] if len(path) > 2 else [start, start]
            if nxt not in prev:
                prev[nxt] = name
                queue.append(nxt)
    return [start, start]


def _components(nodes: list, inputs: dict, members: set) -> list[list]:
    """Strongly connected components (Tarjan's algorithm, with an explicit stack)."""
    index: dict = {}
    low: dict = {}
    on: set = set()
    stack: list = []
    comps: list = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            succ = [w for w in inputs[v] if w in members]
            recurse = False
            while i < len(succ):
                w = succ[i]
                i += 1
                if w not in index:
                    work.append((v, i))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return comps

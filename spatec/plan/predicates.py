"""Pass 2, ``place_predicates``: ``where`` is split into conjuncts; each goes to the
lowest node that binds all its variables; a conjunct mentioning a negated variable
becomes part of that absence; ``successive`` conjuncts are also decided at the end
with the full history of their source."""
from __future__ import annotations

import dataclasses

from spatec.errors import PlanError
from spatec.frontend import ast as A
from spatec.frontend.check import PhraseInfo
from spatec.plan.nodes import After, Join, Leaf, Or, definite_vars, place_vars, walk_nodes
from spatec.plan.physical import is_successive


def split_conjuncts(e) -> list:
    """The conjuncts of ``e``, left to right (without recursion: chains of any length)."""
    out, todo = [], [] if e is None else [e]
    while todo:
        x = todo.pop()
        if isinstance(x, A.BoolOp) and x.op == "and":
            todo += (x.right, x.left)
        else:
            out.append(x)
    return out


def expr_vars(e) -> set[str]:
    out: set[str] = set()
    for n in A.walk(e):
        if isinstance(n, (A.Var,)):
            out.add(n.name)
        elif isinstance(n, A.Attr):
            out.add(n.var)
    return out


def distance_below(c) -> tuple | None:
    """``distance(X, Y) < D`` or ``<= D`` (written either way round, ``D > distance(X, Y)``
    too) as ``(X, Y, metres, strict)``, else None."""
    if not isinstance(c, A.BinOp):
        return None
    left, op, right = c.left, c.op, c.right
    if op in (">", ">="):
        left, right, op = right, left, {">": "<", ">=": "<="}[op]
    if op not in ("<", "<=") or not (isinstance(left, A.Call) and left.func == "distance"
                                     and len(left.args) == 2 and all(isinstance(a, A.Var) for a in left.args)):
        return None
    if not (isinstance(right, A.Quantity) and right.dimension == "distance"):
        return None
    return left.args[0].name, left.args[1].name, right.metres(), op == "<"


def place_predicates(root, conjuncts, info: PhraseInfo):
    """Attach each conjunct to the lowest node binding its variables; return (root, deferred)."""
    negs = {}
    for n in walk_nodes(root):
        if isinstance(n, (Join, After)) and n.absence is not None and n.absence.var:
            negs[n.absence.var] = n.id
    at_node: dict[int, list] = {}
    neg_conds: dict[int, list] = {}
    deferred = []
    lowest = _Lowest(root)
    for c in conjuncts:
        vs = expr_vars(c)
        neg = [negs[v] for v in vs if v in negs]
        if neg:
            if len(set(neg)) > 1:
                raise PlanError("a condition cannot relate two negated events")
            neg_conds.setdefault(neg[0], []).append(c)
            continue
        if is_successive(c):
            deferred.append(c)
            if not (isinstance(c, A.Call) and c.func == "successive"):
                continue  # decided only with the whole history
            # successive(A, B, C) implies successive(A, B) and successive(B, C): each pair
            # filters early, at the node that first binds it
            for a, b in zip(c.args, c.args[1:]):
                pair = A.Call("successive", (a, b), span=c.span)
                at_node.setdefault(lowest({a.name, b.name}).id, []).append(pair)
            continue
        target = lowest(vs)
        at_node.setdefault(target.id, []).append(c)

    def rebuild(n):
        # a generator for A.trampoline (trees of any depth)
        if isinstance(n, Leaf):
            return dataclasses.replace(n, preds=tuple(at_node.get(n.id, ())))
        kw = {"preds": tuple(at_node.get(n.id, ()))}
        if isinstance(n, (Join, Or)):
            kw["left"] = yield rebuild(n.left)
            kw["right"] = yield rebuild(n.right)
        else:
            kw["left"] = yield rebuild(n.left)
        if isinstance(n, (Join, After)) and n.absence is not None:
            kw["absence"] = dataclasses.replace(n.absence, conds=tuple(neg_conds.get(n.id, ())))
        return dataclasses.replace(n, **kw)

    return A.trampoline(rebuild(root)), deferred


class _Lowest:
    """:func:`_lowest` for many conjuncts of one tree, each in about the time of walking from
    its variables' leaves up to where they meet (a chain of n events with n conjuncts: n
    steps, not n² by :func:`_lowest`'s descent from the root, which finds the variables
    below each node on the way). In a tree without ``or`` whose every variable is bound at
    one node, the nodes binding all of ``vs`` are exactly those above all their binding
    nodes: the lowest is where those meet. Otherwise (an ``or``, a variable bound twice or
    not at all, no variables): :func:`_lowest`."""

    def __init__(self, root):
        self.root = root
        self.parent, self.depth, self.binder = {}, {root.id: 0}, {}
        self.simple = True
        twice = set()
        order = list(walk_nodes(root))
        for n in reversed(order):      # parents before children
            if isinstance(n, Or):
                self.simple = False
            kids = [n.left, n.right] if isinstance(n, (Join, Or)) else [n.left] if isinstance(n, After) else []
            for c in kids:
                self.parent[c.id] = n
                self.depth[c.id] = self.depth[n.id] + 1
        for n in order:
            own = set(place_vars(n.filters))
            if isinstance(n, Leaf):
                own.add(n.var)
            for v in own:
                if v in self.binder:
                    twice.add(v)
                self.binder[v] = n
        for v in twice:
            del self.binder[v]

    def __call__(self, vs: set[str]):
        if not self.simple or not vs or any(v not in self.binder for v in vs):
            return _lowest(self.root, vs)
        parent, depth = self.parent, self.depth
        it = iter(vs)
        a = self.binder[next(it)]
        for v in it:
            b = self.binder[v]
            while depth[a.id] > depth[b.id]:
                a = parent[a.id]
            while depth[b.id] > depth[a.id]:
                b = parent[b.id]
            while a is not b:
                a, b = parent[a.id], parent[b.id]
        return a


def _lowest(n, vs: set[str]):
    """The deepest node whose every match binds all of ``vs`` (never below an `or`:
    a conjunct placed in one branch would not restrict the other)."""
    while True:
        children = []
        if isinstance(n, Join):
            children = [n.left, n.right]
        elif isinstance(n, After):
            children = [n.left]
        for c in children:
            if vs <= definite_vars(c):
                n = c
                break
        else:
            return n

"""Pass 3, ``partition_key``: from ``per``, or inferred from equality conjuncts that
connect every variable on the same attribute. A ``per`` phrase whose matches may
hold no keyed event runs as one partition, with ``per`` as conditions."""
from __future__ import annotations

from spatec.frontend import ast as A
from spatec.frontend.check import PhraseInfo, Program
from spatec.plan.nodes import After, Join, Leaf, Or, walk_nodes


def _has_attr(program: Program, type_name, attr: str) -> bool:
    decl = program.events.get(type_name)
    return decl is not None and any(a.name == attr for a in decl.attrs)


def _keyless(n, program: Program, key: str) -> bool:
    """Can a match of ``n`` hold no event of a type with attribute ``key``?"""
    if isinstance(n, Leaf):
        return n.type is None or not _has_attr(program, n.type, key)
    if isinstance(n, Join):
        return _keyless(n.left, program, key) and _keyless(n.right, program, key)
    if isinstance(n, Or):
        return _keyless(n.left, program, key) or _keyless(n.right, program, key)
    return _keyless(n.left, program, key)


def needs_one_partition(program: Program, key: str, root) -> bool:
    """`per KEY` relates the events that have KEY. A match made only of events
    without it (rain cells) is related to no key: the events that may negate it
    (`not X`) or come between (`successive`) are then those of every key, so the
    phrase cannot be split by key. It runs as one partition, with `per` as conditions."""
    if not _keyless(root, program, key):
        return False
    for n in walk_nodes(root):
        neg = getattr(n, "absence", None)
        if neg is not None and any(l.type is None or _has_attr(program, l.type, key) for l in neg.leaves):
            return True
    return False


def per_equalities(program: Program, info: PhraseInfo, key: str) -> list:
    """`per KEY` as conditions: V.KEY == W.KEY for the variables whose types have KEY."""
    names = [v for v, t in list(info.vars.items()) + list(info.negated.items()) if _has_attr(program, t, key)]
    return [A.BinOp("==", A.Attr(a, key), A.Attr(b, key)) for a, b in zip(names, names[1:])]


def partition_key(program: Program, info: PhraseInfo, root, conjuncts) -> tuple[tuple, str]:
    p = info.phrase
    if p.per is not None:
        return (p.per,), "per"
    # Inferred: an attribute k such that `V.k == W.k` conjuncts connect every variable
    # (negated ones too), every leaf is a typed, bound variable whose type has k.
    leaves = [n for n in walk_nodes(root) if isinstance(n, Leaf)]
    neg_leaves = [l for n in walk_nodes(root) if isinstance(n, (Join, After)) and n.absence
                  for l in n.absence.leaves]
    allv = leaves + neg_leaves
    if not allv or any(l.type is None or not l.bound for l in allv):
        return (), "none"
    var_types = {l.var: l.type for l in allv}
    attrs_of = {t: {a.name for a in program.events[t].attrs} for t in set(var_types.values())}
    common = set.intersection(*attrs_of.values()) if attrs_of else set()
    key = []
    for k in sorted(common):
        edges = []
        for c in conjuncts:
            if isinstance(c, A.BinOp) and c.op == "==" and isinstance(c.left, A.Attr) \
                    and isinstance(c.right, A.Attr) and c.left.name == k and c.right.name == k:
                edges.append((c.left.var, c.right.var))
        if _connected(set(var_types), edges):
            key.append(k)
    if key:
        return tuple(key), "inferred"
    return (), "none"


def _connected(nodes: set, edges: list) -> bool:
    if len(nodes) <= 1:
        return False  # one variable: nothing to infer from
    parent = {n: n for n in nodes}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        if a in parent and b in parent:
            parent[find(a)] = find(b)
    return len({find(n) for n in nodes}) == 1

"""Checked phrase → logical plan.

Passes, in order (each a function of its own below):

1. ``normalise``: the syntax tree becomes an operator tree of leaves, joins,
   ``or``, and the two absence forms; patterns joined by ``and`` to an event
   expression become filters of the node they restrict (pushed to the leaf when
   that node is a leaf).
2. ``place_predicates``: ``where`` is split into conjuncts; each goes to the
   lowest node that binds all its variables; a conjunct mentioning a negated
   variable becomes part of that absence; ``successive`` conjuncts are also
   decided at the end with the full history of their source.
3. ``partition_key``: from ``per``, or inferred from equality conjuncts that
   connect every variable on the same attribute.
"""
from __future__ import annotations

import dataclasses
from itertools import count

from spatec.errors import PlanError
from spatec.frontend import ast as A
from spatec.frontend.check import PhraseInfo, Program
from spatec.plan.nodes import (
    After,
    Join,
    Leaf,
    Negation,
    Or,
    PhrasePlan,
    definite_vars,
    walk_nodes,
)
from spatec.plan.support import require_backend


def plan_phrase(program: Program, info: PhraseInfo) -> PhrasePlan:
    p = info.phrase
    b = _Builder(program)
    root = b.normalise(p.match)
    conjuncts = split_conjuncts(p.where)
    one_partition = p.per is not None and _needs_one_partition(program, p.per, root)
    if one_partition:
        conjuncts = conjuncts + per_equalities(program, info, p.per)
    root, deferred = place_predicates(root, conjuncts, info)
    key, key_source = partition_key(program, info, root, conjuncts)
    if one_partition:
        key, key_source = (), "per, as conditions (a match may hold no keyed event)"
    leaves = tuple(sorted((n for n in walk_nodes(root) if isinstance(n, Leaf)), key=lambda l: l.slot))
    gaps = [_gap(d) for d in program.events.values()]
    return PhrasePlan(
        name=p.name, root=root, leaves=leaves, vars=dict(info.vars), negated=dict(info.negated),
        key=key, key_source=key_source, within=p.within.micros() if p.within else None,
        span_bound=info.span_bound, deferred=tuple(deferred), emit=p.emit, schema=tuple(info.schema),
        max_gap=max(gaps, default=0), types=info.types)


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


def _needs_one_partition(program: Program, key: str, root) -> bool:
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


def plan_program(program: Program, mode: str = "batch") -> list[PhrasePlan]:
    require_backend(program, mode)
    return [plan_phrase(program, info) for info in program.phrases]


def _gap(decl: A.EventDecl) -> int:
    """hi - t for events of this type (µs): how far an event's stamp reaches past its local time."""
    tc = decl.time
    if tc is None:
        return 0
    if tc.high is None:
        return tc.widen.micros() if tc.widen is not None else 0
    return 0  # t is the upper end itself


# ---------------------------------------------------------------------------- normalise

class _Builder:
    def __init__(self, program: Program):
        self.program = program
        self.ids = count(1)
        self.slots = count(0)
        self.neg_slots = count(0)

    def normalise(self, m):
        if A.is_pattern(m):
            return self._leaf(None, None, (m,), m.span)
        if isinstance(m, A.EventRef):
            return self._leaf(m.type, m.var, (), m.span)
        if isinstance(m, A.Binary):
            if m.op == "and" and A.is_pattern(m.right):
                return _add_filter(self.normalise(m.left), m.right)
            if m.op == "and" and A.is_pattern(m.left):
                return _add_filter(self.normalise(m.right), m.left)
            if m.op == "or":
                return Or(next(self.ids), self.normalise(m.left), self.normalise(m.right), span=m.span)
            if isinstance(m.right, A.Not) and not A.is_pattern(m.right.operand):
                left = self.normalise(m.left)
                neg = self._negation(m.right.operand, _space(m.op), "", m.right.within.micros())
                return After(next(self.ids), left, neg, span=m.span)
            if isinstance(m.left, A.Binary) and isinstance(m.left.right, A.Not) \
                    and not A.is_pattern(m.left.right.operand) and m.left.right.within is None:
                left = self.normalise(m.left.left)
                neg = self._negation(m.left.right.operand, _space(m.left.op), _space(m.op), None)
                right = self.normalise(m.right)
                return Join(next(self.ids), ";", left, right, absence=neg, span=m.span)
            return Join(next(self.ids), m.op, self.normalise(m.left), self.normalise(m.right), span=m.span)
        raise PlanError(f"cannot plan {type(m).__name__}")  # the checker rejects the rest

    def _leaf(self, type_, var, filters, span) -> Leaf:
        slot = next(self.slots)
        return Leaf(next(self.ids), slot, type_, var or f"_{slot}", var is not None, tuple(filters), span=span)

    def _negation(self, m, lspace: str, rspace: str, window) -> Negation:
        alts = []
        var = None

        def collect(x, filters=()):
            nonlocal var
            if isinstance(x, A.Binary) and x.op == "or" and not A.is_pattern(x):
                collect(x.left, filters)
                collect(x.right, filters)
            elif isinstance(x, A.Binary) and x.op == "and" and A.is_pattern(x.right):
                collect(x.left, filters + (x.right,))
            elif isinstance(x, A.Binary) and x.op == "and" and A.is_pattern(x.left):
                collect(x.right, filters + (x.left,))
            elif isinstance(x, A.EventRef):
                if x.var:
                    var = x.var
                alts.append(Leaf(next(self.ids), -1 - next(self.neg_slots), x.type, x.var or "_x", bool(x.var),
                                 filters, span=x.span))
            elif A.is_pattern(x):
                alts.append(Leaf(next(self.ids), -1 - next(self.neg_slots), None, "_x", False,
                                 filters + (x,), span=x.span))
            else:
                raise PlanError("the negated part of an absence must be one event, possibly restricted by "
                                "patterns, or a choice (`or`) of such events")

        collect(m)
        return Negation(next(self.ids), tuple(alts), var, lspace, rspace, window)


def _space(op: str) -> str:
    return "=" if op.endswith("=") else "<>" if op.endswith("<>") else ""


def _add_filter(node, pattern):
    return dataclasses.replace(node, filters=node.filters + (pattern,))


# ---------------------------------------------------------------------------- predicates

def split_conjuncts(e) -> list:
    if e is None:
        return []
    if isinstance(e, A.BoolOp) and e.op == "and":
        return split_conjuncts(e.left) + split_conjuncts(e.right)
    return [e]


def expr_vars(e) -> set[str]:
    out: set[str] = set()
    for n in A.walk(e):
        if isinstance(n, (A.Var,)):
            out.add(n.name)
        elif isinstance(n, A.Attr):
            out.add(n.var)
    return out


def mentions_successive(e) -> bool:
    return any(isinstance(n, A.Call) and n.func == "successive" for n in A.walk(e))


def place_predicates(root, conjuncts, info: PhraseInfo):
    """Attach each conjunct to the lowest node binding its variables; return (root, deferred)."""
    negs = {}
    for n in walk_nodes(root):
        if isinstance(n, (Join, After)) and n.absence is not None and n.absence.var:
            negs[n.absence.var] = n.id
    at_node: dict[int, list] = {}
    neg_conds: dict[int, list] = {}
    deferred = []
    for c in conjuncts:
        vs = expr_vars(c)
        neg = [negs[v] for v in vs if v in negs]
        if neg:
            if len(set(neg)) > 1:
                raise PlanError("a condition cannot relate two negated events")
            neg_conds.setdefault(neg[0], []).append(c)
            continue
        if mentions_successive(c):
            deferred.append(c)
            if not (isinstance(c, A.Call) and c.func == "successive"):
                continue  # decided only with the whole history
            # successive(A, B, C) implies successive(A, B) and successive(B, C): each pair
            # filters early, at the node that first binds it
            for a, b in zip(c.args, c.args[1:]):
                pair = A.Call("successive", (a, b), span=c.span)
                at_node.setdefault(_lowest(root, {a.name, b.name}).id, []).append(pair)
            continue
        target = _lowest(root, vs)
        at_node.setdefault(target.id, []).append(c)

    def rebuild(n):
        if isinstance(n, Leaf):
            return dataclasses.replace(n, preds=tuple(at_node.get(n.id, ())))
        kw = {"preds": tuple(at_node.get(n.id, ()))}
        if isinstance(n, (Join, Or)):
            kw["left"], kw["right"] = rebuild(n.left), rebuild(n.right)
        else:
            kw["left"] = rebuild(n.left)
        if isinstance(n, (Join, After)) and n.absence is not None:
            kw["absence"] = dataclasses.replace(n.absence, conds=tuple(neg_conds.get(n.id, ())))
        return dataclasses.replace(n, **kw)

    return rebuild(root), deferred


def _lowest(n, vs: set[str]):
    """The deepest node whose every match binds all of ``vs`` (never below an `or`:
    a conjunct placed in one branch would not restrict the other)."""
    children = []
    if isinstance(n, Join):
        children = [n.left, n.right]
    elif isinstance(n, After):
        children = [n.left]
    for c in children:
        if vs <= definite_vars(c):
            return _lowest(c, vs)
    return n


# ---------------------------------------------------------------------------- partition key

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

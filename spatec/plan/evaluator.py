"""Physical pass ``choose_evaluator``: the vectorised fast path a phrase may run on, when
its shape is proven simple (DESIGN, "Fast paths"); the general automaton otherwise.

``leaf``: one event leaf; ``chain``: ``T -> A op T -> B op ...`` with
``successive(A, B, ...)`` over all the variables in order; ``after``: ``T -> A ; not
T -> X within D``; ``between``: ``T -> A ; not T -> X ; T -> B within D``; ``pair``:
``T -> A op T -> B`` bounded by concurrency or ``within``; ``run``: one run leaf ``run T -> R
[while C] [gap D]`` (its patterns, places, where and emit any), cut vectorised per source
(:mod:`spatec.vector.runs`) when ``C`` reads only the members ``R.first``, ``R.prev``,
``R.this`` and their attributes; ``chains``: two chains (each as ``chain`` over its own
variables, or one leaf) joined at the root by an operator bounded by concurrency or
``within`` (:mod:`spatec.vector.chains`: Issue 17's TwoStuck). The evaluators are in
:mod:`spatec.vector.fastpath`; they also refuse data they were not proven for, and the
runner then falls back to the automaton.
"""
from __future__ import annotations

import dataclasses

from spatec.frontend import ast as A
from spatec.frontend.check import Program
from spatec.frontend.runs import run_ref
from spatec.plan.nodes import After, Join, Leaf, Or, PhrasePlan, walk_nodes
from spatec.plan.physical import PhysicalPlan, is_successive
from spatec.plan.predicates import expr_vars


def choose_evaluator(program: Program, plan: PhrasePlan, phys: PhysicalPlan) -> PhysicalPlan:
    return dataclasses.replace(phys, fast_path=fast_path_shape(plan, program))

def fast_path_shape(plan: PhrasePlan, program: Program) -> str | None:
    """The fast-path shape of ``plan`` (:data:`~spatec.plan.physical.FAST_PATH_SHAPES`), or
    None when it is not proven simple. The absence shapes need the partition key to be
    the type's source (one source per partition)."""
    nodes = list(walk_nodes(plan.root))
    if any(isinstance(n, Or) for n in nodes):
        return None
    if isinstance(plan.root, Leaf) and plan.root.run is not None:
        return "run" if run_ok(plan, program) else None
    leaves = plan.leaves
    if not leaves or any(l.type is None or not l.bound for l in leaves):
        return None
    if any(l.run is not None for l in leaves) or plan.places:
        return None
    t = leaves[0].type
    if any(l.type != t for l in leaves) or len({l.var for l in leaves}) != len(leaves):
        return None
    if t not in program.events:
        return None
    if any(is_successive(f.expr) for f in plan.emit):
        return None
    root = plan.root
    shape = None
    if isinstance(root, Leaf):
        shape = "leaf" if _no_conditions_elsewhere(plan, nodes) else None
    elif isinstance(root, After):
        shape = "after" if _after_ok(plan, root, t, nodes) else None
    elif isinstance(root, Join) and root.absence is not None:
        shape = "between" if _between_ok(plan, root, t, nodes) else None
    elif isinstance(root, Join):
        shape = "chain" if _chain_ok(plan, nodes) else "pair" if _pair_ok(plan, root, nodes) \
            else "chains" if _chains_ok(plan, root) else None
    if shape is None:
        return None
    if shape in ("after", "between"):
        src = program.events[t].source
        if src is None or tuple(plan.key) != (src.attr,):
            return None
    return shape


def _no_conditions_elsewhere(plan, nodes) -> bool:
    """No `successive` anywhere (it needs the history the shapes do not keep)."""
    if plan.deferred:
        return False
    for n in nodes:
        if any(is_successive(c) for c in n.preds):
            return False
        if getattr(n, "absence", None) is not None and any(is_successive(c) for c in n.absence.conds):
            return False
    return True


def _neg_ok(neg, t) -> bool:
    return bool(neg.leaves) and all(l.type == t for l in neg.leaves)


def _after_ok(plan, root: After, t, nodes) -> bool:
    return isinstance(root.left, Leaf) and _neg_ok(root.absence, t) and _no_conditions_elsewhere(plan, nodes) \
        and root.absence.window is not None


def _pair_ok(plan, root: Join, nodes) -> bool:
    """Two events related by one operator (``A || B``, ``A ; B within D``, ...): candidates
    come from a window on the time stamps, so the operator must bound it: ``||``
    (concurrent stamps) or any operator under ``within``."""
    if not (isinstance(root.left, Leaf) and isinstance(root.right, Leaf)):
        return False
    if root.absence is not None or root.filters or not _no_conditions_elsewhere(plan, nodes):
        return False
    if root.op != "and" and root.op not in A.ST_OPS:
        return False
    return A.op_parts(root.op)[0] == "||" or plan.within is not None


def _between_ok(plan, root: Join, t, nodes) -> bool:
    if not (isinstance(root.left, Leaf) and isinstance(root.right, Leaf)) or root.op != ";":
        return False
    if root.filters or plan.within is None or not _neg_ok(root.absence, t) or not _no_conditions_elsewhere(plan, nodes):
        return False
    return x_side(root) is not None


def x_side(root: Join):
    """Which positive variable the absence condition relates X to: "" (none), "A", "B"; None: both."""
    neg = root.absence
    a, b = root.left.var, root.right.var
    with_a = bool(neg.left_space) or any(a in expr_vars(c) for c in neg.conds)
    with_b = bool(neg.right_space) or any(b in expr_vars(c) for c in neg.conds)
    if with_a and with_b:
        return None
    return "A" if with_a else "B" if with_b else ""


def _chain_pairs(plan) -> set | None:
    pairs = set()
    for c in plan.deferred:
        if not (isinstance(c, A.Call) and c.func == "successive" and all(isinstance(a, A.Var) for a in c.args)):
            return None
        names = [a.name for a in c.args]
        pairs |= set(zip(names, names[1:]))
    return pairs


def _chain_ok(plan, nodes) -> bool:
    leaves = plan.leaves
    if len(leaves) < 2:
        return False
    vs = [l.var for l in leaves]
    want = set(zip(vs, vs[1:]))
    if _chain_pairs(plan) != want:
        return False
    return _chain_nodes_ok(nodes, want)


def _chains_ok(plan, root: Join) -> bool:
    """Two chains (each a leaf, or a chain as :func:`_chain_ok` over its own variables)
    joined by one operator at the root, with ``successive`` over each side's variables in
    order and nothing else: ``(T -> A ;= T -> B ...) || (T -> E ;= T -> F ...)``. The root's
    operator must bound the join (``||``, or any under ``within``); its conjuncts (and
    spatial suffix) relate the sides."""
    if root.absence is not None or root.filters:
        return False
    if root.op != "and" and root.op not in A.ST_OPS:
        return False
    if A.op_parts(root.op)[0] != "||" and plan.within is None:
        return False
    want = set()
    for side in (root.left, root.right):
        vs = [l.var for l in plan.leaves if l.slot in side.slots]
        want |= set(zip(vs, vs[1:]))
    if not want or _chain_pairs(plan) != want:
        return False
    if any(is_successive(c) for c in root.preds):
        return False
    return all(_chain_nodes_ok(list(walk_nodes(side)), want) for side in (root.left, root.right))


def _chain_nodes_ok(nodes, want: set) -> bool:
    """The nodes of a chain over consecutive slots: leaves without ``successive``, joins
    of the spatio-temporal operators (or ``and``) over adjacent slots, no patterns on
    joins, no absences, only the ``successive`` pairs ``want`` implies."""
    for n in nodes:
        if isinstance(n, Leaf):
            if any(is_successive(c) for c in n.preds):
                return False
            continue
        if not isinstance(n, Join) or n.absence is not None or n.filters:
            return False
        if n.op not in A.ST_OPS and n.op != "and":
            return False
        ls, rs = sorted(n.left.slots), sorted(n.right.slots)
        if ls + rs != list(range(ls[0], rs[-1] + 1)):
            return False
        for c in n.preds:
            if is_successive(c) and _implied_pair(c) not in want:
                return False
    return True


def _implied_pair(c):
    """``successive(a, b)`` placed at a join: the pair, implied by the chain."""
    if isinstance(c, A.Call) and c.func == "successive" and len(c.args) == 2 \
            and all(isinstance(a, A.Var) for a in c.args):
        return (c.args[0].name, c.args[1].name)
    return None


def chain_preds(n) -> tuple:
    """A node's conjuncts without the successive pairs a chain implies."""
    return tuple(c for c in n.preds if _implied_pair(c) is None)


#: node kinds a vectorised ``while`` condition may hold (:mod:`spatec.vector.runs` rewrites them)
_WHILE_NODES = (A.Num, A.Quantity, A.Str, A.BoolLit, A.TimeLit, A.Attr, A.Var, A.UnaryOp, A.BoolOp, A.BinOp,
                A.Call)
#: the largest ``while`` condition cut vectorised (its rewriting recurses)
WHILE_NODES_MAX = 500


def run_ok(plan: PhrasePlan, program: Program) -> bool:
    """Whether the run leaf alone at the root of ``plan`` can be cut vectorised: the runs'
    source is the partition key (or there is none), the run's events need not share another
    key, nothing reads the successive history or other phrases' composites, and the
    ``while`` condition reads only the members ``first``/``prev``/``this`` (attributes,
    stamps, events in functions). Everything after the cut (patterns on the run, places,
    where, within, emit) is the automaton's own code on the complete runs."""
    leaf = plan.root
    info = leaf.run
    decl = program.events.get(leaf.type)
    if decl is None or decl.source is None or not leaf.bound or info.type != leaf.type:
        return False
    if tuple(plan.key) not in ((), (info.source,)) or plan.run_keys:
        return False
    if plan.deferred or any(is_successive(c) for c in leaf.preds) or any(is_successive(f.expr) for f in plan.emit):
        return False
    if info.cond is None:
        return True
    nodes = 0
    for x in A.walk(info.cond):
        nodes += 1
        if nodes > WHILE_NODES_MAX:
            return False
        if isinstance(x, A.Call) and x.func == "successive":
            return False
        ref = run_ref(x, {leaf.var})
        if ref is not None and not (ref.kind in ("member", "attr") and ref.member in ("first", "prev", "this")):
            return False
        if (isinstance(x, A.Var) and ref is None) or not isinstance(x, _WHILE_NODES):
            return False
        if isinstance(x, A.Call) and not all(getattr(run_ref(a, {leaf.var}), "kind", None) == "member"
                                             for a in x.args):
            return False
    return True

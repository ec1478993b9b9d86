"""Logical plan nodes: the operator tree of one phrase, with patterns pushed to
the leaves they restrict and predicates placed at the lowest node that binds
their variables. Plain frozen data; printable and serialisable.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Optional, Union

from spatec.frontend import ast as A
from spatec.frontend.flatpickle import FlatContainer, FlatPickled


class TreeNode(FlatPickled):
    """Base of the operator tree's nodes: equality, hash, repr and pickling without recursion
    (trees of any depth; the dataclasses' own recurse, one level of the tree at a time;
    pickling: :mod:`spatec.frontend.flatpickle`)."""

    __slots__ = ()

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        stack = [(self, other)]
        while stack:
            x, y = stack.pop()
            if x is y:
                continue
            if type(x) is not type(y):
                return False
            for f in _compared(type(x)):
                a, b = getattr(x, f), getattr(y, f)
                if isinstance(a, TreeNode) and isinstance(b, TreeNode):
                    stack.append((a, b))
                elif not (a is b or a == b):
                    return False
        return True

    def __hash__(self) -> int:
        hashes: dict = {}
        for x in walk_nodes(self):       # children first
            hashes[id(x)] = hash((type(x).__name__,) + tuple(
                hashes[id(v)] if isinstance(v, TreeNode) else v
                for v in (getattr(x, f) for f in _compared(type(x)))))
        return hashes[id(self)]

    def __repr__(self) -> str:
        return A.trampoline(_repr_walk(self))


def _compared(cls) -> tuple:
    return tuple(f.name for f in fields(cls) if f.compare)


def _repr_walk(x):
    # a generator for A.trampoline: the text the dataclass repr gives
    parts = []
    for f in fields(x):
        if f.repr:
            v = getattr(x, f.name)
            parts.append(f"{f.name}={(yield _repr_walk(v)) if isinstance(v, TreeNode) else repr(v)}")
    return f"{type(x).__qualname__}({', '.join(parts)})"


@dataclass(frozen=True, eq=False, repr=False)
class Leaf(TreeNode):
    """One event of the composite: a slot filled by an event of ``type`` (None: any type)."""

    id: int
    slot: int
    type: Optional[str]
    var: str                 # the bound variable, or an implicit name `_<slot>`
    bound: bool              # bound by the user (`T -> V`)
    filters: tuple = ()      # pattern ASTs on the event's own stamp (a run's: on the run's stamps)
    preds: tuple = ()        # where-conjuncts over this variable only
    span: object = field(default=None, compare=False)
    #: a run leaf (SPEC §7): the RunInfo of ``run E -> var ...``; its slot holds a whole run
    run: Optional[object] = None

    @property
    def slots(self) -> tuple:
        return (self.slot,)


@dataclass(frozen=True)
class Negation:
    """The negated part of an absence: one event (or a choice of events) that must not occur."""

    id: int
    leaves: tuple            # alternatives: Leaf (slot = -1); a matching event is a candidate X
    var: Optional[str]       # the variable X, if bound
    left_space: str = ""     # "=" / "<>" / "": spatial suffix of the operator before `not`
    right_space: str = ""    # spatial suffix of the operator after `not X` (between only)
    window: Optional[int] = None   # µs, for `A ; not X within D`
    conds: tuple = ()        # where-conjuncts that mention X: part of the absence condition


@dataclass(frozen=True, eq=False, repr=False)
class Join(TreeNode):
    """``left op right``; for ``A ; not X ; B`` also the absence between them."""

    id: int
    op: str
    left: "Node"
    right: "Node"
    filters: tuple = ()
    preds: tuple = ()
    absence: Optional[Negation] = None
    span: object = field(default=None, compare=False)

    @property
    def slots(self) -> tuple:
        return leaf_slots(self)


@dataclass(frozen=True, eq=False, repr=False)
class Or(TreeNode):
    """``left or right``: a match of either, with that branch's stamps."""

    id: int
    left: "Node"
    right: "Node"
    filters: tuple = ()
    preds: tuple = ()
    span: object = field(default=None, compare=False)

    @property
    def slots(self) -> tuple:
        return leaf_slots(self)


@dataclass(frozen=True, eq=False, repr=False)
class After(TreeNode):
    """``left ; not X within D``: a match of left with nothing like X for D after it."""

    id: int
    left: "Node"
    absence: Negation
    filters: tuple = ()
    preds: tuple = ()
    span: object = field(default=None, compare=False)

    @property
    def slots(self) -> tuple:
        return leaf_slots(self)


Node = Union[Leaf, Join, Or, After]


@dataclass(frozen=True)
class PhrasePlan(FlatContainer):
    """Everything needed to evaluate one phrase (its ``types`` map shares subtrees: pickled
    by :class:`~spatec.frontend.flatpickle.FlatContainer`)."""

    name: str
    root: Node
    leaves: tuple            # Leaf by slot
    vars: dict               # positive variable → type
    negated: dict            # negated variable → type
    key: tuple               # partition key attributes (from `per` or inferred); () = one partition
    key_source: str          # "per" | "inferred" | "none"
    within: Optional[int]    # µs
    span_bound: Optional[int]  # µs, largest match stamp length; None = unbounded (successive)
    deferred: tuple          # where-conjuncts decided with history (successive)
    emit: tuple              # EmitField ASTs
    schema: tuple            # (field, type word)
    max_gap: int             # µs: largest hi - t over declared types (same-source order slack)
    types: dict = field(default_factory=dict, compare=False, repr=False)  # expr → type word
    physical: object = None  # PhysicalPlan (spatec.plan.physical): how the phrase is evaluated
    #: bound places (SPEC §9): variable → PlaceBinding; each is bound by a filter of some node
    places: dict = field(default_factory=dict)
    #: attributes every event of a run must share (``per KEY`` when KEY is not the run's source)
    run_keys: tuple = ()
    #: ``as event`` (SPEC §8, :class:`~spatec.frontend.program.AsEventInfo`): the source and the
    #: time its composites have as events; None: no source, the composite's stamp
    as_event: Optional[object] = None


def walk_nodes(n):
    """Every node of the operator tree, parents after children (left subtree, right subtree,
    node), without recursion."""
    stack = [(n, False)]
    while stack:
        x, expanded = stack.pop()
        if expanded:
            yield x
            continue
        stack.append((x, True))
        if isinstance(x, (Join, Or)):
            stack.append((x.right, False))
            stack.append((x.left, False))
        elif isinstance(x, After):
            stack.append((x.left, False))


def leaf_slots(n) -> tuple:
    """The slots of the leaves under ``n``, left to right (without recursion)."""
    return tuple(x.slot for x in walk_nodes(n) if isinstance(x, Leaf))


def depth(n) -> int:
    """The number of nodes on the longest path from ``n`` down to a leaf (without recursion)."""
    best, stack = 0, [(n, 1)]
    while stack:
        x, d = stack.pop()
        best = max(best, d)
        if isinstance(x, (Join, Or)):
            stack += [(x.left, d + 1), (x.right, d + 1)]
        elif isinstance(x, After):
            stack.append((x.left, d + 1))
    return best


def definite_vars(n) -> frozenset:
    """Variables every match of ``n`` binds (bound places of its filters included); without
    recursion (trees of any depth)."""
    return A.trampoline(_definite_walk(n))


def _definite_walk(n):
    # a generator for A.trampoline
    own = place_vars(n.filters)
    if isinstance(n, Leaf):
        return frozenset((n.var,)) | own
    if isinstance(n, Join):
        return (yield _definite_walk(n.left)) | (yield _definite_walk(n.right)) | own
    if isinstance(n, Or):
        return ((yield _definite_walk(n.left)) & (yield _definite_walk(n.right))) | own
    return (yield _definite_walk(n.left)) | own


def place_vars(filters) -> frozenset:
    """The place variables that patterns ``filters`` bind (``at SET -> S``)."""
    out = set()
    for f in filters:
        for x in A.walk(f):
            if isinstance(x, A.AtPlace) and x.var is not None:
                out.add(x.var)
    return frozenset(out)


def negations(n):
    """Every Negation in the tree."""
    for m in walk_nodes(n):
        if isinstance(m, (Join, After)) and m.absence is not None:
            yield m.absence

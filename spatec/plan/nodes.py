"""Logical plan nodes: the operator tree of one phrase, with patterns pushed to
the leaves they restrict and predicates placed at the lowest node that binds
their variables. Plain frozen data; printable and serialisable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union


@dataclass(frozen=True)
class Leaf:
    """One event of the composite: a slot filled by an event of ``type`` (None: any type)."""

    id: int
    slot: int
    type: Optional[str]
    var: str                 # the bound variable, or an implicit name `_<slot>`
    bound: bool              # bound by the user (`T -> V`)
    filters: tuple = ()      # pattern ASTs on the event's own stamp
    preds: tuple = ()        # where-conjuncts over this variable only
    span: object = field(default=None, compare=False)

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


@dataclass(frozen=True)
class Join:
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
        return self.left.slots + self.right.slots


@dataclass(frozen=True)
class Or:
    """``left or right``: a match of either, with that branch's stamps."""

    id: int
    left: "Node"
    right: "Node"
    filters: tuple = ()
    preds: tuple = ()
    span: object = field(default=None, compare=False)

    @property
    def slots(self) -> tuple:
        return self.left.slots + self.right.slots


@dataclass(frozen=True)
class After:
    """``left ; not X within D``: a match of left with nothing like X for D after it."""

    id: int
    left: "Node"
    absence: Negation
    filters: tuple = ()
    preds: tuple = ()
    span: object = field(default=None, compare=False)

    @property
    def slots(self) -> tuple:
        return self.left.slots


Node = Union[Leaf, Join, Or, After]


@dataclass(frozen=True)
class PhrasePlan:
    """Everything needed to evaluate one phrase."""

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


def walk_nodes(n):
    """Every node of the operator tree, parents after children."""
    if isinstance(n, (Join, Or)):
        yield from walk_nodes(n.left)
        yield from walk_nodes(n.right)
    elif isinstance(n, After):
        yield from walk_nodes(n.left)
    yield n


def definite_vars(n) -> frozenset:
    """Variables every match of ``n`` binds."""
    if isinstance(n, Leaf):
        return frozenset((n.var,))
    if isinstance(n, Join):
        return definite_vars(n.left) | definite_vars(n.right)
    if isinstance(n, Or):
        return definite_vars(n.left) & definite_vars(n.right)
    return definite_vars(n.left)


def negations(n):
    """Every Negation in the tree."""
    for m in walk_nodes(n):
        if isinstance(m, (Join, After)) and m.absence is not None:
            yield m.absence

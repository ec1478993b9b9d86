"""The physical plan of a phrase: every choice a runner needs, made once by the planner.

A :class:`PhysicalPlan` is frozen, plain data (it prints, compares and serialises),
attached to its :class:`~spatec.plan.nodes.PhrasePlan` as ``plan.physical``. The
runners interpret it; none of them re-derives these choices from the logical plan.
The passes that fill it are in :mod:`spatec.plan.build` (``PHYSICAL``), each in a
module of its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from spatec.frontend import ast as A
from spatec.frontend.printer import print_match

#: Evaluators: the general automaton, or a vectorised fast path of one of these shapes.
FAST_PATH_SHAPES = ("leaf", "chain", "after", "between", "pair", "run", "chains")


@dataclass(frozen=True)
class Region:
    """A region that a leaf's events must possibly meet: the space pattern that names it
    (``at P``, ``within D of P``, ``in circle(...)``/``in polygon(...)``), bound to a
    projection by the runner that uses it."""

    name: str
    pattern: object          # A.AtPlace | A.NearPlace | A.InShape

    def describe(self) -> str:
        return print_match(self.pattern)


@dataclass(frozen=True)
class PhysicalPlan:
    """How a phrase is evaluated, routed and staged (see the passes in :mod:`spatec.plan.build`)."""

    phrase: str
    #: the evaluator's fast-path shape (:data:`FAST_PATH_SHAPES`), None: the general automaton
    fast_path: Optional[str] = None
    #: event types the phrase reads (leaves, negated leaves; a leaf of any type reads them all)
    types: tuple = ()
    #: the partition key; events of ``keyed`` types go to the key of their values
    key: tuple = ()
    keyed: tuple = ()
    #: types without every key attribute: given to every key (and buffered for keys to come)
    broadcast: tuple = ()
    #: the types read that are other phrases' composites (SPEC §8): their events come from
    #: the producers, with the producers' watermarks
    derived: tuple = ()
    #: some condition relates events by ``successive`` (kept per source, with history)
    successive: bool = False
    #: keyed types whose source is not the key: a partition also needs, as history for
    #: ``successive``, the events of its sources that the key sent to other partitions
    source_history: tuple = ()
    #: per type, the regions one of which each of its events must possibly meet to be of
    #: any use ((type, (Region, ...)), ...): the leaf pre-filter
    prefilter: tuple = ()
    #: every match lies within the span bound and depends on its own events only (no
    #: absence, no ``successive``): the phrase may be cut into stretches of time
    local_in_time: bool = False
    #: metres: a keyless phrase of two nearby point events (``A ||= B``, ``distance(A, B) < D``)
    #: whose two events are never farther apart than this in a match: a runner may cut it
    #: by a distance join instead of one partition (:mod:`spatec.plan.proximity`); None: not such
    proximity: Optional[float] = None
    #: per type, the attributes the phrase reads ((type, (attr, ...)), ...)
    attributes: tuple = ()
    #: the estimates the planner chose by (:class:`spatec.plan.statistics.Statistics`): from a
    #: sample of the input when the runner has it, else the declared defaults
    estimates: object = None
    #: how joins find their candidates (:class:`spatec.plan.order.JoinAccess`, one per join
    #: whose conditions allow a keyed access; the others scan)
    joins: tuple = ()
    #: estimates: ((node id, partial matches per second it passes up), ...) and
    #: ((join id, condition, selectivity), ...)
    rates: tuple = ()
    selectivities: tuple = ()

    @property
    def evaluator(self) -> str:
        return f"fast path: {self.fast_path}" if self.fast_path else "automaton"

    def regions(self) -> dict:
        """``prefilter`` as a dict: type → (Region, ...)."""
        return dict(self.prefilter)

    def attributes_of(self, type_name: str) -> tuple:
        return dict(self.attributes).get(type_name, ())


def is_successive(e) -> bool:
    """Whether expression ``e`` calls ``successive``."""
    return any(isinstance(n, A.Call) and n.func == "successive" for n in A.walk(e))

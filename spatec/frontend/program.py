"""What the checker returns: a :class:`Program` and a :class:`PhraseInfo` per phrase.

These are the front end's contract with the planner. Besides the declarations
and each phrase's variables and types they describe the constructs of SPEC
§7-9 in the form a back end needs them:

- every name a phrase can match is an :class:`EventType`: a declared event
  type or another phrase's composites (a *derived* type: attributes are the
  producer's emit fields, no source, stamps of the composite);
- the phrases form a :class:`FlowGraph` (acyclic: a cycle is a check error),
  and ``Program.phrases`` lists them producers first;
- a run variable is described by a :class:`RunInfo` (what its running summary
  must hold), a bound place by a :class:`PlaceBinding`;
- ``PhraseInfo.constructs`` names the constructs a phrase uses, so that a
  back end can refuse, by name, what it cannot evaluate yet.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from spatec.errors import NO_SPAN, Span
from spatec.frontend import ast as A
from spatec.frontend.flatpickle import FlatContainer

STANDARD_FIELDS = ("phrase", "id", "lo", "hi", "hull", "events")
#: the standard field of the places a phrase binds (only in the records of such phrases)
PLACES_FIELD = "places"

#: names of the constructs of SPEC §7-9, as ``PhraseInfo.constructs`` lists them
RUNS = "runs"
DERIVED = "phrases as event types"
PLACE_SETS = "place sets"
PLACE_BINDINGS = "bound places"


@dataclass(frozen=True)
class EventType:
    """A name a match can use: a declared event type, or a phrase (its composites as events).

    ``attrs`` maps attribute names to type words: for a declared type the
    declared types (``str``, ``int``, ``float``, ``bool``, ``time``,
    ``geometry``); for a derived type the checker's types of the producer's emit
    fields (``number``, ``str``, ``bool``, ``time``, ``duration``, ``distance``,
    ``speed``, ``area``, ``geometry``). None when unknown (the producer did not
    check, or sits on a cycle): its attributes are then not checked.
    """

    name: str
    attrs: Optional[dict]
    source: Optional[str] = None          # the source attribute of a declared type
    has_place: bool = True                # derived types: the composite's convex hull
    stamp_length: Optional[int] = None    # longest time stamp (µs); None: unbounded
    phrase: Optional[str] = None          # the producing phrase, for a derived type
    span: Span = field(default=NO_SPAN, compare=False)
    #: a derived type whose phrase says ``as event source F, ...``: the emit fields that
    #: together are its events' source (SPEC §8); () for every other derived type
    source_fields: tuple = ()

    @property
    def derived(self) -> bool:
        return self.phrase is not None

    @property
    def has_source(self) -> bool:
        """Whether its events have a source (a declared `source`, or a phrase's `as event source`)."""
        return self.source is not None or bool(self.source_fields)


@dataclass(frozen=True)
class AsEventInfo:
    """A phrase's ``as event`` (SPEC §8): its composites, as events, have a source and a time
    of their own, built from emit fields.

    ``source``: the emit fields whose values together are the source (() for none); the
    time stamp is ``[low, high]`` of the emit fields named (``time F``: ``high`` is None and
    the stamp is the instant F), the local time ``t`` its upper end. The checker allows only
    fields that are times of the composite's own events (``A.t``, ``R.first.t``, ``R.lo``,
    ...), so the stamp lies within the composite's, and ``low`` never after ``high``.
    """

    source: tuple
    low: str
    high: Optional[str] = None


@dataclass(frozen=True)
class RunInfo:
    """A run variable ``run E -> R [while C] [gap D]`` (SPEC §7).

    Runs are cut per source of ``type`` (attribute ``source``), in local-time
    order: an event joins the run when it passes ``filter`` (a pattern, or
    None) and ``cond`` holds with ``R.first``, ``R.prev`` (the run's last event
    so far) and ``R.this`` (the candidate); else the run ends and the event,
    if it passes ``filter``, starts the next one. A run is complete when the
    source's next event does not join it, or with ``gap`` (µs) once the
    watermark passes ``R.last.hi + gap`` before that event; a next event whose
    ``hi`` is later than ``R.last.hi + gap`` never joins. Without ``gap`` a
    silent source keeps its run open (and holds back the watermark of the
    phrase's derived stream).

    The running summary per source must hold: the first and last event (their
    stamps and attributes: ``R.ATTR`` is ``R.first.ATTR``), the count, the
    time stamp hull ``[min lo, max hi]``, the convex hull of the location
    stamps, and one accumulator per entry of ``aggregates`` (``("min",
    "speed")``, ...); never the run's events.
    """

    var: str
    type: str
    source: str
    filter: Optional[A.Match]
    cond: Optional[A.Expr]
    gap: Optional[int]
    aggregates: tuple = ()        # ((func, attribute), ...) used by where/emit, func in min/max/avg
    node: Optional[A.Run] = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class PlaceBinding:
    """``at SET -> S`` / ``certainly at SET -> S``: S is the matching place (SPEC §9).

    One match per place of ``place`` (a set, or a single place) that the
    pattern holds for; the place is not a constituent (the composite's stamps
    are its events'). ``attrs`` are the place's attributes (a set's columns or
    properties; ``name`` for a single place). Its id in a composite is
    ``SET:N``, N the place's 1-based position in its file (a single place:
    its name).
    """

    var: str
    place: str
    certainly: bool
    attrs: dict
    node: Optional[A.AtPlace] = field(default=None, compare=False, repr=False)
    #: ``at nearest SET -> S``: only the place whose centre is nearest the stamp's (SPEC §9)
    nearest: bool = False


@dataclass
class PhraseInfo(FlatContainer):
    """A checked phrase: its AST and what the checker learned about it."""

    phrase: A.Phrase
    vars: dict            # variable → event type, for event and run variables bound in the positive match
    negated: dict         # variable → event type, for variables bound inside `not`
    types: dict           # expression node → type word
    schema: list          # [(field, type word)] of the emit fields
    span_bound: int | None  # largest possible time-stamp length of a match (µs), None if unbounded
    runs: dict = field(default_factory=dict)        # run variable → RunInfo
    places: dict = field(default_factory=dict)      # place variable → PlaceBinding
    inputs: tuple = ()    # the phrases whose composites this phrase matches (positively or negated)
    constructs: frozenset = frozenset()  # RUNS, DERIVED, PLACE_SETS, PLACE_BINDINGS used
    as_event: Optional[AsEventInfo] = None   # `as event`: its composites' source and time as events

    @property
    def name(self) -> str:
        return self.phrase.name

    @property
    def waits_for_sources(self) -> bool:
        """A run without `gap` completes only when its source reports again (SPEC §8)."""
        return any(r.gap is None for r in self.runs.values())


@dataclass(frozen=True)
class FlowGraph:
    """The program's phrases as a data-flow graph: who consumes whose composites."""

    order: tuple            # phrase names, producers before their consumers, else in source order
    inputs: dict            # phrase → tuple of the phrases it consumes

    def consumers(self, name: str) -> tuple:
        return tuple(p for p in self.order if name in self.inputs.get(p, ()))


@dataclass
class Program:
    """A checked program: declarations resolved, phrases typed (producers first)."""

    root: str
    timezone: str
    crs: str | None
    events: dict          # declared event types: name → EventDecl
    places: dict          # single places: name → PlaceDef
    phrases: list         # PhraseInfo, in flow order (producers before consumers)
    texts: dict = field(default_factory=dict, repr=False)
    place_sets: dict = field(default_factory=dict)   # name → PlaceSet
    event_types: dict = field(default_factory=dict)  # every matchable name → EventType
    flow: FlowGraph = field(default_factory=lambda: FlowGraph((), {}))

    def phrase(self, name: str) -> PhraseInfo:
        for p in self.phrases:
            if p.name == name:
                return p
        raise KeyError(name)

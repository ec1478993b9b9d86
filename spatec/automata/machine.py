"""The automaton of a phrase and its one step function.

A phrase's operator tree becomes a tree of detectors (after Hermes' composite
event detectors, which SpaTeC's implementation follows): a leaf takes events
of its type that pass its patterns and predicates; a join keeps the partial
matches of each side in a buffer and combines a new partial match with every
buffered one of the other side whose relation (``;``, ``||``, ``=``, ...)
and placed predicates hold. The root's matches are checked against ``within``;
those with an absence or a ``successive`` condition wait until the watermark
decides them; the rest are reported at once.

The automaton (:class:`Automaton`) is plain data built from the plan and is
shared; the per-key run state (:class:`RunState`) is separate, picklable and
holds only what may still matter: buffers are pruned by the watermark using the
bound of the phrase (``within``, concurrency, ``successive``).

``step(automaton, state, events, watermark)`` is the single entry point every
runner uses.
"""
from __future__ import annotations

import bisect
import hashlib
import json
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _encode_str

from spatec.automata import hulls as H
from spatec.automata.access import accesses
from spatec.automata.compile import AutomatonSpec, chain_name, compile_automaton
from spatec.automata.exprs import compile_condition, compile_expr
from spatec.automata.patterns import PatternCompiler
from spatec.automata.places import PlaceSets, split_filters
from spatec.automata.runs import RunLeaf
from spatec.frontend import ast as A
from spatec.plan.nodes import After, Join, Leaf, Or, PhrasePlan, walk_nodes
from spatec.spatial import stamps as S

NEG_INF = -(1 << 62)


class Ev:
    """A primitive event at run time."""

    __slots__ = ("type", "id", "source", "t", "lo", "hi", "loc", "attrs")
    #: a whole run (:class:`spatec.automata.runs.RunEv`) rather than one event
    is_run = False

    def __init__(self, type, id, source, t, lo, hi, loc, attrs):
        self.type, self.id, self.source, self.t, self.lo, self.hi, self.loc, self.attrs = \
            type, id, source, t, lo, hi, loc, attrs

    def __getstate__(self):
        return (self.type, self.id, self.source, self.t, self.lo, self.hi, self.loc, self.attrs)

    def __setstate__(self, s):
        self.type, self.id, self.source, self.t, self.lo, self.hi, self.loc, self.attrs = s

    def __repr__(self):
        return f"Ev({self.id})"


class HistoryEv(Ev):
    """An event a partition sees only for ``successive``'s history: one of the
    same source that the partition key sent elsewhere (``per line`` while a
    vehicle changes line). It takes part in no match."""

    __slots__ = ()


class PM:
    """A partial match: events by slot (None where this sub-tree has no slot), and its stamp;
    ``places``: the places it binds (``((var, Place), ...)``, SPEC §9), not constituents.
    ``_hb``: what makes its stamp when not all its events (:mod:`spatec.automata.hulls`)."""

    __slots__ = ("ev", "lo", "hi", "_loc", "checks", "places", "_hb")

    def __init__(self, ev, lo, hi, checks=(), places=()):
        self.ev, self.lo, self.hi, self._loc, self.checks, self.places, self._hb = \
            ev, lo, hi, None, checks, places, None

    @property
    def loc(self):
        """The hull of its events' stamps, in slot order."""
        if self._loc is None:
            if self._hb is not None:
                return H.loc(self)
            locs = [e.loc for e in self.ev if e is not None]
            self._loc = locs[0] if len(locs) == 1 else S.hull(locs)
        return self._loc

    def events(self):
        return [e for e in self.ev if e is not None]

    def __getstate__(self):
        return (self.ev, self.lo, self.hi, self.checks, self.places)

    def __setstate__(self, s):
        self.ev, self.lo, self.hi, self.checks, self.places = s
        self._loc = self._hb = None


@dataclass
class RunState:
    """Per-key run state: everything an automaton remembers between batches.

    ``lo_sorted`` names the buffers whose partial matches are in order of ``lo`` (as they are
    while events arrive in order): a join then looks only at the end of the other side's
    buffer that can still be within ``within`` of a new partial match, and pruning drops a
    prefix. An arrival out of order takes its buffer out until pruning has put it back in
    order."""

    watermark: int = NEG_INF
    buffers: dict = field(default_factory=dict)     # (node id, side) → [PM]
    pending: list = field(default_factory=list)     # [(PM, decision list)]
    xbuf: dict = field(default_factory=dict)        # negation id → [Ev]
    history: dict = field(default_factory=dict)     # (type, source) → sorted [t]
    emitted: dict = field(default_factory=dict)     # composite id → hi (for `or` duplicates)
    since_prune: int = 0
    lo_sorted: set = field(default_factory=set)     # buffer keys whose partial matches are in order of lo
    runs: dict = field(default_factory=dict)        # (run leaf id, source) → Cut (spatec.automata.runs)

    def size(self) -> int:
        return (sum(len(v) for v in self.buffers.values()) + len(self.pending)
                + sum(len(v) for v in self.xbuf.values()) + sum(len(v) for v in self.history.values())
                + len(self.emitted) + sum(c.size() for c in self.runs.values()))

    def empty(self) -> bool:
        """``size() == 0``, stopping at the first thing held."""
        return not (self.pending or self.emitted or self.runs or any(self.buffers.values())
                    or any(self.xbuf.values()) or any(self.history.values()))


class Composite:
    """A decided composite event: its phrase, bindings and stamps.

    ``loc`` may be given as None: the stamp, the hull of the events' stamps in
    the order of ``events`` (what :attr:`PM.loc` is), is then made when first
    read (a runner that writes hulls for many composites at once need not make
    them one by one)."""

    __slots__ = ("phrase", "id", "lo", "hi", "_loc", "bindings", "events", "places")

    def __init__(self, phrase: str, id: str, lo: int, hi: int, loc, bindings: dict, events: list,
                 places: dict | None = None):
        self.phrase, self.id, self.lo, self.hi, self._loc = phrase, id, lo, hi, loc
        self.bindings = bindings    # variable → Ev (bound, positive variables; a run: its RunEv)
        self.events = events        # every constituent Ev (a run: its RunEv)
        self.places = places or {}  # variable → Place (bound places, SPEC §9)

    def env(self) -> dict:
        """What ``emit`` reads: the bound events and places."""
        return {**self.bindings, **self.places} if self.places else self.bindings

    @property
    def loc(self):
        if self._loc is None:
            evs = self.events
            self._loc = evs[0].loc if len(evs) == 1 else S.hull([e.loc for e in evs])
        return self._loc

    @loc.setter
    def loc(self, value):
        self._loc = value

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return ((self.phrase, self.id, self.lo, self.hi, self.loc, self.bindings, self.events, self.places)
                == (other.phrase, other.id, other.lo, other.hi, other.loc, other.bindings, other.events,
                    other.places))

    __hash__ = None

    def __repr__(self):
        return (f"Composite(phrase={self.phrase!r}, id={self.id!r}, lo={self.lo!r}, hi={self.hi!r}, "
                f"loc={self.loc!r}, bindings={self.bindings!r}, events={self.events!r})")

    def __getstate__(self):
        return (self.phrase, self.id, self.lo, self.hi, self._loc, self.bindings, self.events, self.places)

    def __setstate__(self, s):
        self.phrase, self.id, self.lo, self.hi, self._loc, self.bindings, self.events, self.places = s


def composite_id(phrase: str, pairs) -> str:
    """Hash of the phrase name and its sorted (variable, event id) pairs (SPEC §4): the SHA-256
    of ``json.dumps([phrase, sorted([[var, id], ...])], separators=(",", ":"), ensure_ascii=False)``."""
    pairs = sorted(map(tuple, pairs))     # as lists would sort; json writes tuples as lists too
    text = type(phrase) is str
    for v, i in pairs:
        if type(v) is not str or type(i) is not str:
            text = False
            break
    if text:
        # the same text as json.dumps, spelt out (json.dumps encodes each string with
        # encode_basestring when ensure_ascii is False)
        enc = _encode_str
        payload = f"[{enc(phrase)},[" + ",".join([f"[{enc(v)},{enc(i)}]" for v, i in pairs]) + "]]"
    else:
        payload = json.dumps([phrase, pairs], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


class Context:
    """What expressions need beyond the events: the per-source history for `successive`."""

    __slots__ = ("state",)

    def __init__(self, state):
        self.state = state

    def successive(self, evs) -> bool | None:
        a0 = evs[0]
        if a0.source is None:
            return False
        for a, b in zip(evs, evs[1:]):
            if b.type != a0.type or b.source != a0.source or not a.t < b.t:
                return False
            hist = self.state.history.get((a.type, a.source), ())
            i = bisect.bisect_right(hist, a.t)
            if i < len(hist) and hist[i] < b.t:
                return False
        return True


# --------------------------------------------------------------------------------- automaton

def slot_sets(nodes) -> dict:
    """Node id → the slots of the leaves below it, for ``nodes`` in the order of
    :func:`~spatec.plan.nodes.walk_nodes` (children before parents). A sub-tree's slots are
    mostly contiguous (slots are numbered left to right): those are a ``range`` (constant
    size: a chain of n events would otherwise hold n²/2 slots), the others a frozenset."""
    out = {}
    span = {}    # node id → (least slot, largest slot, number of slots)
    for n in nodes:
        if isinstance(n, Leaf):
            span[n.id] = (n.slot, n.slot, 1)
            out[n.id] = range(n.slot, n.slot + 1)
            continue
        if isinstance(n, (Join, Or)):
            (a, b, k), (c, d, m) = span[n.left.id], span[n.right.id]
            span[n.id] = lo, hi, count = min(a, c), max(b, d), k + m
            if hi - lo + 1 == count:
                out[n.id] = range(lo, hi + 1)
            else:
                out[n.id] = frozenset(out[n.left.id]) | frozenset(out[n.right.id])
        else:
            span[n.id] = span[n.left.id]
            out[n.id] = out[n.left.id]
    return out


class Automaton:
    """An automaton bound to a projection (:func:`bind`): the spec's data, with its patterns
    and conditions compiled to closures, in the shape :mod:`spatec.automata.step` reads."""

    def __init__(self, spec: AutomatonSpec, projector):
        plan = spec.plan
        self.spec = spec
        self.plan = plan
        self.name = plan.name
        tz = self.tz = spec.timezone
        self.place_sets = PlaceSets(dict(spec.place_sets), projector)
        pc = PatternCompiler(dict(spec.places), tz, projector, self.place_sets)
        self.nleaves = len(plan.leaves)
        self.nodes = list(walk_nodes(plan.root))
        by_id = {n.id: n for n in self.nodes}
        self.parent = {c: by_id[p] for c, p, _ in spec.parent}
        self.side = {c: s for c, _, s in spec.parent}
        runs = self.run_vars = frozenset(l.var for l in plan.leaves if l.run is not None)
        #: node id → its patterns' test and, where it binds places, its binder (SPEC §9)
        self.filters, self.binders = {}, {}
        for n in self.nodes:
            self.filters[n.id], binder = split_filters(pc, self.place_sets, n.filters)
            if binder is not None:
                self.binders[n.id] = binder
        self.preds = {n.id: compile_condition(n.preds, tz, runs) for n in self.nodes}
        #: run leaf id → RunLeaf (SPEC §7)
        self.run_leaves = {l.id: RunLeaf(l, pc.filter([l.run.filter] if l.run.filter is not None else []),
                                         compile_condition([l.run.cond] if l.run.cond is not None else [], tz, runs),
                                         l.run.gap, l.run.aggregates, plan.run_keys)
                           for l in plan.leaves if l.run is not None}
        #: node id → the slots of the leaves below it (:func:`slot_sets`)
        self.slots = slot_sets(self.nodes)
        # leaves by event type (None: any type)
        self.leaves_by_type: dict = {}
        for l in plan.leaves:
            self.leaves_by_type.setdefault(l.type, []).append(l)
        # negations
        self.negs = {}
        self.neg_leaves_by_type: dict = {}
        for n in self.nodes:
            if isinstance(n, (Join, After)) and n.absence is not None:
                neg = n.absence
                self.negs[neg.id] = (n, neg, compile_condition(neg.conds, tz, runs),
                                     {l.id: pc.filter(l.filters) for l in neg.leaves})
                for l in neg.leaves:
                    self.neg_leaves_by_type.setdefault(l.type, []).append((neg.id, l))
        self.deferred = compile_condition(plan.deferred, tz, runs)
        self.succ_chains = list(spec.succ_chains)
        #: the variables of every `successive(...)` in a condition decided with the history
        #: (``not successive(A, B)`` too): a pending composite waits for each of them
        self.succ_waits = list(dict.fromkeys(
            tuple(chain_name(a) for a in x.args) for c in plan.deferred for x in A.walk(c)
            if isinstance(x, A.Call) and x.func == "successive"))
        #: per entry of ``succ_waits``: the slack its decision waits for past the last event's
        #: local time (SPEC §8: a derived type's later events have ``t >= lo >=`` its producer's
        #: frontier, which bounds the watermark: none; an input type's: the largest ``hi - t``)
        #: and whether its events are another phrase's composites (decided by the watermark at
        #: the end too)
        chain_types = [{plan.vars.get(v.split(".")[0]) for v in chain} for chain in self.succ_waits]
        self.chain_derived = [bool(ts & set(plan.physical.derived)) for ts in chain_types]
        self.chain_slack = [0 if d else plan.max_gap for d in self.chain_derived]
        self.needs_history = spec.needs_history
        self.has_or = spec.has_or
        self.var_slots: dict = {}
        for l in plan.leaves:
            if l.bound:
                self.var_slots.setdefault(l.var, []).append(l.slot)
        self.emit = [(f.name, compile_expr(f.expr, tz, runs)) for f in plan.emit]
        self.type_len = dict(spec.type_len)
        self.G = plan.max_gap
        self.S = spec.span
        self.max_window = spec.max_window
        self.rules = {key: dict(r) for key, r in spec.rules}
        #: the types it reads that are other phrases' composites (SPEC §8): the end of the input
        #: decides no more than the watermark does (see :mod:`spatec.automata.step`)
        self.derived = frozenset(plan.physical.derived)
        #: join id → how it finds its candidates (:mod:`spatec.automata.access`; the others scan)
        self.access = accesses(plan.physical.joins if plan.physical is not None else ())


def bind(spec: AutomatonSpec, projector) -> Automaton:
    """The automaton of ``spec`` for a run projected with ``projector``."""
    return Automaton(spec, projector)


def build(plan: PhrasePlan, program, projector) -> Automaton:
    """The automaton of ``plan`` for a run projected with ``projector``: compiled
    (:func:`~spatec.automata.compile.compile_automaton`), then bound."""
    return bind(compile_automaton(plan, program), projector)

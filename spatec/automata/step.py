"""``step``: advance one key's run state over a batch of events.

Events of a batch are inserted in the order given (runners sort by event
time); an event whose event time (``hi``) is behind the watermark is late and
returned, not used. After the batch the watermark advances, pending composites
whose absence or ``successive`` condition can no longer change are decided,
and buffers are pruned.

Decisions (SPEC §4): ``A ; not X ; B`` when the watermark reaches ``B.hi``
(plus the largest ``hi - t`` of any type, 0 unless a type is stamped
``time ts ± d``, so that no same-source event can still fall between);
``A ; not X within D`` when the watermark passes ``A.hi + D``; ``successive``
when it reaches the last event's local time (plus the same slack); every other
composite as soon as it is complete. At the end of a batch replay
(``final=True``) everything is decided except absences whose window reaches
past the last event.

A phrase that reads another phrase's composites (SPEC §8) decides by the least
watermark of the streams it reads, a derived stream's being its producer's
frontier (:mod:`spatec.runtime.derived`). Such a watermark may stop short of the
last event: at the end of the input such a phrase decides its absences only as
far as the watermark it is given says (``successive``, over input events, is
still decided at the end), and a batch replay never lets its watermark pass that
(``limit``).
"""
from __future__ import annotations

import bisect

from spatec.automata import hulls as H
from spatec.automata import relations as R
from spatec.automata import runs as RUNS
from spatec.automata.machine import (
    NEG_INF,
    PM,
    Automaton,
    Composite,
    Context,
    HistoryEv,
    RunState,
    composite_id,
)
from spatec.frontend import ast as A
from spatec.plan.nodes import After, Join
from spatec.spatial import stamps as S


#: events between two prunings of an ordered batch replay
PRUNE_EVERY = 256


def step(am: Automaton, st: RunState, events, watermark: int | None = None, final: bool = False,
         ordered: bool = False, limit: int | None = None):
    """Insert ``events``; return (decided composites, late events).

    ``ordered``: the events come sorted by event time (a batch replay), so the
    watermark may follow them event by event, and decisions and pruning happen
    as the batch goes rather than only at its end. ``limit``: the watermark never
    goes past it (a batch replay of a phrase over derived events: its final watermark).
    """
    out: list[Composite] = []
    late = []
    ctx = Context(st)
    w0 = st.watermark
    hi_max = w0
    n = unpruned = 0
    for ev in events:
        if ev.hi < w0:
            late.append(ev)
            continue
        if ev.hi > hi_max:
            if ordered and n >= 4 and (limit is None or hi_max <= limit):
                # every event before this one has a smaller event time: decide up to it, and
                # prune (a pass over every buffer: only once PRUNE_EVERY events have come, as
                # between batches; pruning drops only what can no longer match)
                st.watermark = hi_max
                _decide(am, st, ctx, hi_max, False, out)
                if unpruned >= PRUNE_EVERY:
                    _prune(am, st, hi_max)
                    unpruned = 0
                n = 0
            hi_max = ev.hi
        n += 1
        unpruned += 1
        _insert(am, st, ctx, ev, out, ordered)
    w = hi_max if watermark is None else max(w0, watermark)
    if limit is not None and w > limit:
        w = max(w0, limit)
    st.watermark = w
    if am.run_leaves:
        _settle_runs(am, st, ctx, w, final, out)
    _decide(am, st, ctx, w, final, out)
    st.since_prune += len(events)
    if final or st.since_prune >= 64 or len(events) >= 64:
        _prune(am, st, w)
        st.since_prune = 0
    return out, late


# ------------------------------------------------------------------------------------ insert

def _insert(am: Automaton, st: RunState, ctx, ev, out, ordered: bool = False) -> None:
    if am.needs_history and ev.source is not None:
        h = st.history.setdefault((ev.type, ev.source), [])
        if not h or ev.t > h[-1]:
            h.append(ev.t)
        else:
            i = bisect.bisect_left(h, ev.t)
            if i == len(h) or h[i] != ev.t:
                h.insert(i, ev.t)
    if ev.__class__ is HistoryEv:
        return
    for negs, leaves, runs in _routes(am, ev.type):
        for neg_id, f in negs:
            if f is None or f(ev.lo, ev.hi, ev.loc):
                st.xbuf.setdefault(neg_id, []).append(ev)
        for leaf, f, p, slot, join, side in leaves:
            if f is not None and not f(ev.lo, ev.hi, ev.loc):
                continue
            if leaf.id in am.binders:
                _leaf_places(am, st, ctx, leaf, ev, out)
                continue
            if p is not None and not p({leaf.var: ev}, ctx):
                continue
            slots = [None] * am.nleaves
            slots[slot] = ev
            if join is not None:
                _enter(am, st, ctx, out, _join(am, st, ctx, join, side, PM(tuple(slots), ev.lo, ev.hi), out))
            else:
                _up(am, st, ctx, leaf, PM(tuple(slots), ev.lo, ev.hi), out)
        for rl in runs:
            done = []
            RUNS.feed(rl, st, ev, ordered, ctx, done)
            for rl_, run in done:
                _leaf_match(am, st, ctx, rl_.leaf, run, out)


def _settle_runs(am: Automaton, st: RunState, ctx, w: int, final: bool, out) -> None:
    """Cut the runs the watermark settles (SPEC §7); complete ones enter the tree at their leaf."""
    done = []
    RUNS.settle(am, st, w, final, ctx, done)
    for rl, run in done:
        _leaf_match(am, st, ctx, rl.leaf, run, out)


def enter_runs(am: Automaton, st: RunState, runs: list, w: int) -> list:
    """Complete runs cut outside the automaton (:mod:`spatec.vector.runs`), ``(leaf, RunEv)``
    in order, entering the tree at their leaves as :func:`_settle_runs` has them enter, then
    decided at the end of the input (watermark ``w``): their composites."""
    ctx = Context(st)
    out: list = []
    st.watermark = max(st.watermark, w)
    for leaf, run in runs:
        _leaf_match(am, st, ctx, leaf, run, out)
    _decide(am, st, ctx, st.watermark, True, out)
    return out


def _leaf_match(am: Automaton, st: RunState, ctx, leaf, ev, out) -> None:
    """``ev`` (an event, or a complete run) at ``leaf``: its patterns, its places, its conditions."""
    f = am.filters[leaf.id]
    if f is not None and not f(ev.lo, ev.hi, ev.loc):
        return
    if leaf.id in am.binders:
        _leaf_places(am, st, ctx, leaf, ev, out)
        return
    p = am.preds[leaf.id]
    if p is not None and not p({leaf.var: ev}, ctx):
        return
    slots = [None] * am.nleaves
    slots[leaf.slot] = ev
    _up_from_leaf(am, st, ctx, leaf, PM(tuple(slots), ev.lo, ev.hi), out)


def _leaf_places(am: Automaton, st: RunState, ctx, leaf, ev, out) -> None:
    """``ev`` at a leaf that binds places: one partial match per matching place (SPEC §9)."""
    p = am.preds[leaf.id]
    for places in am.binders[leaf.id](ev.lo, ev.hi, ev.loc):
        if p is not None:
            env = {leaf.var: ev}
            env.update(places)
            if not p(env, ctx):
                continue
        slots = [None] * am.nleaves
        slots[leaf.slot] = ev
        _up_from_leaf(am, st, ctx, leaf, PM(tuple(slots), ev.lo, ev.hi, (), tuple(places)), out)


def _up_from_leaf(am: Automaton, st: RunState, ctx, leaf, pm: PM, out) -> None:
    parent = am.parent.get(leaf.id)
    if isinstance(parent, Join):
        _enter(am, st, ctx, out, _join(am, st, ctx, parent, am.side[leaf.id], pm, out))
    else:
        _up(am, st, ctx, leaf, pm, out)


def _routes(am: Automaton, type_name) -> tuple:
    """Where an event of ``type_name`` goes, in the order :func:`_insert` visits it: for its
    type, then for leaves of any type (None), the negated leaves ``(neg id, filter)``, the
    leaves ``(leaf, filter, predicate, slot, join, side)`` (``join``: the parent when it
    is a join, which :func:`_up` would go to) and the run leaves (:class:`RunLeaf`, which
    take the events of their type to cut them into runs). Derived from the automaton once
    per type. A phrase's composites go to the leaves of their type only: a pattern alone (a
    leaf of any type) matches input events."""
    cache = am.__dict__.get("_routes")
    if cache is None:
        cache = am._routes = {}
    r = cache.get(type_name)
    if r is None:
        def to_join(leaf):
            parent = am.parent.get(leaf.id)
            return (parent, am.side[leaf.id]) if isinstance(parent, Join) else (None, None)

        r = cache[type_name] = tuple(
            (tuple((neg_id, am.negs[neg_id][3][leaf.id]) for neg_id, leaf in am.neg_leaves_by_type.get(key, ())),
             tuple((leaf, am.filters[leaf.id], am.preds[leaf.id], leaf.slot, *to_join(leaf))
                   for leaf in am.leaves_by_type.get(key, ()) if leaf.run is None),
             tuple(am.run_leaves[leaf.id] for leaf in am.leaves_by_type.get(key, ()) if leaf.run is not None))
            for key in ((type_name,) if type_name in am.derived else (type_name, None)))
    return r


def _join_info(am: Automaton, node: Join) -> tuple:
    """What :func:`_join` needs of a join, derived once: ``(time relation, space suffix,
    absence id or None, the right side's slots, whether the join has a filter or predicate,
    whether its right buffer drops dead partial matches, sides, whether its matches make
    their stamps from their halves')`` (``"and"``: no relation, ``"", ""``:
    :func:`~spatec.frontend.ast.op_parts`; per side, where its own and the other side's
    events are in the slots: :func:`_within`; stamps from halves: :mod:`~spatec.automata.hulls`,
    a join over many events, spatial or not: a spatial join above it reads them)."""
    cache = am.__dict__.get("_join_info")
    if cache is None:
        cache = am._join_info = {}
    r = cache.get(node.id)
    if r is None:
        time_rel, space = A.op_parts(node.op)
        r = cache[node.id] = (time_rel, space, node.absence.id if node.absence is not None else None,
                              _copied(am.slots[node.right.id]),
                              am.filters[node.id] is not None or am.preds[node.id] is not None,
                              bool(am.rules[(node.id, "R")].get("seq_right")),
                              {"L": (_within(am.slots[node.left.id]), _within(am.slots[node.right.id])),
                               "R": (_within(am.slots[node.right.id]), _within(am.slots[node.left.id]))},
                              len(am.slots[node.id]) >= H.MIN_EVENTS)
    return r


def _within(slots) -> slice:
    """Where a side's events are in a partial match's slots: its range (a chain of n events
    then scans its side, not all n slots), or everywhere."""
    return slice(slots.start, slots.stop) if isinstance(slots, range) else slice(None)


def _copied(slots):
    """The right side's slots as :func:`_join` copies them: a slice when they are contiguous
    (one C-level copy, whatever the size), else the sorted slots."""
    if isinstance(slots, range):
        return slice(slots.start, slots.stop)
    return tuple(sorted(slots))


def _env(am: Automaton, pm: PM, extra=None) -> dict:
    env = {}
    for var, slots in am.var_slots.items():
        for s in slots:
            e = pm.ev[s]
            if e is not None:
                env[var] = e
                break
    if pm.places:
        env.update(pm.places)
    if extra:
        env.update(extra)
    return env


def _up(am: Automaton, st: RunState, ctx, node, pm: PM, out) -> None:
    """``pm``, a match of ``node``, goes up the tree (:func:`_flow`)."""
    _flow(am, st, ctx, out, [iter(((node, pm),))])


def _enter(am: Automaton, st: RunState, ctx, out, join) -> None:
    """A partial match enters a join (``join``: :func:`_join`'s generator): most make nothing
    with the other side's buffer, and are done with here; the others go to :func:`_flow`."""
    nxt = next(join, None)
    if nxt is not None:
        _flow(am, st, ctx, out, [join], nxt)


def _flow(am: Automaton, st: RunState, ctx, out, stack: list, nxt=None) -> None:
    """Send matches up the tree, depth first, without recursion (trees of any depth).

    ``stack``: iterators of ``(node, match of node)`` still to send up, the innermost last;
    a join is one (:func:`_join`, a generator: the matches it makes with the other side's
    buffer, then it buffers its own). A match goes up through the nodes above it that only
    filter it (``or``, an absence after, patterns and conditions) until it reaches a join,
    whose generator goes on the stack, or the root. The order of everything (matches made,
    buffered, reported) is the order of the recursive descent this replaces: a join's next
    candidate is tried only once the match made with the last one has gone as far up as it
    goes, and a join buffers its own match after probing. ``nxt``: the first match to send
    up, already taken from the innermost iterator."""
    parent_of, side_of, binders = am.parent, am.side, am.binders
    while stack:
        if nxt is None:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                continue
        node, pm = nxt
        nxt = None
        while True:
            parent = parent_of.get(node.id)
            if parent is None:
                _root(am, st, ctx, pm, out)
                break
            if isinstance(parent, Join):
                stack.append(_join(am, st, ctx, parent, side_of[node.id], pm, out))
                break
            if isinstance(parent, After):
                q = PM(pm.ev, pm.lo, pm.hi, pm.checks + (parent.absence.id,), pm.places)
                q._loc, q._hb = pm._loc, pm._hb      # the same events: the same stamp
                pm = q
            if parent.id in binders:
                stack.append(iter([(parent, q) for q in _bind_places(am, parent, pm, ctx)]))
                break
            if not _accept(am, parent, pm, ctx):
                break
            node = parent


def _bind_places(am: Automaton, node, pm: PM, ctx) -> list:
    """``pm`` at a node that binds places: one partial match per matching place, each passing
    the node's patterns and conditions."""
    f = am.filters[node.id]
    if f is not None and not f(pm.lo, pm.hi, pm.loc):
        return []
    out = []
    p = am.preds[node.id]
    for places in am.binders[node.id](pm.lo, pm.hi, pm.loc):
        q = PM(pm.ev, pm.lo, pm.hi, pm.checks, pm.places + tuple(places))
        q._loc, q._hb = pm._loc, pm._hb      # places are not events: the same stamp
        if p is None or p(_env(am, q), ctx):
            out.append(q)
    return out


def _accept(am: Automaton, node, pm: PM, ctx) -> bool:
    f = am.filters[node.id]
    if f is not None and not f(pm.lo, pm.hi, pm.loc):
        return False
    p = am.preds[node.id]
    return p is None or p(_env(am, pm), ctx)


def _join(am: Automaton, st: RunState, ctx, node: Join, side: str, pm: PM, out):
    """``pm`` arrives at ``node`` from ``side``: a generator of the matches of ``node`` it makes
    with the other side's buffered partial matches, ``(node, match)`` (:func:`_flow` sends
    each up before asking for the next); once they are made, ``pm`` is buffered."""
    nid = node.id
    time_rel, space, absence, rslots, check, seq_right, sides, halves = _join_info(am, node)
    my_sl, other_sl = sides[side]
    access = am.access.get(nid)
    oside = "R" if side == "L" else "L"
    if access is None:
        okeys = ((nid, oside),)
    else:
        okeys = [(nid, oside, k) for k in access.probe(side, pm, st.buffers, nid)]
    for okey in okeys:
        other = st.buffers.get(okey)
        if not other:
            continue
        w = am.plan.within
        lo, hi = pm.lo, pm.hi
        first = 0
        if w is not None and okey in st.lo_sorted:
            # the buffer is in order of lo: the partial matches starting before hi - w (a
            # prefix) would all fail `within` below; found from the end, as a new partial
            # match mostly pairs with recent ones
            cut = hi - w
            first = len(other)
            while first and other[first - 1].lo >= cut:
                first -= 1
        mine = mine_ids = None
        for q in other[first:]:
            qlo, qhi = q.lo, q.hi
            if w is not None and (hi if hi > qhi else qhi) - (lo if lo < qlo else qlo) > w:
                continue  # already longer than `within`: every composite above this join would be too
            if access is not None and (access.reject(pm, q, ctx) if side == "L" else access.reject(q, pm, ctx)):
                continue  # the access's conjunct (a condition of this join) is false: decided early
            if mine is None:
                mine = [e for e in pm.ev[my_sl] if e is not None]    # pm.events()
                mine_ids = set(map(id, mine))
            if not mine_ids.isdisjoint(map(id, q.ev[other_sl])):   # (None is not among mine)
                continue  # distinct variables, distinct events
            if am.run_leaves and RUNS.shares_events(mine, q.events()):
                continue  # ... and a run holds every event of its stretch
            if side == "L":
                left, right = pm, q
            else:
                left, right = q, pm
            # the relation: time (``;``, ``||``), then space (``=``, ``<>``)
            if time_rel == ";":
                if not left.hi < right.lo:
                    theirs = [e for e in q.ev[other_sl] if e is not None]    # q.events()
                    if not (R.before(mine, theirs) if side == "L" else R.before(theirs, mine)):
                        continue
            elif time_rel == "||":
                theirs = [e for e in q.ev[other_sl] if e is not None]    # q.events()
                le, re_ = (mine, theirs) if side == "L" else (theirs, mine)
                if not R.composite_concurrent(le, left.lo, left.hi, re_, right.lo, right.hi):
                    continue
            if halves:
                lsl, rsl = sides["L"]
                if space and S.overlap(H.loc(left, lsl), H.loc(right, rsl)) != (space == "="):
                    continue
            elif space and S.overlap(left.loc, right.loc) != (space == "="):
                continue
            # the events of both sides: the left's, with the right side's slots from the right
            ev = list(left.ev)
            if rslots.__class__ is slice:
                ev[rslots] = right.ev[rslots]
            else:
                rev = right.ev
                for s_ in rslots:
                    ev[s_] = rev[s_]
            checks = left.checks + right.checks
            if absence is not None:
                checks = checks + (absence,)
            c = PM(tuple(ev), left.lo if left.lo < right.lo else right.lo,
                   left.hi if left.hi > right.hi else right.hi, checks,
                   left.places + right.places if left.places or right.places else ())
            if halves:
                H.join(c, left, right, lsl, rsl)
            if nid in am.binders:
                for c2 in _bind_places(am, node, c, ctx):
                    yield node, c2
                continue
            if check and not _accept(am, node, c, ctx):
                continue
            yield node, c
    key = (nid, side) if access is None else (nid, side, access.store(side, pm))
    if side == "R" and seq_right and _seq_right_dead(
            pm, RUNS.floor(st, st.watermark) if st.runs else st.watermark, am.G, my_sl):
        return
    buf = st.buffers.get(key)
    if not buf:
        if buf is None:
            buf = st.buffers[key] = []
        st.lo_sorted.add(key)
    elif pm.lo < buf[-1].lo:
        st.lo_sorted.discard(key)   # an out-of-order arrival: joins scan this buffer whole
    buf.append(pm)




# ------------------------------------------------------------------------------------ root

def _root(am: Automaton, st: RunState, ctx, pm: PM, out) -> None:
    w = am.plan.within
    if w is not None and pm.hi - pm.lo > w:
        return
    if pm.checks or am.deferred is not None:
        st.pending.append(pm)
        return
    _emit(am, st, pm, out)


def _emit(am: Automaton, st: RunState, pm: PM, out) -> None:
    env = _env(am, pm)
    cid = composite_id(am.name, [(v, e.id) for v, e in env.items()])
    places = None
    if pm.places:
        places = dict(pm.places)
        for v in places:
            del env[v]
    if am.has_or:
        if cid in st.emitted:
            return
        st.emitted[cid] = pm.hi
    # the stamp (the hull of the events) is made when first asked for: pm._loc if a pattern
    # already needed it, else by the runner that outputs the composite
    out.append(Composite(am.name, cid, pm.lo, pm.hi, pm._loc, env, pm.events(), places))


def _part(pm: PM, slots) -> list:
    return [pm.ev[s] for s in slots if pm.ev[s] is not None]


def _decide(am: Automaton, st: RunState, ctx, w: int, final: bool, out) -> None:
    if not st.pending:
        return
    keep = []
    for pm in st.pending:
        if not _ready(am, pm, w, final):
            keep.append(pm)
            continue
        if _holds(am, st, ctx, pm):
            _emit(am, st, pm, out)
    st.pending = keep


def _ready(am: Automaton, pm: PM, w: int, final: bool) -> bool:
    if am.derived:
        # the watermark decides, at the end of the input too (it may stop short of the last event)
        return _ready_by(am, pm, w, final)
    for neg_id in pm.checks:
        node = am.negs[neg_id][0]
        if isinstance(node, Join):
            b = _part(pm, am.slots[node.right.id])
            if not (final or w >= max(e.hi for e in b) + am.G):
                return False
        else:
            a = _part(pm, am.slots[node.left.id])
            end = max(e.hi for e in a) + node.absence.window
            if not (w > end or (final and end <= w)):
                return False
    if am.succ_waits and not final:
        env = _env(am, pm)
        for chain, slack in zip(am.succ_waits, am.chain_slack):
            if w < max(_chain_t(env, v) for v in chain) + slack:
                return False
    return True


def _ready_by(am: Automaton, pm: PM, w: int, final: bool) -> bool:
    """:func:`_ready` for a phrase over derived events: as before the end of the input, except
    that ``successive`` over input events (all seen at the end) is decided at the end; over
    derived events (SPEC §8, ``as event source ...``) by the watermark, as an absence."""
    if final and am.succ_waits:
        t = _absence_time(am, pm)
        if any(am.chain_derived):
            env = _env(am, pm)
            for chain, derived in zip(am.succ_waits, am.chain_derived):
                if derived:
                    t = max(t, max(_chain_t(env, v) for v in chain))
        return w >= t
    return w >= decision_time(am, pm)


def _absence_time(am: Automaton, pm: PM) -> int:
    t = NEG_INF
    for neg_id in pm.checks:
        node = am.negs[neg_id][0]
        if isinstance(node, Join):
            t = max(t, max(e.hi for e in _part(pm, am.slots[node.right.id])) + am.G)
        else:
            t = max(t, max(e.hi for e in _part(pm, am.slots[node.left.id])) + node.absence.window + 1)
    return t


def _chain_t(env: dict, name: str) -> int:
    """The local time of a ``successive`` chain's entry: a variable's event, or a run's member."""
    e = env.get(name)
    if e is not None:
        return e.t
    var, member = name.split(".")
    return getattr(env[var], member).t


def decision_time(am: Automaton, pm: PM) -> int:
    """The smallest watermark at which pending ``pm`` is ready to be decided (before the end of
    input): ``_ready(am, pm, w, False)`` holds exactly for ``w >= decision_time(am, pm)``.
    NEG_INF when nothing holds it back. Lets a live runner step a waiting key only once the
    watermark reaches its first decision, rather than at every move of the watermark."""
    t = _absence_time(am, pm)     # an absence after is ready when w > its end
    if am.succ_waits:
        env = _env(am, pm)
        for chain, slack in zip(am.succ_waits, am.chain_slack):
            t = max(t, max(_chain_t(env, v) for v in chain) + slack)
    return t


def next_decision(am: Automaton, st: RunState) -> int | None:
    """The smallest watermark at which some pending composite of ``st`` can be decided, or a
    run cut or completed (SPEC §7: a run waits for the watermark to settle its source's next
    event, or to pass its gap); None when nothing waits. Stepping the key with a lower
    watermark and no events decides nothing."""
    t = min((decision_time(am, pm) for pm in st.pending), default=None)
    if st.runs:
        r = RUNS.next_due(am, st)
        if r is not None and (t is None or r < t):
            t = r
    return t


def undecided_low(am: Automaton, st: RunState) -> int | None:
    """At the end of the input: the least ``lo`` of the composites ``st`` leaves undecided (each
    satisfies everything but an absence whose decision has not come; ``successive``, decided
    at the end, is checked here), and of the runs not complete (their own ``lo``); None if
    none. It holds back the phrase's frontier."""
    low = None
    ctx = None
    for pm in st.pending:
        if low is not None and pm.lo >= low:
            continue
        if am.deferred is not None:
            ctx = ctx or Context(st)
            if not am.deferred(_env(am, pm), ctx):
                continue
        low = pm.lo
    for cut in st.runs.values():          # a run not complete (SPEC §7): its lo, as the oracle's
        for x in ([cut.open] if cut.open is not None else []) + cut.pending:
            if low is None or x.lo < low:
                low = x.lo
    return low


def _holds(am: Automaton, st: RunState, ctx, pm: PM) -> bool:
    env = None
    for neg_id in pm.checks:
        node, neg, cond, _ = am.negs[neg_id]
        a = _part(pm, am.slots[node.left.id])
        a_hi = max(e.hi for e in a)
        a_loc = None
        if isinstance(node, Join):
            b = _part(pm, am.slots[node.right.id])
            b_lo = min(e.lo for e in b)
            b_loc = None
        members = pm.events()
        for x in st.xbuf.get(neg_id, ()):
            if any(x is m for m in members):
                continue
            if am.run_leaves and RUNS.contains(members, x):
                continue   # an event of a run of the composite is one of its events
            if not R.composite_before(a, a_hi, [x], x.lo):
                continue
            if isinstance(node, Join):
                if not R.composite_before([x], x.hi, b, b_lo):
                    continue
            elif x.hi > a_hi + neg.window:
                continue
            if neg.left_space:
                a_loc = a_loc or (a[0].loc if len(a) == 1 else S.hull([e.loc for e in a]))
                if S.overlap(a_loc, x.loc) != (neg.left_space == "="):
                    continue
            if neg.right_space:
                b_loc = b_loc or (b[0].loc if len(b) == 1 else S.hull([e.loc for e in b]))
                if S.overlap(x.loc, b_loc) != (neg.right_space == "="):
                    continue
            if cond is not None:
                if env is None:
                    env = _env(am, pm)
                xenv = dict(env)
                if neg.var:
                    xenv[neg.var] = x
                if not cond(xenv, ctx):
                    continue
            return False  # an X occurred: the absence fails
    if am.deferred is not None:
        if env is None:
            env = _env(am, pm)
        if not am.deferred(env, ctx):
            return False
    return True


# ------------------------------------------------------------------------------------ prune

def _seq_right_dead(pm: PM, w: int, G: int, where: slice = slice(None)) -> bool:
    """No future match can come certainly before this right-hand partial match (``where``:
    where its events are, :func:`_within`)."""
    for q in pm.ev[where]:
        if q is not None and q.lo <= w and (q.source is None or q.t <= w - G):
            return True
    return False


def _prune(am: Automaton, st: RunState, w: int) -> None:
    if w == NEG_INF:
        return
    if st.runs:
        w = RUNS.floor(st, w)   # a run still to complete may hold events from before w
    S_ = am.S
    G = am.G
    min_lo = None
    lo_sorted = st.lo_sorted
    emptied = []
    for key, buf in st.buffers.items():
        if not buf:
            if len(key) == 3:
                emptied.append(key)   # a keyed buffer (spatec.automata.access): its key may not come back
            continue
        rules = am.rules[key[:2]]
        conc = rules.get("conc")
        seq_right = rules.get("seq_right")
        succ = rules.get("succ")
        in_order = key in lo_sorted
        if in_order and not (conc is not None or seq_right or succ):
            # only the span bound: in order of lo, what it drops is a prefix
            n = 0
            if S_ is not None:
                cut, m = w - S_, len(buf)
                while n < m and buf[n].lo < cut:
                    n += 1
            if n:
                del buf[:n]
            if buf and (min_lo is None or buf[0].lo < min_lo):
                min_lo = buf[0].lo
            continue
        keep = []
        cut_s = None if S_ is None else w - S_
        cut_c = None if conc is None else w - conc
        for pm in buf:
            if cut_s is not None and pm.lo < cut_s:
                continue
            if cut_c is not None and pm.hi < cut_c:
                continue
            if seq_right and _seq_right_dead(pm, w, G):
                continue
            if succ and _succ_dead(st, pm, succ, w, G):
                continue
            keep.append(pm)
            if min_lo is None or pm.lo < min_lo:
                min_lo = pm.lo
        buf[:] = keep
        if not in_order and all(a.lo <= b.lo for a, b in zip(keep, keep[1:])):
            lo_sorted.add(key)   # the out-of-order partial matches are gone
    for key in emptied:
        del st.buffers[key]
        lo_sorted.discard(key)
    if st.xbuf or st.history:
        _prune_events(am, st, w, min_lo)
    if st.emitted and S_ is not None:
        st.emitted = {k: v for k, v in st.emitted.items() if v >= w - S_}


def _prune_events(am: Automaton, st: RunState, w: int, min_lo) -> None:
    """The events kept for absences and for ``successive`` that no partial match (``min_lo``:
    the smallest lo of those kept) and no future composite can still need."""
    S_ = am.S
    G = am.G
    for pm in st.pending:
        if min_lo is None or pm.lo < min_lo:
            min_lo = pm.lo
    # A future composite's events start after w - (longest stamp or match span).
    fut = [x for x in (S_, am.type_len.get(None)) if x is not None]
    horizon = w - min(fut) if fut else None
    thr = horizon
    if min_lo is not None:
        thr = min_lo if thr is None else min(thr, min_lo)
    if thr is not None:
        for nid, xs in st.xbuf.items():
            xs[:] = [x for x in xs if x.hi > thr]
    if st.history:
        thr_h = w - G if min_lo is None else min(min_lo, w - G)
        for k in list(st.history):
            h = st.history[k]
            i = bisect.bisect_left(h, thr_h)
            if i:
                del h[:i]
            if not h:
                del st.history[k]


def _succ_dead(st: RunState, pm: PM, succ, w: int, G: int) -> bool:
    for kind, slot in succ:
        e = pm.ev[slot]
        if e is None:
            continue
        if kind == "prev":
            if e.t <= w - G:
                return True
        else:
            h = st.history.get((e.type, e.source), ())
            i = bisect.bisect_right(h, e.t)
            if i < len(h) and h[i] < w - G:
                return True
    return False

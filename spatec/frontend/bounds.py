"""Boundedness (SPEC §4): can a partial match of this phrase wait forever?

A phrase is bounded when it has ``within D``, or when every join of two
sub-expressions is bounded by itself: by concurrency of two operands whose
time stamps have bounded length (two concurrent stamps are at most their
lengths apart), or by a ``successive(...)`` conjunct of ``where`` that links a
variable of one operand to a variable of the other. ``A ; not X within D``
waits at most D. ``or`` is bounded when both branches are. A run (SPEC §7) is
a leaf that never waits for another operand: it completes when its source
reports again (or after its ``gap``); its time stamp, though, may be of any
length.

Stamp lengths come from the program's event types
(:class:`spatec.frontend.program.EventType`): a derived type's is its
producer's bound. The walks run on :func:`spatec.frontend.ast.trampoline`:
no depth limit.
"""
from __future__ import annotations

from spatec.frontend import ast as A


def stamp_length(decl: A.EventDecl | None) -> int | None:
    """Largest time-stamp length of an event of this type (µs); None if unbounded."""
    if decl is None or decl.time is None:
        return None
    tc = decl.time
    if tc.high is None:
        return 2 * tc.widen.micros() if tc.widen is not None else 0
    if tc.low.attr != tc.high.attr:
        return None  # `start .. end`: as long as the data says
    lo = tc.low.offset.micros() if tc.low.offset else 0
    hi = tc.high.offset.micros() if tc.high.offset else 0
    return max(0, hi - lo)


def _type_length(types: dict, name: str) -> int | None:
    t = types.get(name)
    if t is None:
        return None
    if isinstance(t, A.EventDecl):  # a plain {name: EventDecl} (the planner's view)
        return stamp_length(t)
    return t.stamp_length


def successive_links(where) -> set[frozenset]:
    """Pairs of variables linked by a top-level ``successive(...)`` conjunct
    (a run's member ``R.last`` stands for its run R)."""
    links: set[frozenset] = set()
    stack = [where] if where is not None else []
    while stack:
        e = stack.pop()
        if isinstance(e, A.BoolOp) and e.op == "and":
            stack += [e.right, e.left]
        elif isinstance(e, A.Call) and e.func == "successive":
            names = [a.name if isinstance(a, A.Var) else a.var for a in e.args
                     if isinstance(a, (A.Var, A.Attr))]
            for a, b in zip(names, names[1:]):
                if a != b:
                    links.add(frozenset((a, b)))
    return links


def leaf_length(m, events: dict) -> int | None:
    """Largest stamp length of a match of ``m``, or None if unbounded.

    ``events`` maps type names to :class:`EventType` (or to ``EventDecl``).
    """
    return A.trampoline(_length(m, events))


def _length(m, events: dict):
    if isinstance(m, A.EventRef):
        return _type_length(events, m.type)
    if isinstance(m, A.Run):
        return None  # a run lasts as long as its source keeps joining it
    if A.is_pattern(m):  # any (primitive) event at all
        lens = [_type_length(events, n) for n, t in events.items() if not getattr(t, "derived", False)]
        return None if not lens or any(x is None for x in lens) else max(lens)
    if isinstance(m, A.Binary):
        if m.op == "and" and A.is_pattern(m.right):
            return (yield _length(m.left, events))
        if m.op == "and" and A.is_pattern(m.left):
            return (yield _length(m.right, events))
        if m.op == "or":
            a = yield _length(m.left, events)
            b = yield _length(m.right, events)
            return None if a is None or b is None else max(a, b)
        if isinstance(m.right, A.Not):  # absence after: A's stamp
            return (yield _length(m.left, events))
        if m.op in A.CONC_OPS:
            a = yield _length(m.left, events)
            b = yield _length(m.right, events)
            return None if a is None or b is None else a + b
        return None
    return None


def span_bound(p: A.Phrase, events: dict) -> int | None:
    """Largest time-stamp length of a match of the phrase (µs), None if none is known."""
    n = leaf_length(p.match, events)
    if p.within is not None:
        w = p.within.micros()
        return w if n is None else min(n, w)
    return n


def phrase_bound_problem(p: A.Phrase, events: dict):
    """(node, reason) for the first join that could wait forever, or None if bounded."""
    if p.within is not None:
        return None
    return _Bounds(p.match, events, successive_links(p.where)).problem()


class _Bounds:
    """The join-by-join boundedness walk, linear in the size of the match.

    Each positive variable gets the position of its first leaf, left to right,
    so every subtree covers a range of positions; a ``successive`` link joins
    two operands when one end lies in each range, found from the smaller side.
    Stamp lengths are computed once per node.
    """

    def __init__(self, m, events: dict, links: set):
        self.m, self.events = m, events
        self.pos: dict = {}
        self.ranges: dict = {}     # id(node) → (lo, hi) or None
        self.lengths: dict = {}    # id(node) → stamp length
        A.trampoline(self._range(m))
        self.partners: dict = {}   # position → positions it is linked to
        for k in links:
            a, b = tuple(k)
            if a in self.pos and b in self.pos:
                self.partners.setdefault(self.pos[a], set()).add(self.pos[b])
                self.partners.setdefault(self.pos[b], set()).add(self.pos[a])

    def _range(self, m):
        r = None
        if isinstance(m, (A.EventRef, A.Run)):
            if m.var:
                p = self.pos.setdefault(m.var, len(self.pos))
                r = (p, p)
        elif isinstance(m, A.Binary):
            a = yield self._range(m.left)
            b = None if isinstance(m.right, A.Not) else (yield self._range(m.right))
            r = a if b is None else b if a is None else (min(a[0], b[0]), max(a[1], b[1]))
        self.ranges[id(m)] = r
        return r

    def length(self, m) -> int | None:
        key = id(m)
        if key not in self.lengths:
            self.lengths[key] = A.trampoline(self._length(m))
        return self.lengths[key]

    def _length(self, m):
        # leaf_length, remembering each node's answer
        key = id(m)
        if key in self.lengths:
            return self.lengths[key]
        if isinstance(m, A.Binary) and m.op in A.CONC_OPS + ("or",) and not A.is_pattern(m):
            a = yield self._length(m.left)
            b = yield self._length(m.right)
            if a is None or b is None:
                n = None
            else:
                n = max(a, b) if m.op == "or" else a + b
        elif isinstance(m, A.Binary) and m.op == "and" and (A.is_pattern(m.right) or A.is_pattern(m.left)) \
                and not A.is_pattern(m):
            n = yield self._length(m.left if A.is_pattern(m.right) else m.right)
        elif isinstance(m, A.Binary) and isinstance(m.right, A.Not) and not A.is_pattern(m):
            n = yield self._length(m.left)
        else:
            n = leaf_length(m, self.events) if not isinstance(m, A.Binary) or A.is_pattern(m) else None
        self.lengths[key] = n
        return n

    def linked(self, left, right) -> bool:
        lr, rr = self.ranges.get(id(left)), self.ranges.get(id(right))
        if lr is None or rr is None or not self.partners:
            return False
        if lr[1] - lr[0] > rr[1] - rr[0]:
            lr, rr = rr, lr
        for p in range(lr[0], lr[1] + 1):
            for q in self.partners.get(p, ()):
                if rr[0] <= q <= rr[1]:
                    return True
        return False

    def problem(self):
        return A.trampoline(self._problem(self.m))

    def _problem(self, m):
        if not isinstance(m, A.Binary):
            return None
        if m.op == "or":
            return (yield self._problem(m.left)) or (yield self._problem(m.right))
        if m.op == "and" and (A.is_pattern(m.left) or A.is_pattern(m.right)):
            return (yield self._problem(m.right if A.is_pattern(m.left) else m.left))
        if isinstance(m.right, A.Not):
            # `A ; not X within D` waits at most D; `A ; not X` alone is reported by the checker
            return (yield self._problem(m.left))
        left = m.left
        if isinstance(left, A.Binary) and isinstance(left.right, A.Not) and left.right.within is None:
            left = left.left  # A ; not X ; B joins A and B
        inner = (yield self._problem(left)) or (yield self._problem(m.right))
        if inner:
            return inner
        if m.op in A.CONC_OPS and self.length(left) is not None and self.length(m.right) is not None:
            return None
        if self.linked(left, m.right):
            return None
        what = {"and": "`and`"}.get(m.op, f"`{m.op}`")
        if m.op in A.CONC_OPS:
            why = (f"the operands of {what} have time stamps of unbounded length, so a partial match "
                   "could wait forever")
        else:
            why = f"a partial match of {what} could wait forever for its other operand"
        return (m, why)

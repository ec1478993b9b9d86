"""Boundedness (SPEC §4): can a partial match of this phrase wait forever?

A phrase is bounded when it has ``within D``, or when every join of two
sub-expressions is bounded by itself: by concurrency of two operands whose
time stamps have bounded length (two concurrent stamps are at most their
lengths apart), or by a ``successive(...)`` conjunct of ``where`` that links a
variable of one operand to a variable of the other. ``A ; not X within D``
waits at most D. ``or`` is bounded when both branches are.
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


def successive_links(where) -> set[frozenset]:
    """Pairs of variables linked by a top-level ``successive(...)`` conjunct."""
    links: set[frozenset] = set()

    def conj(e):
        if isinstance(e, A.BoolOp) and e.op == "and":
            conj(e.left)
            conj(e.right)
        elif isinstance(e, A.Call) and e.func == "successive":
            names = [a.name for a in e.args if isinstance(a, A.Var)]
            for a, b in zip(names, names[1:]):
                links.add(frozenset((a, b)))

    if where is not None:
        conj(where)
    return links


def positive_vars(m) -> set[str]:
    """Variables bound in ``m`` outside any `not`."""
    out: set[str] = set()
    if isinstance(m, A.EventRef):
        if m.var:
            out.add(m.var)
    elif isinstance(m, A.Binary):
        out |= positive_vars(m.left)
        if not isinstance(m.right, A.Not):
            out |= positive_vars(m.right)
    elif isinstance(m, A.Certainly):
        pass
    return out


def leaf_length(m, events: dict) -> int | None:
    """Largest stamp length of a match of ``m``, or None if unbounded."""
    if isinstance(m, A.EventRef):
        return stamp_length(events.get(m.type))
    if A.is_pattern(m):  # any event at all
        lens = [stamp_length(d) for d in events.values()]
        return None if not lens or any(x is None for x in lens) else max(lens)
    if isinstance(m, A.Binary):
        if m.op == "and" and A.is_pattern(m.right):
            return leaf_length(m.left, events)
        if m.op == "and" and A.is_pattern(m.left):
            return leaf_length(m.right, events)
        if m.op == "or":
            a, b = leaf_length(m.left, events), leaf_length(m.right, events)
            return None if a is None or b is None else max(a, b)
        if isinstance(m.right, A.Not):  # absence after: A's stamp
            return leaf_length(m.left, events)
        if m.op in A.CONC_OPS:
            a, b = leaf_length(m.left, events), leaf_length(m.right, events)
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
    links = successive_links(p.where)
    return _problem(p.match, events, links)


def _linked(left, right, links) -> bool:
    lv, rv = positive_vars(left), positive_vars(right)
    return any(len(k & lv) == 1 and len(k & rv) == 1 for k in links)


def _problem(m, events, links):
    if not isinstance(m, A.Binary):
        return None
    if m.op == "or":
        return _problem(m.left, events, links) or _problem(m.right, events, links)
    if m.op == "and" and (A.is_pattern(m.left) or A.is_pattern(m.right)):
        return _problem(m.right if A.is_pattern(m.left) else m.left, events, links)
    if isinstance(m.right, A.Not):
        # `A ; not X within D` waits at most D; `A ; not X` alone is reported by the checker
        return _problem(m.left, events, links)
    left = m.left
    if isinstance(left, A.Binary) and isinstance(left.right, A.Not) and left.right.within is None:
        left = left.left  # A ; not X ; B joins A and B
    inner = _problem(left, events, links) or _problem(m.right, events, links)
    if inner:
        return inner
    if m.op in A.CONC_OPS and leaf_length(left, events) is not None \
            and leaf_length(m.right, events) is not None:
        return None
    if _linked(left, m.right, links):
        return None
    what = {"and": "`and`"}.get(m.op, f"`{m.op}`")
    if m.op in A.CONC_OPS:
        why = (f"the operands of {what} have time stamps of unbounded length, so a partial match "
               "could wait forever")
    else:
        why = f"a partial match of {what} could wait forever for its other operand"
    return (m, why)

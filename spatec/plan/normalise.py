"""Pass 1, ``normalise``: the syntax tree of a match becomes an operator tree of leaves,
joins, ``or`` and the two absence forms; patterns joined by ``and`` to an event
expression become filters of the node they restrict (pushed to the leaf when that
node is a leaf)."""
from __future__ import annotations

import dataclasses
from itertools import count

from spatec.errors import PlanError
from spatec.frontend import ast as A
from spatec.frontend.check import Program
from spatec.plan.nodes import After, Join, Leaf, Negation, Or


def normalise(program: Program, match):
    """The operator tree of ``match`` (slots and node ids numbered in a fixed order)."""
    return _Builder(program).normalise(match)


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

"""Runs (SPEC §7) as a back end reads them in a checked phrase's expressions.

The parser cannot tell ``R.first`` (a run's member event) from ``A.first`` (an
attribute named ``first``): the checker decides by what R is bound to, and
:func:`run_ref` gives a back end the same answer for any expression node, so
that no evaluator repeats the rule.

>>> from spatec.frontend import ast as A
>>> runs = {"R"}
>>> run_ref(A.Attr("R", "first"), runs)
RunRef(var='R', kind='member', member='first', attr=None)
>>> run_ref(A.Attr("R", "line"), runs)        # R.ATTR is R.first.ATTR
RunRef(var='R', kind='attr', member='first', attr='line')
>>> run_ref(A.Attr("R", "t", member="last"), runs)
RunRef(var='R', kind='attr', member='last', attr='t')
>>> run_ref(A.Attr("R", "hi"), runs)           # the run's composite stamp
RunRef(var='R', kind='stamp', member=None, attr='hi')
>>> run_ref(A.Call("max", (A.Attr("R", "speed"),)), runs)
RunRef(var='R', kind='aggregate', member='max', attr='speed')
>>> run_ref(A.Attr("A", "first"), runs) is None
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from spatec.frontend import ast as A

#: a run's member events: the first, the last so far (in `while`), the candidate (in `while`), the last
MEMBERS = ("first", "prev", "this", "last")


@dataclass(frozen=True)
class RunRef:
    """What an expression node means for run ``var``.

    - ``member``: the member event ``R.<member>`` (``R.first``);
    - ``attr``: attribute ``attr`` of member event ``member`` (``R.last.t``; ``R.line`` is ``R.first.line``);
    - ``stamp``: the run composite's ``lo`` or ``hi`` (``R.lo``);
    - ``run``: the run's composite (``R`` in ``overlap(R, B)``);
    - ``count``: ``count(R)``; ``aggregate``: ``min/max/avg(R.attr)`` (``member`` holds the function).
    """

    var: str
    kind: str
    member: Optional[str] = None
    attr: Optional[str] = None


def run_ref(e, runs) -> RunRef | None:
    """How ``e`` refers to a run of ``runs`` (the run variables of a checked phrase), or None."""
    if isinstance(e, A.Var):
        return RunRef(e.name, "run") if e.name in runs else None
    if isinstance(e, A.Attr):
        if e.var not in runs:
            return None
        if e.member is not None:
            return RunRef(e.var, "attr", e.member, e.name)
        if e.name in MEMBERS:
            return RunRef(e.var, "member", e.name)
        if e.name in ("lo", "hi"):
            return RunRef(e.var, "stamp", None, e.name)
        return RunRef(e.var, "attr", "first", e.name)
    if isinstance(e, A.Call) and len(e.args) == 1:
        a = e.args[0]
        if e.func == "count" and isinstance(a, A.Var) and a.name in runs:
            return RunRef(a.name, "count")
        if e.func in ("min", "max", "avg") and isinstance(a, A.Attr) and a.var in runs and a.member is None:
            return RunRef(a.var, "aggregate", e.func, a.name)
    return None

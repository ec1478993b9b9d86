"""Checking a predicate over named fields: a subscription filter of ``spatec serve``.

A filter is the language's ``where`` expression over a phrase's output record: a bare
name is one of its fields (``line``, ``metres``, ``lo``), and everything else — literals
with units, arithmetic, comparisons, ``and``/``or``/``not`` — is typed by the phrase
checker's own walk (:class:`~spatec.frontend.check_phrase.PhraseChecker`, on the
trampoline: any depth, time linear in the size). Functions and ``A.x`` are not fields.

>>> from spatec.frontend.parse import parse_expr
>>> e = parse_expr('line == "1" and gap > 10 min', '<where>')
>>> check_fields(e, {"line": "str", "gap": "duration"}, "UTC")[0]
'bool'
>>> try:
...     check_fields(parse_expr('gap > 10', '<where>'), {"gap": "duration"}, "UTC")
... except CheckError as err:
...     print(err.first.span.col, err.first.message)
1 unit mismatch: cannot compare a duration with a number
"""
from __future__ import annotations

from spatec.errors import CheckError, Diagnostic, Span
from spatec.frontend import ast as A
from spatec.frontend.check_phrase import PhraseChecker
from spatec.frontend.typewords import did_you_mean, value_type


class _Diagnostics:
    """What :class:`PhraseChecker` asks of the program checker, for one filter."""

    def __init__(self, timezone: str, line: str):
        self.timezone, self.line = timezone, line
        self.diagnostics: list[Diagnostic] = []
        self.types: dict = {}
        self.place_sets: dict = {}
        self.bad_events: set = set()

    def err(self, span: Span, msg: str, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(span, msg, hint, self.line))


class FieldChecker(PhraseChecker):
    """The phrase checker's expression rules, with bare names as fields of ``fields``
    (name → type word or declared type)."""

    def __init__(self, fields: dict, timezone: str, line: str = ""):
        # the state the expression walk reads (no phrase: no variables, runs or places)
        self.c = _Diagnostics(timezone, line)
        self.fields = {n: value_type(t) for n, t in fields.items()}
        self.vars, self.var_spans, self.negated, self.places = {}, {}, {}, {}
        self.runs, self.aggregates, self.run_names = {}, {}, set()
        self.types: dict = {}
        self.constructs: set = set()
        self.mode, self.run_var, self.ok = "where", None, True

    def _expr_inner(self, e):
        if isinstance(e, A.Var):
            t = self.fields.get(e.name)
            if t is None:
                self.err(e.span, f"unknown field {e.name}",
                         did_you_mean(e.name, self.fields) or "fields: " + ", ".join(self.fields))
            return t
        if isinstance(e, A.Attr):
            self.err(e.span, f"a filter names the output fields, not variables: `{e.var}.{e.name}`",
                     f"e.g. `{e.name} == ...` for an output field `{e.name}`")
            return None
        if isinstance(e, A.Call):
            self.err(e.span, f"functions are not available in a filter: {e.func}",
                     "a filter compares the output fields")
            return None
        return (yield from super()._expr_inner(e))


def check_fields(e, fields: dict, timezone: str, line: str = "") -> tuple[str | None, dict]:
    """The type of ``e`` and of each of its nodes (node → type word); raises
    :class:`CheckError` with every problem, positioned in the filter's own text
    (``line``: that text, for the caret)."""
    c = FieldChecker(fields, timezone, line)
    t = c.expr(e, "where")
    if c.c.diagnostics:
        raise CheckError(c.c.diagnostics)
    return t, c.types

"""Checking one phrase: its match, conditions and output (SPEC §3-4, §7-9).

The match and every expression are walked as generators on
:func:`spatec.frontend.ast.trampoline` (``t = yield self._expr(e.left)``), so
a chain of any length checks without recursion.

Where each run expression may stand (SPEC §7):

| expression | `while` | `where`, `emit` |
| --- | --- | --- |
| ``R.first``, ``R.first.ATTR`` | yes | yes |
| ``R.prev``, ``R.this`` (and their attributes) | yes | no |
| ``R.last`` (and its attributes) | no | yes |
| ``R.ATTR`` (= ``R.first.ATTR``) | yes | yes |
| ``R`` (the run's composite), ``R.lo``, ``R.hi`` | no | yes |
| ``count(R)``, ``min/max/avg(R.ATTR)`` | no | yes |
| other variables | no | yes |
"""
from __future__ import annotations

import datetime as dt

from spatec.errors import Span
from spatec.frontend import ast as A
from spatec.frontend.bounds import phrase_bound_problem, span_bound
from spatec.frontend.program import (
    DERIVED,
    AsEventInfo,
    PLACE_BINDINGS,
    PLACE_SETS,
    PLACES_FIELD,
    RUNS,
    STANDARD_FIELDS,
    PhraseInfo,
    PlaceBinding,
    RunInfo,
)
from spatec.frontend.runs import MEMBERS
from spatec.frontend.typewords import (
    AGGREGATES,
    DIMENSIONS,
    EVENTS_ONLY,
    FUNCTIONS,
    NUMERIC,
    OP_VERB,
    SPATIAL,
    STAMP_ATTRS,
    arith_type,
    clock,
    did_you_mean,
    is_numeric,
    parse_time_literal,
    unit_hint,
    value_type,
    words,
)

_PATTERN_NAMES = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "weekday",
                  "weekend", "January", "February", "March", "April", "May", "June", "July", "August",
                  "September", "October", "November", "December"}
_NO_PLACE_BINDING = ("a place can be bound only beside an event, as in `BusGPS -> A and at stops -> S`: "
                     "not under `or` or `not`, nor in a run's patterns")


def _at(span: Span, fallback: Span) -> Span:
    return span if span.line else fallback


class PhraseChecker:
    """Checks one phrase against the program's declarations (``c``: the program checker)."""

    def __init__(self, c, p: A.Phrase):
        self.c, self.p = c, p
        self.vars: dict[str, str] = {}
        self.var_spans: dict[str, Span] = {}
        self.negated: dict[str, str] = {}
        self.types: dict = {}
        self.runs: dict[str, A.Run] = {}
        self.aggregates: dict[str, list] = {}
        self.places: dict[str, PlaceBinding] = {}
        self.constructs: set = set()
        self.run_names = {n.var for n in A.walk(p.match) if isinstance(n, A.Run)}
        self.mode = "where"          # "where" | "emit" | "while"
        self.run_var: str | None = None   # the run whose `while` is being checked
        self.ok = True

    def err(self, span: Span, msg: str, hint: str | None = None) -> None:
        self.ok = False
        self.c.err(span, msg, hint)

    def unit(self, q: A.Quantity, dim: str) -> bool:
        if not self.c.check_unit(q, dim):
            self.ok = False
            return False
        return True

    # ---------------------------------------------------------------- the phrase
    def run(self) -> PhraseInfo | None:
        p = self.p
        A.trampoline(self._match(p.match, negated=False, bindable=True))
        if p.per is not None:
            self._per()
        if p.within is not None:
            self.unit(p.within, "duration")
            if p.within.value <= 0:
                self.err(p.within.span, "`within` needs a positive duration")
        if p.where is not None:
            t = self.expr(p.where, "where")
            if t is not None and t != "bool":
                self.err(p.where.span, f"`where` needs a condition, got {words(t)}")
        schema = []
        names: dict[str, Span] = {}
        for f in p.emit:
            if f.name in STANDARD_FIELDS or f.name == PLACES_FIELD:
                self.err(f.span, f"emit field `{f.name}` clashes with a standard output field",
                         "every output already has " + ", ".join(f"`{s}`" for s in STANDARD_FIELDS)
                         + f" (and `{PLACES_FIELD}` when it binds places)")
                continue
            if f.name in names:
                self.err(f.span, f"emit field `{f.name}` is given twice")
                continue
            names[f.name] = f.span
            t = self.expr(f.expr, "emit")
            if t == "event":
                self.err(f.expr.span, "emit an attribute of the event, not the event itself",
                         "its id is in the standard `events` field")
                t = None
            elif t == "place":
                self.err(f.expr.span, "emit an attribute of the place (`S.name`), not the place itself",
                         f"its id is in the standard `{PLACES_FIELD}` field")
                t = None
            schema.append((f.name, t or "str"))
        as_event = self._as_event(dict(schema)) if p.as_event is not None else None
        bound = None
        if self.ok and not self.c.bad_events:  # stamp lengths need sound event declarations
            bound = self._bounds()
        if not self.ok:
            return None
        runs = {v: self._run_info(r) for v, r in self.runs.items()}
        inputs = tuple(dict.fromkeys(
            n.type for n in A.walk(p.match)
            if isinstance(n, (A.EventRef, A.Run)) and n.type in self.c.types and self.c.types[n.type].derived))
        return PhraseInfo(p, dict(self.vars), dict(self.negated), self.types, schema, bound, runs=runs,
                          places=dict(self.places), inputs=inputs, constructs=frozenset(self.constructs),
                          as_event=as_event)

    def _run_info(self, r: A.Run) -> RunInfo:
        etype = self.c.types[r.type]
        return RunInfo(r.var, r.type, etype.source, r.filter, r.cond, r.gap.micros() if r.gap else None,
                       tuple(dict.fromkeys(self.aggregates.get(r.var, ()))), node=r)

    # ---------------------------------------------------------------- match
    def _match(self, m, negated: bool, bindable: bool):
        """``bindable``: runs and place bindings may stand here (not under `or`/`not`)."""
        if isinstance(m, A.EventRef):
            self._event_ref(m, negated)
            return
        if isinstance(m, A.Run):
            yield self._run(m, negated, bindable)
            return
        if isinstance(m, A.Binary):
            if m.op == "or":
                yield self._or(m, negated)
                return
            if isinstance(m.right, A.Not) and not A.is_pattern(m.right.operand) or (
                    isinstance(m.right, A.Not) and m.right.within is not None):
                yield self._absence_right(m, negated, bindable)
                return
            if isinstance(m.left, A.Binary) and isinstance(m.left.right, A.Not) \
                    and not A.is_pattern(m.left.right.operand) and m.left.right.within is None:
                # A ; not X ; B — the left operand ends in the negation
                for op in (m.left.op, m.op):
                    if op not in A.SEQ_OPS:
                        self.err(m.span, f"`{op}` cannot stand beside `not X`: absence is `A ; not X ; B`",
                                 "use `;`, `;=` or `;<>` on both sides of `not X`")
                        break
                yield self._match(m.left.left, negated, bindable)
                yield self._match(m.left.right.operand, True, False)
                yield self._match(m.right, negated, bindable)
                return
            yield self._match(m.left, negated, bindable)
            yield self._match(m.right, negated, bindable)
            return
        if isinstance(m, A.Not):
            if not A.is_pattern(m.operand):
                self.err(m.span, "`not` of an event expression may only stand between two sequences "
                                 "(`A ; not X ; B`) or after one (`A ; not X within D`)",
                         "to exclude places or times, negate a pattern: `BusGPS -> A and not at station`")
            yield self._match(m.operand, negated, False)
            return
        if isinstance(m, A.Certainly):
            if not A.is_pattern(m.pattern):
                self.err(m.span, "`certainly` applies to a pattern (`certainly at P`, `certainly Tuesday`)")
            if isinstance(m.pattern, A.AtPlace):
                self._pattern(m.pattern, negated, bindable, certain=True)
            else:
                yield self._match(m.pattern, negated, False)
            return
        self._pattern(m, negated, bindable)

    def _bind(self, var: str, var_span: Span, fallback: Span) -> bool:
        """Checks a new variable name; False when it is taken."""
        if var in self.vars or var in self.negated or var in self.places:
            first = self.var_spans[var]
            self.err(_at(var_span, fallback), f"variable {var} is bound twice", f"first bound at {first}; use another name")
            return False
        if var in self.c.types:
            self.err(_at(var_span, fallback), f"variable {var} has the name of an event type")
        self.var_spans[var] = _at(var_span, fallback)
        return True

    def _event_type(self, name: str, span: Span):
        t = self.c.types.get(name)
        if t is None:
            self.err(span, f"unknown event type {name}",
                     did_you_mean(name, self.c.types) or "declare it with `event`, or define a phrase of that name")
            return None
        if t.derived:
            self.constructs.add(DERIVED)
        return t

    def _event_ref(self, m: A.EventRef, negated: bool) -> None:
        self._event_type(m.type, _at(m.type_span, m.span))
        if m.var is not None and self._bind(m.var, m.var_span, m.span):
            (self.negated if negated else self.vars)[m.var] = m.type

    def _run(self, m: A.Run, negated: bool, bindable: bool):
        self.constructs.add(RUNS)
        if negated or not bindable:
            self.err(m.span, "a run cannot stand under `or` or `not`",
                     "a run binds a stretch of one source's events; join it with `;`, `||`, `and`, ...")
        etype = self._event_type(m.type, _at(m.type_span, m.span))
        if etype is not None and etype.derived and etype.has_source:
            self.err(_at(m.type_span, m.span), f"runs of a phrase's composites are not supported: {m.type} "
                                               "is a phrase",
                     "relate its composites with `successive(C1, C2)`, which applies to them (`as event "
                     "source ...`)")
            etype = None
        elif etype is not None and etype.derived:
            self.err(_at(m.type_span, m.span), f"{m.type} is a phrase: its composites have no source, so they "
                                               "cannot form runs",
                     "a run cuts the events of each source (a vehicle) into stretches of successive events")
            etype = None
        elif etype is not None and etype.source is None:
            self.err(_at(m.type_span, m.span), f"a run needs an event type with a `source`; {m.type} has none",
                     "a run cuts the events of each source (a vehicle) into stretches of successive events")
            etype = None
        if self._bind(m.var, m.var_span, m.span):
            self.vars[m.var] = m.type
            if etype is not None:
                self.runs[m.var] = m
        if m.filter is not None:
            yield self._match(m.filter, negated, False)
        if m.gap is not None and self.unit(m.gap, "duration") and m.gap.value <= 0:
            self.err(m.gap.span, "a run's `gap` must be a positive duration")
        if m.cond is not None and etype is not None:
            t = self.expr(m.cond, "while", run_var=m.var)
            if t is not None and t != "bool":
                self.err(m.cond.span, f"`while` needs a condition, got {words(t)}")

    def _absence_right(self, m: A.Binary, negated: bool, bindable: bool):
        neg = m.right
        if negated:
            self.err(neg.span, "absence cannot be nested inside another `not`")
        if m.op not in A.SEQ_OPS:
            self.err(m.span, f"`{m.op} not` is not an absence form",
                     "absence is `A ; not X ; B` or `A ; not X within D` (also `;=`, `;<>`)")
        elif neg.within is None:
            self.err(neg.span, "`not X` needs an event after it or a window",
                     "write `A ; not X ; B` or `A ; not X within 5 min`")
        else:
            if self.unit(neg.within, "duration") and neg.within.value <= 0:
                self.err(neg.within.span, "the absence window must be positive")
        yield self._match(m.left, negated, bindable)
        yield self._match(neg.operand, True, False)

    def _or(self, m: A.Binary, negated: bool):
        before_pos, before_neg = dict(self.vars), dict(self.negated)
        yield self._match(m.left, negated, False)
        left_pos = {k: v for k, v in self.vars.items() if k not in before_pos}
        left_neg = {k: v for k, v in self.negated.items() if k not in before_neg}
        # the right branch may bind the same names: one binding (SPEC §3)
        self.vars, self.negated = dict(before_pos), dict(before_neg)
        saved_spans = dict(self.var_spans)
        yield self._match(m.right, negated, False)
        right_pos = {k: v for k, v in self.vars.items() if k not in before_pos}
        right_neg = {k: v for k, v in self.negated.items() if k not in before_neg}
        for k in sorted(set(left_pos) | set(right_pos)):
            if k not in left_pos or k not in right_pos:
                self.err(m.span, f"the branches of `or` must bind the same variables: {k} is bound "
                                 f"only in the {'left' if k in left_pos else 'right'} one")
            elif left_pos[k] != right_pos[k]:
                self.err(m.span, f"variable {k} is a {left_pos[k]} in one branch of `or` and a "
                                 f"{right_pos[k]} in the other")
        self.vars = {**before_pos, **left_pos, **right_pos}
        self.negated = {**before_neg, **left_neg, **right_neg}
        self.var_spans = {**self.var_spans, **{k: v for k, v in saved_spans.items() if k in left_pos}}

    def _place_name(self, name: str, span: Span):
        """The place set or single place named ``name`` (None, reported, if neither; None,
        not reported again, for a place set whose file has errors)."""
        if name in self.c.place_sets:
            self.constructs.add(PLACE_SETS)
            return self.c.place_sets[name]
        if name in self.c.places:
            return self.c.places[name]
        if name in self.c.bad_place_sets:
            self.ok = False          # its file's errors are reported at its rows
            return None
        self.err(span, f"unknown place {name}",
                 did_you_mean(name, list(self.c.places) + list(self.c.place_sets))
                 or "declare it with `place NAME = ...` or `places NAME = \"FILE\"`")
        return None

    def _pattern(self, m, negated: bool, bindable: bool, certain: bool = False) -> None:
        if isinstance(m, A.AtPlace):
            found = self._place_name(m.place, _at(m.place_span, m.span))
            if m.var is None:
                return
            if negated or not bindable:
                self.err(_at(m.var_span, m.span), _NO_PLACE_BINDING)
                return
            if not self._bind(m.var, m.var_span, m.span):
                return
            if found is None:
                # (reported: unknown, or its file has errors) bound all the same, its attributes
                # unknown: no second error at each use of the variable
                self.places[m.var] = PlaceBinding(m.var, m.place, certain, None, node=m, nearest=m.nearest)
                return
            if m.nearest and m.place not in self.c.place_sets:
                self.err(_at(m.place_span, m.span), f"`nearest` chooses among the places of a set: {m.place} is "
                                                    "one place",
                         f"write `at {m.place} -> {m.var}`; `at nearest` is for a set declared with "
                         "`places NAME = \"FILE\"`")
                return
            self.constructs.add(PLACE_BINDINGS)
            attrs = dict(found.attrs) if m.place in self.c.place_sets else {"name": "str"}
            self.places[m.var] = PlaceBinding(m.var, m.place, certain, attrs, node=m, nearest=m.nearest)
        elif isinstance(m, A.NearPlace):
            self.unit(m.distance, "distance")
            self._place_name(m.place, _at(m.place_span, m.span))
        elif isinstance(m, A.InShape):
            s = m.shape
            if isinstance(s, A.Circle):
                if self.unit(s.radius, "distance") and s.radius.value <= 0:
                    self.err(s.radius.span, "a circle's radius must be positive")
                self.c.check_lonlat(s.lon, s.lat, s.span) or setattr(self, "ok", False)
            elif isinstance(s, A.PolygonShape):
                self.c.check_polygon("", s, m.span) or setattr(self, "ok", False)
            else:
                self.c.check_lonlat(s.lon, s.lat, s.span) or setattr(self, "ok", False)
                if s.widen is not None:
                    self.unit(s.widen, "distance")
        elif isinstance(m, A.ClockPattern):
            for t in (m.start, m.end):
                if clock(t) is None:
                    self.err(m.span, f"`{t}` is not a clock time", "use 24-hour `HH:MM`, e.g. `07:30`")
        elif isinstance(m, A.DatePattern):
            days = []
            for t in (m.start,) if m.single else (m.start, m.end):
                try:
                    days.append(dt.date.fromisoformat(t))
                except ValueError:
                    self.err(m.span, f"`{t}` is not a date", "use `YYYY-MM-DD`")
            if len(days) == 2 and days[0] > days[1]:
                self.err(m.span, f"the range ends ({m.end}) before it starts ({m.start})")

    def _per(self) -> None:
        key = self.p.per
        bound_types = set(self.vars.values()) | set(self.negated.values())
        kinds = {}
        for t in bound_types:
            etype = self.c.types.get(t)
            if etype is None or etype.attrs is None:
                continue
            if key in etype.attrs:
                kinds[t] = value_type(etype.attrs[key])
        unknown = any(self.c.types.get(t) is not None and self.c.types[t].attrs is None for t in bound_types)
        if not kinds and not unknown:
            names = sorted(bound_types)
            self.err(_at(self.p.per_span, self.p.span), f"`per {key}`: no bound event type has an attribute {key}",
                     f"bound types: {', '.join(names) or 'none'}; `per` needs an attribute they share")
        elif len(set(kinds.values())) > 1:
            self.err(self.p.per_span, f"`per {key}`: {key} has different types in "
                                      + ", ".join(f"{t} ({k})" for t, k in sorted(kinds.items())))

    # ---------------------------------------------------------------- expressions
    def expr(self, e, mode: str, run_var: str | None = None) -> str | None:
        """The type of a top-level expression of ``where``, ``emit`` or a run's ``while``."""
        self.mode, self.run_var = mode, run_var
        try:
            return A.trampoline(self._expr(e))
        finally:
            self.mode, self.run_var = "where", None

    def _var_kind(self, name: str, span: Span) -> str | None:
        """"event", "run", "place" or "negated" for a bound variable usable here; None (reported) if not."""
        if self.mode == "while":
            if name != self.run_var:
                self.err(span, f"a run's `while` condition may use only {self.run_var}.first, "
                               f"{self.run_var}.prev and {self.run_var}.this, not {name}",
                         "it decides from the run's own events whether the next one joins; "
                         "relate the run to other variables in `where`")
                return None
            return "run"
        if name in self.vars and name in self.run_names:
            return "run"
        if name in self.vars:
            return "event"
        if name in self.places:
            return "place"
        if name in self.negated:
            if self.mode != "where":
                self.err(span, f"variable {name} is negated (`not`): it is never part of a match",
                         "a negated variable may appear in `where`, as part of the absence condition")
                return None
            return "negated"
        if name in self.c.places or name in self.c.place_sets or name in self.c.bad_place_sets:
            many = name not in self.c.places
            self.err(span, f"{name} is a place{' set' if many else ''}, not a variable",
                     f"bind {'one of its places' if many else 'it'} beside an event and use that: `BusGPS -> A and "
                     f"at {'nearest ' if many else ''}{name} -> P`, then `distance(A, P)`; or keep the events "
                     f"near it with a pattern: `BusGPS -> A and within 100 m of {name}`")
            return None
        hint = did_you_mean(name, list(self.vars) + list(self.negated) + list(self.places))
        if name in _PATTERN_NAMES:
            hint = ("patterns (`Tuesday`, `at P`, ...) belong in the match: "
                    f"`BusGPS -> A and {name}`")
        self.err(span, f"variable {name} is used but never bound",
                 hint or "bind it in the match: `BusGPS -> " + name + "`")
        return None

    def _etype_of(self, var: str):
        name = self.vars.get(var) or self.negated.get(var)
        return self.c.types.get(name) if name is not None else None

    def _attr_type(self, etype, name: str, span: Span, owner: str) -> str | None:
        """The type of attribute ``name`` of an event of type ``etype``."""
        if name in STAMP_ATTRS:
            return "time"
        if etype is None or etype.attrs is None:
            return None  # unknown type: reported where it was bound
        if name in etype.attrs:
            return value_type(etype.attrs[name])
        names = list(etype.attrs) + list(STAMP_ATTRS)
        self.err(span, f"{owner} has no attribute {name}",
                 did_you_mean(name, names) or f"{owner} has: " + ", ".join(names))
        return None

    def _member(self, var: str, member: str, span: Span) -> bool:
        """Is ``var.member`` (a run's member event) allowed here? Reports why not."""
        if self.mode == "while" and member == "last":
            self.err(span, f"{var}.last is not known while the run grows",
                     f"in `while`, {var}.prev is the run's last event so far and {var}.this the candidate")
            return False
        if self.mode != "while" and member in ("prev", "this"):
            self.err(span, f"{var}.{member} exists only in the run's `while` condition",
                     f"in where and emit, use {var}.first or {var}.last")
            return False
        return True

    def _attr(self, e: A.Attr) -> str | None:
        var_span, name_span = _at(e.var_span, e.span), _at(e.name_span, e.span)
        kind = self._var_kind(e.var, var_span)
        if kind is None:
            return None
        if e.member is not None:
            member_span = _at(e.member_span, e.span)
            if kind != "run":
                self.err(member_span, f"{e.var} is not a run: `{e.var}.{e.member}.{e.name}` needs a run variable",
                         f"write `{e.var}.{e.name}`" if kind != "place" else f"write `{e.var}.{e.name}`")
                return None
            if e.member not in MEMBERS:
                self.err(member_span, f"a run has no member {e.member}",
                         did_you_mean(e.member, MEMBERS) or "its members are first, prev, this and last")
                return None
            if not self._member(e.var, e.member, member_span):
                return None
            return self._attr_type(self._etype_of(e.var), e.name, name_span, f"{e.var}.{e.member}")
        if kind == "place":
            b = self.places[e.var]
            if b.attrs is None:
                return None          # a set whose file has errors: reported there
            if e.name in b.attrs:
                return value_type(b.attrs[e.name])
            if e.name in STAMP_ATTRS:
                self.err(name_span, f"{e.var} is a place: it has no time stamp ({e.var}.{e.name})",
                         "a bound place has a region and the attributes of its row")
                return None
            what = f"the places of {b.place}" if b.place in self.c.place_sets else f"place {b.place}"
            self.err(name_span, f"{what} have no attribute {e.name}" if b.place in self.c.place_sets
                     else f"{what} has no attribute {e.name}",
                     did_you_mean(e.name, b.attrs) or "attributes: " + ", ".join(sorted(b.attrs)[:20]))
            return None
        if kind == "run":
            if e.name in MEMBERS:
                return "event" if self._member(e.var, e.name, name_span) else None
            if self.mode == "while" and e.name in ("lo", "hi"):
                self.err(name_span, f"{e.var}.{e.name} is the whole run's; in `while` the run is not complete",
                         f"use {e.var}.first.{e.name}, {e.var}.prev.{e.name} or {e.var}.this.{e.name}")
                return None
            if e.name == "t":
                self.err(name_span, f"a run has no single local time: {e.var}.t",
                         f"use {e.var}.first.t or {e.var}.last.t; {e.var}.lo and {e.var}.hi are its time stamp")
                return None
            return self._attr_type(self._etype_of(e.var), e.name, name_span, self.vars.get(e.var, e.var))
        etype = self._etype_of(e.var)
        return self._attr_type(etype, e.name, name_span, etype.name if etype is not None else e.var)

    def _expr(self, e):
        t = yield self._expr_inner(e)
        if t is not None:
            self.types[e] = t
        return t

    def _expr_inner(self, e):
        literal = A.literal_type(e)
        if literal is not None:
            return literal
        if isinstance(e, A.TimeLit):
            if parse_time_literal(e.text, self.c.timezone) is None:
                self.err(e.span, f"`{e.text}` is not a valid date-time")
                return None
            return "time"
        if isinstance(e, A.Var):
            kind = self._var_kind(e.name, e.span)
            if kind == "run" and self.mode == "while":
                self.err(e.span, f"in `while`, the run {e.name} is not complete: use {e.name}.first, "
                                 f"{e.name}.prev or {e.name}.this")
                return None
            return None if kind is None else "place" if kind == "place" else "event"
        if isinstance(e, A.Attr):
            return self._attr(e)
        if isinstance(e, A.Call):
            return self._call(e)
        if isinstance(e, A.UnaryOp):
            t = yield self._expr(e.operand)
            if t is None:
                return None
            if e.op == "not":
                if t != "bool":
                    self.err(e.span, f"`not` needs a condition, got {words(t)}")
                    return None
                return "bool"
            if t not in NUMERIC + DIMENSIONS:
                self.err(e.span, f"cannot negate {words(t)}")
                return None
            return t
        if isinstance(e, A.BoolOp):
            lt = yield self._expr(e.left)
            rt = yield self._expr(e.right)
            for side, t in ((e.left, lt), (e.right, rt)):
                if t is not None and t != "bool":
                    self.err(side.span, f"`{e.op}` needs conditions on both sides, got {words(t)}")
                    return None
            return "bool" if lt and rt else None
        if isinstance(e, A.BinOp):
            lt = yield self._expr(e.left)
            rt = yield self._expr(e.right)
            if lt is None or rt is None:
                return None
            if e.op in A.COMPARE_OPS:
                return self._compare(e, lt, rt)
            r = arith_type(e.op, lt, rt)
            if r is None:
                self.err(e.span, f"cannot {OP_VERB[e.op]} {words(lt)} and {words(rt)}", unit_hint(lt, rt))
            return r
        return None

    def _compare(self, e: A.BinOp, lt: str, rt: str) -> str | None:
        num = lambda t: "number" if t in NUMERIC else t  # noqa: E731
        a, b = num(lt), num(rt)
        if a != b:
            msg = f"unit mismatch: cannot compare {words(lt)} with {words(rt)}"
            self.err(e.span, msg, unit_hint(lt, rt))
            return None
        if a in ("event", "geometry", "place"):
            self.err(e.span, f"cannot compare {words(a)}s", "compare their attributes instead")
            return None
        if e.op not in ("==", "!=") and a == "bool":
            self.err(e.span, "truth values can only be compared with `==` or `!=`")
            return None
        return "bool"

    # ---------------------------------------------------------------- functions
    def _call(self, e: A.Call):
        func_span = _at(e.func_span, e.span)
        if e.func not in FUNCTIONS:
            self.err(func_span, f"unknown function {e.func}",
                     did_you_mean(e.func, FUNCTIONS) or "functions: " + ", ".join(FUNCTIONS))
            return None
        arity, result = FUNCTIONS[e.func]
        n = len(e.args)
        if isinstance(arity, int) and n != arity:
            self.err(e.span, f"{e.func} takes {arity} {'events' if arity > 1 else 'argument'}, got {n}")
            return None
        if isinstance(arity, tuple) and (n < arity[0] or (arity[1] is not None and n > arity[1])):
            lo, hi = arity
            if hi is None:
                self.err(e.span, f"{e.func} takes at least {lo} event{'s' if lo > 1 else ''}, got {n}")
            else:
                self.err(e.span, f"{e.func} takes {lo} or {hi} events, got {n}")
            return None
        if e.func == "count" or e.func in AGGREGATES:
            return self._aggregate(e)
        kinds, types = [], []
        for a in e.args:
            kind, etype = self._event_arg(e, a)
            if kind is None:
                return None
            if kind == "place" and e.func not in SPATIAL:
                self.err(a.span, f"{_show(a)} is a place: {e.func} needs events",
                         "a bound place has a region and no time stamp: use it in distance(A, S), "
                         "overlap(A, S) or disjoint(A, S)")
                return None
            if kind == "run" and e.func in EVENTS_ONLY:
                self.err(a.span, f"{_show(a)} is a run, not an event: {e.func} needs events",
                         f"use {_show(a)}.first or {_show(a)}.last")
                return None
            self.types[a] = "place" if kind == "place" else "event"
            kinds.append(kind)
            types.append(etype)
        if e.func == "successive":
            return self._successive(e, types)
        if e.func == "speed":
            for a, t in zip(e.args, types):
                if t is not None and not t.has_place:
                    self.err(a.span, f"speed needs a location: {t.name} has no `place` clause")
                    return None
        return result

    def _event_arg(self, e: A.Call, a) -> tuple:
        """(kind, EventType) of a function's argument: a bound variable or a run's member event."""
        if isinstance(a, A.Var):
            kind = self._var_kind(a.name, a.span)
            if kind is None:
                return None, None
            if kind == "run" and self.mode == "while":
                self.err(a.span, f"in `while`, the run {a.name} is not complete: use {a.name}.first, "
                                 f"{a.name}.prev or {a.name}.this")
                return None, None
            return kind, (self._etype_of(a.name) if kind != "place" else None)
        if isinstance(a, A.Attr) and a.member is None:
            kind = self._var_kind(a.var, _at(a.var_span, a.span))
            if kind is None:
                return None, None
            if kind == "run" and a.name in MEMBERS:
                if not self._member(a.var, a.name, _at(a.name_span, a.span)):
                    return None, None
                return "member", self._etype_of(a.var)
        self.err(a.span, f"the arguments of {e.func} are bound variables, e.g. `{e.func}(A, B)`",
                 "or a run's member events: `overlap(R.first, R.this)`")
        return None, None

    def _successive(self, e: A.Call, types: list) -> str | None:
        names = [_show(a) for a in e.args]
        if len(set(names)) != len(names):
            self.err(e.span, "successive needs distinct variables")
            return None
        if any(t is None for t in types):
            return "bool"
        if len({t.name for t in types}) > 1:
            self.err(e.span, "successive relates events of one type: "
                             + ", ".join(f"{n} is {t.name}" for n, t in zip(names, types)))
            return None
        t = types[0]
        if t.derived and not t.has_source:
            self.err(e.span, f"successive does not apply to {t.name}: a phrase's composites have no source",
                     f"give them one: `as event source F time G` after phrase {t.name}'s emit "
                     "(successive means: the next event of the same type and source)")
            return None
        if not t.has_source:
            self.err(e.span, f"successive needs a type with a `source`; {t.name} has none",
                     "successive means: the next event of the same type and source")
            return None
        return "bool"

    def _aggregate(self, e: A.Call) -> str | None:
        """``count(R)``, ``min/max/avg(R.ATTR)``: over a run's events, in where and emit."""
        a = e.args[0]
        func_span = _at(e.func_span, e.span)
        if self.mode == "while":
            self.err(func_span, f"{e.func} describes the whole run: use it in `where` or `emit`",
                     "`while` decides from R.first, R.prev and R.this whether the next event joins")
            return None
        if e.func == "count":
            if not isinstance(a, A.Var) or self._var_kind(a.name, a.span) != "run":
                if isinstance(a, A.Var) and a.name not in self.vars and a.name not in self.places \
                        and a.name not in self.negated:
                    return None  # unbound: reported
                self.err(a.span, f"count counts the events of a run: {_show(a)} is not a run variable",
                         "bind one with `run BusGPS -> R`, then `count(R)`")
                return None
            self.types[a] = "event"
            return "number"
        if not (isinstance(a, A.Attr) and a.member is None):
            self.err(a.span, f"{e.func} takes an attribute of a run's events, e.g. `{e.func}(R.speed)`")
            return None
        kind = self._var_kind(a.var, _at(a.var_span, a.span))
        if kind is None:
            return None
        if kind != "run":
            self.err(_at(a.var_span, a.span), f"{e.func} is over a run's events: {a.var} is not a run variable",
                     f"bind one with `run BusGPS -> {a.var}`")
            return None
        name_span = _at(a.name_span, a.span)
        if a.name in MEMBERS or a.name in STAMP_ATTRS:
            self.err(name_span, f"{e.func} takes an attribute of the run's events, not {a.var}.{a.name}",
                     f"for times, {a.var}.first.t and {a.var}.last.t are the first and last")
            return None
        t = self._attr_type(self._etype_of(a.var), a.name, name_span, self.vars.get(a.var, a.var))
        if t is None:
            return None
        if not is_numeric(t):
            self.err(name_span, f"{e.func} needs a numeric attribute: {a.var}.{a.name} is {words(t)}",
                     f"the first and last values are {a.var}.first.{a.name} and {a.var}.last.{a.name}")
            return None
        self.types[a] = t
        self.aggregates.setdefault(a.var, []).append((e.func, a.name))
        return t

    # ---------------------------------------------------------------- as event (SPEC §8)
    def _as_event(self, schema: dict) -> AsEventInfo | None:
        """``as event source F, ... time G [.. H]``: the source is made of emit fields (text or
        numbers), the time of emit fields that are times of the composite's own events."""
        p, ae = self.p, self.p.as_event
        emits = {f.name: f for f in p.emit}
        before = self.ok
        self.ok = True
        source: tuple = ()
        if ae.source is not None:
            seen = set()
            for name in ae.source.attrs:
                if name in seen:
                    self.err(ae.source.span, f"`source`: {name} is named twice")
                    continue
                seen.add(name)
                if name not in emits:
                    self.err(ae.source.span, f"`source {name}`: {name} is not an emit field of {p.name}",
                             did_you_mean(name, emits) or "the source is made of emit fields, e.g. "
                             "`emit line = R.line ... as event source line`")
                elif name in schema and schema[name] not in ("str", "number"):
                    self.err(ae.source.span, f"`source {name}`: a source is text or a number, and {name} "
                                             f"is {words(schema[name])}")
            source = tuple(ae.source.attrs)
        times = []
        if ae.time is None:
            self.err(ae.span, f"phrase {p.name}'s `as event` has no `time` clause",
                     "name the emit field that is its events' local time, e.g. `time arrived` with "
                     "`arrived = R.first.t`")
        else:
            tc = ae.time
            if tc.widen is not None:
                self.err(tc.widen.span, "a phrase's composites as events take their time stamp from their "
                                        "own events: no widening",
                         "the stamp must lie within the composite's; write `time F` or `time F .. G`")
            for b in (tc.low, tc.high):
                if b is None:
                    continue
                if b.offset is not None:
                    self.err(b.span, f"`time {b.attr}`: no offset here: the time must be a time of the "
                                     "composite's own events",
                             "emit the time you mean from an event, e.g. `arrived = R.first.t`")
                    continue
                f = emits.get(b.attr)
                if f is None:
                    self.err(b.span, f"`time {b.attr}`: {b.attr} is not an emit field of {p.name}",
                             did_you_mean(b.attr, emits) or "the time is an emit field, e.g. "
                             "`emit arrived = R.first.t ... as event time arrived`")
                    continue
                ref = self._stamp_time(f.expr)
                if ref is None:
                    from spatec.frontend.printer import print_expr

                    self.err(b.span, f"`time {b.attr}`: {b.attr} is `{print_expr(f.expr)}`, not a time of the "
                                     f"composite's own events",
                             "emit a time stamp of one of its events (`R.first.t`, `R.last.t`, `A.t`, `A.lo`, "
                             "`B.hi`, `R.lo`): the declared time must lie within the composite's time stamp")
                    continue
                times.append((b.attr, ref))
            if self.ok and tc.high is not None and len(times) == 2 and not _not_after(times[0][1], times[1][1]):
                self.err(tc.span, f"`time {tc.low.attr} .. {tc.high.attr}`: {tc.low.attr} may come after "
                                  f"{tc.high.attr}",
                         "the low end must never be after the high end: take both from one event "
                         "(`A.lo .. A.hi`) or from one run (`R.first.t .. R.last.t`)")
        ok, self.ok = self.ok, before and self.ok
        if not ok:
            return None
        return AsEventInfo(source, ae.time.low.attr, ae.time.high.attr if ae.time.high is not None else None)

    def _stamp_time(self, e):
        """``(variable, member, stamp end)`` when ``e`` is a time stamp of one of the composite's
        own events (``A.t``, ``A.lo``, ``R.first.t``, ``R.last.hi``, ``R.lo``), else None."""
        if not isinstance(e, A.Attr) or e.name not in STAMP_ATTRS:
            return None
        if e.var in self.run_names and e.var in self.vars:
            if e.member in ("first", "last"):
                return (e.var, e.member, e.name)
            if e.member is None and e.name in ("lo", "hi"):
                return (e.var, "run", e.name)
            return None
        if e.member is None and e.var in self.vars:
            return (e.var, None, e.name)
        return None

    # ---------------------------------------------------------------- boundedness
    def _bounds(self) -> int | None:
        """SPEC §4: partial matches must not live forever.

        Returns the largest possible match span in µs (None: unbounded but
        acceptable because every join is bounded otherwise).
        """
        problem = phrase_bound_problem(self.p, self.c.types)
        if problem is not None:
            node, why = problem
            self.err(self.p.span if not node else node.span,
                     f"phrase {self.p.name} is unbounded: {why}",
                     "add `within D` (e.g. `within 2 h`), relate the events with `||`, "
                     "or link them with `successive(A, B)`")
            return None
        return span_bound(self.p, self.c.types)


#: a stamp time is never after another: ((member, end), (member, end)) within one event or run
_ORDER = {((m, a), (m, b)) for m in (None, "first", "last") for a, b in (("lo", "t"), ("t", "hi"), ("lo", "hi"))}
# a run's events are one type's, in local-time order, and hi - t is the same for each
_ORDER |= {(("first", "t"), ("last", "t")), (("first", "hi"), ("last", "hi"))}


def _not_after(a: tuple, b: tuple) -> bool:
    """Whether stamp time ``a`` (:meth:`PhraseChecker._stamp_time`) is never after ``b``."""
    if a == b:
        return True
    if a[0] != b[0]:
        return False
    if a[1] == "run":
        return a[2] == "lo"
    if b[1] == "run":
        return b[2] == "hi"
    seen, todo = {(a[1], a[2])}, [(a[1], a[2])]
    while todo:
        x = todo.pop()
        for u, v in _ORDER:
            if u == x and v not in seen:
                seen.add(v)
                todo.append(v)
    return (b[1], b[2]) in seen


def _show(a) -> str:
    if isinstance(a, A.Var):
        return a.name
    if isinstance(a, A.Attr):
        return f"{a.var}.{a.name}" if a.member is None else f"{a.var}.{a.member}.{a.name}"
    return "it"

"""Hypothesis strategies for SpaTeC ASTs of the shapes the parser produces."""
from __future__ import annotations

from hypothesis import strategies as st

from spatec.frontend import ast as A

KEYWORDS = {
    "timezone", "crs", "places", "include", "event", "source", "time", "place", "point", "circle",
    "polygon", "phrase", "per", "where", "within", "emit", "or", "and", "not", "certainly", "between",
    "on", "from", "to", "at", "in", "of", "true", "false",
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "weekday", "weekend",
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December", "run", "while", "gap", "nearest", "as", *A.UNIT_DIMENSION,
}
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "weekday", "weekend")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda n: n not in KEYWORDS)
floats = st.floats(allow_nan=False, allow_infinity=False)
magnitudes = st.one_of(st.integers(0, 10_000).map(float), st.floats(0, 1e6, allow_nan=False),
                       st.floats(0, 1e300, allow_nan=False))


def quantities(units=tuple(A.UNIT_DIMENSION)):
    return st.builds(A.Quantity, magnitudes, st.sampled_from(units))


durations = quantities(tuple(A.TIME_UNITS))
distances = quantities(tuple(A.DIST_UNITS))

shapes = st.one_of(
    st.builds(A.Circle, floats, floats, distances),
    st.builds(A.PointShape, floats, floats, st.none() | distances),
    st.builds(A.PolygonShape, st.lists(st.tuples(floats, floats), min_size=1, max_size=5).map(tuple)),
)
clock = st.from_regex(r"[0-9]{1,2}:[0-9]{2}(:[0-9]{2})?", fullmatch=True)
date = st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", fullmatch=True)

# place names: identifiers, stop ids that start with a digit, any text (printed quoted)
place_names = st.one_of(names, st.from_regex(r"[0-9][A-Za-z0-9_]{0,8}", fullmatch=True),
                        st.text(min_size=1, max_size=10))
pattern_atoms = st.one_of(
    st.builds(A.DayPattern, st.sampled_from(DAYS)),
    st.builds(A.MonthPattern, st.sampled_from(MONTHS)),
    st.builds(A.ClockPattern, clock, clock),
    date.map(lambda d: A.DatePattern(d, d, True)),
    st.builds(A.DatePattern, date, date, st.just(False)),
    st.builds(A.AtPlace, place_names, st.none() | names),
    st.builds(A.AtPlace, place_names, names, nearest=st.just(True)),     # at nearest SET -> S
    st.builds(A.InShape, shapes),
    st.builds(A.NearPlace, distances, place_names),
)
event_refs = st.builds(A.EventRef, names, st.none() | names)
ST_OPS = st.sampled_from(A.ST_OPS)
SEQ_OPS = st.sampled_from(A.SEQ_OPS)


def _extend(inner):
    return st.one_of(
        st.builds(A.Binary, st.sampled_from(A.ST_OPS + ("and", "or")), inner, inner),
        st.builds(A.Not, inner),
        st.builds(A.Certainly, inner),
        # absence between: A ; not X ; B
        st.builds(lambda op1, op2, a, x, b: A.Binary(op2, A.Binary(op1, a, A.Not(x)), b),
                  SEQ_OPS, SEQ_OPS, inner, inner, inner),
        # absence after: A ; not X within D
        st.builds(lambda op, a, x, d: A.Binary(op, a, A.Not(x, d)), SEQ_OPS, inner, inner, durations),
    )



def _pattern_conj(parts):
    """Patterns beside a run's event type, as the parser groups them: left to right."""
    out = parts[0]
    for p in parts[1:]:
        out = A.Binary("and", out, p)
    return out


pattern_exprs = st.recursive(pattern_atoms, lambda inner: st.one_of(
    st.builds(A.Binary, st.sampled_from(("and", "or")), inner, inner), st.builds(A.Not, inner)), max_leaves=4)

datetimes = st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}"
                          r"(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:?[0-9]{2})?", fullmatch=True)
expr_atoms = st.one_of(
    st.builds(A.Num, magnitudes),
    quantities(),
    st.builds(A.Str, st.text(max_size=8)),
    st.builds(A.BoolLit, st.booleans()),
    st.builds(A.TimeLit, datetimes),
    st.builds(A.Var, names),
    st.builds(A.Attr, names, names),
    st.builds(A.Attr, names, names, names),   # R.first.t
)


def _extend_expr(inner):
    return st.one_of(
        st.builds(A.BinOp, st.sampled_from(A.COMPARE_OPS + A.ARITH_OPS), inner, inner),
        st.builds(A.BoolOp, st.sampled_from(("and", "or")), inner, inner),
        st.builds(A.UnaryOp, st.sampled_from(("not", "-")), inner),
        st.builds(A.Call, names, st.lists(inner, max_size=3).map(tuple)),
    )


exprs = st.recursive(expr_atoms, _extend_expr, max_leaves=12)

# a run: `run T -> R`, `run (T and P and ...) -> R`, with `while` and `gap`
runs = st.builds(
    A.Run, names, names,
    st.none() | st.lists(pattern_exprs, min_size=1, max_size=3).map(_pattern_conj),
    st.none() | exprs, st.none() | durations)
matches = st.recursive(st.one_of(event_refs, pattern_atoms, runs), _extend, max_leaves=10)

def _time_bound():
    signed = st.builds(lambda q, neg: A.Quantity(-q.value if neg else q.value, q.unit), durations, st.booleans())
    return st.builds(A.TimeBound, names, st.none() | signed)


time_clauses = st.one_of(
    st.builds(A.TimeClause, _time_bound(), st.none(), st.none() | durations),
    st.builds(A.TimeClause, _time_bound(), _time_bound(), st.none()),
)
source_clauses = st.builds(A.SourceClause, names)
# a phrase's `as event` (SPEC 8): a source of one or more emit fields, a time
as_events = st.builds(A.AsEvent, st.none() | st.builds(A.SourceClause, names,
                                                       more=st.lists(names, max_size=2).map(tuple)),
                      st.none() | time_clauses)

phrases = st.builds(
    A.Phrase, names, matches, per=st.none() | names, where=st.none() | exprs,
    within=st.none() | durations,
    emit=st.lists(st.builds(A.EmitField, names, exprs), max_size=3).map(tuple),
    as_event=st.none() | as_events,
)
place_clauses = st.one_of(
    st.builds(A.PlaceClause, geom=names, widen=st.none() | distances),
    st.builds(A.PlaceClause, lon=names, lat=names, widen=st.none() | distances),
)
events = st.builds(
    A.EventDecl, names,
    st.lists(st.builds(A.AttrDecl, names, names, column=st.none() | st.text(max_size=8)), max_size=4).map(tuple),
    source=st.none() | source_clauses,
    time=st.none() | time_clauses,
    place=st.none() | place_clauses,
)
strings = st.text(max_size=12)
decls = st.one_of(
    phrases, events,
    st.builds(A.PlaceDecl, names, shapes),
    st.builds(A.PlacesFile, strings), st.builds(A.Include, strings),
    st.builds(A.PlaceSetDecl, names, strings, st.none() | place_clauses),
    st.builds(A.Timezone, strings), st.builds(A.CrsDecl, strings),
)
modules = st.builds(A.Module, st.just("gen.spatec"), st.lists(decls, max_size=5).map(tuple))

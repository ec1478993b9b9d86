"""Text → AST: the Lark LALR parser and the Transformer that builds AST nodes.

>>> m = parse_text('phrase P = BusGPS -> A ; BusGPS -> B within 5 min', 'x.spatec')
>>> m.decls[0].match.op
';'
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedInput,
    UnexpectedToken,
)

from spatec.errors import Diagnostic, ParseError, Span
from spatec.frontend import ast as A

GRAMMAR = Path(__file__).with_name("spatec.lark")

# What a user would type for each terminal, for "expected ..." messages.
TERMINAL_TEXT = {
    "ST_OP": "an operator (`;`, `||`, `=`, `<>`, `;=`, `;<>`, `||=`, `||<>`)",
    "CMP_OP": "a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`)",
    "PLUS": "`+`", "MINUS": "`-`", "STAR": "`*`", "SLASH": "`/`",
    "PM": "`±`", "UNIT": "a unit (`s`, `min`, `h`, `d`, `m`, `km`, `m/s`, `km/h`)",
    "DAY": "a day (`Monday` … `Sunday`, `weekday`, `weekend`)",
    "MONTH": "a month (`January` … `December`)",
    "DATETIME": "a date-time", "DATE": "a date (`2026-12-24`)", "CLOCK": "a clock time (`07:30`)",
    "NUMBER": "a number", "SIGNED_NUMBER": "a number", "STRING": "a string in quotes",
    "NAME": "a name", "PLACE_ID": "a stop id (`0500CCITY423`)", "LPAR": "`(`", "RPAR": "`)`", "COMMA": "`,`", "COLON": "`:`",
    "EQUAL": "`=`", "DOT": "`.`", "__ANON_0": "`->`", "$END": "the end of the file",
}


@functools.lru_cache(maxsize=1)
def parser() -> Lark:
    """The LALR parser, built once per process; its tables are cached on disk between runs."""
    return Lark.open(str(GRAMMAR), parser="lalr", propagate_positions=True, cache=_cache_file(),
                     maybe_placeholders=True)


@functools.lru_cache(maxsize=1)
def expr_parser() -> Lark:
    """The LALR parser of one predicate (``where`` text on its own: a subscription's filter)."""
    return Lark.open(str(GRAMMAR), parser="lalr", propagate_positions=True, start="expr",
                     maybe_placeholders=True)


def parse_expr(text: str, file: str = "<filter>"):
    """Parse one predicate (the language's ``where`` expression). Raises :class:`ParseError`."""
    p = expr_parser()
    try:
        tree = p.parse(text)
    except UnexpectedInput as e:
        raise ParseError([_syntax_diagnostic(e, text, file, p)]) from None
    builder = _Builder(file)
    node = builder.build(tree)
    if builder.problems:
        raise ParseError([Diagnostic(q.span, q.message, q.hint, _line(text, q.span.line))
                          for q in builder.problems])
    return node


def _cache_file() -> str | bool:
    """A per-user cache of the parser tables (Lark checks the grammar's hash when loading it)."""
    import hashlib
    import os

    import lark

    digest = hashlib.sha256(GRAMMAR.read_bytes()).hexdigest()[:16]
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spatec"
        base.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # RuntimeError: no home directory
        return False  # no writable cache: build the tables each time
    if not os.access(base, os.W_OK):
        return False
    return str(base / f"grammar-{lark.__version__}-{digest}.lark")


def _terminal_text(name: str, p: Lark) -> str:
    if name in TERMINAL_TEXT:
        return TERMINAL_TEXT[name]
    try:
        term = p.get_terminal(name)
    except KeyError:
        return name
    if term.pattern.type == "str":
        return f"`{term.pattern.value}`"
    return name.lower()


_DECL_KEYWORDS = {"PHRASE", "EVENT", "PLACE", "PLACES", "INCLUDE", "TIMEZONE", "CRS", "SOURCE", "TIME", "AS"}
_PATTERN_STARTS = {"DAY", "MONTH", "BETWEEN", "ON", "FROM", "AT", "IN", "WITHIN", "CERTAINLY"}


def _expected_text(expected: set[str], p: Lark) -> str:
    expected = set(expected)
    if expected & _DECL_KEYWORDS and "$END" in expected:
        # after a complete declaration anything may start the next: not worth listing
        rest = expected - _DECL_KEYWORDS - {"$END"}
        if not rest:
            return "a declaration (`phrase`, `event`, `place`, `include`, `timezone`, ...)"
        expected = rest
    words = []
    if "NAME" in expected and _PATTERN_STARTS & expected:
        words.append("an event type, a pattern (`at P`, `Tuesday`, ...)")
        expected -= _PATTERN_STARTS | {"NAME", "DAY", "MONTH"}
    texts = sorted({_terminal_text(n, p) for n in expected}, key=lambda t: (not t.startswith("`"), t))
    texts = words + texts
    if len(texts) == 1:
        return texts[0]
    return ", ".join(texts[:-1]) + " or " + texts[-1]


def _span(meta, file: str) -> Span:
    if getattr(meta, "empty", True):
        return Span(file, 0, 0, 0, 0)
    return Span(file, meta.line, meta.column, meta.end_line, meta.end_column)


def _tok_span(tok: Token, file: str) -> Span:
    return Span(file, tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + len(tok))


_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|.)', re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


def _unquote(tok: Token) -> str:
    """The text of a string literal: `\\n \\t \\r \\0 \\\\ \\" \\' \\xHH \\uHHHH \\UHHHHHHHH`."""
    body = str(tok)[1:-1]
    if "\\" not in body:
        return body

    def one(m: re.Match) -> str:
        esc = m.group(1)
        if esc[0] in "uUx" and len(esc) > 1:
            code = int(esc[1:], 16)
            if code > 0x10FFFF:
                raise _token_problem(tok, f"`\\{esc}` is not a character")
            return chr(code)
        if esc in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[esc]
        raise _token_problem(tok, f"unknown escape `\\{esc}` in a string",
                             "escapes are \\n, \\t, \\\\, \\\", \\uHHHH; write `\\\\` for a backslash")

    return _ESCAPE.sub(one, body)


def _num(tok: Token) -> float:
    v = float(tok)
    if not math.isfinite(v):
        raise _token_problem(tok, f"the number {tok} is too large")
    return v


_ST_CANON = {"≠": "<>", "‖": "||"}

#: units as an analyst may write them (the grammar reads them as units) → the unit to write
UNIT_SLIPS = {**{u: "min" for u in ("minutes", "minute", "mins")},
              **{u: "s" for u in ("seconds", "second", "secs", "sec")},
              **{u: "h" for u in ("hours", "hour", "hrs", "hr")}, **{u: "d" for u in ("days", "day")},
              **{u: "m" for u in ("metres", "meters", "metre", "meter")},
              **{u: "km" for u in ("kilometres", "kilometers", "kilometre", "kilometer", "kms")},
              **{u: "km/h" for u in ("km/hr", "kmh", "kph", "mph")}}


def canonical_op(op: str) -> str:
    """Map the Unicode spellings to ASCII: `‖=` → `||=`, `;≠` → `;<>`."""
    for u, a in _ST_CANON.items():
        op = op.replace(u, a)
    return op


class _Builder:
    """Builds AST nodes from the parse tree, giving each its source span.

    One method per rule alias, called as ``method(meta, children)`` with the
    children already built; :meth:`build` visits the tree bottom-up with a
    loop, so a chain of any length (a 10,000-term `or`) builds without
    recursion.
    """

    def __init__(self, file: str):
        self.file = file
        self.problems: list[_Positioned] = []  # reported together after the whole tree is built

    def problem(self, span: Span, message: str, hint: str | None = None, soft: bool = False) -> None:
        """``soft``: a slip whose meaning is plain (the tree is built as if written right)."""
        self.problems.append(_Positioned(span, message, hint, soft))

    def _str(self, tok: Token) -> str:
        try:
            return _unquote(tok)
        except _Positioned as p:
            self.problem(dataclasses.replace(p.span, file=self.file), p.message, p.hint)
            return ""

    def _num(self, tok: Token) -> float:
        try:
            return _num(tok)
        except _Positioned as p:
            self.problem(dataclasses.replace(p.span, file=self.file), p.message, p.hint)
            return 0.0

    def _s(self, meta) -> Span:
        return _span(meta, self.file)

    def _t(self, tok: Token) -> Span:
        return _tok_span(tok, self.file)

    def build(self, tree: Tree):
        """The AST of a parse tree: every subtree after its children, in one loop."""
        done: dict = {}
        for sub in tree.iter_subtrees():
            kids = [done.pop(id(k)) if isinstance(k, Tree) else k for k in sub.children]
            done[id(sub)] = getattr(self, str(sub.data))(sub.meta, kids)
        return done[id(tree)]

    # ------------------------------------------------------------ top level
    def start(self, meta, items):
        return _attach_clauses(items, self.file, self.problems)

    def timezone(self, meta, c):
        return A.Timezone(self._str(c[0]), span=self._s(meta))

    def crs(self, meta, c):
        return A.CrsDecl(self._str(c[0]), span=self._s(meta))

    def places(self, meta, c):
        return A.PlacesFile(self._str(c[0]), span=self._s(meta), path_span=self._t(c[0]))

    def place_set(self, meta, c):
        name, path = c
        return A.PlaceSetDecl(str(name), self._str(path), span=self._s(meta), name_span=self._t(name),
                              path_span=self._t(path))

    def places_gtfs(self, meta, c):
        path, table, _pm, widen = c
        return A.PlacesFile(self._str(path), span=self._s(meta), path_span=self._t(path), gtfs=str(table),
                            widen=widen, table_span=self._t(table))

    def place_set_gtfs(self, meta, c):
        name, path, table, _pm, widen = c
        clause = A.PlaceClause(widen=widen, span=widen.span) if widen is not None else None
        return A.PlaceSetDecl(str(name), self._str(path), clause, span=self._s(meta), name_span=self._t(name),
                              path_span=self._t(path), gtfs=str(table), table_span=self._t(table))

    def include(self, meta, c):
        return A.Include(self._str(c[0]), span=self._s(meta), path_span=self._t(c[0]))

    def event_decl(self, meta, c):
        name, *attrs = c
        attrs = tuple(a for a in attrs if a is not None)
        return A.EventDecl(str(name), attrs, span=self._s(meta), name_span=self._t(name))

    def attr_decl(self, meta, c):
        column = self._str(c[2]) if c[2] is not None else None
        return A.AttrDecl(str(c[0]), str(c[1]), span=self._s(meta), column=column)

    def source_clause(self, meta, c):
        return A.SourceClause(str(c[0]), span=self._s(meta), more=tuple(str(x) for x in c[1:]))

    def as_event(self, meta, c):
        return A.AsEvent(span=self._s(meta))

    def time_point(self, meta, c):
        bound, _pm, widen = c
        return A.TimeClause(bound, None, widen, span=self._s(meta))

    def time_range(self, meta, c):
        return A.TimeClause(c[0], c[1], None, span=self._s(meta))

    def time_bound(self, meta, c):
        name, sign, q = c
        if q is not None and str(sign) == "-":
            q = A.Quantity(-q.value, q.unit, span=q.span)
        return A.TimeBound(str(name), q, span=self._s(meta))

    def place_decl(self, meta, c):
        return A.PlaceDecl(str(c[0]), c[1], span=self._s(meta), name_span=self._t(c[0]))

    def place_geom(self, meta, c):
        name, _pm, widen = c
        return A.PlaceClause(geom=str(name), widen=widen, span=self._s(meta))

    def place_point(self, meta, c):
        lon, lat, _pm, widen = c
        return A.PlaceClause(lon=str(lon), lat=str(lat), widen=widen, span=self._s(meta))

    # ------------------------------------------------------------ shapes
    def circle(self, meta, c):
        return A.Circle(c[0], c[1], c[2], span=self._s(meta))

    def point_shape(self, meta, c):
        lon, lat, _pm, widen = c
        return A.PointShape(lon, lat, widen, span=self._s(meta))

    def polygon_pairs(self, meta, c):
        return A.PolygonShape(tuple(c), span=self._s(meta))

    def polygon_flat(self, meta, c):
        if len(c) % 2:
            self.problem(self._s(meta), "polygon() needs an even count of numbers (lon, lat pairs)")
        return A.PolygonShape(tuple((c[i], c[i + 1]) for i in range(0, len(c) - 1, 2)), span=self._s(meta))

    def polygon_wkt(self, meta, c):
        text = self._str(c[0])
        try:
            import shapely

            g = shapely.from_wkt(text)
            coords = tuple((float(x), float(y)) for x, y in g.exterior.coords)
        except Exception:  # noqa: BLE001 - shapely raises several kinds for bad WKT
            self.problem(self._s(meta), "polygon(\"...\") needs WKT text of a POLYGON",
                         'e.g. polygon("POLYGON ((0.12 52.2, 0.13 52.2, 0.13 52.21, 0.12 52.2))")')
            coords = ()
        if len(coords) > 1 and coords[0] == coords[-1]:
            coords = coords[:-1]
        return A.PolygonShape(coords, span=self._s(meta))

    def coord(self, meta, c):
        return (c[0], c[1])

    def number(self, meta, c):
        return self._num(c[0])

    def _unit(self, tok: Token) -> str:
        """A unit as written, or (a slip such as `mins`, reported) the unit it stands for."""
        unit = str(tok)
        if unit in A.UNIT_DIMENSION:
            return unit
        right = UNIT_SLIPS[unit]
        hint = (f"write `{right}`: the units are `s`, `min`, `h`, `d`, `m`, `km`, `m/s`, `km/h`"
                if unit != "mph" else "miles are not a unit of SpaTeC: 1 mph is 1.609 km/h")
        self.problem(self._t(tok), f"unknown unit `{unit}`; did you mean `{right}`?", hint, soft=True)
        return right

    def quantity(self, meta, c):
        return A.Quantity(self._num(c[0]), self._unit(c[1]), span=self._s(meta))

    # ------------------------------------------------------------ phrases
    def phrase(self, meta, c):
        name, per, match, where, within, emit = c
        return A.Phrase(str(name), match, per=per[0] if per else None, where=where, within=within,
                        emit=tuple(emit or ()), span=self._s(meta),
                        per_span=per[1] if per else Span(self.file, 0, 0, 0, 0), name_span=self._t(name))

    def per(self, meta, c):
        return (str(c[0]), _tok_span(c[0], self.file))

    def where(self, meta, c):
        return c[0]

    def within(self, meta, c):
        return c[0]

    def emit(self, meta, c):
        return list(c)

    def emit_field(self, meta, c):
        return A.EmitField(str(c[0]), c[1], span=self._s(meta))

    # ------------------------------------------------------------ match
    def m_bin_or(self, meta, c):
        return A.Binary("or", c[0], c[1], span=self._s(meta))

    def m_bin_and(self, meta, c):
        return A.Binary("and", c[0], c[1], span=self._s(meta))

    def m_bin_st(self, meta, c):
        return A.Binary(canonical_op(str(c[1])), c[0], c[2], span=self._s(meta))

    def m_absent_after(self, meta, c):
        left, op, neg, q = c
        # the `not` node's span runs from the operand to the window
        nspan = Span(self.file, neg.span.line, neg.span.col, q.span.end_line, q.span.end_col) \
            if neg.span.line else self._s(meta)
        return A.Binary(canonical_op(str(op)), left, A.Not(neg, q, span=nspan), span=self._s(meta))

    def m_not(self, meta, c):
        return A.Not(c[0], span=self._s(meta))

    def m_certainly(self, meta, c):
        return A.Certainly(c[0], span=self._s(meta))

    def m_event(self, meta, c):
        return A.EventRef(str(c[0]), None, span=self._s(meta), type_span=self._t(c[0]))

    def m_bind(self, meta, c):
        return A.EventRef(str(c[0]), str(c[1]), span=self._s(meta), var_span=self._t(c[1]),
                          type_span=self._t(c[0]))

    # ------------------------------------------------------------ runs
    def run(self, meta, c):
        (etype, type_span, filt), var, cond, gap = c
        return A.Run(etype, str(var), filt, cond, gap, span=self._s(meta), type_span=type_span,
                     var_span=self._t(var))

    def run_type(self, meta, c):
        return (str(c[0]), self._t(c[0]), None)

    def run_filtered(self, meta, c):
        """`(E and P and ...)`: one event type (unbound) and the patterns that restrict it."""
        m = c[0]
        parts: list = []  # the patterns beside the event, in written order
        event = None
        while True:
            if isinstance(m, A.Binary) and m.op == "and" and not A.is_pattern(m):
                if A.is_pattern(m.right):
                    parts.append(m.right)
                    m = m.left
                    continue
                if A.is_pattern(m.left):
                    parts.append(m.left)
                    m = m.right
                    continue
            event = m
            break
        if not isinstance(event, A.EventRef):
            self.problem(event.span, "a run is made of one event type, optionally restricted by patterns",
                         "e.g. `run (BusGPS and not at centre) -> R`")
            return ("?", event.span, None)
        if event.var is not None:
            self.problem(event.var_span, "bind the run after the parentheses, not the event inside them",
                         f"write `run ({event.type} and ...) -> {event.var}`")
        parts.sort(key=lambda p_: (p_.span.line, p_.span.col))
        filt = parts[0] if parts else None
        for part in parts[1:]:
            filt = A.Binary("and", filt, part, span=Span(self.file, filt.span.line, filt.span.col,
                                                         part.span.end_line, part.span.end_col))
        return (event.type, event.type_span, filt)

    def run_while(self, meta, c):
        return c[0]

    def run_gap(self, meta, c):
        return c[0]

    def p_day(self, meta, c):
        return A.DayPattern(str(c[0]), span=self._s(meta))

    def p_month(self, meta, c):
        return A.MonthPattern(str(c[0]), span=self._s(meta))

    def p_between(self, meta, c):
        return A.ClockPattern(str(c[0]), str(c[1]), span=self._s(meta))

    def p_on(self, meta, c):
        return A.DatePattern(str(c[0]), str(c[0]), True, span=self._s(meta))

    def p_from(self, meta, c):
        return A.DatePattern(str(c[0]), str(c[1]), False, span=self._s(meta))

    def _place(self, tok: Token) -> str:
        return self._str(tok) if tok.type == "STRING" else str(tok)

    def p_at(self, meta, c):
        return A.AtPlace(self._place(c[0]), span=self._s(meta), place_span=self._t(c[0]))

    def p_at_bind(self, meta, c):
        return A.AtPlace(self._place(c[0]), str(c[1]), span=self._s(meta), place_span=self._t(c[0]),
                         var_span=self._t(c[1]))

    def p_at_nearest(self, meta, c):
        return A.AtPlace(self._place(c[0]), str(c[1]), span=self._s(meta), place_span=self._t(c[0]),
                         var_span=self._t(c[1]), nearest=True, nearest_span=self._s(meta))

    def p_at_nearest_unbound(self, meta, c):
        self.problem(self._s(meta), "`at nearest` chooses the place to bind: name a variable for it",
                     f"write `at nearest {self._place(c[0])} -> S`; to match any of the places, `at "
                     f"{self._place(c[0])}`")
        return A.AtPlace(self._place(c[0]), span=self._s(meta), place_span=self._t(c[0]))

    def p_in(self, meta, c):
        return A.InShape(c[0], span=self._s(meta))

    def p_near(self, meta, c):
        return A.NearPlace(c[0], self._place(c[1]), span=self._s(meta), place_span=self._t(c[1]))

    # ------------------------------------------------------------ predicates
    def e_bool_or(self, meta, c):
        return A.BoolOp("or", c[0], c[1], span=self._s(meta))

    def e_bool_and(self, meta, c):
        return A.BoolOp("and", c[0], c[1], span=self._s(meta))

    def e_not(self, meta, c):
        return A.UnaryOp("not", c[0], span=self._s(meta))

    def e_cmp(self, meta, c):
        return A.BinOp(str(c[1]), c[0], c[2], span=self._s(meta))

    def e_arith(self, meta, c):
        return A.BinOp(str(c[1]), c[0], c[2], span=self._s(meta))

    def e_neg(self, meta, c):
        return A.UnaryOp("-", c[1], span=self._s(meta))

    def e_num(self, meta, c):
        return A.Num(self._num(c[0]), span=self._s(meta))

    def e_quantity(self, meta, c):
        return A.Quantity(self._num(c[0]), self._unit(c[1]), span=self._s(meta))

    def e_str(self, meta, c):
        return A.Str(self._str(c[0]), span=self._s(meta))

    def e_true(self, meta, c):
        return A.BoolLit(True, span=self._s(meta))

    def e_false(self, meta, c):
        return A.BoolLit(False, span=self._s(meta))

    def e_time(self, meta, c):
        return A.TimeLit(str(c[0]), span=self._s(meta))

    def e_var(self, meta, c):
        return A.Var(str(c[0]), span=self._s(meta))

    def e_attr(self, meta, c):
        return A.Attr(str(c[0]), str(c[1]), span=self._s(meta), var_span=self._t(c[0]), name_span=self._t(c[1]))

    def e_member_attr(self, meta, c):
        return A.Attr(str(c[0]), str(c[2]), str(c[1]), span=self._s(meta), var_span=self._t(c[0]),
                      name_span=self._t(c[2]), member_span=self._t(c[1]))

    def e_call(self, meta, c):
        name, *args = c
        args = tuple(a for a in args if a is not None)
        return A.Call(str(name), args, span=self._s(meta), func_span=self._t(name))


class _Positioned(Exception):
    def __init__(self, span: Span, message: str, hint: str | None = None, soft: bool = False):
        self.span, self.message, self.hint, self.soft = span, message, hint, soft


def _token_problem(tok: Token, message: str, hint: str | None = None) -> _Positioned:
    """A problem with one token; parse_text fills in the file name."""
    return _Positioned(_tok_span(tok, ""), message, hint)


def _attach_clauses(items, file: str, problems: list) -> A.Module:
    """Fold `source`/`time`/`place` clause items into the event declaration before them."""
    decls: list = []
    orphan = False      # clauses after a misplaced `as event` are its own: not reported again
    for item in items:
        if isinstance(item, A.AsEvent):
            prev = decls[-1] if decls else None
            orphan = True
            if not isinstance(prev, A.Phrase):
                problems.append(_Positioned(item.span, "`as event` stands after a phrase",
                                            "it gives the phrase's composites, as events, a source and a "
                                            "time of their own: `phrase P = ... emit ... as event source F "
                                            "time G`"))
            elif prev.as_event is not None:
                problems.append(_Positioned(item.span, f"phrase {prev.name} has two `as event` clauses"))
            else:
                decls[-1] = _with_as_event(prev, item, file)
                orphan = False
            continue
        if orphan and isinstance(item, (A.SourceClause, A.TimeClause, A.PlaceClause)):
            continue
        orphan = False
        if isinstance(item, (A.SourceClause, A.TimeClause, A.PlaceClause)):
            kw = {A.SourceClause: "source", A.TimeClause: "time", A.PlaceClause: "place"}[type(item)]
            prev = decls[-1] if decls else None
            if isinstance(prev, A.Phrase) and prev.as_event is not None:
                problems.extend(_as_event_clause(prev, item, kw, decls, file))
                continue
            if isinstance(item, A.SourceClause) and item.more and isinstance(prev, A.EventDecl):
                problems.append(_Positioned(item.span, f"the source of event {prev.name} is one attribute",
                                            f"write `source {item.attr}`; several fields may be the source "
                                            "of a phrase's composites (`as event source line, direction`)"))
                item = A.SourceClause(item.attr, span=item.span)
            if kw == "place" and isinstance(prev, A.PlaceSetDecl):
                if prev.gtfs is not None:
                    problems.append(_Positioned(item.span, f"places {prev.name}: a GTFS table brings its own "
                                                           "regions", "widen them on the `places` line: "
                                                           f"`places {prev.name} = gtfs \"{prev.path}\" "
                                                           f"{prev.gtfs} ± 40 m`"))
                    continue
                if prev.place is not None:
                    problems.append(_Positioned(item.span, f"places {prev.name} has two `place` clauses"))
                    continue
                span = Span(file, prev.span.line, prev.span.col, item.span.end_line, item.span.end_col)
                decls[-1] = A.PlaceSetDecl(prev.name, prev.path, item, span=span, name_span=prev.name_span,
                                           path_span=prev.path_span)
                continue
            if not isinstance(prev, A.EventDecl):
                hint = ("a place declaration needs `=`: `place NAME = circle(lon, lat, 100 m)`"
                        if kw == "place" else f"put `{kw}` right after an `event` declaration, or after a "
                        "phrase's `as event`")
                problems.append(_Positioned(item.span, f"`{kw}` clause outside an event declaration", hint))
                continue
            if getattr(prev, kw) is not None:
                problems.append(_Positioned(item.span, f"event {prev.name} has two `{kw}` clauses"))
                continue
            span = Span(file, prev.span.line, prev.span.col, item.span.end_line, item.span.end_col)
            decls[-1] = A.EventDecl(prev.name, prev.attrs, **{
                "source": prev.source, "time": prev.time, "place": prev.place, kw: item}, span=span,
                name_span=prev.name_span)
        else:
            decls.append(item)
    return A.Module(file, tuple(decls), span=Span(file, 1, 1, 1, 1))


def _with_as_event(p: A.Phrase, ae: A.AsEvent, file: str, end: Span | None = None) -> A.Phrase:
    """Phrase ``p`` with its ``as event`` clause (the phrase's span then reaches to the end of
    the clause, or of ``end``, a clause of it)."""
    end = end or ae.span
    span = Span(file, p.span.line, p.span.col, end.end_line, end.end_col) if p.span.line else p.span
    return A.Phrase(p.name, p.match, per=p.per, where=p.where, within=p.within, emit=p.emit, span=span,
                    per_span=p.per_span, name_span=p.name_span, as_event=ae)


def _as_event_clause(p: A.Phrase, item, kw: str, decls: list, file: str) -> list:
    """Attach a `source` or `time` clause to phrase ``p``'s `as event` (``decls[-1]``); the
    problems of doing so."""
    ae = p.as_event
    if kw == "place":
        return [_Positioned(item.span, "the place of a phrase's composites is their convex hull: `as event` "
                                       "has no `place` clause",
                            "give its events a `source` and a `time`; their location stamp stays the hull")]
    if getattr(ae, kw) is not None:
        return [_Positioned(item.span, f"phrase {p.name}'s `as event` has two `{kw}` clauses")]
    ae = A.AsEvent(**{"source": ae.source, "time": ae.time, kw: item}, span=ae.span)
    decls[-1] = _with_as_event(p, ae, file, item.span)
    return []


def _line(text: str, n: int) -> str | None:
    lines = text.splitlines()
    return lines[n - 1] if 0 < n <= len(lines) else None


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    return f"`{tok}`"


def _syntax_diagnostic(e: UnexpectedInput, text: str, file: str, p: Lark) -> Diagnostic:
    line, col = getattr(e, "line", 0) or 0, getattr(e, "column", 0) or 0
    if isinstance(e, UnexpectedToken):
        tok = e.token
        expected = _expected_text(set(e.accepts or e.expected), p)
        msg = f"unexpected {_describe_token(tok)}; expected {expected}"
        if tok.type == "$END":
            lines = text.splitlines() or [""]
            line, col = len(lines), len(lines[-1]) + 1
            width = 1
        else:
            width = max(1, len(str(tok)))
        after = text[tok.start_pos - 1] if tok.type != "$END" and tok.start_pos else ""
        hint = _hint_for(tok, set(e.accepts or e.expected), after, p)
        span = Span(file, line, col, line, col + width)
        in_condition = _pattern_in_condition(tok, set(e.accepts or e.expected), text, file) \
            or _clock_in_condition(tok, text, file)
        if in_condition is not None:
            span, msg, hint = in_condition
        elif hint is None:
            glued = _glued_keyword(tok, text, file, e)
            if glued is not None:
                span, msg, hint = glued
    elif isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        allowed = _expected_text(set(e.allowed or ()), p) if e.allowed else None
        shown = ch if ch.isprintable() else ascii(ch)[1:-1]
        msg = f"unexpected character `{shown}`" + (f"; expected {allowed}" if allowed else "")
        hint = None
        if ch == "'" or ch == '"':
            hint = "strings must be closed on the same line"
        span = Span(file, line, col, line, col + 1)
    else:  # UnexpectedEOF
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
        msg = "unexpected end of file"
        hint = None
        span = Span(file, line, col, line, col + 1)
    return Diagnostic(span, msg, hint, _line(text, span.line))


def _hint_for(tok: Token, expected: set[str], after: str, p: Lark) -> str | None:
    """A hint for a syntax error; ``after`` is the character just before the token."""
    if tok.type == "NUMBER" and "UNIT" in expected:
        return None
    if tok.type == "NAME":
        close = _close_keyword(str(tok), expected, p)
        if close:
            return f"did you mean `{close}`?"
    if "UNIT" in expected:
        return "durations and distances need a unit: `30 s`, `20 min`, `150 m`, `12 km/h`"
    if str(tok) == "=" and after == "=":
        return "in a match expression `=` means same place; comparisons (`==`) go in `where`"
    if expected == {"OF"}:
        return ("right after an operator, `within D` starts the pattern `within 300 m of PLACE`; "
                "is an operand missing before `within`?")
    if tok.type == "NAME" and "ST_OP" in expected:
        return "operands of a match expression are joined by an operator such as `;`, `||` or `and`"
    return None


def _close_keyword(word: str, expected: set[str], p: Lark) -> str | None:
    """The keyword that could come here and that ``word`` looks like a slip of (`withn`: `within`)."""
    import difflib

    words = []
    for name in expected:
        try:
            pattern = p.get_terminal(name).pattern
        except KeyError:
            continue
        if pattern.type == "str" and pattern.value.isalpha():
            words.append(pattern.value)
    close = difflib.get_close_matches(word, sorted(words), n=1, cutoff=0.75)
    return close[0] if close else None


# words that start a pattern: read as names inside a condition, where patterns cannot stand
_PATTERN_WORDS = {"at", "in", "between", "on", "from", "certainly", "within"}
_LAST_WORD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*$")


def _pattern_in_condition(tok: Token, expected: set[str], text: str, file: str):
    """(span, message, hint) when a pattern was written inside a condition (`where ... not (at
    centre)`): the pattern word just before the token was read as a name."""
    if tok.type == "$END" or "DOT" not in expected or not tok.start_pos:
        return None
    m = _LAST_WORD.search(text, 0, tok.start_pos)
    if m is None or m.group(1) not in _PATTERN_WORDS:
        return None
    start = m.start(1)
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    word = m.group(1)
    span = Span(file, line, col, line, col + len(word))
    before = text[:start]
    run_at, while_at, where_at = before.rfind("run"), before.rfind("while"), before.rfind("where")
    if run_at != -1 and while_at > run_at and where_at < while_at:
        hint = ("a run's `while` condition extends as far as it can: put the run in parentheses, "
                "`(run BusGPS -> R while ...) and certainly at stops -> S`")
    else:
        hint = ("patterns belong in the match: `BusGPS -> A and not at centre`; "
                "a condition compares attributes and calls functions")
    shown = f"{word} {tok}" if str(tok).isidentifier() or tok.type in ("STRING", "PLACE_ID") else word
    return span, f"`{shown}` is a pattern: patterns cannot stand in a condition", hint


_CLOCK_BEFORE = re.compile(r"(\d{1,2})$")
_CLOCK_AFTER = re.compile(r":\d{2}(:\d{2})?")


def _clock_in_condition(tok: Token, text: str, file: str):
    """(span, message, hint) when a clock time was written in a condition (`where A.t > 09:00`):
    a condition compares instants; a time of day is a pattern of the match."""
    if tok.type == "$END" or str(tok) != ":" or not tok.start_pos:
        return None
    before = _CLOCK_BEFORE.search(text, 0, tok.start_pos)
    after = _CLOCK_AFTER.match(text, tok.start_pos)
    if before is None or after is None:
        return None
    start, end = before.start(1), after.end()
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    clock = text[start:end]
    return (Span(file, line, col, line, col + len(clock)),
            f"`{clock}` is a time of day: a condition compares instants (`A.t`, a date-time) and durations",
            f"for the events of a time of day, put the pattern in the match: `BusGPS -> A and between "
            f"{clock} and 17:00`; to compare with an instant, write a date-time: `A.t > 2019-10-01T{clock}`")


def _glued_keyword(tok: Token, text: str, file: str, e: UnexpectedToken):
    """(span, message, hint) when the word before the token was read as a keyword and a name
    (`andd` as `and` `d`, `emitt` as `emit` `t`): a slip of the keyword."""
    import difflib

    from spatec.frontend.printer import KEYWORDS

    if tok.type == "$END" or not tok.start_pos:
        return None
    m = _LAST_WORD.search(text, 0, tok.start_pos)
    if m is None or m.group(1) in KEYWORDS:
        return None
    word = m.group(1)
    # the parser's last two values must be the keyword and the rest of the word, as lexed
    try:
        values = e.interactive_parser.parser_state.value_stack[-2:]
    except AttributeError:
        return None
    if len(values) != 2 or not all(isinstance(v, Token) for v in values):
        return None
    kw_tok, rest = values
    keyword = str(kw_tok)
    if kw_tok.start_pos != m.start(1) or keyword + str(rest) != word or keyword not in KEYWORDS:
        return None
    start = m.start(1)
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    close = difflib.get_close_matches(word, sorted(KEYWORDS), n=1, cutoff=0.75)
    hint = f"did you mean `{close[0]}`?" if close else None
    return (Span(file, line, col, line, col + len(word)),
            f"`{word}` is read as the keyword `{keyword}` followed by `{word[len(keyword):]}`", hint)


def parse_text(text: str, file: str = "<string>") -> A.Module:
    """Parse one file's text. Raises :class:`ParseError` with every problem found.

    LALR parsing stops at the first syntax error; to report the later ones too,
    parsing resumes at the next line that starts a declaration (`phrase`,
    `event`, `place`, ...), with the text before it blanked so positions hold.
    """
    text = text.removeprefix("\ufeff")     # a byte-order mark is no character of the program
    p = parser()
    diags: list[Diagnostic] = []
    tree = None
    rest = text
    restart = 0
    while True:
        try:
            tree = p.parse(rest)
            break
        except UnexpectedInput as e:
            d = _syntax_diagnostic(e, text, file, p)
            diags.append(d)
            # resume at the error line itself when the error is a declaration keyword
            # that begins it (the declaration before it was cut short)
            here = _ITEM_START.match(_line(text, d.span.line) or "") is not None \
                and (_line(text, d.span.line) or "")[: d.span.col - 1].strip() == ""
            nxt = _next_item_line(text, d.span.line - 1 if here else d.span.line)
            if nxt is None or nxt <= restart or len(diags) >= 50:
                break
            restart = nxt
            rest = _blank_before(text, nxt)
    if diags:
        raise ParseError(_dedupe(diags))
    builder = _Builder(file)
    module = builder.build(tree)
    if builder.problems:
        problems = sorted(builder.problems, key=lambda p_: (p_.span.line, p_.span.col))
        raise ParseError([Diagnostic(p_.span, p_.message, p_.hint, _line(text, p_.span.line))
                          for p_ in problems], module=module if all(p_.soft for p_ in problems) else None)
    return module


_ITEM_START = re.compile(r"^\s*(phrase|event|place|places|include|timezone|crs)\b")


def _next_item_line(text: str, after_line: int) -> int | None:
    for i, line in enumerate(text.splitlines()[after_line:], start=after_line + 1):
        if _ITEM_START.match(line):
            return i
    return None


def _blank_before(text: str, line_no: int) -> str:
    lines = text.splitlines(keepends=True)
    head = "".join(lines[: line_no - 1])
    return re.sub(r"[^\n]", " ", head) + "".join(lines[line_no - 1:])


def _dedupe(diags: list[Diagnostic]) -> list[Diagnostic]:
    seen, out = set(), []
    for d in diags:
        k = (d.span.line, d.span.col, d.message)
        if k not in seen:
            seen.add(k)
            out.append(d)
    return out



"""``where``/``emit`` expressions and primitive patterns over columns of events.

The vectorised twins of :mod:`spatec.automata.exprs` and
:mod:`spatec.automata.patterns`, for the fast paths: the events are the rows
of a :class:`Columns`, a candidate composite binds each variable to one row,
and an expression is computed for many candidates at once. The answers are
the scalar ones bit for bit:

- values are numpy arrays with a *known* mask standing for ``None`` (SQL's
  three-valued logic, as in :mod:`exprs`);
- IEEE arithmetic is the same in numpy and Python as long as integers stay
  below 2**53 (where numpy would round them to floats differently from
  Python); larger ones go to the scalar fallback;
- distances use ``math.hypot`` (numpy's ``hypot`` differs in the last bit);
- discs overlap by the squared-distance test of :func:`stamps.overlap`;
  patterns use :func:`stamps.relate_many`, which equals ``possibly_in`` /
  ``certainly_in`` bit for bit, and time patterns the same interval sets.

Whatever is not vectorised here (``hull_area``, non-disc stamps, ``bool``
attributes, a variable used whole, big integers) is computed row by row by
the scalar closures on materialised events, at the lowest node of the
expression that needs it.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spatec.automata.exprs import compile_expr
from spatec.automata.machine import Context, RunState
from spatec.automata.patterns import PatternCompiler, domain
from spatec.events.columns import arrow_text, json_plain_text, one_array
from spatec.frontend import ast as A
from spatec.frontend.check import time_literal_micros
from spatec.plan.predicates import expr_vars

SAFE_INT = 2 ** 53


class Scalar(Exception):
    """Raised inside the vectorised evaluation: compute this node row by row."""


class Col:
    """One value per candidate: array ``a`` and mask ``k`` of the known ones (None: all known)."""

    __slots__ = ("a", "k")

    def __init__(self, a, k=None):
        self.a, self.k = a, k

    def known(self) -> np.ndarray:
        return np.ones(len(self.a), dtype=bool) if self.k is None else self.k

    def truth(self) -> np.ndarray:
        """Where the value is ``True`` (the test of :func:`exprs.compile_condition`)."""
        if self.a.dtype == bool:
            return self.a.copy() if self.k is None else self.a & self.k
        if self.a.dtype == object:
            out = np.fromiter((v is True for v in self.a), bool, len(self.a))
            return out if self.k is None else out & self.k
        return np.zeros(len(self.a), dtype=bool)

    def python(self) -> list:
        """Plain Python values, None where unknown."""
        vals = self.a.tolist()
        if self.k is not None:
            for i in np.flatnonzero(~self.k).tolist():
                vals[i] = None
        return vals


def _and_k(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def from_python(vals: list) -> Col:
    """A column of Python values (None: unknown), typed when every known value has one type."""
    n = len(vals)
    known = np.fromiter((v is not None for v in vals), bool, n)
    types = {type(v) for v in vals if v is not None}
    k = None if known.all() else known
    if types == {bool}:
        return Col(np.array([bool(v) if v is not None else False for v in vals], dtype=bool), k)
    if types == {int}:
        a = [v if v is not None else 0 for v in vals]
        if all(-SAFE_INT < v < SAFE_INT for v in a):
            return Col(np.array(a, dtype=np.int64), k)
    if types == {float}:
        return Col(np.array([v if v is not None else 0.0 for v in vals], dtype=np.float64), k)
    arr = np.empty(n, dtype=object)
    arr[:] = vals
    return Col(arr, k)


def _numeric(a: np.ndarray) -> bool:
    return a.dtype.kind in "if"


def _check_ints(*arrays) -> None:
    """Mixing or growing integers beyond 2**53 is where numpy and Python part ways."""
    for a in arrays:
        if a.dtype.kind == "i" and len(a) and int(np.abs(a).max()) >= SAFE_INT:
            raise Scalar


# --------------------------------------------------------------------------- events as columns

class TextColumn:
    """Text held as Arrow (events' ids as staged), made Python strings only for the
    rows asked for: ``col[rows]`` gives a numpy array of ``str``, ``col[i]`` one
    ``str``. Events read from Arrow are many more than those a phrase's composites
    bind (Bunching's bus-day: 1.3 M ids, 0.46 M bound), and one string per event
    was a quarter of a Spark task's loading."""

    def __init__(self, arr, pos: np.ndarray | None = None):
        self.arr, self.pos = one_array(arr), pos

    @classmethod
    def of(cls, values) -> "TextColumn | None":
        """The column of a pandas Series or array backed by Arrow text; None for any other."""
        arr = arrow_text(values)
        return None if arr is None else cls(arr)

    def __len__(self) -> int:
        return len(self.arr) if self.pos is None else len(self.pos)

    def take(self, pos: np.ndarray) -> "TextColumn":
        """The column of rows ``pos``, still unmade."""
        return TextColumn(self.arr, pos if self.pos is None else self.pos[pos])

    def __getitem__(self, rows):
        at = rows if self.pos is None else self.pos[rows]
        if np.ndim(at) == 0:
            return self.arr[int(at)].as_py()
        at = np.asarray(at)
        if at.dtype == bool:
            at = np.flatnonzero(at)
        return self.arr.take(pa.array(at, pa.int64())).to_numpy(zero_copy_only=False)

    def arrow(self, rows) -> pa.Array:
        """Rows ``rows`` (positions) as an Arrow array, no Python string made."""
        at = np.asarray(rows if self.pos is None else self.pos[rows], dtype=np.int64)
        return self.arr.take(pa.array(at))

    def tolist(self) -> list:
        return (self.arr if self.pos is None else self.arr.take(pa.array(self.pos, pa.int64()))).to_pylist()

    def json_plain(self) -> bool:
        """Whether every text of the whole array is one JSON writes as it is, in quotes
        (:func:`~spatec.events.columns.json_plain_text`; no missing value): then so is
        every row of any :meth:`take`. Read once, from the array's own bytes."""
        got = self.__dict__.get("_plain")
        if got is None:
            arr = self.arr
            got = self._plain = arr.type == pa.string() and arr.null_count == 0 and json_plain_text(arr)
        return got

    def all_distinct(self) -> bool:
        """Whether the rows' values all differ: every value of the array once (Arrow's
        hash of the text, several times cheaper than ``count_distinct``) and no row
        twice; else counted row by row."""
        every = len(pc.unique(self.arr)) == len(self.arr)
        if self.pos is None:
            return every
        if every and (not len(self.pos) or np.bincount(self.pos, minlength=len(self.arr)).max() <= 1):
            return True
        return len(pc.unique(self.arr.take(pa.array(self.pos, pa.int64())))) == len(self.pos)


def all_distinct(values) -> bool:
    """Whether the values of a :class:`TextColumn` or a numpy array of objects all differ."""
    if isinstance(values, TextColumn):
        return values.all_distinct()
    return len(set(values.tolist())) == len(values)


class Columns:
    """The events of one type as arrays; row ``i`` is one event.

    Given: ``t lo hi r`` (arrays), ``ids``, ``src_code`` (equal codes: equal
    sources; -1: none). Made when first needed: the disc centres ``x y`` and
    ``disc`` (a finite point) from ``locate(rows or None) -> (x, y, disc)``,
    attributes from ``attr_values(name, rows or None)`` (a pandas Series or a
    list of Python values), run-time events
    (:class:`~spatec.automata.machine.Ev`) of rows from ``materialise(rows)``
    for the scalar fallback and for composites.
    """

    def __init__(self, *, ids, src_code, t, lo, hi, r, locate, attr_values, materialise, group=None,
                 part=None):
        self.n = len(t)
        self.ids, self.src_code, self.t, self.lo, self.hi, self.r = ids, src_code, t, lo, hi, r
        self.group = group          # rows of a group are consecutive, sorted by local time
        self.part = part            # the partition of each row (-1: none)
        self._locate = locate
        self._xy = None
        self._attr_values = attr_values
        self._materialise = materialise
        self._attrs: dict = {}
        self._evs: dict = {}

    @property
    def x(self) -> np.ndarray:
        return self._located()[0]

    @property
    def y(self) -> np.ndarray:
        return self._located()[1]

    @property
    def disc(self) -> np.ndarray:
        return self._located()[2]

    def _located(self):
        if self._xy is None:
            self._xy = self._locate(None)
        return self._xy

    def centres(self, rows):
        """(x, y, disc) of ``rows``, locating only those unless every row is located already."""
        if self._xy is not None or 4 * len(rows) > self.n:
            x, y, d = self._located()
            return x[rows], y[rows], d[rows]
        return self._locate(rows)

    def attr(self, name: str, rows) -> Col:
        """Attribute ``name`` of ``rows`` (converted whole, once, when many rows ask)."""
        col = self._attrs.get(name)
        if col is None and 4 * len(rows) <= self.n:
            return _attr_col(self._attr_values(name, rows))
        if col is None:
            col = self._attrs[name] = _attr_col(self._attr_values(name, None))
        return Col(col.a[rows], None if col.k is None else col.k[rows])

    def evs(self, rows) -> list:
        """Run-time events of ``rows`` (made once per row)."""
        rows = np.asarray(rows, dtype=np.int64)
        need = [i for i in np.unique(rows).tolist() if i not in self._evs]
        if need:
            for i, ev in zip(need, self._materialise(np.asarray(need, dtype=np.int64))):
                self._evs[i] = ev
        return [self._evs[i] for i in rows.tolist()]

    def all_discs(self, rows) -> bool:
        return bool(self.disc[rows].all())


def source_codes(sources) -> np.ndarray:
    """Equal codes for equal sources, -1 for none."""
    return pd.factorize(pd.Series(sources, dtype=object) if not isinstance(sources, pd.Series)
                        else sources)[0].astype(np.int64)


def present(s: pd.Series) -> np.ndarray:
    """``s.notna()`` as an array; for a column of text with no missing value found with one
    type check per value (``infer_dtype``, in C) rather than a test for each kind of NA
    (Bunching's hour: 11 of its fast path's 112 ms went to those tests)."""
    if _all_text(s):
        return np.ones(len(s), dtype=bool)
    return s.notna().to_numpy()


def _all_text(s: pd.Series) -> bool:
    """Whether every value of ``s`` is a str (none missing)."""
    return s.dtype == object and pd.api.types.infer_dtype(s, skipna=False) == "string"


def _attr_col(values) -> Col:
    """An attribute column as the scalar path sees it (``python_values``: NaN and NA are None)."""
    if isinstance(values, pd.Series):
        s = values
        kind = s.dtype.kind if isinstance(s.dtype, np.dtype) else None
        if kind == "f":
            a = s.to_numpy(np.float64)
            known = ~np.isnan(a)
            return Col(np.where(known, a, 0.0), None if known.all() else known)
        if kind == "i" or str(s.dtype) in ("Int64", "Int32"):
            known = s.notna().to_numpy()
            a = s.to_numpy(np.int64, na_value=0)
            if len(a) and int(np.abs(a).max()) >= SAFE_INT:
                return from_python(s.astype(object).where(s.notna(), None).tolist())
            return Col(a, None if known.all() else known)
        if _all_text(s):
            return Col(s.to_numpy(dtype=object, copy=True), None)     # text, none missing: no NA test
        if pd.api.types.infer_dtype(s, skipna=True) == "string":
            # text (the usual attribute): what from_python makes of the list, without the list
            known = s.notna().to_numpy()
            a = s.to_numpy(dtype=object, copy=True)
            if not known.all():
                a[~known] = None
            return Col(a, None if known.all() else known)
        values = s.astype(object).where(s.notna(), None).tolist()
    col = from_python(list(values))
    if col.a.dtype == bool:
        # a bool attribute is compared by identity in the scalar path (`is False`):
        # keep its exact Python objects
        arr = np.empty(len(values), dtype=object)
        arr[:] = list(values)
        return Col(arr, col.k)
    return col


# --------------------------------------------------------------------------- expressions

class Bound:
    """Candidates: for each variable, the row it is bound to (arrays of one length ``m``)."""

    def __init__(self, cols: Columns, rows: dict):
        self.cols, self.rows = cols, rows
        self.m = len(next(iter(rows.values()))) if rows else 0

    def take(self, keep) -> "Bound":
        return Bound(self.cols, {v: r[keep] for v, r in self.rows.items()})


_CMP = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
        ">": np.greater, ">=": np.greater_equal}


class Evaluator:
    """Computes expression ASTs over :class:`Bound` candidates."""

    def __init__(self, tz: str):
        self.tz = tz
        self.ctx = Context(RunState())
        self._compiled: dict = {}

    # ---------------------------------------------------------------- entry points
    def holds(self, exprs, b: Bound) -> np.ndarray:
        """Where every expression is True (as :func:`exprs.compile_condition`)."""
        ok = np.ones(b.m, dtype=bool)
        for e in exprs:
            if not ok.any():
                break
            idx = np.flatnonzero(ok)
            sub = b if len(idx) == b.m else b.take(idx)
            ok[idx] = self.value(e, sub).truth()
        return ok

    def emit(self, e, b: Bound) -> list:
        """Python values of an emitted expression, None where missing or failing
        (as :func:`runners.common.output_row`)."""
        try:
            return self._vec(e, b).python()
        except (Scalar, ZeroDivisionError, OverflowError, TypeError):
            return self._scalar(e, b, errors=True).python()

    def value(self, e, b: Bound) -> Col:
        try:
            return self._vec(e, b)
        except (Scalar, ZeroDivisionError, OverflowError, TypeError):
            # row by row: an error then happens exactly where the scalar path raises
            # (it short-circuits `and`/`or`, numpy computes both sides)
            return self._scalar(e, b)

    # ---------------------------------------------------------------- scalar fallback
    def _scalar(self, e, b: Bound, errors: bool = False) -> Col:
        key = id(e)
        if key not in self._compiled:
            self._compiled[key] = (e, compile_expr(e, self.tz))
        f = self._compiled[key][1]
        names = sorted(_vars(e) & set(b.rows))
        evs = {v: b.cols.evs(b.rows[v]) for v in names}
        out = []
        for i in range(b.m):
            env = {v: evs[v][i] for v in names}
            if errors:
                try:
                    out.append(f(env, self.ctx))
                except (ZeroDivisionError, OverflowError, TypeError):
                    out.append(None)
            else:
                out.append(f(env, self.ctx))
        return from_python(out)

    # ---------------------------------------------------------------- vectorised
    def _vec(self, e, b: Bound) -> Col:
        m = b.m
        if isinstance(e, A.Num):
            return _const(e.value, m)
        if isinstance(e, A.Quantity):
            v = e.base()
            return _const(int(v) if e.dimension == "duration" else v, m)
        if isinstance(e, (A.Str, A.BoolLit)):
            return _const(e.value, m)
        if isinstance(e, A.TimeLit):
            return _const(time_literal_micros(e.text, self.tz), m)
        if isinstance(e, A.Attr):
            rows = b.rows[e.var]
            if e.name in ("t", "lo", "hi"):
                return Col(getattr(b.cols, e.name)[rows])
            return b.cols.attr(e.name, rows)
        if isinstance(e, A.UnaryOp):
            c = self.value(e.operand, b)
            if e.op == "not":
                if c.a.dtype != bool:
                    raise Scalar
                return Col(~c.a, c.k)
            if not _numeric(c.a):
                raise Scalar
            return Col(-c.a, c.k)
        if isinstance(e, A.BoolOp):
            return self._boolop(e, b)
        if isinstance(e, A.BinOp):
            x, y = self.value(e.left, b), self.value(e.right, b)
            if e.op in _CMP:
                return _compare(e.op, x, y)
            return _arith(e.op, x, y)
        if isinstance(e, A.Call):
            return self._call(e, b)
        raise Scalar  # a variable used whole, or anything new

    def _boolop(self, e, b: Bound) -> Col:
        x, y = self.value(e.left, b), self.value(e.right, b)
        if x.a.dtype != bool or y.a.dtype != bool:
            raise Scalar
        xk, yk = x.known(), y.known()
        xa = np.where(xk, x.a, e.op == "and")   # an unknown side never decides
        ya = np.where(yk, y.a, e.op == "and")
        if e.op == "and":
            val = xa & ya
            known = (xk & yk) | (xk & ~xa) | (yk & ~ya)
        else:
            val = xa | ya
            known = (xk & yk) | (xk & xa) | (yk & ya)
        return Col(val, None if known.all() else known)

    def _call(self, e, b: Bound) -> Col:
        f = e.func
        names = [a.name for a in e.args]
        cols = b.cols
        if f == "duration":
            ra, rb = b.rows[names[0]], b.rows[names[-1]]     # duration(A) = A.hi - A.lo
            return Col(cols.hi[rb] - cols.lo[ra])
        if f in ("before", "concurrent"):
            ra, rb = b.rows[names[0]], b.rows[names[1]]
            ab, ba = _before(cols, ra, rb), _before(cols, rb, ra)
            return Col(ab if f == "before" else ~ab & ~ba)
        if f in ("overlap", "disjoint", "distance", "speed"):
            ra, rb = b.rows[names[0]], b.rows[names[1]]
            if not (cols.all_discs(ra) and cols.all_discs(rb)):
                raise Scalar
            dx = cols.x[ra] - cols.x[rb]
            dy = cols.y[ra] - cols.y[rb]
            if f == "speed":
                gap = np.abs(cols.t[rb] - cols.t[ra])
                _check_ints(gap)
                known = gap != 0
                h = _hypot(cols.x[rb] - cols.x[ra], cols.y[rb] - cols.y[ra])
                with np.errstate(divide="ignore", invalid="ignore"):
                    v = h / (gap / 1e6)
                return Col(np.where(known, v, 0.0), None if known.all() else known)
            s = cols.r[ra] + cols.r[rb]
            ov = dx * dx + dy * dy <= s * s
            if f == "overlap":
                return Col(ov)
            if f == "disjoint":
                return Col(~ov)
            d = np.zeros(b.m)
            far = np.flatnonzero(~ov)
            if len(far):
                g = _hypot(dx[far], dy[far]) - s[far]
                d[far] = np.where(g > 0.0, g, 0.0)
            return Col(d)
        raise Scalar  # hull_area, successive


def _vars(e) -> set:
    return expr_vars(e)


def _hypot(dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return np.fromiter(map(math.hypot, dx.tolist(), dy.tolist()), np.float64, len(dx))


def _before(cols: Columns, ra, rb) -> np.ndarray:
    """:func:`relations.ev_before` for row pairs."""
    ca, cb = cols.src_code[ra], cols.src_code[rb]
    same = (ca == cb) & (ca >= 0)
    return np.where(same, cols.t[ra] < cols.t[rb], cols.hi[ra] < cols.lo[rb])


def _const(v, m: int) -> Col:
    if isinstance(v, bool):
        return Col(np.full(m, v, dtype=bool))
    if isinstance(v, int):
        if not -SAFE_INT < v < SAFE_INT:
            raise Scalar
        return Col(np.full(m, v, dtype=np.int64))
    if isinstance(v, float):
        return Col(np.full(m, v, dtype=np.float64))
    arr = np.empty(m, dtype=object)
    arr[:] = [v] * m
    return Col(arr)


def _subset_op(fn, x: Col, y: Col, fill_dtype) -> Col:
    """``fn`` on the rows where both are known (object arrays hold None elsewhere)."""
    k = _and_k(x.k, y.k)
    if k is None:
        return Col(np.asarray(fn(x.a, y.a)))
    out = np.zeros(len(x.a), dtype=fill_dtype)
    idx = np.flatnonzero(k)
    if len(idx):
        got = np.asarray(fn(x.a[idx], y.a[idx]))
        if got.dtype != out.dtype:
            out = out.astype(got.dtype)
        out[idx] = got
    return Col(out, k)


def _compare(op: str, x: Col, y: Col) -> Col:
    fn = _CMP[op]
    xo, yo = x.a.dtype == object, y.a.dtype == object
    if not (xo or yo):
        if (x.a.dtype.kind == "i") != (y.a.dtype.kind == "i") and (_numeric(x.a) and _numeric(y.a)):
            _check_ints(x.a, y.a)
        return _subset_op(lambda a, b: fn(a, b), x, y, bool)
    return _subset_op(lambda a, b: fn(a, b).astype(bool), x, y, bool)


def _arith(op: str, x: Col, y: Col) -> Col:
    if not (_numeric(x.a) and _numeric(y.a)):
        raise Scalar
    ints = x.a.dtype.kind == "i" and y.a.dtype.kind == "i"
    if ints and op in ("+", "-", "*") or (x.a.dtype.kind != y.a.dtype.kind) or op == "/":
        _check_ints(x.a, y.a)
    if ints and op == "*" and len(x.a):
        if float(np.abs(x.a).max()) * float(np.abs(y.a).max()) >= SAFE_INT:
            raise Scalar
    with np.errstate(all="ignore"):
        if op == "+":
            return Col(x.a + y.a, _and_k(x.k, y.k))
        if op == "-":
            return Col(x.a - y.a, _and_k(x.k, y.k))
        if op == "*":
            return Col(x.a * y.a, _and_k(x.k, y.k))
        nz = y.a != 0
        k = _and_k(_and_k(x.k, y.k), None if nz.all() else nz)
        v = np.true_divide(x.a, np.where(nz, y.a, 1))
        return Col(v.astype(np.float64), k)


# --------------------------------------------------------------------------- patterns

class Patterns:
    """Primitive patterns over many events at once (the sets of :class:`PatternCompiler`)."""

    def __init__(self, places: dict, tz: str, projector, sets=None):
        self.pc = PatternCompiler(places, tz, projector, sets)
        self._every: dict = {}

    def mask(self, patterns, cols: Columns, rows) -> np.ndarray:
        """Where every pattern possibly matches (:meth:`PatternCompiler.filter`). Over
        every row of ``cols``, computed once per patterns (two leaves of a phrase often
        test the same: patterns compare equal whatever their place in the program)."""
        every = len(rows) == cols.n and (not cols.n or (rows[0] == 0 and bool((np.diff(rows) == 1).all())))
        key = tuple(patterns)
        if every:
            got = self._every.get(key)
            if got is not None and got[0] is cols:
                return got[1].copy()
        ok = np.ones(len(rows), dtype=bool)
        for p in patterns:
            ok &= self.relate(p, cols, rows)[0]
        if every:
            self._every[key] = (cols, ok.copy())
        return ok

    def relate(self, p, cols: Columns, rows):
        """(possibly, certainly) for ``rows``, as :meth:`PatternCompiler.compile`."""
        if self._names_set(p):
            return self._each(p, cols, rows)
        d = domain(p)
        if d == "space":
            return self._space(self.pc.space_set(p), cols, rows)
        if d == "time":
            return self._time(self.pc.time_set(p), cols, rows)
        if isinstance(p, A.Certainly):
            c = self.relate(p.pattern, cols, rows)[1]
            return c, c
        if isinstance(p, A.Not):
            pos, cert = self.relate(p.operand, cols, rows)
            return ~cert, ~pos
        if isinstance(p, A.Binary):
            lp, lc = self.relate(p.left, cols, rows)
            rp, rc = self.relate(p.right, cols, rows)
            if p.op == "and":
                return lp & rp, lc & rc
            return lp | rp, lc | rc
        raise TypeError(type(p).__name__)

    def _names_set(self, p) -> bool:
        """Whether ``p`` tests a place set (SPEC §9): those go through its spatial index, one
        event at a time (``certainly at SET`` is inside one place, not inside the union)."""
        sets = self.pc.sets
        return bool(sets) and any(isinstance(x, (A.AtPlace, A.NearPlace)) and x.place in sets
                                  for x in A.walk(p))

    def _each(self, p, cols: Columns, rows):
        pos, cert = self.pc.compile(p)
        n = len(rows)
        possibly, certainly = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        for i, ev in enumerate(cols.evs(rows)):
            possibly[i], certainly[i] = pos(ev.lo, ev.hi, ev.loc), cert(ev.lo, ev.hi, ev.loc)
        return possibly, certainly

    def _time(self, ts, cols: Columns, rows):
        lo, hi = cols.lo[rows], cols.hi[rows]
        if len(rows) == 0:
            return np.zeros(0, bool), np.zeros(0, bool)
        pieces = ts.pieces(int(lo.min()), int(hi.max()))
        if not pieces:
            z = np.zeros(len(rows), dtype=bool)
            return z, z.copy()
        starts = np.array([s for s, _ in pieces], dtype=np.int64)
        ends = np.array([e for _, e in pieces], dtype=np.int64)
        # pieces are sorted and disjoint: only the last one starting at or before a time can hold it
        i = np.searchsorted(starts, hi, side="right") - 1
        possibly = (i >= 0) & (ends[np.maximum(i, 0)] > lo)
        j = np.searchsorted(starts, lo, side="right") - 1
        certainly = (j >= 0) & (ends[np.maximum(j, 0)] > hi)
        return possibly, certainly

    def _space(self, ss, cols: Columns, rows):
        from spatec.spatial import stamps as S

        n = len(rows)
        possibly = np.zeros(n, dtype=bool)
        certainly = np.zeros(n, dtype=bool)
        disc = cols.disc[rows]
        region = ss.atom if ss.atom is not None else ss.region_loc()
        vec = np.flatnonzero(disc) if region is not S.UNIVERSE else np.zeros(0, dtype=np.int64)
        if len(vec):
            r = rows[vec]
            p, c = S.relate_many(cols.x[r], cols.y[r], None, cols.r[r], region)
            if ss.neg:
                p, c = ~c, ~p
            possibly[vec], certainly[vec] = p, c
        rest = np.setdiff1d(np.arange(n), vec, assume_unique=True)
        if len(rest):
            for i, ev in zip(rest.tolist(), cols.evs(rows[rest])):
                possibly[i], certainly[i] = ss.possibly(ev.loc), ss.certainly(ev.loc)
        return possibly, certainly

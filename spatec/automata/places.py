"""Place sets and bound places (SPEC §9) in the automaton.

``at SET`` is one pattern over a :class:`~spatec.spatial.placeindex.PlaceIndex`, never a
chain of ``or``: :class:`SetSpace` is the set as a space set of
:mod:`spatec.automata.patterns` (possibly: meets one place; in combinations the set is
the union of its places), and ``certainly at SET`` lies inside one place.

``at SET -> S`` / ``certainly at SET -> S`` beside an event bind S to the matching
place, one match per place (``at nearest SET -> S``: one match, at the nearest of them): :func:`split_filters` turns a node's patterns into a test
(the patterns that bind nothing) and a *binder* that lists the places each binding
pattern holds for. A bound :class:`Place` has an id (``SET:N``, or a single place's
name), the attributes of its row, and its region (``distance(A, S)``).
"""
from __future__ import annotations

import itertools

import shapely
from shapely import wkt as shp_wkt

from spatec.automata.patterns import SpaceSet
from spatec.frontend import ast as A
from spatec.spatial import stamps as S
from spatec.spatial.placeindex import PlaceIndex


class Place:
    """A bound place: ``id``, ``attrs`` (its row), ``loc`` (its region, projected)."""

    __slots__ = ("id", "attrs", "loc")

    def __init__(self, id: str, attrs: dict, loc):
        self.id, self.attrs, self.loc = id, attrs, loc

    def __eq__(self, other):
        return isinstance(other, Place) and (self.id, self.attrs, self.loc) == (other.id, other.attrs, other.loc)

    __hash__ = None

    def __repr__(self):
        return f"Place({self.id})"

    def __getstate__(self):
        return (self.id, self.attrs, self.loc)

    def __setstate__(self, s):
        self.id, self.attrs, self.loc = s


def place_loc(pd, projector):
    """A :class:`~spatec.frontend.places.PlaceDef`'s region, projected."""
    if pd.kind == "circle":
        x, y = projector.forward(pd.lon, pd.lat)
        return S.Loc.disc(float(x), float(y), pd.radius)
    g = shapely.transform(shp_wkt.loads(pd.wkt), lambda c: _fwd(projector, c))
    return S.Loc.of(g, pd.widen)


def _fwd(proj, coords):
    import numpy as np

    x, y = proj.forward(coords[:, 0], coords[:, 1])
    return np.column_stack([x, y])


class PlaceSets:
    """The place sets an automaton names, projected and indexed when first used."""

    def __init__(self, sets: dict, projector):
        self.sets, self.proj = dict(sets), projector
        self._index: dict = {}
        self._places: dict = {}

    def __contains__(self, name) -> bool:
        return name in self.sets

    def index(self, name: str) -> PlaceIndex:
        ix = self._index.get(name)
        if ix is None:
            ps = self.sets[name]
            if len(ps.places) and all(p.kind == "circle" for p in ps.places):
                import numpy as np

                xs, ys = self.proj.forward(np.array([p.lon for p in ps.places], dtype=float),
                                           np.array([p.lat for p in ps.places], dtype=float))
                locs = [S.Loc.disc(x, y, p.radius) for x, y, p in zip(np.asarray(xs).tolist(),
                                                                      np.asarray(ys).tolist(), ps.places)]
            else:
                locs = [place_loc(p, self.proj) for p in ps.places]
            ix = self._index[name] = PlaceIndex(locs)
        return ix

    def place(self, name: str, i: int) -> Place:
        """The i-th place of set ``name`` as a bound value (made once)."""
        key = (name, i)
        p = self._places.get(key)
        if p is None:
            ps = self.sets[name]
            p = self._places[key] = Place(ps.place_id(i), dict(ps.values[i]), self.index(name).locs[i])
        return p

    def space(self, name: str, grow: float = 0.0) -> "SetSpace":
        return SetSpace(self.index(name).grown(grow))


class SetSpace(SpaceSet):
    """A place set as a space set: the union of its places (or its complement, ``neg``)."""

    def __init__(self, index: PlaceIndex, neg: bool = False):
        super().__init__(None, neg, None)
        self.index = index

    def region_geom(self):
        if self.geom is None:
            self.geom = self.index.union_geom()
        return self.geom

    def possibly(self, loc) -> bool:
        if self.neg:
            return not self.index.inside_union(loc)
        return self.index.meets_any(loc)

    def certainly(self, loc) -> bool:
        if self.neg:
            return loc.geom is not None and not self.index.meets_any(loc)
        return self.index.inside_union(loc)

    def complement(self) -> "SetSpace":
        return SetSpace(self.index, not self.neg)


def split_filters(pc, sets: PlaceSets, filters) -> tuple:
    """A node's patterns as ``(test, binder)``: ``test(lo, hi, loc)`` of the patterns that bind
    nothing (None if none); ``binder(lo, hi, loc)`` the list of place bindings (each a tuple
    ``((var, Place), ...)``, one per combination of matching places), None if nothing binds.

    Bindings stand beside an event, joined to the rest by ``and`` (the checker's rule), as
    ``at P -> S`` or ``certainly at P -> S``."""
    rest, binds = [], []
    for f in filters:
        for c in _conjuncts(f):
            b = _binding(c)
            if b is None:
                rest.append(c)
            else:
                binds.append(b)
    test = pc.filter(rest)
    if not binds:
        return test, None
    finders = [_finder(pc, sets, place, var, certainly, nearest) for var, place, certainly, nearest in binds]

    def binder(lo, hi, loc):
        found = [f(loc) for f in finders]
        if len(found) == 1:
            return [(x,) for x in found[0]]
        return list(itertools.product(*found))
    return test, binder


def _conjuncts(p):
    stack, out = [p], []
    while stack:
        x = stack.pop()
        if isinstance(x, A.Binary) and x.op == "and" and A.is_pattern(x):
            stack += [x.right, x.left]
        else:
            out.append(x)
    return out


def _binding(p):
    """``(var, place, certainly, nearest)`` for ``at [nearest] P -> S`` / ``certainly at
    [nearest] P -> S``, else None."""
    if isinstance(p, A.AtPlace) and p.var is not None:
        return p.var, p.place, False, p.nearest
    if isinstance(p, A.Certainly) and isinstance(p.pattern, A.AtPlace) and p.pattern.var is not None:
        return p.pattern.var, p.pattern.place, True, p.pattern.nearest
    for x in A.walk(p):
        if isinstance(x, A.AtPlace) and x.var is not None:
            from spatec.errors import PlanError

            raise PlanError("a place can be bound only beside an event (`E and at stops -> S`)")
    return None


def _finder(pc, sets: PlaceSets, place: str, var: str, certainly: bool, nearest: bool = False):
    """``loc → [(var, Place), ...]``: the places of ``place`` the stamp meets (or lies inside);
    ``nearest``: only the one of them nearest the stamp (SPEC §9)."""
    if place in sets:
        def in_set(loc):
            ix = sets.index(place)
            hits = ix.containing(loc) if certainly else ix.meeting(loc)
            if nearest:
                hits = ix.nearest(loc, hits)
            return [(var, sets.place(place, i)) for i in hits]
        return in_set
    region = pc.region(place)
    bound = Place(place, {"name": place}, region)
    test = S.certainly_in if certainly else S.possibly_in

    def one(loc):
        return [(var, bound)] if test(loc, region) else []
    return one

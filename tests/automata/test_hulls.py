"""A partial match's stamp made from its halves' hull support (spatec.automata.hulls) is the
hull of all its events' stamps, bit for bit: for chains and for any order of joining, over
stamps that repeat, lie on lines (a small grid), differ in radius, are polygons or UNIVERSE."""
from __future__ import annotations

import os
import random

import shapely
from hypothesis import given, settings
from hypothesis import strategies as st
from shapely import Polygon

from spatec.automata import hulls as H
from spatec.automata.machine import PM, Ev
from spatec.spatial import stamps as S

SETTINGS = settings(max_examples=int(os.environ.get("HULL_EXAMPLES", 150)), deadline=None)


@st.composite
def stamps(draw):
    """Stamps as events meet them: GPS discs of one radius (mostly), on a small grid (repeats,
    collinear points) or anywhere, sometimes another radius, a polygon or no place at all."""
    grid = draw(st.booleans())
    radii = draw(st.sampled_from([(15.0,), (15.0, 20.0), (0.0, 5.0, 15.0), (10.0, 10.0, 3.0)]))
    n = draw(st.integers(2, 40))
    out = []
    for _ in range(n):
        kind = draw(st.sampled_from(["disc"] * 12 + ["poly", "universe"]))
        if grid:
            x, y = draw(st.integers(0, 4)) * 10.0, draw(st.integers(0, 4)) * 10.0
        else:
            x, y = draw(st.floats(-50, 50)), draw(st.floats(-50, 50))
        r = draw(st.sampled_from(radii))
        if kind == "disc":
            out.append(S.Loc.disc(x, y, r))
        elif kind == "poly":
            out.append(S.Loc.of(Polygon([(x, y), (x + 20, y), (x + 20, y + 10), (x, y + 10)]), r))
        else:
            out.append(S.UNIVERSE)
    return out


def same(a, b) -> bool:
    if a.geom is None or b.geom is None:
        return a is b
    return a.r == b.r and shapely.to_wkb(a.geom) == shapely.to_wkb(b.geom)


def leaf(locs, slot: int) -> PM:
    ev = [None] * len(locs)
    ev[slot] = Ev("T", f"e{slot}", "s", 0, 0, 0, locs[slot], {})
    return PM(tuple(ev), 0, 0)


def joined(left: PM, right: PM, lsl=slice(None), rsl=slice(None)) -> PM:
    """What the automaton's spatial join does: compare the sides' stamps, make the match."""
    H.loc(left, lsl)
    H.loc(right, rsl)
    ev = tuple(a if a is not None else b for a, b in zip(left.ev, right.ev))
    c = PM(ev, 0, 0)
    H.join(c, left, right, lsl, rsl)
    return c


@SETTINGS
@given(stamps())
def test_a_chains_stamps_are_the_hulls_of_all_its_events(locs):
    """``A0 ;= A1 ;= ...`` left-deep: every level's stamp, from its halves', is the hull of
    its events in slot order."""
    pm = leaf(locs, 0)
    for k in range(1, len(locs)):
        pm = joined(pm, leaf(locs, k), slice(0, k), slice(k, k + 1))
        assert same(H.loc(pm), S.hull(locs[:k + 1])), k


@SETTINGS
@given(stamps(), st.randoms(use_true_random=False))
def test_stamps_joined_in_any_order_are_the_hulls_of_all(locs, rnd: random.Random):
    """Partial matches joined in any order (their slots interleaved, as an ``and`` over
    a tree makes them): the stamp is the hull of its events in slot order."""
    parts = [leaf(locs, i) for i in range(len(locs))]
    while len(parts) > 1:
        i, j = sorted(rnd.sample(range(len(parts)), 2))
        b, a = parts.pop(j), parts.pop(i)
        c = joined(a, b) if rnd.random() < 0.5 else joined(b, a)
        want = S.hull([e.loc for e in c.ev if e is not None])
        assert same(H.loc(c), want)
        parts.append(c)


def test_a_long_chain_of_one_place_keeps_one_stamp():
    """1,000 fixes at one place (the deep-chain tests' data): the support stays one stamp,
    so a level's stamp costs the same however deep."""
    locs = [S.Loc.disc(3.0, 4.0, 15.0)] * 1000
    pm = leaf(locs, 0)
    for k in range(1, len(locs)):
        pm = joined(pm, leaf(locs, k), slice(0, k), slice(k, k + 1))
    assert same(H.loc(pm), S.hull(locs)) and len(H.support(pm).pairs) == 1

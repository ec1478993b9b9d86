"""The fast paths against the general automaton (STYLE habit 7, DESIGN "Fast paths"):
random traces and random phrases of each shape; both must report the same
composites, stamps, hulls, bindings and emitted fields."""
from __future__ import annotations

import os

from fastpath_support import (
    SETTINGS,
    after_phrases,
    between_phrases,
    cells,
    chain_phrases,
    check_same,
    leaf_phrases,
    pair_phrases,
    traces,
)
from hypothesis import given, settings
from hypothesis import strategies as st

N = int(os.environ.get("FASTPATH_EXAMPLES", 50))
TYPES = st.sampled_from(["Bus", "Bus", "Tag", "Trip"])


def _draw(data, phrases):
    t = data.draw(TYPES)
    others = ("Bus", "Tag") if t != "Tag" else ("Tag", "Bus")
    rows = data.draw(traces(types=(t,) + (others[1:] if data.draw(st.booleans()) else ())))
    return data.draw(phrases(t)), rows


@settings(max_examples=N, **SETTINGS)
@given(st.data())
def test_leaf(data):
    text, rows = _draw(data, leaf_phrases)
    check_same(text, rows, "leaf")


@settings(max_examples=N // 2, **SETTINGS)
@given(st.data())
def test_leaf_polygon_stamps(data):
    """Events stamped with polygons (no source): the patterns fall back to the scalar tests."""
    rows = data.draw(cells()) + data.draw(traces(types=("Bus",), max_events=6))
    text = data.draw(leaf_phrases("Cell")).replace("A.line", "A.cell").replace("A.ts", "A.stop") \
        .replace("A.vehicle", "A.cell").replace("A.lat", "A.x")
    check_same(text, rows, "leaf")


@settings(max_examples=2 * N, **SETTINGS)
@given(st.data())
def test_chain(data):
    text, rows = _draw(data, chain_phrases)
    check_same(text, rows, "chain")


@settings(max_examples=N, **SETTINGS)
@given(st.data())
def test_after(data):
    text, rows = _draw(data, after_phrases)
    check_same(text, rows, "after")


@settings(max_examples=2 * N, **SETTINGS)
@given(st.data())
def test_between(data):
    text, rows = _draw(data, between_phrases)
    check_same(text, rows, "between")


@settings(max_examples=2 * N, **SETTINGS)
@given(st.data())
def test_pair(data):
    text, rows = _draw(data, pair_phrases)
    check_same(text, rows, "pair")

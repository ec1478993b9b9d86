"""Composite ids of many matches at once (spatec.vector.ids): the same ids as
composite_id, whatever the text of the bound events' ids."""
from __future__ import annotations

import doctest

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spatec.automata.machine import composite_id
from spatec.vector import fastpath as F
from spatec.vector import ids as I
from spatec.vector.vexpr import Columns, TextColumn

#: ids that JSON writes as they are, and ones it escapes: quotes, backslashes, control
#: characters, line separators, non-ASCII, empty, and %-formats (the list path's template)
_ID = st.text(st.characters(codec="utf-8"), max_size=8) | st.sampled_from(
    ["", '"', "\\", "\x00", "\x1f", "\x7f", "é\n", "%s", "%", "\u2028", "BusGPS:WP-101:2019-10-01T07:59:38Z"])
_VARS = st.lists(st.sampled_from(["A", "B", "C", "D", "X_1", "é", 'q"']), min_size=1, max_size=4, unique=True)


def test_doctests():
    assert doctest.testmod(I).failed == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(_ID, min_size=1, max_size=12), _VARS, st.sampled_from(["Stuck", 'Ph"ä\\', "", "%s"]),
       st.data(), st.sampled_from([1, 2, 65_536]))
def test_ids_of_arrow_text_are_composite_id(pool, vs, phrase, data, block):
    """Matches.ids over staged (Arrow) ids, in blocks of any size, equals composite_id of
    each match's pairs, and the ids of the same matches held as Python strings."""
    n = data.draw(st.integers(0, 9))
    rows = {v: np.array(data.draw(st.lists(st.integers(0, len(pool) - 1), min_size=n, max_size=n)), dtype=np.int64)
            for v in vs}
    want = [composite_id(phrase, [(v, pool[rows[v][j]]) for v in vs]) for j in range(n)]
    fp = F.FastPath("chain", phrase, "T", tuple(vs), None)
    old, I.BLOCK = I.BLOCK, block
    try:
        for ids in (TextColumn(pa.chunked_array([pool[:3], pool[3:]], pa.string())),
                    TextColumn(pa.array(pool, pa.string())),
                    np.array(pool, dtype=object)):
            m = F.Matches(fp, _columns(ids), rows, np.zeros(n, np.int64), np.zeros(n, np.int64))
            assert m.ids() == want
            events = m.event_ids(arrow=True)
            dicts = [{v: pool[rows[v][j]] for v in sorted(vs)} for j in range(n)]
            assert (events.to_pylist() if isinstance(events, pa.Array) else events) == dicts
            assert m.event_ids() == dicts
            if isinstance(events, pa.StructArray):
                assert [f.name for f in events.type] == sorted(vs)
    finally:
        I.BLOCK = old


@settings(max_examples=200, deadline=None)
@given(st.lists(_ID | st.none() | st.integers(0, 3), max_size=6))
def test_plain_ids_are_those_json_writes_as_they_are(ids):
    """plain_ids: every id is a str (not None, not a number) whose JSON text is itself in quotes."""
    import json

    want = all(type(x) is str and json.dumps(x, ensure_ascii=False) == f'"{x}"' for x in ids)
    assert I.plain_ids(ids) == want


def test_a_missing_event_id_bound_keeps_the_dicts():
    """A missing id (an Arrow null) among the bound ones is not Arrow text to join: the
    events stay dicts, as before; one that no match binds does not matter."""
    ids = TextColumn(pa.array(["a", None, "c"], pa.string()))
    fp = F.FastPath("chain", "P", "T", ("A",), None)
    m = F.Matches(fp, _columns(ids), {"A": np.array([0, 2])}, np.zeros(2, np.int64), np.zeros(2, np.int64))
    assert m.ids() == [composite_id("P", [("A", "a")]), composite_id("P", [("A", "c")])]
    assert m.event_ids(arrow=True).to_pylist() == [{"A": "a"}, {"A": "c"}]
    m = F.Matches(fp, _columns(ids), {"A": np.array([0, 1])}, np.zeros(2, np.int64), np.zeros(2, np.int64))
    assert m.event_ids(arrow=True) == [{"A": "a"}, {"A": None}]


def _columns(ids) -> Columns:
    n = len(ids)
    z = np.zeros(n)
    return Columns(ids=ids, src_code=np.zeros(n, np.int64), t=z.astype(np.int64), lo=z.astype(np.int64),
                   hi=z.astype(np.int64), r=z, locate=lambda rows: (z, z, np.ones(n, bool)),
                   attr_values=None, materialise=None, group=np.zeros(n, np.int64), part=np.zeros(n, np.int64))

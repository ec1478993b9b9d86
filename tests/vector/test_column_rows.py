"""Output rows held as columns (spatec.runtime.rows.ColumnRows): the same rows, frame,
windows and deduplication as the dicts the general path makes."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spatec.runtime.rows import ColumnRows, dedupe, rows_frame, rows_starting

PLAN = SimpleNamespace(schema=[("n", "number"), ("who", "text"), ("ok", "bool"), ("never", "number")], places=())
value = st.one_of(st.none(), st.integers(-5, 5), st.floats(allow_nan=False, width=32), st.text(max_size=3),
                  st.booleans())


@st.composite
def column_rows(draw):
    n = draw(st.integers(1, 40))
    lo = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))          # many ties on (lo, hi)
    hi = [a + draw(st.integers(0, 2)) for a in lo]
    ids = [f"P:{draw(st.sampled_from('abcé'))}{i % 7}" for i in range(n)]   # some repeated
    cols = {"phrase": ["P"] * n, "id": ids, "lo": np.array(lo, np.int64), "hi": np.array(hi, np.int64),
            "hull": [draw(st.one_of(st.none(), st.just("POINT (1 2)"))) for _ in range(n)],
            "events": [{"a": f"e{i}"} for i in range(n)]}
    for name in ("n", "who", "ok"):                                          # "never": no row has it
        kind = draw(st.sampled_from([value, st.integers(), st.text(max_size=2), st.booleans(), st.floats(),
                                     st.integers(-2 ** 63, 2 ** 63 - 1), st.sampled_from([2 ** 63 - 1, -2 ** 63])]))
        cols[name] = [draw(kind) for _ in range(n)]
    return ColumnRows(cols)


@given(column_rows())
@settings(max_examples=200, deadline=None)
def test_as_columns_or_as_dicts_the_same(rows):
    dicts = list(rows)
    assert [list(r) for r in dicts] == [list(rows.columns)] * len(rows)
    assert all(type(r["lo"]) is int for r in dicts)
    pd.testing.assert_frame_equal(rows_frame(PLAN, rows), rows_frame(PLAN, dicts), check_exact=True)
    once = dedupe(rows)
    assert list(once) == dedupe(dicts)
    pd.testing.assert_frame_equal(rows_frame(PLAN, once), rows_frame(PLAN, dedupe(dicts)), check_exact=True)
    assert list(rows_starting(rows, 1, 3)) == rows_starting(dicts, 1, 3)
    # the hulls as Arrow text (fast_rows' arrow_hulls, for the Spark tasks' JSON lines)
    arrow = ColumnRows({**rows.columns, "hull": pa.array(rows.columns["hull"], pa.string())})
    assert list(arrow) == dicts and list(dedupe(arrow)) == dedupe(dicts)
    assert list(rows_starting(arrow, 1, 3)) == rows_starting(dicts, 1, 3)
    frame = rows_frame(PLAN, dedupe(arrow))
    assert isinstance(frame["hull"].dtype, pd.ArrowDtype)
    pd.testing.assert_frame_equal(frame.assign(hull=frame["hull"].astype(object).where(frame["hull"].notna(), None)),
                                  rows_frame(PLAN, dedupe(dicts)), check_exact=True)


def test_unique_rows_are_not_copied():
    rows = ColumnRows({"phrase": ["P"], "id": ["P:1"], "lo": np.array([1]), "hi": np.array([2]), "hull": [None],
                       "events": [{}]})
    assert dedupe(rows) is rows
    assert len(rows_frame(PLAN, rows_starting(rows, 5, 6))) == 0


def test_ties_broken_by_id_as_pandas_sorts_them():
    ids = ["b\0", "b", "a\0\0", "a", "c", "é", "z"]        # trailing NULs: numpy text would drop them
    n = len(ids)
    for ids in (ids, ids[4:]):
        n = len(ids)
        rows = ColumnRows({"phrase": ["P"] * n, "id": ids, "lo": np.zeros(n, np.int64),
                           "hi": np.zeros(n, np.int64), "hull": [None] * n, "events": [{}] * n})
        pd.testing.assert_frame_equal(rows_frame(PLAN, rows), rows_frame(PLAN, list(rows)), check_exact=True)

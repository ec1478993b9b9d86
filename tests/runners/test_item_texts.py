"""An item's texts as the matcher's object columns: each distinct text one Python string
that its rows share (a bus's id is in each of its fixes), the values and nulls as Arrow's."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, strategies as st

from spatec.exec.match import one_object, text_objects

texts = st.lists(st.one_of(st.none(), st.sampled_from(["4", "19", "U", "é", "", "a\x00b"]), st.text(max_size=5)),
                 max_size=40)


@given(texts)
def test_texts_are_arrows_values_and_each_distinct_text_is_one_string(values):
    for col in (pa.array(values, pa.string()), pa.array(values, pa.large_string()),
                pa.array(values, pa.string()).dictionary_encode()):
        got = text_objects(col)
        assert got.dtype == object and got.tolist() == values
        first: dict = {}
        for v in got:
            if v is not None:
                assert first.setdefault(v, v) is v       # the same object for the same text


def test_other_values_are_as_arrow_gives_them():
    assert text_objects(pa.array([1, None, 3])).tolist()[0] == 1
    assert text_objects(pa.array([True, None])).tolist() == [True, None]
    assert text_objects(pa.array([], pa.string())).tolist() == []


def test_one_value_for_every_row_is_one_object():
    got = one_object(4, "BusGPS")
    assert got.dtype == object and got.tolist() == ["BusGPS"] * 4
    assert len({id(v) for v in got}) == 1

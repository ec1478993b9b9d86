"""Typing columns: the vectorised paths agree with the per-row definitions."""
from __future__ import annotations

import doctest
import importlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spatec.events.columns import convert

MODULES = ["events.raw", "events.timefmt", "events.columns", "events.canonical", "events.formats",
           "events.sirivm", "events.read", "sinks.files"]


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    assert doctest.testmod(importlib.import_module(f"spatec.{name}")).failed == 0


_number_text = st.one_of(
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", " ", " 7 ", "+3", "3.0", "1e3", ".5", "5.", "1_0", "0x10", "1,5", "nan", "-inf", "x"]),
)
_value = st.one_of(_number_text, st.integers(-10**6, 10**6), st.floats(-1e6, 1e6), st.booleans(), st.none())


def same(a, b) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    return a == b


@pytest.mark.parametrize("type_name", ["int", "float", "bool", "str", "time"])
@given(values=st.lists(_value, min_size=1, max_size=25))
@settings(max_examples=80, deadline=None)
def test_each_row_as_if_alone(type_name, values):
    """A row's value or reason never depends on the other rows of its column."""
    whole = convert(values, type_name)
    for i, v in enumerate(values):
        alone = convert([v], type_name)
        # a column of one kind reads 1 as 1; in a mixed column it is the text "1": same value
        assert whole.missing[i] == alone.missing[0], (v, whole.missing[i])
        if whole.missing[i]:
            continue
        assert (i in whole.errors) == (0 in alone.errors), (v, whole.errors.get(i), alone.errors)
        if i not in whole.errors:
            assert same(whole.values[i], alone.values[0]), (v, whole.values[i], alone.values[0])


def test_text_columns_fast_and_slow_paths_agree():
    clean = convert(pa.array(["1.5", "2", None]), "float")
    messy = convert(pa.array(["1.5", "2", None, " x "]), "float")
    assert clean.values[:2].tolist() == messy.values[:2].tolist() == [1.5, 2.0]
    assert clean.missing.tolist() == [False, False, True] and messy.errors == {3: 'cannot parse " x " as a float'}
    assert np.isnan(messy.values[2])


@pytest.mark.parametrize("distinct", [0, 1, 7, 300, 5000])
def test_str_objects_shared_or_not_the_same_text(distinct):
    # a repetitive column is made of its distinct values (shared), a varied one row by row
    from spatec.events.columns import str_objects

    rng = np.random.default_rng(distinct)
    pool = [f"v{i}" for i in range(distinct)] + [None]
    values = [pool[i] for i in rng.integers(0, len(pool), 5000)]
    got = str_objects(pa.array(values, pa.string()))
    assert got.dtype == object and got.tolist() == values
    assert str_objects(pa.array(values[:10], pa.string())).tolist() == values[:10]

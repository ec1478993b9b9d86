"""Events to keys: one routing and one hash for every runner."""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from spatec.automata.machine import Ev
from spatec.plan.physical import PhysicalPlan
from spatec.runtime.routing import bucket_of, key_buckets, route
from spatec.spatial import stamps as S

values = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.floats(allow_nan=False, width=32))


@given(st.lists(st.tuples(values, values), min_size=1, max_size=30), st.integers(1, 50))
def test_the_vectorised_hash_and_the_one_by_one_hash_agree(keys, n):
    frame = pd.DataFrame({"a": pd.Series([k[0] for k in keys], dtype=object),
                          "b": pd.Series([k[1] for k in keys], dtype=object)})
    got = key_buckets(frame, ("a", "b"), n)
    assert got.tolist() == bucket_of(keys, n)
    assert ((got >= 0) & (got < n)).all()


def test_a_missing_key_value_goes_to_no_group():
    frame = pd.DataFrame({"k": ["x", None, "y", np.nan]})
    got = key_buckets(frame, ("k",), 7)
    assert got[1] == -1 and got[3] == -1 and got[0] >= 0 and got[2] >= 0


def ev(i, vehicle, t="Bus"):
    return Ev(t, f"{t}:{i}", vehicle, i, i - 10, i, S.Loc.disc(0.0, 0.0, 1.0), {"vehicle": vehicle})


def test_route_keyed_broadcast_and_keyless():
    phys = PhysicalPlan("P", types=("Bus", "Rain"), key=("vehicle",), keyed=("Bus",), broadcast=("Rain",))
    a, b, c, r = ev(1, "V1"), ev(2, "V2"), ev(3, None), ev(4, None, "Rain")
    by_key, bcast = route(phys, {"Bus": [a, b, c], "Rain": [r]})
    assert by_key == {("V1",): [a], ("V2",): [b]} and bcast == [r]      # no key value: no key
    by_key, bcast = route(PhysicalPlan("Q", types=("Bus",), keyed=("Bus",)), {"Bus": [a, c]})
    assert by_key == {(): [a, c]} and bcast == []

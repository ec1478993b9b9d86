"""Hull columns: the WKB of a hull written from its numbers is, byte for byte, the WKB of
its 7-decimal text (polygon_wkts, then wkb_column), with the same GeoParquet facts."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.sinks import files as sinks
from spatec.spatial.hullcol import HULL, hull_array, hull_texts, hull_wkb, text_hulls
from spatec.spatial.wkb import geo_facts, wkb_column
from spatec.spatial.wkt import polygon_wkts, read_back


def old_and_new(xy, offsets):
    texts = polygon_wkts(xy, offsets, arrow=True)
    col = polygon_wkts(xy, offsets, arrow="wkb")
    assert col.type == HULL and len(col) == len(offsets) - 1
    return texts, col


def same(xy, offsets):
    texts, col = old_and_new(xy, offsets)
    want, got = wkb_column(texts), hull_wkb(col)
    assert got.wkb.type == pa.binary()
    assert got.wkb.equals(want.wkb), [(a, b) for a, b in zip(got.wkb.to_pylist(), want.wkb.to_pylist()) if a != b][:2]
    # facts as written into the metadata: json keeps a zero's sign
    assert (sorted(got.types), json.dumps(got.bbox)) == (sorted(want.types), json.dumps(want.bbox))
    geoms = shapely.from_wkt(np.asarray(texts.to_pylist(), dtype=object))
    types, bbox = geo_facts(geoms)
    assert got.types == types and got.bbox == bbox
    assert list(hull_texts(col)) == texts.to_pylist()
    return col


#: numbers of every kind polygon_wkts meets: lon/lat, halves of 1e-7 (ties: half to even on the
#: shortest decimal), negatives, zeros of both signs, below 1e-4 and 400 or more (GEOS writes them)
plain = st.floats(-180, 180, allow_nan=False)
tie = st.integers(-3_600_000_000, 3_600_000_000).map(lambda k: (2 * k + 1) / 2e7)
tiny = st.one_of(st.just(0.0), st.just(-0.0), st.floats(-1e-4, 1e-4), st.sampled_from([4e-8, -4e-8, 5e-8, -5e-8, 1e-4, -1e-4]))
large = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([399.99999995, 399.9999999, 400.0, -400.0, 1e17]))
number = st.one_of(plain, tie, tiny, large, st.floats(0.1, 0.2), st.floats(52.0, 52.3))


@st.composite
def rings(draw):
    n = draw(st.integers(0, 8))
    if n == 0:
        return np.zeros((0, 2))
    pts = draw(st.lists(st.tuples(number, number), min_size=n, max_size=n))
    how = draw(st.sampled_from(["ring", "ring", "degenerate", "short"]))
    if how == "degenerate":                 # one point repeated: a polygon of no area
        pts = pts[:1] * max(len(pts), 3)
    if how == "short":                      # fewer than four points once closed: GEOS refuses it
        pts = pts[:2]
    return np.array(pts + pts[:1], dtype=float)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rings(), min_size=0, max_size=10))
def test_wkb_from_numbers_is_wkb_of_text(polys):
    offsets = np.r_[0, np.cumsum([len(p) for p in polys])].astype(np.int64)
    xy = np.vstack(polys) if polys else np.zeros((0, 2))
    try:
        wkb_column(polygon_wkts(xy, offsets, arrow=True))
    except (shapely.errors.GEOSException, ValueError) as e:     # (a ring GEOS refuses: refused as before)
        with pytest.raises(type(e)) as got:
            hull_wkb(polygon_wkts(xy, offsets, arrow="wkb"))
        assert str(got.value) == str(e)
        return
    same(xy, offsets)


def test_ties_negatives_and_zeros_read_back_as_their_text():
    v = np.array([0.12345665, -0.12345665, 0.12345675, 2.5e-7 + 0.1, -0.0, 0.0, 52.0, -1.00000005, 399.99999995])
    got = read_back(v)
    text = polygon_wkts(np.column_stack([v, v])[[*range(len(v)), 0]], np.array([0, len(v) + 1]))[0]
    assert text.startswith("POLYGON ((0.1234566 0.1234566, -0.1234566 -0.1234566, 0.1234568 0.1234568, ")
    want = np.array([float(t) for t in text[10:-2].replace(",", "").split()[::2]][:len(v)])
    assert got.tobytes() == want.tobytes()           # bit for bit: zeros unsigned, as "0" reads
    assert np.signbit(got[4]) == False  # noqa: E712


def test_cambridge_hulls_are_written_without_text():
    """Grown discs at Cambridge (the runners' hulls): every row WKB, no text made."""
    rng = np.random.default_rng(7)
    centres = rng.uniform([0.0, 52.1], [0.3, 52.3], size=(500, 2))
    polys = shapely.buffer(shapely.points(centres), rng.uniform(1e-5, 1e-3, 500), quad_segs=8)
    xy, offsets = shapely.get_coordinates(polys), np.r_[0, np.cumsum(shapely.get_num_coordinates(polys))]
    col = same(xy, offsets)
    assert col.field("text").null_count == len(col) and col.field("wkb").null_count == 0
    # with a polygon GEOS writes (a number below 1e-4): that row as text, the rest WKB
    xy2 = np.vstack([xy, [[5e-5, 52.0], [0.1, 52.0], [0.1, 52.1], [5e-5, 52.0]]])
    col = same(xy2, np.r_[offsets, offsets[-1] + 4])
    assert col.field("text").null_count == len(col) - 1 and col.field("wkb").null_count == 1


def test_a_taken_hull_column_in_a_frame_writes_the_same_parquet(tmp_path):
    """As the Spark tasks' parts: the column taken (sorted, deduplicated) in a pandas frame,
    then parquet_table: the same table and file as from the texts."""
    rng = np.random.default_rng(3)
    centres = rng.uniform([-0.2, 52.1], [0.3, 52.3], size=(200, 2))
    polys = shapely.buffer(shapely.points(centres), rng.uniform(1e-5, 1e-3, 200), quad_segs=4)
    xy, offsets = shapely.get_coordinates(polys), np.r_[0, np.cumsum(shapely.get_num_coordinates(polys))]
    texts, col = old_and_new(xy, offsets)
    texts = pa.concat_arrays([texts, pa.array(["POINT (0.1 52.2)", "LINESTRING (0.1 52.2, 0.2 52.3)"])])
    col = pa.concat_arrays([col, text_hulls(pa.array(["POINT (0.1 52.2)", "LINESTRING (0.1 52.2, 0.2 52.3)"]))])
    order = rng.permutation(len(texts))[:150]
    n = len(order)

    def frame(hull):
        return pd.DataFrame({"phrase": ["P"] * n, "id": [f"{i:032x}" for i in range(n)],
                             "lo": np.arange(n, dtype=np.int64), "hi": np.arange(n, dtype=np.int64) + 5,
                             "hull": pd.arrays.ArrowExtensionArray(hull.take(pa.array(order))),
                             "events": [{"A": str(i)} for i in range(n)]})

    new = frame(col)
    assert hull_array(new["hull"]) is not None and hull_array(frame(texts)["hull"]) is None
    want, got = sinks.parquet_table(frame(texts)), sinks.parquet_table(new)
    assert got.schema.equals(want.schema, check_metadata=True) and got.equals(want)
    assert set(json.loads(got.schema.metadata[b"geo"])["columns"]["hull"]["geometry_types"]) == \
        {"Point", "LineString", "Polygon"}
    pq.write_table(want, tmp_path / "want.parquet")
    pq.write_table(got, tmp_path / "got.parquet")
    assert (tmp_path / "got.parquet").read_bytes() == (tmp_path / "want.parquet").read_bytes()

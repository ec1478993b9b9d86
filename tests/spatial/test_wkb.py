"""wkb_column: shapely's WKB of WKT text, byte for byte, and the column's GeoParquet facts."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.spatial import wkb as W
from spatec.spatial.wkb import geo_facts, wkb_column


def reference(texts):
    """The definition: GEOS reads the text, shapely writes its WKB."""
    geoms = shapely.from_wkt(np.asarray(texts, dtype=object)) if len(texts) else np.array([], dtype=object)
    return pa.array(list(shapely.to_wkb(geoms)) if len(geoms) else [], pa.binary()), geo_facts(geoms)


def check(texts):
    want, (types, bbox) = reference(texts)
    for given_ in (np.asarray(texts, dtype=object), pa.array(texts, pa.string())):
        got = wkb_column(given_)
        assert got.wkb.type == pa.binary()
        assert got.wkb.equals(want), [(a, b) for a, b in zip(got.wkb.to_pylist(), want.to_pylist()) if a != b][:2]
        assert (got.types, got.bbox) == (types, bbox)
        assert [type(v) for v in got.bbox or []] == [float] * len(bbox or [])


#: away from zero: a bounding box with a zero is taken the slow way (its sign), see wkb_column
coord = st.one_of(st.floats(min_value=-180, max_value=-1e-6), st.floats(min_value=1e-6, max_value=180))


def shape(draw_kind, xy):
    if draw_kind == "point":
        return shapely.Point(xy[0])
    if draw_kind == "line":
        return shapely.LineString(xy[:max(2, len(xy))])
    return shapely.Polygon(xy)                                  # closed by shapely; may be degenerate


@st.composite
def hull_texts(draw):
    kind = draw(st.sampled_from(["point", "line", "polygon"]))
    n = draw(st.integers(1 if kind == "point" else 2 if kind == "line" else 3, 8))
    xy = draw(st.lists(st.tuples(coord, coord), min_size=n, max_size=n))
    if draw(st.booleans()):                                   # repeated points: degenerate hulls
        xy = xy[:1] * len(xy)
    g = shape(kind, xy)
    precision = draw(st.sampled_from([7, -1, 3]))
    return shapely.to_wkt(g, rounding_precision=precision, trim=True)


odd = st.sampled_from([
    None, "POINT EMPTY", "LINESTRING EMPTY", "POLYGON EMPTY", "POINT Z (1 2 3)",
    "POLYGON ((0 0, 4 0, 4 4, 0 0), (1 1, 2 1, 2 2, 1 1))", "MULTIPOINT ((1 2), (3 4))",
    "GEOMETRYCOLLECTION (POINT (1 2))", "POINT (1e-5 -2.5E3)", "POINT (0.1234567890123456789 -7.000000000000001)",
    "LINESTRING (1 1, 1 1)", "POLYGON ((1 1, 1 1, 1 1, 1 1))", "POINT (.5 5.)", "POINT (-0 0)",
])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(hull_texts(), odd), max_size=12))
def test_wkb_of_random_hulls_is_shapely_s(texts):
    check(texts)


def test_grown_discs_as_spatec_writes_them():
    """Polygons of many vertices, 7 decimals (the runners' hulls), far from zero: the fast path."""
    rng = np.random.default_rng(7)
    centres = rng.uniform([-1, 51.5], [1, 53], size=(300, 2))
    polys = shapely.buffer(shapely.points(centres), rng.uniform(1e-5, 1e-3, 300), quad_segs=8)
    texts = shapely.to_wkt(polys, rounding_precision=7, trim=True).tolist()
    texts += ["POINT (0.1466929 52.1753933)", "LINESTRING (0.1 52.1, 0.2 52.3)"]
    check(texts)
    assert wkb_column(np.asarray(texts, dtype=object)).types == {"Point", "LineString", "Polygon"}


def test_empty_and_all_missing_columns():
    check([])
    check([None, None])
    check(["POLYGON EMPTY"])


def test_text_shapely_refuses_fails_as_before():
    for bad in (["POLYGON ((1 1, 2 1, 2 2, 1 2))"], ["POINT (1 2"], ["LINESTRING (1 1)"],
                ["POINT (3 4)", "POLYGON ((1 1, 2 1, 2 2, 1 2))"]):
        with pytest.raises(shapely.errors.GEOSException) as want:
            shapely.from_wkt(np.asarray(bad, dtype=object))
        with pytest.raises(shapely.errors.GEOSException) as got:
            wkb_column(np.asarray(bad, dtype=object))
        assert str(got.value) == str(want.value)


def test_fast_rows_do_not_go_through_geos(monkeypatch):
    """The runners' hulls are written without a geometry per row (the point of the module)."""
    texts = np.asarray(["POLYGON ((1 1, 2 1, 2 2, 1 1))", "POINT (3 4)", "LINESTRING (1 2, 3 4)"], dtype=object)
    monkeypatch.setattr(W.shapely, "from_wkt", lambda *a, **k: pytest.fail("parsed with GEOS"))
    got = wkb_column(texts)
    monkeypatch.undo()
    assert got.wkb.equals(reference(texts)[0])

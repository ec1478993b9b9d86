"""parquet_table builds the hull (WKB) and map columns from the frame's columns at once:
the same table, metadata included, as the row-by-row construction it replaced (GEOS
reads every hull's text, shapely writes its WKB, a dict per row for each map)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.events.raw import to_arrow
from spatec.sinks import files as sinks

T = 1569916778_000000


def stamps(values) -> pa.Array:
    return pa.array(pd.array(values, dtype="Int64"), pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def slow_table(df: pd.DataFrame, time_fields=()) -> pa.Table:
    """The definition (main 8fd7daa's parquet_table)."""
    geoms = shapely.from_wkt(df["hull"].to_numpy(dtype=object)) if len(df) else np.array([], dtype=object)
    maps = pa.map_(pa.string(), pa.string())
    arrays = {
        "phrase": pa.array(df["phrase"].tolist(), pa.string()),
        "id": pa.array(df["id"].tolist(), pa.string()),
        "lo": stamps(df["lo"]),
        "hi": stamps(df["hi"]),
        "hull": pa.array(list(shapely.to_wkb(geoms)) if len(df) else [], pa.binary()),
        "events": pa.array([list(sinks.events_dict(v).items()) for v in df["events"]], maps),
    }
    for c in [c for c in df.columns if c not in sinks.FIXED]:
        if c in sinks.MAPS:
            arrays[c] = pa.array([list(sinks.events_dict(v).items()) for v in df[c]], maps)
        elif c in time_fields:
            arrays[c] = stamps(df[c])
        else:
            arrays[c] = to_arrow(df[c]) if len(df) else pa.array([], pa.null())
    present = geoms[~shapely.is_missing(geoms)]
    types = sorted({g.geom_type + (" Z" if shapely.has_z(g) else "") for g in present if not g.is_empty})
    column = {"encoding": "WKB", "geometry_types": types}
    nonempty = present[~shapely.is_empty(present)] if len(present) else present
    if len(nonempty):
        b = shapely.bounds(nonempty)
        column["bbox"] = [float(b[:, 0].min()), float(b[:, 1].min()), float(b[:, 2].max()), float(b[:, 3].max())]
    geo = {"version": "1.0.0", "primary_column": "hull", "columns": {"hull": column}}
    return pa.table(arrays).replace_schema_metadata({b"geo": json.dumps(geo).encode()})


def same(df, time_fields=(), tmp_path=None):
    want, got = slow_table(df, time_fields), sinks.parquet_table(df, time_fields)
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.equals(want), [c for c in want.column_names if not got.column(c).equals(want.column(c))]
    if tmp_path is not None:                        # and the files written are the same bytes
        pq.write_table(want, tmp_path / "want.parquet")
        pq.write_table(got, tmp_path / "got.parquet")
        assert (tmp_path / "got.parquet").read_bytes() == (tmp_path / "want.parquet").read_bytes()


lon = st.one_of(st.floats(-1.0, -1e-6), st.floats(1e-6, 1.0))
lat = st.floats(51.5, 53.0)


@st.composite
def hulls(draw):
    kind = draw(st.sampled_from(["Point", "LineString", "Polygon", "disc", "odd"]))
    xy = draw(st.lists(st.tuples(lon, lat), min_size=3, max_size=6))
    if kind == "Point":
        g = shapely.Point(xy[0])
    elif kind == "LineString":
        g = shapely.LineString(xy[:2] if draw(st.booleans()) else [xy[0], xy[0]])   # incl. degenerate
    elif kind == "Polygon":
        g = shapely.Polygon(xy if draw(st.booleans()) else [xy[0]] * 4)            # incl. degenerate
    elif kind == "disc":
        return shapely.to_wkt(shapely.Point(xy[0]).buffer(draw(st.floats(1e-5, 1e-3)), quad_segs=4),
                              rounding_precision=7, trim=True)
    else:
        return draw(st.sampled_from([None, "POLYGON EMPTY", "POINT EMPTY", "POINT Z (0.1 52.1 3)",
                                     "MULTIPOINT ((0.1 52.1), (0.2 52.2))"]))
    return shapely.to_wkt(g, rounding_precision=draw(st.sampled_from([7, -1])), trim=True)


ident = st.text(alphabet="AB:xyé\"\\ 0", max_size=6)
events = st.one_of(
    st.fixed_dictionaries({"A": ident, "B": ident}),            # the usual: the same variables
    st.dictionaries(st.sampled_from(["B", "A", "C"]), ident),   # differing (and empty) ones
    st.none(), st.just(float("nan")),                           # missing
    st.fixed_dictionaries({"A": st.integers(0, 9)}),            # not text: written as text
)


@st.composite
def frames(draw):
    n = draw(st.integers(0, 8))
    uniform = draw(st.booleans())
    evs = [draw(events) for _ in range(n)]
    if uniform:
        evs = [{"A": f"BusGPS:{i}:1", "B": f"BusGPS:{i}:2"} for i in range(n)]
    df = pd.DataFrame({
        "phrase": ["P"] * n, "id": [f"{i:032x}" for i in range(n)],
        "lo": np.full(n, T, dtype=np.int64) + np.arange(n), "hi": np.full(n, T + 10, dtype=np.int64) + np.arange(n),
        "hull": pd.Series([draw(hulls()) for _ in range(n)], dtype=object),
        "events": pd.Series(evs, dtype=object),
        "places": pd.Series([draw(st.one_of(st.none(), st.fixed_dictionaries({"S": ident}))) for _ in range(n)],
                            dtype=object),
        "vehicle": [draw(ident) for _ in range(n)],
        "started": np.full(n, T, dtype=np.int64),
    })
    if draw(st.booleans()) and df["hull"].notna().all():    # Arrow text, as the Spark tasks' hulls are
        # (no missing one: the row-by-row construction fails on pd.NA there)
        df["hull"] = pd.Series(pd.arrays.ArrowExtensionArray(pa.array(df["hull"].tolist(), pa.string())))
    return df


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_parquet_table_is_the_row_by_row_construction(df):
    same(df, {"started"})


def test_a_part_of_the_runners_hulls_writes_the_same_file(tmp_path):
    """Grown discs in 7 decimals and the usual events (the fast path for both columns)."""
    rng = np.random.default_rng(3)
    n = 500
    polys = shapely.buffer(shapely.points(rng.uniform([-0.8, 52.0], [0.6, 52.8], (n, 2))), 2e-4, quad_segs=8)
    df = pd.DataFrame({
        "phrase": "Stuck", "id": [f"{i:032x}" for i in range(n)],
        "lo": T + np.arange(n, dtype=np.int64), "hi": T + 60 + np.arange(n, dtype=np.int64),
        "hull": shapely.to_wkt(polys, rounding_precision=7, trim=True),
        "events": [{k: f"BusGPS:V{i}:{k}" for k in "ABCD"} for i in range(n)],
        "vehicle": [f"V{i % 7}" for i in range(n)],
    })
    same(df, (), tmp_path)
    same(df.iloc[:0].reset_index(drop=True), (), tmp_path)

"""The spatial-join engines: one SQL text, identical answers everywhere."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import shapely
from shapely import LineString, MultiPoint, MultiPolygon, Point, Polygon, box

from spatec.errors import SpatecError, UnsupportedError
from spatec.spatial.engines import (
    ENGINES,
    OUTPUT_SCHEMA,
    SQL_FUNCTIONS,
    EngineError,
    SedonaSparkEngine,
    _spark_views,
    engine,
    events_table,
    region_table,
    render_sql,
)
from spatec.spatial.stamps import Loc, certainly_in, possibly_in

LOCAL = ["shapely", "sedonadb"]

DONUT = Polygon([(200, 200), (900, 300), (700, 900), (250, 700)], [[(400, 400), (500, 400), (500, 500), (400, 500)]])
REGIONS = [
    ("stop", Loc.disc(1000.0, 1000.0, 300.0)),                         # circle(lon, lat, 300 m)
    ("near_stop", Loc.disc(1500.0, 400.0, 0.0 + 250.0)),               # within 250 m of a point place
    ("pin", Loc.disc(100.0, 1500.0, 0.0)),                             # a point place, r = 0
    ("donut", Loc.of(DONUT)),                                          # polygon with a hole
    ("near_works", Loc.of(box(1200, 1200, 1600, 1500), 100.0)),        # within 100 m of a polygon
    ("road", Loc.of(LineString([(0, 1900), (2000, 1800)]))),           # a line, r = 0
    ("corridor", Loc.of(LineString([(0, 100), (1000, 180), (2000, 60)]), 50.0)),
    ("stops", Loc.of(MultiPoint([(1800, 1000), (1900, 1300)]), 120.0)),
    ("blocks", Loc.of(MultiPolygon([box(0, 1000, 300, 1200), box(1700, 1600, 1950, 1950)]))),
]


def random_events(seed: int, n_disc: int = 700, n_geom: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = n_disc + n_geom
    x, y = rng.uniform(-100, 2100, n), rng.uniform(-100, 2100, n)
    r = rng.choice([0.0, 15.0, 40.0, 120.0], n)
    wkb = [None] * n
    for i in range(n_disc, n):
        kind = i % 4
        if kind == 0:
            g = box(x[i], y[i], x[i] + rng.uniform(1, 150), y[i] + rng.uniform(1, 150))
        elif kind == 1:
            g = shapely.convex_hull(MultiPoint(rng.uniform(-60, 60, (6, 2)) + [x[i], y[i]]))
        elif kind == 2:
            g = LineString([(x[i], y[i]), (x[i] + rng.uniform(-200, 200), y[i] + rng.uniform(-200, 200))])
        else:
            g = Point(x[i], y[i])  # a point geometry counts as a disc
        wkb[i] = shapely.to_wkb(g)
        x[i] = y[i] = np.nan
    x[:5] = np.nan  # unknown places
    wkb[5] = shapely.to_wkb(Polygon())  # an empty geometry: unknown too
    return pd.DataFrame({"ev": np.arange(n, dtype=np.int64) * 3 + 7, "x": x, "y": y, "r": r, "wkb": wkb})


def scalar_join(events: pd.DataFrame, regions) -> pd.DataFrame:
    """The brute-force meaning: every event against every region, one by one."""
    rows = []
    for e in events.itertuples():
        loc = Loc.of(shapely.from_wkb(e.wkb), e.r) if e.wkb is not None else Loc.disc(e.x, e.y, e.r)
        for name, region in regions:
            if possibly_in(loc, region):
                rows.append((e.ev, name, True, certainly_in(loc, region)))
    out = pd.DataFrame(rows, columns=OUTPUT_SCHEMA.names)
    return out.sort_values(["ev", "region"], ignore_index=True)


@pytest.fixture(scope="module")
def events():
    return random_events(11)


@pytest.fixture(scope="module")
def expected(events):
    return scalar_join(events, REGIONS)


class TestParity:
    @pytest.mark.parametrize("name", LOCAL)
    def test_random_events_match_the_scalar_meaning(self, name, events, expected):
        got = engine(name).join(events, REGIONS)
        pd.testing.assert_frame_equal(got, expected, check_dtype=False)
        # the sample exercises every kind of answer
        assert got.certainly.any() and not got.certainly.all()
        assert {n for n, _ in REGIONS} - {"pin"} <= set(got.region)

    def test_engines_identical(self, events):
        a = engine("shapely").join_arrow(events, REGIONS)
        b = engine("sedonadb").join_arrow(events, REGIONS)
        assert a.schema == b.schema == OUTPUT_SCHEMA
        assert a.equals(b)

    def test_more_seeds(self):
        for seed in (1, 2):
            ev = random_events(seed, 300, 100)
            a = engine("shapely").join_arrow(ev, REGIONS[::-1])
            b = engine("sedonadb").join_arrow(ev, REGIONS[::-1])
            assert a.equals(b)

    @pytest.mark.parametrize("name", LOCAL)
    def test_touching_cases_are_exact(self, name):
        ev = pd.DataFrame({
            "ev": [1, 2, 3, 4, 5, 6],
            # touches stop from outside (1000 + 300 + 15) / inside tangent (1000 + 285)
            "x": [1315.0, 1285.0, 1000.0 + 180.0, 1286.0, 1500.0 + 150, 100.0],
            "y": [1000.0, 1000.0, 1000.0 + 240.0, 1000.0, 400.0 + 200, 1500.0],
            "r": [15.0, 15.0, 0.0, 15.0, 0.0, 0.0],
        })
        got = engine(name).join(ev, REGIONS[:3]).set_index(["ev", "region"])
        assert got.loc[(1, "stop")].tolist() == [True, False]
        assert got.loc[(2, "stop")].tolist() == [True, True]
        assert got.loc[(3, "stop")].tolist() == [True, True]    # 180-240-300: on the circle
        assert got.loc[(4, "stop")].tolist() == [True, False]
        assert got.loc[(5, "near_stop")].tolist() == [True, True]  # 150-200-250
        assert got.loc[(6, "pin")].tolist() == [True, True]     # a point on a point place


@pytest.mark.parametrize("name", LOCAL)
class TestInputs:
    def test_unknown_places_are_possibly_everywhere(self, name):
        ev = pd.DataFrame({"ev": [1, 2], "x": [np.nan, 5.0], "y": [1.0, None], "r": [15.0, 15.0]})
        got = engine(name).join(ev, REGIONS)
        assert len(got) == 2 * len(REGIONS)
        assert got.possibly.all() and not got.certainly.any()

    def test_empty_events(self, name):
        ev = pd.DataFrame({"ev": pd.Series([], dtype="int64"), "x": [], "y": [], "r": []})
        got = engine(name).join(ev, REGIONS)
        assert got.empty and list(got.columns) == OUTPUT_SCHEMA.names

    def test_no_regions(self, name, events):
        assert engine(name).join(events, []).empty

    def test_only_wkb_column(self, name):
        ev = pd.DataFrame({"ev": [1], "r": [0.0], "wkb": [shapely.to_wkb(box(950, 950, 1050, 1050))]})
        got = engine(name).join(ev, REGIONS[:1])
        assert got.to_dict("records") == [{"ev": 1, "region": "stop", "possibly": True, "certainly": True}]

    def test_arrow_batch_input(self, name, events, expected):
        batch = pa.RecordBatch.from_pandas(events, preserve_index=False)
        got = engine(name).join_arrow(batch, REGIONS)
        assert got.to_pandas().equals(expected.astype({"ev": "int64"}))

    def test_repeated_calls_reuse_regions(self, name, events):
        e = engine(name)
        first = e.join_arrow(events.iloc[:300], REGIONS)
        for _ in range(3):
            assert e.join_arrow(events.iloc[:300], REGIONS).equals(first)

    @pytest.mark.parametrize("bad", [
        pd.DataFrame({"ev": [1], "x": [0.0], "y": [0.0], "r": [-1.0]}),
        pd.DataFrame({"ev": [1], "x": [0.0], "y": [0.0], "r": [np.nan]}),
        pd.DataFrame({"ev": [1], "x": [0.0], "y": [0.0]}),
        pd.DataFrame({"ev": [1], "x": [0.0], "r": [1.0]}),
        "not a table",
    ])
    def test_bad_events(self, name, bad):
        with pytest.raises(EngineError):
            engine(name).join(bad, REGIONS)

    def test_bad_regions(self, name, events):
        with pytest.raises(EngineError, match="twice"):
            engine(name).join(events, [REGIONS[0], REGIONS[0]])
        with pytest.raises(EngineError, match="must be a Loc"):
            engine(name).join(events, [("u", Loc.of(None))])


class TestFactory:
    def test_names(self):
        assert ENGINES == ("shapely", "sedonadb", "sedona-spark")
        for name in ENGINES:
            assert engine(name).name == name

    def test_unknown_name_lists_the_valid_ones(self):
        with pytest.raises(EngineError, match="valid engines: shapely, sedonadb, sedona-spark") as info:
            engine("duckdb")
        assert isinstance(info.value, SpatecError)

    def test_local_engines_available(self):
        assert engine("shapely").available() and engine("sedonadb").available()

    def test_region_table(self):
        t = region_table(REGIONS)
        assert t.num_rows == len(REGIONS)
        rows = {r["name"]: r for r in t.to_pylist()}
        assert rows["stop"]["circle"] and rows["stop"]["cont_wkb"] is None
        assert rows["donut"]["areal"] and not rows["road"]["areal"] and rows["corridor"]["areal"]
        assert rows["near_works"]["bx0"] == 1200 - 100 - 1.0

    def test_events_table_fills_missing_columns(self):
        t = events_table(pa.table({"ev": [1], "x": [1.0], "y": [2.0], "r": [3]}))
        assert t.column("wkb").null_count == 1 and t.schema.field("r").type == pa.float64()

    def test_sql_uses_sedona_functions(self):
        assert {"ST_Distance", "ST_CoveredBy", "ST_MaxDistance", "ST_GeomFromWKB"} <= set(SQL_FUNCTIONS)


# --- Sedona on Spark ----------------------------------------------------------
# The suite's SparkSession (tests/conftest.py) has Sedona's jar on spark.jars when
# scripts/setup.sh could fetch it; where it could not, these tests skip saying why.


@pytest.fixture(scope="module")
def sedona_spark(spark):
    from spatec.runners.spark.session import sedona_missing

    reason = sedona_missing()
    if reason is not None:
        pytest.skip(reason)
    assert SedonaSparkEngine.available(spark), "Sedona's jar is on spark.jars but its functions do not register"
    return spark


def executed_plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_sedona_spark_absent_is_explained(spark, monkeypatch):
    e = engine("sedona-spark")
    assert not e.available(None)
    events = spark.createDataFrame(pd.DataFrame({"ev": [1], "x": [0.0], "y": [0.0], "r": [15.0]}))
    monkeypatch.setattr(SedonaSparkEngine, "available", staticmethod(lambda spark: False))
    with pytest.raises(UnsupportedError, match="sedona-spark") as info:
        e.join(events, REGIONS)
    assert "ST_DWithin" not in str(info.value) and "ST_CoveredBy" in str(info.value)
    assert "scripts/setup.sh" in str(info.value)
    with pytest.raises(EngineError):
        e.join(pd.DataFrame({"ev": [1]}), REGIONS)
    views = _spark_views(events, REGIONS)
    assert spark.table(views[1]).columns == region_table(REGIONS).column_names
    assert spark.table(views[0]).columns == ["ev", "x", "y", "r", "wkb"]


def test_sedona_spark_matches_shapely(sedona_spark, events, expected):
    sdf = sedona_spark.createDataFrame(events)
    joined = engine("sedona-spark").join(sdf, REGIONS)
    got = joined.toPandas().sort_values(["ev", "region"], ignore_index=True)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    assert "BroadcastIndexJoin" in executed_plan(joined)


def test_sedona_spark_thousands_of_stops(sedona_spark):
    """A set of many places (every Cambridge stop as a 40 m disc): one R-tree over them."""
    from pathlib import Path

    from spatec.spatial.crs import Projector

    stops = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "cambridge" / "stops.csv"
    if not stops.exists():
        pytest.skip(f"the Cambridge stops are not at {stops}")
    df = pd.read_csv(stops)
    proj = Projector("EPSG:32631")
    sx, sy = proj.forward(df["lon"].to_numpy(float), df["lat"].to_numpy(float))
    regions = [(f"s{i}", Loc.disc(float(x), float(y), 40.0)) for i, (x, y) in enumerate(zip(sx, sy))]
    assert len(regions) > 1000
    rng = np.random.default_rng(3)
    n = 3000
    ex = rng.uniform(sx.min() - 200, sx.max() + 200, n)
    ey = rng.uniform(sy.min() - 200, sy.max() + 200, n)
    near = rng.integers(0, len(sx), n // 2)           # half of them close to a stop
    ex[: n // 2] = sx[near] + rng.uniform(-60, 60, n // 2)
    ey[: n // 2] = sy[near] + rng.uniform(-60, 60, n // 2)
    events = pd.DataFrame({"ev": np.arange(n, dtype=np.int64), "x": ex, "y": ey, "r": 15.0})
    want = engine("shapely").join(events, regions)
    assert len(want) > 500
    joined = engine("sedona-spark").join(sedona_spark.createDataFrame(events), regions)
    got = joined.toPandas().sort_values(["ev", "region"], ignore_index=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert "BroadcastIndexJoin" in executed_plan(joined)

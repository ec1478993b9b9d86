"""Synthetic traces: replicate() and synthetic_trace()."""
import numpy as np
import pandas as pd
import pytest

from spatec.datasets import synth
from spatec.datasets.synth import COLUMNS, replicate, synthetic_trace

HOUR = 3600


def parsed(recorded_at) -> np.ndarray:
    """ISO times with offsets back to epoch seconds."""
    return pd.to_datetime(pd.Series(recorded_at), utc=True, format="ISO8601").astype("int64").to_numpy() // 10**9


def small_trace():
    return pd.DataFrame({
        "vehicle": ["a", "b", "a", "b", "a"],
        "recorded_at": ["x"] * 5,
        "ts": np.array([1569916800, 1569916810, 1569916820, 1569918000, 1569920500], dtype=np.int64),
        "lon": [0.1, 0.2, 0.1, 0.2, 0.1],
        "lat": [52.2] * 5,
        "received": [1569916801.5, 1569916811.5, 1569916821.5, 1569918001.5, 1569920501.5],
    })


# --------------------------------------------------------------------------- replicate

def test_replicate_one_copy_is_the_trace_with_recorded_at_recomputed():
    df = synthetic_trace(3, 600, seed=2)
    pd.testing.assert_frame_equal(replicate(df, 1), df)


def test_replicate_shifts_ts_received_and_recorded_at_together():
    df = small_trace()
    out = replicate(df, 3, shift_s=HOUR, clip=False)
    assert len(out) == 15
    assert out["ts"].dtype == np.int64
    np.testing.assert_array_equal(out["ts"].to_numpy(), np.concatenate([df.ts + k * HOUR for k in range(3)]))
    np.testing.assert_allclose(out["received"] - out["ts"], 1.5)
    np.testing.assert_array_equal(parsed(out["recorded_at"]), out["ts"].to_numpy())
    assert out["recorded_at"].iloc[0] == "2019-10-01T09:00:00+01:00"
    assert list(out["vehicle"][:5]) == list(df["vehicle"])


def test_replicate_clips_so_copies_do_not_overlap():
    df = small_trace()  # spans 3700 s: the last row is past one hour
    out = replicate(df, 2)
    assert len(out) == 8
    assert not out.duplicated(["vehicle", "ts"]).any()
    for v, g in out.groupby("vehicle"):
        assert g["ts"].is_monotonic_increasing, v


def test_replicate_with_suffix_widens_the_fleet():
    df = small_trace()
    out = replicate(df, 3, shift_s=0, id_suffix=True)
    assert len(out) == 15
    assert sorted(out["vehicle"].unique()) == ["a", "a~1", "a~2", "b", "b~1", "b~2"]
    np.testing.assert_array_equal(out["ts"].to_numpy(), np.tile(df["ts"].to_numpy(), 3))


def test_replicate_keeps_recorded_at_right_across_the_dst_change():
    # 2019-10-27 01:00 UTC: British Summer Time ends.
    df = pd.DataFrame({"vehicle": ["a"], "recorded_at": [""], "ts": [1572134400]})  # 00:00 UTC
    out = replicate(df, 3, shift_s=HOUR)
    assert list(out["recorded_at"]) == ["2019-10-27T01:00:00+01:00", "2019-10-27T01:00:00+00:00",
                                        "2019-10-27T02:00:00+00:00"]
    np.testing.assert_array_equal(parsed(out["recorded_at"]), out["ts"].to_numpy())


def test_replicate_datetime_ts():
    df = pd.DataFrame({"vehicle": ["a"], "ts": pd.to_datetime(["2019-10-01T08:00:00Z"])})
    out = replicate(df, 2, shift_s=60)
    assert out["ts"].iloc[1] == pd.Timestamp("2019-10-01T08:01:00Z")


def test_replicate_rejects_bad_input():
    with pytest.raises(ValueError):
        replicate(small_trace(), 0)
    with pytest.raises(TypeError):
        replicate(pd.DataFrame({"ts": ["x"]}), 2)


def test_replicate_the_cambridge_hour_to_a_day():
    from spatec.datasets import registry as datasets
    from spatec.errors import DataError
    try:
        path = datasets.resolve("cambridge-sirivm-hour", download=False, check=False)
    except DataError:
        pytest.skip("Cambridge hour not available")
    df = pd.read_csv(path, usecols=["vehicle", "recorded_at", "ts", "lon", "lat", "received"])
    day = replicate(df, 24)
    per_copy = int((df["ts"] < df["ts"].min() + HOUR).sum())
    assert len(day) == 24 * per_copy
    assert day["ts"].max() - day["ts"].min() < 24 * HOUR
    assert not day.duplicated(["vehicle", "ts"]).any()
    sample = day.sample(2000, random_state=0)
    np.testing.assert_array_equal(parsed(sample["recorded_at"]), sample["ts"].to_numpy())


# --------------------------------------------------------------------------- synthetic_trace

@pytest.fixture(scope="module")
def trace():
    return synthetic_trace(12, 2 * HOUR, seed=0)


def test_columns_and_types_are_the_cambridge_csv(trace):
    assert list(trace.columns) == COLUMNS
    assert trace["ts"].dtype == np.int64
    assert trace["vehicle"].str.match(r"SYN-\d{4}$").all()
    assert trace["lat"].between(52.1, 52.3).all() and trace["lon"].between(0.0, 0.3).all()
    assert set(trace["direction"]) == {"INBOUND", "OUTBOUND"}
    assert trace["delay"].str.match(r"-?PT(\d+H)?(\d+M)?(\d+S)?$").all()
    np.testing.assert_array_equal(parsed(trace["recorded_at"]), trace["ts"].to_numpy())
    assert (trace["received"] > trace["ts"]).all()
    assert trace["ts"].is_monotonic_increasing
    assert trace["ts"].min() >= synth.DEFAULT_START
    assert trace["ts"].max() < synth.DEFAULT_START + 2 * HOUR
    assert not trace.duplicated(["vehicle", "ts"]).any()


def test_same_seed_same_trace_other_seed_other_trace(trace):
    pd.testing.assert_frame_equal(synthetic_trace(12, 2 * HOUR, seed=0), trace)
    assert not synthetic_trace(12, 2 * HOUR, seed=1).equals(trace)


def test_fixes_come_every_period_with_jitter_and_some_silences(trace):
    gaps = trace.groupby("vehicle")["ts"].diff().dropna()
    assert 19 <= gaps.median() <= 21
    assert gaps.min() >= 17
    assert ((gaps > 23) & (gaps < 300)).sum() == 0
    assert (gaps > 300).sum() >= 1, "at least one silence longer than 5 min"
    quick = synthetic_trace(4, HOUR, period_s=5, seed=0, silence_per_h=0)
    assert quick.groupby("vehicle")["ts"].diff().dropna().between(4, 6).all()


def _distance_m(lon1, lat1, lon2, lat2):
    k = np.cos(np.radians(52.2))
    return np.hypot((np.asarray(lon2) - lon1) * 111320 * k, (np.asarray(lat2) - lat1) * 111320)


def _at(df, place, radius_m):
    lon, lat = synth.DEFAULT_PLACES[place]
    return _distance_m(lon, lat, df["lon"], df["lat"]) <= radius_m + 15


def _journeys(df, a, b, ra, rb):
    """Brute-force `(at a) ; not (at a or at b) ; (at b)` per vehicle."""
    df = df.sort_values(["vehicle", "ts"])
    at_a, at_b = np.asarray(_at(df, a, ra)), np.asarray(_at(df, b, rb))
    found = 0
    for _, idx in df.groupby("vehicle").indices.items():
        last_a = False
        for i in idx:
            if at_a[i]:
                last_a = True
            elif at_b[i]:
                found += last_a
                last_a = False
    return found


def test_buses_travel_hospital_to_station_and_centre_to_hospital(trace):
    assert _journeys(trace, "hospital", "station", 150, 200) >= 3
    assert _journeys(trace, "centre", "hospital", 120, 150) >= 3


def test_congestion_holds_buses_still_away_from_the_termini(trace):
    df = trace.sort_values(["vehicle", "ts"])
    away = ~np.any([np.asarray(_at(df, p, 200)) for p in synth.DEFAULT_PLACES], axis=0)
    stuck = 0
    for _, idx in df.groupby("vehicle").indices.items():
        lon, lat = df["lon"].to_numpy()[idx], df["lat"].to_numpy()[idx]
        for i in range(len(idx) - 3):
            if away[idx[i]] and all(_distance_m(lon[i], lat[i], lon[i + j], lat[i + j]) <= 30 for j in (1, 2, 3)):
                stuck += 1
    assert stuck >= 5


def test_same_line_buses_share_a_road_and_sometimes_bunch():
    df = synthetic_trace(24, 2 * HOUR, seed=0)
    assert df.groupby("line")["vehicle"].nunique().min() >= 2
    a = df.merge(df, on=["line", "ts"], suffixes=("_a", "_b"))
    a = a[a["vehicle_a"] < a["vehicle_b"]]
    assert (_distance_m(a["lon_a"], a["lat_a"], a["lon_b"], a["lat_b"]) < 100).any()


def test_places_may_be_given():
    places = {"here": (0.10, 52.20), "there": (0.15, 52.21)}
    df = synthetic_trace(2, HOUR, seed=0, places=places, silence_per_h=0)
    assert set(df["origin_name"]) == {"here", "there"}
    assert df["lon"].between(0.09, 0.16).all()


def test_places_from_the_project_geojson():
    from pathlib import Path
    geo = Path(__file__).resolve().parents[2] / "geo" / "cambridge.geojson"
    df = synthetic_trace(3, 1800, seed=0, places=geo)
    assert "hospital" in set(df["origin_name"]) | set(df["destination_name"])


def test_bad_rows_when_asked():
    df = synthetic_trace(6, HOUR, seed=5, bad_fraction=0.06)
    bad = df.attrs["bad_rows"]
    n = sum(len(v) for v in bad.values())
    assert n == round(0.06 * len(df))
    assert min(len(v) for v in bad.values()) >= n // 3 - 1

    ts_num = pd.to_numeric(df["ts"], errors="coerce")
    assert sorted(np.flatnonzero(ts_num.isna())) == bad["time"]
    out_of_range = (df["lat"].abs() > 90) | (df["lon"].abs() > 180)
    assert sorted(np.flatnonzero(out_of_range)) == bad["coords"]
    assert sorted(np.flatnonzero(df["vehicle"] == "")) == bad["vehicle"]
    good = df.drop(index=[i for v in bad.values() for i in v])
    assert pd.to_numeric(good["ts"]).notna().all()


def test_no_bad_rows_by_default(trace):
    assert trace.attrs["bad_rows"] == {"time": [], "coords": [], "vehicle": []}


def test_a_trace_survives_a_csv_round_trip(tmp_path):
    df = synthetic_trace(3, 900, seed=4)
    df.to_csv(tmp_path / "t.csv.gz", index=False)
    back = pd.read_csv(tmp_path / "t.csv.gz", dtype={"line": str})
    pd.testing.assert_frame_equal(back, df, check_exact=False, rtol=1e-9)


def test_docstring_examples():
    import doctest

    from spatec.datasets import registry as datasets
    for module in (synth, datasets):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0, module.__name__

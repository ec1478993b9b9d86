"""examples/fences: entering and leaving a zone with possibly/certainly does not flap. A bus
whose fixes jitter across the edge enters once and leaves once; naive point-in-polygon alerts
at every jitter. On the Cambridge hour, one alert per crossing of the recorded positions."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench_fences  # noqa: E402  (the benchmark's naive detector and zone are the ones tested here)

PROGRAM = ROOT / "examples" / "fences" / "fences.spatec"


def trace() -> pd.DataFrame:
    """One bus driving east along latitude 52.2030 across the core's west edge and back: 20 fixes
    jittering 10 m either side of the edge, then inside, then jittering again, then outside."""
    zone = bench_fences.zone_polygon()
    import shapely

    lat = 52.2045
    edge = shapely.intersection(zone.exterior, shapely.LineString([(0.10, lat), (0.12, lat)]))
    x0 = shapely.get_x(edge)                       # the edge's longitude on this latitude
    m = 1 / (111_320.0 * np.cos(np.radians(lat)))  # degrees of longitude per metre
    xs = ([x0 - 200 * m] + [x0 + (10 if i % 2 else -10) * m for i in range(20)] + [x0 + 200 * m] * 3
          + [x0 + (10 if i % 2 else -10) * m for i in range(20)] + [x0 - 200 * m] * 2)
    ts = 1569916800 + 20 * np.arange(len(xs))
    return pd.DataFrame({"vehicle": "v1", "line": "U", "operator": "WP", "direction": "INBOUND", "lon": xs, "lat": lat, "ts": ts})


def test_jitter_at_the_edge_is_one_entry_and_one_exit():
    import spatec

    df = trace()
    out = spatec.compile(PROGRAM).replay_local({"BusGPS": df})
    enters, leaves = out["EntersCore"], out["LeavesCore"]
    assert len(enters) == 1 and len(leaves) == 1
    t = pd.to_datetime(df["ts"], unit="s", utc=True)
    assert enters["entered"].iloc[0] == t.iloc[21]        # the first fix certainly inside
    assert enters["outside"].iloc[0] == t.iloc[0]         # the last certainly outside
    assert leaves["left"].iloc[0] == t.iloc[44]
    naive = bench_fences.naive_alerts(df, bench_fences.zone_polygon())
    assert len(naive) > 30                                 # every jitter an alert


@pytest.mark.slow
def test_one_alert_per_crossing_on_the_hour():
    if not bench_fences.HOUR.is_file():
        pytest.skip(f"{bench_fences.HOUR} is not available")
    import spatec

    clean = bench_fences.load()
    truth = bench_fences.naive_alerts(clean, bench_fences.zone_polygon())
    out = spatec.compile(PROGRAM).replay_local({"BusGPS": clean})
    got = {k: len(out[p]) for k, p in (("enter", "EntersCore"), ("exit", "LeavesCore"))}
    assert got == truth["kind"].value_counts().to_dict() == {"enter": 118, "exit": 119}

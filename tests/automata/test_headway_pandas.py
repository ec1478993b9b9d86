"""examples/headway on the Cambridge hour against a pandas computation written from the
question alone: a bus's call at the station is a stretch of its fixes within reach of the
station circle (a fix elsewhere, or five minutes without a fix, ends it), and a headway is
two consecutive calls of one line and direction by arrival, by two different buses.

That is what the program says (SPEC §7-8, `as event source line, direction time arrived`):
the calls are ordered exactly by arrival, however they overlap in time. The pandas side
also follows the two rules of the end of the data: a call whose bus neither left nor was
silent for five minutes is not complete (it is not reported), and a headway that such a
call could still split (its second call arrives after the open call's stamp begins) is not
decided."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spatec.api import compile as compile_program
from spatec.spatial.crs import Projector

REPO = Path(__file__).resolve().parents[2]
HOUR = REPO.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
STATION = (0.13610, 52.19300, 200.0)      # examples/bus.spatec
GPS_ERROR, READ_WINDOW, GAP = 15.0, 30, 300

pytestmark = pytest.mark.skipif(not HOUR.exists(), reason=f"the Cambridge hour is not at {HOUR}")


def pandas_calls(fixes: pd.DataFrame, crs: str) -> tuple[pd.DataFrame, float]:
    """The complete calls (vehicle, line, direction, arrived, left in epoch s) and the least
    start (epoch s) of a call still open at the end of the data (inf if none)."""
    proj = Projector(crs)
    x, y = proj.forward(fixes["lon"].to_numpy(float), fixes["lat"].to_numpy(float))
    sx, sy = proj.forward(np.array([STATION[0]]), np.array([STATION[1]]))
    fixes = fixes.assign(near=np.hypot(np.asarray(x) - sx[0], np.asarray(y) - sy[0]) <= STATION[2] + GPS_ERROR)
    end = fixes["ts"].max()
    calls, open_since = [], np.inf
    for vehicle, g in fixes.sort_values("ts").groupby("vehicle", sort=False):
        run = None
        for ts, near, line, direction in zip(g["ts"], g["near"], g["line"], g["direction"]):
            if run is not None and near and ts <= run["left"] + GAP:
                run["left"] = ts
                continue
            if run is not None:
                calls.append(run)          # the next fix did not join: complete
                run = None
            if near:
                run = {"vehicle": vehicle, "line": line, "direction": direction, "arrived": ts, "left": ts}
        if run is not None:
            if end > run["left"] + GAP:
                calls.append(run)          # silent for longer than the gap
            else:
                open_since = min(open_since, run["arrived"] - READ_WINDOW)
    return pd.DataFrame(calls), open_since


def pandas_headways(calls: pd.DataFrame, open_since: float) -> pd.DataFrame:
    out = []
    for (line, direction), g in calls.dropna(subset=["line", "direction"]).groupby(["line", "direction"]):
        arrivals = np.sort(g["arrived"].unique())
        for a in g.itertuples():
            later = arrivals[arrivals > a.arrived]
            if not len(later) or later[0] > open_since:
                continue        # the last call, or an open call may still arrive in between
            for b in g[g["arrived"] == later[0]].itertuples():
                if b.vehicle != a.vehicle:
                    out.append({"line": line, "direction": direction, "first": a.vehicle, "second": b.vehicle,
                                "minutes": (b.arrived - a.arrived) / 60})
    return pd.DataFrame(out)


def test_headway_at_the_station_equals_pandas():
    prog = compile_program(REPO / "examples" / "headway" / "headway.spatec")
    got = prog.replay_local({"BusGPS": str(HOUR)})
    fixes = pd.read_csv(HOUR, usecols=["vehicle", "line", "direction", "ts", "lon", "lat"])
    calls, open_since = pandas_calls(fixes, got.crs)
    assert len(got["StationCall"]) == len(calls) == 71
    want = pandas_headways(calls, open_since)
    have = got["Headway"][["line", "direction", "first", "second", "minutes"]]
    key = ["line", "direction", "first", "second"]
    a = have.sort_values(key).reset_index(drop=True)
    b = want.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b) == 47
    pd.testing.assert_frame_equal(a[key], b[key])
    np.testing.assert_allclose(a["minutes"], b["minutes"], atol=1e-9)
    # each call of a line and direction has one successor at most (issue 32: calls that overlap
    # in time are ordered by arrival, none skipped; here no two calls of a line and direction
    # arrive in the same second)
    assert not calls.duplicated(["line", "direction", "arrived"]).any()
    assert not got["Headway"].duplicated(["line", "direction", "first_arrived"]).any()

"""A small GTFS static feed made from the Cambridge data: the stops of ``stops.csv`` and, for
each line and direction of the SIRI-VM hour, one route, one trip and one shape.

No public GTFS feed of that day is part of the data set, so the feed is derived from it:
a shape is the path of the line's longest journey of the hour in that direction (its
fixes in time order, standing still dropped), the trip calls at the stops that journey
passed within 30 m of, at the times it did. It is written by gtfs-kit, and read back by
spatec's ``places ... = gtfs "feed.zip" TABLE`` declarations (``lang/REFERENCE.md``).
Derived data of the data set, it is never part of the repository:
``spatec datasets gtfs --out feed.zip`` writes it.

Caveat for off-route work: a line's shape is one journey of the hour; a bus of that
line on a variant of the route (a short working, a loop) is off that shape.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

#: a stop is called at when a fix of the journey is this close (metres)
CALL_RADIUS_M = 30.0
#: a shape point is kept when it is at least this far from the one before (metres)
SHAPE_STEP_M = 10.0
SERVICE_ID = "20191001"
TIMEZONE = "Europe/London"

_DIRECTION = {"OUTBOUND": 0, "INBOUND": 1}


def _metres(lon, lat, lon0: float, lat0: float):
    """Equirectangular metres around (lon0, lat0): enough for picking a journey and its stops."""
    k = 111_320.0
    return (np.asarray(lon) - lon0) * k * np.cos(np.radians(lat0)), (np.asarray(lat) - lat0) * 110_540.0


def journeys(trace: pd.DataFrame) -> pd.DataFrame:
    """The trace's fixes with a ``journey`` number: a stretch of one vehicle's fixes (in time
    order) with one line and direction."""
    t = trace.sort_values(["vehicle", "ts"], kind="stable").reset_index(drop=True)
    key = t["vehicle"].astype(str) + "\x1f" + t["line"].astype(str) + "\x1f" + t["direction"].astype(str)
    t["journey"] = (key != key.shift()).cumsum()
    return t


def _path(fixes: pd.DataFrame, lon0: float, lat0: float) -> tuple[np.ndarray, float]:
    """The fixes' positions with standing still dropped (points closer than SHAPE_STEP_M to the
    last kept one), and the path's length in metres."""
    x, y = _metres(fixes["lon"].to_numpy(float), fixes["lat"].to_numpy(float), lon0, lat0)
    keep = [0]
    for i in range(1, len(x)):
        j = keep[-1]
        if np.hypot(x[i] - x[j], y[i] - y[j]) >= SHAPE_STEP_M:
            keep.append(i)
    k = np.asarray(keep)
    length = float(np.hypot(np.diff(x[k]), np.diff(y[k])).sum()) if len(k) > 1 else 0.0
    return k, length


def build(stops_csv: str | Path, trace_csv: str | Path, out: str | Path) -> dict:
    """Write the feed (a ``.zip``, or a folder) and return how many rows each table has."""
    import gtfs_kit

    stops_in = pd.read_csv(stops_csv, dtype={"stop_id": "string", "name": "string"})
    trace = pd.read_csv(trace_csv, usecols=["vehicle", "operator", "line", "direction", "destination_name",
                                            "ts", "lon", "lat"],
                        dtype={"vehicle": "string", "operator": "string", "line": "string", "direction": "string",
                               "destination_name": "string"})
    trace = trace[trace["direction"].isin(list(_DIRECTION)) & (trace["lon"] != 0) & (trace["lat"] != 0)]
    lon0, lat0 = float(trace["lon"].median()), float(trace["lat"].median())
    t = journeys(trace)
    sx, sy = _metres(stops_in["lon"].to_numpy(float), stops_in["lat"].to_numpy(float), lon0, lat0)

    routes, trips, shapes, stop_times = [], [], [], []
    for (operator, line, direction), fixes_of in t.groupby(["operator", "line", "direction"], sort=True):
        best = None
        for _, j in fixes_of.groupby("journey", sort=True):
            if len(j) < 3:
                continue
            keep, length = _path(j, lon0, lat0)
            if len(keep) >= 2 and (best is None or length > best[2]):
                best = (j, keep, length)
        if best is None:
            continue
        j, keep, _length = best
        route_id = f"{operator}-{line}"
        if not routes or routes[-1]["route_id"] != route_id:
            routes.append({"route_id": route_id, "agency_id": operator, "route_short_name": line,
                           "route_long_name": "", "route_type": 3})
        d = _DIRECTION[direction]
        trip_id = f"{route_id}-{d}"
        shape_id = f"{route_id}-{d}"
        trips.append({"route_id": route_id, "service_id": SERVICE_ID, "trip_id": trip_id,
                      "trip_headsign": str(j["destination_name"].iloc[-1]), "direction_id": d,
                      "shape_id": shape_id})
        pts = j.iloc[keep]
        shapes += [{"shape_id": shape_id, "shape_pt_lat": round(float(la), 7), "shape_pt_lon": round(float(lo), 7),
                    "shape_pt_sequence": n + 1} for n, (lo, la) in enumerate(zip(pts["lon"], pts["lat"]))]
        stop_times += _calls(j, trip_id, stops_in, sx, sy, lon0, lat0)
    agency = pd.DataFrame([{"agency_id": a, "agency_name": a, "agency_url": "https://www.example.org/",
                            "agency_timezone": TIMEZONE} for a in sorted({r["agency_id"] for r in routes})])
    stops = pd.DataFrame({"stop_id": stops_in["stop_id"], "stop_name": stops_in["name"],
                          "stop_lat": stops_in["lat"], "stop_lon": stops_in["lon"]})
    calendar = pd.DataFrame([{"service_id": SERVICE_ID, "monday": 0, "tuesday": 1, "wednesday": 0, "thursday": 0,
                              "friday": 0, "saturday": 0, "sunday": 0, "start_date": SERVICE_ID,
                              "end_date": SERVICE_ID}])
    feed = gtfs_kit.Feed(dist_units="km", agency=agency, stops=stops, routes=pd.DataFrame(routes),
                         trips=pd.DataFrame(trips), stop_times=pd.DataFrame(stop_times),
                         calendar=calendar, shapes=pd.DataFrame(shapes))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    feed.to_file(out)
    return {"stops": len(stops), "routes": len(routes), "trips": len(trips), "shapes": len(trips),
            "shape_points": len(shapes), "stop_times": len(stop_times)}


def _calls(j: pd.DataFrame, trip_id: str, stops: pd.DataFrame, sx, sy, lon0: float, lat0: float) -> list:
    """The stops the journey passed within CALL_RADIUS_M of, in the order it did, at the local
    time of its first fix there."""
    from zoneinfo import ZoneInfo

    x, y = _metres(j["lon"].to_numpy(float), j["lat"].to_numpy(float), lon0, lat0)
    ts = j["ts"].to_numpy(np.int64)
    first: dict = {}
    for i in range(len(x)):
        near = np.flatnonzero(np.hypot(sx - x[i], sy - y[i]) <= CALL_RADIUS_M)
        for s in near.tolist():
            first.setdefault(s, i)
    zone = ZoneInfo(TIMEZONE)
    out = []
    for n, (s, i) in enumerate(sorted(first.items(), key=lambda kv: (kv[1], kv[0]))):
        local = pd.Timestamp(int(ts[i]), unit="s", tz="UTC").tz_convert(zone)
        hms = f"{local.hour:02d}:{local.minute:02d}:{local.second:02d}"
        out.append({"trip_id": trip_id, "arrival_time": hms, "departure_time": hms,
                    "stop_id": str(stops["stop_id"].iloc[s]), "stop_sequence": n + 1})
    return out

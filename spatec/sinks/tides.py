"""TIDES out: a replay's input as ``vehicle_locations`` and a phrase's calls or dwells as
``stop_visits`` (Transit ITS Data Exchange Specification, https://tides-transit.org).

``spatec replay ... --tides DIR [--tides-visits PHRASE]`` writes a TIDES data package to
DIR: ``datapackage.json`` (the TIDES data-package profile: title, profile and, per
table, a tabular data resource whose ``schema`` names the TIDES table schema) and one
CSV per table, with every column of the table in the schema's order (empty where
spatec knows nothing of it, as TIDES' own samples are). The tables follow the TIDES
specification at :data:`TIDES_COMMIT`.

``vehicle_locations``, from every input event type with a source and a point place:

========================  ====================================================
``location_ping_id``      the event's id (``BusGPS:WP-101:2019-10-01T07:59:38Z``)
``service_date``          the local date of its time, in the program's zone
``event_timestamp``       its local time ``t``, ISO 8601 UTC
``vehicle_id``            its source
``latitude, longitude``   its point
``heading``               an attribute ``heading`` or ``bearing``, if declared
``trip_id_performed``     an attribute ``trip_id_performed``, ``trip_id`` or ``journey_ref``, if declared
========================  ====================================================

``stop_visits``, from a phrase's composites (each one visit), by its emit fields
(:data:`VISIT_FIELDS`: the TIDES name or a usual one): the stop, the vehicle, the
actual arrival and departure (times), optionally the dwell (a duration; else
departure less arrival) and the trip. A phrase that emits no trip has its visits
cut into trips per vehicle and service date where its emitted ``line`` or
``direction`` changes (``lang/REFERENCE.md``, decision 48).
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from spatec.errors import OutputError

#: the TIDES specification these tables follow (TIDES-transit/TIDES, spec/*.schema.json)
TIDES_COMMIT = "67bca7c580f1b3658dc2488f5081fa39563cd58a"
SCHEMA_URL = "https://raw.githubusercontent.com/TIDES-transit/TIDES/{commit}/spec/{table}.schema.json"
PROFILE_URL = "https://raw.githubusercontent.com/TIDES-transit/TIDES/{commit}/spec/tides-datapackage-profile.json"

#: the columns of each table, in the order of its TIDES table schema
COLUMNS = {
    "vehicle_locations": (
        "location_ping_id", "service_date", "event_timestamp", "trip_id_performed", "trip_id_scheduled",
        "trip_stop_sequence", "scheduled_stop_sequence", "vehicle_id", "device_id", "pattern_id", "stop_id",
        "current_status", "latitude", "longitude", "gps_quality", "heading", "speed", "odometer",
        "schedule_deviation", "headway_deviation", "trip_type", "schedule_relationship"),
    "stop_visits": (
        "service_date", "trip_id_performed", "trip_stop_sequence", "scheduled_stop_sequence", "pattern_id",
        "vehicle_id", "dwell", "stop_id", "timepoint", "schedule_arrival_time", "schedule_departure_time",
        "actual_arrival_time", "actual_departure_time", "distance", "boarding_1", "alighting_1", "boarding_2",
        "alighting_2", "departure_load", "door_open", "door_close", "door_status", "ramp_deployed_time",
        "ramp_failure", "kneel_deployed_time", "lift_deployed_time", "bike_rack_deployed", "bike_load", "revenue",
        "number_of_transactions", "schedule_relationship"),
}

#: stop_visits column → (the emit field names it is read from, in order of preference; their types;
#: whether a phrase must emit one)
VISIT_FIELDS = {
    "stop_id": (("stop_id", "stop"), ("str", "int"), True),
    "vehicle_id": (("vehicle_id", "vehicle"), ("str", "int"), True),
    "actual_arrival_time": (("actual_arrival_time", "arrived", "arrival", "since"), ("time",), True),
    "actual_departure_time": (("actual_departure_time", "departed", "departure", "left", "until"), ("time",), True),
    "dwell": (("dwell",), ("duration",), False),
    "trip_id_performed": (("trip_id_performed", "trip", "journey"), ("str", "int"), False),
    "pattern_id": (("pattern_id", "shape", "shape_id"), ("str", "int"), False),
    "line": (("line", "route"), ("str", "int"), False),
    "direction": (("direction", "direction_id"), ("str", "int"), False),
}
_HEADING = ("heading", "bearing")
_TRIP = ("trip_id_performed", "trip_id", "journey_ref")


class TidesError(OutputError):
    """A phrase or an input that cannot become a TIDES table."""


# ---------------------------------------------------------------------------------- mapping


def visit_fields(plan) -> dict:
    """stop_visits column → the phrase's emit field it is read from; :class:`TidesError` naming
    what is missing when the phrase cannot be stop visits."""
    types = dict(plan.schema)
    out = {}
    for column, (names, kinds, required) in VISIT_FIELDS.items():
        found = next((n for n in names if n in types), None)
        if found is None:
            if required:
                raise TidesError(f"--tides-visits {plan.name}: the phrase emits no {column.replace('_', ' ')} "
                                 f"(a {'/'.join(kinds)} field named {' or '.join(names)}); it emits "
                                 f"{', '.join(types) or 'nothing'}")
            continue
        if types[found] not in kinds:
            raise TidesError(f"--tides-visits {plan.name}: field {found} is a {types[found]}; {column} needs a "
                             f"{' or '.join(kinds)}")
        out[column] = found
    return out


def location_types(program) -> list:
    """The event types whose events are vehicle locations: with a source and a point place."""
    return [name for name, d in program.events.items()
            if d.source is not None and d.place is not None and d.place.lon is not None]


# ---------------------------------------------------------------------------------- values


def _iso(micros: np.ndarray) -> pd.Series:
    """ISO 8601 UTC text of epoch microseconds (fractions only where a column has them)."""
    t = pd.to_datetime(pd.Series(micros, dtype="int64"), unit="us", utc=True)
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if (np.asarray(micros) % 1_000_000).any() else "%Y-%m-%dT%H:%M:%SZ"
    return t.dt.strftime(fmt)


def _service_date(micros: np.ndarray, tz: str) -> pd.Series:
    """The local calendar date of each time (a service day is the date it starts on: decision 48)."""
    t = pd.to_datetime(pd.Series(micros, dtype="int64"), unit="us", utc=True).dt.tz_convert(tz)
    return t.dt.strftime("%Y-%m-%d")


def _text(series: pd.Series) -> pd.Series:
    return series.astype(object).where(series.notna(), None).map(lambda v: None if v is None else str(v))


def _write(path: Path, table: str, data: dict, n: int) -> int:
    """One TIDES table as CSV: every column of the table, in order, empty where not given."""
    columns = COLUMNS[table]
    frame = pd.DataFrame({c: (data[c] if c in data else pd.Series([None] * n, dtype=object)) for c in columns})
    frame.to_csv(path, index=False, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    return n


def vehicle_locations(frames: dict, program, tz: str) -> tuple[dict, int]:
    """Columns of the vehicle_locations table from canonical event frames (type → events)."""
    parts = []
    for name in location_types(program):
        df = frames.get(name)
        if df is None or not len(df):
            continue
        decl = program.events[name]
        attrs = {a.name for a in decl.attrs}
        part = {
            "location_ping_id": df["_id"].astype(str).to_numpy(),
            "service_date": _service_date(df["_t"].to_numpy(), tz).to_numpy(),
            "event_timestamp": _iso(df["_t"].to_numpy()).to_numpy(),
            "vehicle_id": _text(df["_source"]).to_numpy(),
            "latitude": df["_lat"].to_numpy(float),
            "longitude": df["_lon"].to_numpy(float),
            "_t": df["_t"].to_numpy(),
        }
        heading = next((a for a in _HEADING if a in attrs), None)
        if heading is not None:
            h = pd.to_numeric(df[heading], errors="coerce")
            part["heading"] = h.where((h >= 0) & (h <= 360)).to_numpy()   # (a bearing outside is no heading)
        trip = next((a for a in _TRIP if a in attrs), None)
        if trip is not None:
            part["trip_id_performed"] = _text(df[trip]).to_numpy()
        parts.append(pd.DataFrame(part))
    if not parts:
        return {}, 0
    out = pd.concat(parts, ignore_index=True).sort_values(["_t", "location_ping_id"], kind="stable")
    out = out.drop(columns="_t").reset_index(drop=True)
    return {c: out[c] for c in out.columns}, len(out)


def stop_visits(rows: pd.DataFrame, plan, tz: str) -> tuple[dict, int, int]:
    """Columns of the stop_visits table from a phrase's output rows, the visits written and
    those left out (no vehicle, stop or arrival)."""
    f = visit_fields(plan)
    v = pd.DataFrame({
        "id": rows["id"].astype(str),
        "vehicle_id": _text(rows[f["vehicle_id"]]),
        "stop_id": _text(rows[f["stop_id"]]),
        "arrive": pd.to_numeric(rows[f["actual_arrival_time"]], errors="coerce"),
        "depart": pd.to_numeric(rows[f["actual_departure_time"]], errors="coerce"),
    })
    for opt in ("trip_id_performed", "pattern_id", "line", "direction"):
        v[opt] = _text(rows[f[opt]]) if opt in f else None
    v["dwell"] = (pd.to_numeric(rows[f["dwell"]], errors="coerce") if "dwell" in f
                  else (v["depart"] - v["arrive"]) / 1e6)
    keep = v["vehicle_id"].notna() & v["stop_id"].notna() & v["arrive"].notna()
    left_out = int((~keep).sum())
    v = v[keep].copy()
    back = v["depart"].notna() & (v["depart"] < v["arrive"])
    if back.any():
        raise TidesError(f"--tides-visits {plan.name}: composite {v[back].iloc[0]['id']} departs before it arrives "
                         f"({f['actual_departure_time']} < {f['actual_arrival_time']}): are the two fields "
                         "the other way round?")
    if (v["dwell"] < 0).any():
        raise TidesError(f"--tides-visits {plan.name}: a dwell is negative (composite "
                         f"{v[v['dwell'] < 0].iloc[0]['id']})")
    if not len(v):
        return {}, 0, left_out
    arrive = v["arrive"].astype("int64").to_numpy()
    v["service_date"] = _service_date(arrive, tz).to_numpy()
    v["arrival"] = _iso(arrive).to_numpy()
    depart = v["depart"].notna().to_numpy()
    v["departure"] = np.where(depart, _iso(v["depart"].fillna(0).astype("int64").to_numpy()).to_numpy(), None)
    v = v.sort_values(["vehicle_id", "arrive", "depart", "stop_id", "id"], kind="stable").reset_index(drop=True)
    if "trip_id_performed" not in f:
        v["trip_id_performed"] = _derived_trips(v)
    v["trip_stop_sequence"] = v.groupby(["service_date", "trip_id_performed"], sort=False).cumcount() + 1
    v = v.sort_values(["service_date", "trip_id_performed", "trip_stop_sequence"], kind="stable")
    data = {"service_date": v["service_date"], "trip_id_performed": v["trip_id_performed"],
            "trip_stop_sequence": v["trip_stop_sequence"], "vehicle_id": v["vehicle_id"], "stop_id": v["stop_id"],
            "dwell": v["dwell"].round().astype("Int64"), "actual_arrival_time": v["arrival"],
            "actual_departure_time": v["departure"]}
    if "pattern_id" in f:
        data["pattern_id"] = v["pattern_id"]
    return {k: c.reset_index(drop=True) for k, c in data.items()}, len(v), left_out


def _derived_trips(v: pd.DataFrame) -> pd.Series:
    """A trip per vehicle and service date, cut where the emitted line or direction changes
    (visits in arrival order): ``VEHICLE:DATE:K``."""
    route = v["line"].fillna("") + "\x1f" + v["direction"].fillna("")
    day = v["vehicle_id"] + "\x1f" + v["service_date"]
    new = (day != day.shift()) | (route != route.shift())
    k = new.astype(int).groupby(day, sort=False).cumsum()
    return v["vehicle_id"] + ":" + v["service_date"] + ":" + k.astype(str)


# ---------------------------------------------------------------------------------- the package


def _slug(text: str) -> str:
    return re.sub(r"[^-a-z0-9._/]+", "-", text.lower()).strip("-") or "spatec"


def write_package(folder: Path, title: str, tables: dict, source: str) -> Path:
    """``datapackage.json`` for the tables written (name → rows), per the TIDES data-package profile."""
    resources = [{
        "name": table, "profile": "tabular-data-resource", "path": f"{table}.csv", "tides-table": table,
        "schema": SCHEMA_URL.format(commit=TIDES_COMMIT, table=table), "format": "csv", "mediatype": "text/csv",
        "encoding": "utf-8", "description": f"{rows:,} rows",
        "sources": [{"title": source, "component": "AVL", "product": "spatec"}],
    } for table, rows in tables.items()]
    pkg = {"profile": PROFILE_URL.format(commit=TIDES_COMMIT), "name": _slug(title), "title": title,
           "description": f"TIDES tables written by {source}", "resources": resources}
    path = folder / "datapackage.json"
    path.write_text(json.dumps(pkg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def write_tides(folder, program, tz: str, events: dict | None, visits: dict, plans: dict, source: str) -> dict:
    """Write the package: ``events`` (type → canonical events: vehicle_locations; None: not
    written), ``visits`` (phrase → output rows: stop_visits, all phrases in one table).
    Returns table → (rows written, rows left out)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: dict = {}
    if events is not None:
        data, n = vehicle_locations(events, program, tz)
        written["vehicle_locations"] = (_write(folder / "vehicle_locations.csv", "vehicle_locations", data, n), 0)
    if visits:
        datas, total, out = [], 0, 0
        for name, rows in visits.items():
            data, n, left = stop_visits(rows, plans[name], tz)
            if n:
                datas.append(pd.DataFrame(data))
            total += n
            out += left
        both = pd.concat(datas, ignore_index=True) if datas else pd.DataFrame(columns=["service_date"])
        if len(datas) > 1:   # one table: sequences numbered per phrase stay unique only with their trips apart
            dup = both.duplicated(["service_date", "trip_id_performed", "trip_stop_sequence"])
            if dup.any():
                raise TidesError("--tides-visits: two phrases give visits of the same trip; write one phrase's "
                                 "visits at a time (or emit trip ids that differ)")
        written["stop_visits"] = (_write(folder / "stop_visits.csv", "stop_visits", {c: both[c] for c in both.columns},
                                         total), out)
    write_package(folder, f"{source}", {t: n for t, (n, _) in written.items()}, source)
    return written

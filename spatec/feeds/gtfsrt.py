"""GTFS-realtime VehiclePositions: encoded from SIRI-VM records (for the feed server) and
read back as raw batches.

Like the SIRI-VM adapter this only renames (:data:`GTFSRT_FIELDS`); two fields
are derived: GTFS-realtime has no operator field, so a ``route_id`` of the form
``AGENCY:ROUTE`` (the convention of several national feeds, and what
:func:`encode_gtfsrt` writes) gives ``operator`` = AGENCY and ``line`` = ROUTE;
a plain ``route_id`` is the line and leaves ``operator`` null. Latitude and
longitude are 32-bit floats in GTFS-realtime, so a fix read from it differs
from the SIRI-VM text by up to about half a metre.
"""
from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Collection, Iterable

from spatec.errors import DataError
from spatec.events.raw import RawBatch
from spatec.events.sirivm import POLL_TIME

GTFSRT_FIELDS: dict[str, str] = {
    # GTFS-realtime field          attribute
    "vehicle.id":                  "vehicle",
    "vehicle.label":               "label",
    "trip.trip_id":                "journey_ref",
    "trip.route_id":               "route_id",
    "trip.direction_id":           "direction",
    "trip.start_date":             "start_date",
    "position.longitude":          "lon",
    "position.latitude":           "lat",
    "position.bearing":            "bearing",
    "position.speed":              "speed",
    "timestamp":                   "ts",
    # derived from route_id "AGENCY:ROUTE" (see the module docstring)
    "operator":                    "operator",
    "line":                        "line",
}


def _gtfs():
    try:
        from google.transit import gtfs_realtime_pb2
    except ImportError as e:  # pragma: no cover - an optional dependency
        raise DataError("GTFS-realtime needs the gtfs-realtime-bindings package "
                        "(pip install 'spatec[gtfs]')") from e
    return gtfs_realtime_pb2


def _epoch(text: Any) -> int | None:
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return int(text)
    try:
        return int(_dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def _float(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if x == x else None


def encode_gtfsrt(records: Iterable[dict], timestamp: float) -> bytes:
    """A GTFS-realtime VehiclePositions FeedMessage (serialised) from SIRI-VM records.

    ``route_id`` is ``OperatorRef:LineRef``; a record without a usable position
    or time is still encoded, without that field (a reader rejects it).
    """
    g = _gtfs()
    msg = g.FeedMessage()
    msg.header.gtfs_realtime_version = "2.0"
    msg.header.incrementality = g.FeedHeader.FULL_DATASET
    msg.header.timestamp = int(timestamp)
    for n, r in enumerate(records):
        if not isinstance(r, dict):
            continue
        e = msg.entity.add()
        vid = r.get("VehicleRef")
        e.id = f"{vid}#{n}" if vid else f"#{n}"
        vp = e.vehicle
        if vid:
            vp.vehicle.id = str(vid)
            vp.vehicle.label = str(vid)
        if r.get("LineRef") is not None:
            op = r.get("OperatorRef")
            vp.trip.route_id = f"{op}:{r['LineRef']}" if op else str(r["LineRef"])
        if r.get("DatedVehicleJourneyRef") is not None:
            vp.trip.trip_id = str(r["DatedVehicleJourneyRef"])
        if r.get("DirectionRef") in ("OUTBOUND", "INBOUND"):
            vp.trip.direction_id = 0 if r["DirectionRef"] == "OUTBOUND" else 1
        lon, lat = _float(r.get("Longitude")), _float(r.get("Latitude"))
        if lon is not None and lat is not None:
            vp.position.longitude, vp.position.latitude = lon, lat
            b = _float(r.get("Bearing"))
            if b is not None:
                vp.position.bearing = b
        ts = _epoch(r.get("RecordedAtTime"))
        if ts is not None and ts >= 0:
            vp.timestamp = ts
    return msg.SerializeToString()


def _gtfs_record(entity) -> dict:
    vp = entity.vehicle
    out: dict[str, Any] = {"entity_id": entity.id}
    if vp.HasField("vehicle"):
        for f in ("id", "label"):
            if vp.vehicle.HasField(f):
                out[f"vehicle.{f}"] = getattr(vp.vehicle, f)
    if vp.HasField("trip"):
        for f in ("trip_id", "route_id", "direction_id", "start_date"):
            if vp.trip.HasField(f):
                out[f"trip.{f}"] = getattr(vp.trip, f)
        rid = out.get("trip.route_id")
        if rid is not None:
            agency, sep, line = rid.partition(":")
            out["operator"], out["line"] = (agency, line) if sep else (None, rid)
    if vp.HasField("position"):
        for f in ("longitude", "latitude", "bearing", "speed"):
            if vp.position.HasField(f):
                out[f"position.{f}"] = getattr(vp.position, f)
    if vp.HasField("timestamp"):
        out["timestamp"] = vp.timestamp
    return out


def gtfsrt_batch(name: str, data: bytes, received: float | None = None,
                 columns: Collection[str] | None = None) -> RawBatch:
    """One GTFS-realtime FeedMessage as a raw batch under attribute names
    (:data:`GTFSRT_FIELDS`); entities without a vehicle position are skipped.
    A message that does not parse is one reject with row 0."""
    g = _gtfs()
    msg = g.FeedMessage()
    try:
        msg.ParseFromString(data)
    except Exception as e:  # protobuf raises DecodeError, or others on garbage
        rec = json.dumps(data[:200].decode("utf-8", errors="replace"))
        return _gtfs_raw(name, [], [], [(0, f"not a GTFS-realtime FeedMessage ({e})", rec)], columns)
    when = received if received is not None else (msg.header.timestamp or None)
    records, rows = [], []
    for n, ent in enumerate(msg.entity, 1):
        if not ent.HasField("vehicle"):
            continue
        r = _gtfs_record(ent)
        if when is not None:
            r[POLL_TIME] = when
        records.append(r)
        rows.append(n)
    out = _gtfs_raw(name, records, rows, [], columns)
    if msg.header.timestamp:
        out.clock = float(msg.header.timestamp)    # the feed's own time
    return out


def _gtfs_raw(name, records, rows, unreadable, columns) -> RawBatch:
    return RawBatch.from_records(name, records, rows, unreadable, columns,
                                 renames={attr: f for f, attr in GTFSRT_FIELDS.items()},
                                 provides=[*GTFSRT_FIELDS.values(), POLL_TIME])

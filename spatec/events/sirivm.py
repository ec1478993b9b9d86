"""SIRI-VM feed polls: the format adapter for live bus positions.

A poll is one JSON document as the SmartCambridge feed handler stores it,
``{"request_data": [{"VehicleRef": "WP-101", "RecordedAtTime":
"2019-10-01T08:59:38+01:00", "Longitude": "-0.1845219", ...}, ...], ...}``
(a bare JSON list of such records is read too). Polls come one per file
(``<epoch>_<date>.json``), as a directory of them, or as a ``.tar.gz`` of
them; they are read in the time order of their names, each as one raw batch
named ``archive.tar.gz!member`` inside an archive.

The adapter only renames: ``SIRIVM_FIELDS`` maps SIRI-VM fields to the
attribute names an event declaration uses (the columns of the CSV export of
the same feed); fields not in the table keep their own names. Typing and
everything after it is the same as for any other format. Consecutive polls
repeat records; the copies become duplicate rejects downstream.

Besides the feed's fields each record gets ``received``: the poll's time from
its file name (epoch seconds), which is when the feed handler received it
(the CSV export's ``received`` column).

A poll that is not JSON is one reject with row 0 (the whole file).
"""
from __future__ import annotations

import gzip
import json
import tarfile
from typing import Any, Collection, Iterator

from spatec.events.formats import poll_order
from spatec.events.raw import RawBatch, json_record

SIRIVM_FIELDS: dict[str, str] = {
    # SIRI-VM field            attribute
    "VehicleRef":               "vehicle",
    "LineRef":                  "line",
    "OperatorRef":              "operator",
    "DirectionRef":             "direction",
    "Longitude":                "lon",
    "Latitude":                 "lat",
    "RecordedAtTime":           "ts",
    "Bearing":                  "bearing",
    "Delay":                    "delay",
    "OriginRef":                "origin_ref",
    "OriginName":               "origin_name",
    "DestinationRef":           "destination_ref",
    "DestinationName":          "destination_name",
    "DatedVehicleJourneyRef":   "journey_ref",
}
POLL_TIME = "received"
POLL_SUFFIXES = (".json", ".json.gz")


def read_polls(path: str, columns: Collection[str] | None = None) -> Iterator[RawBatch]:
    """The polls in one file: a poll (JSON), or an archive of polls (tar, gzip or not).
    ``columns``: the attributes wanted (only the fields feeding them are loaded)."""
    if tarfile.is_tarfile(path):
        with tarfile.open(path, "r:*") as tar:
            members = [(m.name, tar.extractfile(m).read()) for m in tar
                       if m.isfile() and m.name.lower().endswith(POLL_SUFFIXES)]
        for name, data in sorted(members, key=lambda nm: poll_order(nm[0])):
            yield poll_batch(f"{path}!{name}", data, poll_order(name)[0], columns)
    else:
        with open(path, "rb") as f:
            yield poll_batch(path, f.read(), poll_order(path)[0], columns)


def poll_batch(name: str, data: bytes, received: float | None = None,
               columns: Collection[str] | None = None) -> RawBatch:
    """One poll (raw bytes, gzip or not) as a raw batch under attribute names."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return _batch(name, [], [], [(0, f"not a SIRI-VM poll: invalid JSON ({e})", json.dumps(_head(data)))],
                      columns)
    if isinstance(doc, dict) and isinstance(doc.get("request_data"), list):
        items = doc["request_data"]
    elif isinstance(doc, list):
        items = doc
    else:
        return _batch(name, [], [], [(0, "not a SIRI-VM poll: no request_data list", json.dumps(_head(data)))],
                      columns)
    records, rows, unreadable = [], [], []
    has_time = received is not None and received != float("inf")
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict):
            unreadable.append((number, f"not a JSON object: {type(item).__name__}", json_record({"value": item})))
            continue
        if has_time and POLL_TIME not in item:
            item = {**item, POLL_TIME: received}
        records.append(item)
        rows.append(number)
    return _batch(name, records, rows, unreadable, columns)


def _batch(name: str, records: list[dict[str, Any]], rows: list[int], unreadable: list,
           columns: Collection[str] | None) -> RawBatch:
    return RawBatch.from_records(name, records, rows, unreadable, columns,
                                 renames={attr: field for field, attr in SIRIVM_FIELDS.items()},
                                 provides=[*SIRIVM_FIELDS.values(), POLL_TIME])


def _head(data: bytes, limit: int = 200) -> str:
    return data[:limit].decode("utf-8", errors="replace")


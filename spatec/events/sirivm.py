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

A poll that is not JSON (damaged gzip data, JSON nested too deeply) is one
reject with row 0 (the whole file). A record holding a byte that is not UTF-8
is a reject of its own; the poll's other records are read.
"""
from __future__ import annotations

import gzip
import json
import tarfile
import zlib
from typing import Any, Collection, Iterator

from spatec.events.formats import poll_order
from spatec.events.raw import RawBatch, json_record, printable, printable_value, utf8_problem

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
    if _is_tar(path):
        members, damage = [], None
        try:
            with tarfile.open(path, "r:*") as tar:
                for m in tar:
                    if m.isfile() and m.name.lower().endswith(POLL_SUFFIXES):
                        members.append((m.name, tar.extractfile(m).read()))
        except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
            damage = str(e) or type(e).__name__
        for name, data in sorted(members, key=lambda nm: poll_order(nm[0])):
            yield poll_batch(f"{path}!{name}", data, poll_order(name)[0], columns)
        if damage is not None:
            # the polls before the damage are read; what follows it is one reject
            yield _batch(f"{path}!", [], [], [(0, f"damaged archive after {len(members)} poll(s): {damage}; "
                                                  "the rest of it is lost", json.dumps(""))], columns)
    else:
        with open(path, "rb") as f:
            yield poll_batch(path, f.read(), poll_order(path)[0], columns)


def _is_tar(path: str) -> bool:
    """Whether a file is a tar archive (gzip or not); a damaged one still is."""
    try:
        return tarfile.is_tarfile(path)
    except (EOFError, zlib.error, OSError):
        return path.lower().endswith((".tar", ".tar.gz", ".tgz"))


def poll_batch(name: str, data: bytes, received: float | None = None,
               columns: Collection[str] | None = None) -> RawBatch:
    """One poll (raw bytes, gzip or not) as a raw batch under attribute names."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            why = "ends inside its compressed data" if isinstance(e, EOFError) else f"is corrupt ({e})"
            return _batch(name, [], [], [(0, f"not a SIRI-VM poll: its gzip data {why}", json.dumps(""))], columns)
    try:
        text = data.decode("utf-8-sig")
        clean = True
    except UnicodeDecodeError:
        # keep bad bytes as themselves: the records holding one are rejects, the others are read
        text, clean = data.decode("utf-8", "surrogateescape"), False
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        return _batch(name, [], [], [(0, f"not a SIRI-VM poll: invalid JSON ({e})", json.dumps(_head(data)))],
                      columns)
    except RecursionError:
        return _batch(name, [], [], [(0, "not a SIRI-VM poll: invalid JSON (nested too deeply)",
                                      json.dumps(_head(data)))], columns)
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
            unreadable.append((number, f"not a JSON object: {type(item).__name__}",
                               _shown({"value": item}, clean)))
            continue
        if not clean:
            bad = _not_utf8(item)
            if bad:
                unreadable.append((number, bad, _shown(item, clean)))
                continue
        if has_time and POLL_TIME not in item:
            item = {**item, POLL_TIME: received}
        records.append(item)
        rows.append(number)
    out = _batch(name, records, rows, unreadable, columns)
    ts = doc.get("ts") if isinstance(doc, dict) else None
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and ts > 0:
        out.clock = float(ts)        # the feed's own time (the live ingest checks fixes against it)
    return out


def _batch(name: str, records: list[dict[str, Any]], rows: list[int], unreadable: list,
           columns: Collection[str] | None) -> RawBatch:
    return RawBatch.from_records(name, records, rows, unreadable, columns,
                                 renames={attr: field for field, attr in SIRIVM_FIELDS.items()},
                                 provides=[*SIRIVM_FIELDS.values(), POLL_TIME])


def _not_utf8(item: dict) -> str | None:
    """Which field of a record holds a byte that is not UTF-8 (None: none does)."""
    for k, v in item.items():
        for text in (k, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) if v is not None else ""):
            bad = utf8_problem(text)
            if bad:
                return f"{printable(k)}: not UTF-8 ({bad})"
    return None


def _shown(item: dict, clean: bool) -> str:
    """A record's JSON for a reject (bytes that are not UTF-8 escaped)."""
    return json_record(item if clean else printable_value(item))


def _head(data: bytes, limit: int = 200) -> str:
    return data[:limit].decode("utf-8", errors="replace")


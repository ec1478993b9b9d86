"""Event declarations and small-file helpers shared by the io tests.

Declarations are built as AST nodes (what the checker hands to ingest), so these
tests do not depend on the parser. (A module of its own, not conftest: every test
folder has a conftest, and only one of them can be imported as ``conftest``.)
"""
from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

from spatec.frontend.ast import (
    AttrDecl,
    EventDecl,
    PlaceClause,
    Quantity,
    SourceClause,
    TimeBound,
    TimeClause,
)

CAMBRIDGE = Path("/work/shared/datasets/cambridge")
CAMBRIDGE_CSV = CAMBRIDGE / "sirivm_2019-10-01_0854-1000.csv.gz"
CAMBRIDGE_POLLS = CAMBRIDGE / "sirivm_polls_2019-10-01.tar.gz"


def attrs(**types: str) -> tuple[AttrDecl, ...]:
    return tuple(AttrDecl(name, t) for name, t in types.items())


# event BusGPS(vehicle: str, line: str, operator: str, lon: float, lat: float, ts: time)
#     source vehicle
#     time   ts - 30 s .. ts
#     place  point(lon, lat) ± 15 m
BUS = EventDecl(
    "BusGPS", attrs(vehicle="str", line="str", operator="str", lon="float", lat="float", ts="time"),
    source=SourceClause("vehicle"),
    time=TimeClause(TimeBound("ts", Quantity(-30, "s")), TimeBound("ts")),
    place=PlaceClause(lon="lon", lat="lat", widen=Quantity(15, "m")))

# event Cell(cell: str, mm_h: float, start: time, end: time, area: geometry)
#     time start .. end
#     place area ± 50 m
CELL = EventDecl(
    "Cell", attrs(cell="str", mm_h="float", start="time", end="time", area="geometry"),
    time=TimeClause(TimeBound("start"), TimeBound("end")),
    place=PlaceClause(geom="area", widen=Quantity(50, "m")))

# event Obs(who: str, n: int, x: float, ok: bool, at: time, lon: float, lat: float)
#     source who
#     time at ± 5 s
#     place point(lon, lat)
OBS = EventDecl(
    "Obs", attrs(who="str", n="int", x="float", ok="bool", at="time", lon="float", lat="float"),
    source=SourceClause("who"),
    time=TimeClause(TimeBound("at"), widen=Quantity(5, "s")),
    place=PlaceClause(lon="lon", lat="lat"))

# event Tick(name: str, at: time) -- no source, no place
TICK = EventDecl("Tick", attrs(name="str", at="time"), time=TimeClause(TimeBound("at")))


def write_csv(path: Path, header: list[str], rows: list[list[str]], gz: bool = False) -> Path:
    opener = gzip.open if gz else open
    with opener(path, "wt", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def write_jsonl(path: Path, records: list, gz: bool = False) -> Path:
    opener = gzip.open if gz else open
    with opener(path, "wt", encoding="utf-8") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


def write_poll(path: Path, records: list[dict]) -> Path:
    path.write_text(json.dumps({"request_data": records, "feed_id": "test"}))
    return path


BUS_HEADER = ["vehicle", "line", "operator", "lon", "lat", "ts", "extra"]

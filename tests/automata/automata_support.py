"""Shared by the automata tests: a small test schema, plain event rows, the
canonical frames spatec reads, and the two evaluations to compare (the
oracle of tests/oracle.py and the local runner)."""
from __future__ import annotations

import datetime as dt
import math
import sys
from pathlib import Path

import pandas as pd

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
for p in (str(ROOT), str(TESTS)):
    if p not in sys.path:
        sys.path.insert(0, p)

import oracle  # noqa: E402

from spatec.plan.program import compile_program  # noqa: E402
from spatec.runners.local import replay_frames  # noqa: E402
from spatec.spatial.crs import Projector  # noqa: E402

US = 1_000_000
CRS = "EPSG:32631"
LON0, LAT0 = 0.14, 52.18
#: 2024-03-05 12:58 UTC = 07:58 in New York (a Tuesday, EST)
T0 = int(dt.datetime(2024, 3, 5, 12, 58, tzinfo=dt.timezone.utc).timestamp()) * US
M_LAT = 1 / 111_320.0
M_LON = 1 / (111_320.0 * math.cos(math.radians(LAT0)))


def lonlat(dx: float, dy: float) -> tuple[float, float]:
    """The point ``dx`` metres east and ``dy`` north of (LON0, LAT0) (approximately)."""
    return LON0 + dx * M_LON, LAT0 + dy * M_LAT


def _square(dx, dy, half):
    pts = [lonlat(dx - half, dy - half), lonlat(dx + half, dy - half), lonlat(dx + half, dy + half),
           lonlat(dx - half, dy + half)]
    return pts


def _q_poly():
    return ", ".join(f"({x:.7f}, {y:.7f})" for x, y in _square(200, 0, 75))


HEADER = f'''timezone "America/New_York"

event Bus(vehicle: str, line: str, x: int, lon: float, lat: float, ts: time)
    source vehicle
    time   ts - 30 s .. ts
    place  point(lon, lat) ± 15 m

event Tag(vehicle: str, line: str, x: int, lon: float, lat: float, ts: time)
    source vehicle
    time   ts ± 5 s
    place  point(lon, lat) ± 5 m

event Trip(vehicle: str, x: int, lon: float, lat: float, start: time, stop: time)
    source vehicle
    time   start .. stop
    place  point(lon, lat) ± 50 m

event Cell(cell: str, x: int, start: time, stop: time, area: geometry)
    time   start .. stop
    place  area

place P = circle({LON0}, {LAT0}, 100 m)
place Q = polygon({_q_poly()})
'''

RADIUS = {"Bus": 15.0, "Tag": 5.0, "Trip": 50.0, "Cell": 0.0}
ATTRS = {"Bus": ["vehicle", "line", "x", "lon", "lat", "ts"],
         "Tag": ["vehicle", "line", "x", "lon", "lat", "ts"],
         "Trip": ["vehicle", "x", "lon", "lat", "start", "stop"],
         "Cell": ["cell", "x", "start", "stop", "area"],
         # examples/bus.spatec (the rows of test_oracle_spec_examples.fix)
         "BusGPS": ["vehicle", "line", "operator", "direction", "lon", "lat", "ts"]}


def iso(t: int) -> str:
    return dt.datetime.fromtimestamp(t / US, dt.timezone.utc).isoformat().replace("+00:00", "Z")


def row(type_, source, t_s, dx=0.0, dy=0.0, x=1, line="a", dur_s=60, half=50.0, cell="c"):
    """One event as a plain row; ``t_s`` seconds after T0 is its local time (``ts``/``stop``)."""
    t = T0 + int(round(t_s * US))
    lon, lat = lonlat(dx, dy)
    if type_ == "Bus":
        lo, hi = t - 30 * US, t
    elif type_ == "Tag":
        lo, hi = t - 5 * US, t + 5 * US
    else:
        lo, hi = t - int(dur_s * US), t
    attrs = {"x": x}
    r = {"type": type_, "t": t, "lo": lo, "hi": hi, "r": RADIUS[type_]}
    if type_ == "Cell":
        ring = _square(dx, dy, half)
        wkt = "POLYGON ((" + ", ".join(f"{a:.7f} {b:.7f}" for a, b in ring + ring[:1]) + "))"
        r.update(source=None, place="geom", geom=wkt, lon=math.nan, lat=math.nan,
                 id=f"Cell:#{cell}:{t}")
        attrs.update(cell=cell, start=lo, stop=hi, area=wkt)
    else:
        r.update(source=source, place="point", geom=None, lon=lon, lat=lat, id=f"{type_}:{source}:{iso(t)}")
        attrs.update(vehicle=source, lon=lon, lat=lat)
        if type_ in ("Bus", "Tag"):
            attrs.update(line=line, ts=t)
        else:
            attrs.update(start=lo, stop=hi)
    r["attrs"] = attrs
    return r


def frames(rows) -> dict:
    """Canonical frames (type → DataFrame) of plain rows."""
    out = {}
    for type_ in ATTRS:
        rs = [r for r in rows if r["type"] == type_]
        if not rs:
            continue
        cols = {"_type": [r["type"] for r in rs], "_id": [r["id"] for r in rs],
                "_source": pd.Series([r["source"] for r in rs], dtype=object),
                "_t": pd.Series([r["t"] for r in rs], dtype="int64"),
                "_lo": pd.Series([r["lo"] for r in rs], dtype="int64"),
                "_hi": pd.Series([r["hi"] for r in rs], dtype="int64"),
                "_place": [r["place"] for r in rs],
                "_lon": pd.Series([r["lon"] for r in rs], dtype=float),
                "_lat": pd.Series([r["lat"] for r in rs], dtype=float),
                "_r": pd.Series([r["r"] for r in rs], dtype=float),
                "_geom": pd.Series([r["geom"] for r in rs], dtype=object)}
        for a in ATTRS[type_]:
            vals = [r["attrs"].get(a) for r in rs]
            cols[a] = pd.Series(vals, dtype=object if a in ("x", "vehicle", "line", "operator", "direction", "cell",
                                                            "area") else None)
        out[type_] = pd.DataFrame(cols)
    return out


_N = [0]


def compile_text(body: str):
    """Compile HEADER + ``body``."""
    _N[0] += 1
    return compile_program(f"/tmp/spatec_oracle_{_N[0]}.spatec", HEADER + body)


def compiled_or_reject(body: str):
    """:func:`compile_text`, or (a generated program that does not check) the example rejected."""
    from hypothesis import assume

    from spatec.errors import SpatecError

    try:
        return compile_text(body)
    except SpatecError:
        assume(False)


def write_stops(path, stops) -> Path:
    """A stops CSV (``stop_id,name,lon,lat``) of ``(id, name, dx, dy)`` metres from the origin."""
    path = Path(path)
    path.write_text("stop_id,name,lon,lat\n" + "".join(
        f"{sid},{name},{lonlat(dx, dy)[0]:.8f},{lonlat(dx, dy)[1]:.8f}\n" for sid, name, dx, dy in stops),
        encoding="utf-8")
    return path


def sut_rows(compiled, rows, name: str) -> list[tuple]:
    df = replay_frames(compiled, frames(rows), crs=CRS).frames[name]
    return sorted((r.id, int(r.lo), int(r.hi), tuple(sorted(r.events.items()))) for r in df.itertuples())


def oracle_rows(compiled, rows, name: str, full: bool = False) -> list[tuple]:
    proj = Projector(CRS)
    o = oracle.Oracle(compiled.program, proj, oracle.oevents(compiled.program, rows, proj))
    got = o.phrase(name)
    return got if full else sorted(g[:4] for g in got)


def both(body: str, rows, name: str = "Ph"):
    c = compile_text(body)
    return oracle_rows(c, rows, name), sut_rows(c, rows, name)


def both_all(compiled, rows) -> dict:
    """Phrase → (oracle rows, runner rows) for every phrase of the program."""
    result = replay_frames(compiled, frames(rows), crs=CRS)
    proj = Projector(CRS)
    o = oracle.Oracle(compiled.program, proj, oracle.oevents(compiled.program, rows, proj))
    out = {}
    for p in compiled.plans:
        df = result.frames[p.name]
        sut = sorted((r["id"], int(r["lo"]), int(r["hi"]), tuple(sorted({**r["events"], **(r.get("places") or {})}
                                                                         .items())))
                     for r in df.to_dict("records"))
        out[p.name] = (sorted(g[:4] for g in o.phrase(p.name)), sut)
    return out

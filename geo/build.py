"""Rebuild geo/cambridge.geojson and geo/zones.geojson from the tfc_web data.

    python geo/build.py                      # finds the data like spatec does
    python geo/build.py --data ../shared/datasets/cambridge
    python geo/build.py --check              # exit 1 if the files would change

Named places are circles around hand-picked groups of stops in stops.csv:
centre = the mean of the group's coordinates, radius = the larger of the
place's minimum radius and the farthest stop's distance plus 50 m, rounded up
to 10 m. Each circle is written as a 64-vertex polygon whose vertices lie on
the circle (geodesic, WGS84), and the exact circle is kept in the feature's
properties. Road zones are zones.json's `zone.path` polygons, unchanged
except that rings are closed and wound anticlockwise (RFC 7946).
See geo/README.md.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from pathlib import Path

from pyproj import Geod

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VERTICES = 64
MARGIN_M = 50.0
SOURCE = "stops.csv from SmartCambridge tfc_web (MIT licence, see LICENSE.tfc_web)"
ZONES_SOURCE = "zones.json from SmartCambridge tfc_web (MIT licence, see LICENSE.tfc_web)"

# name, description, stop ids, minimum radius (m). hospital, station and centre
# use the radii of examples/bus.spatec as their minimum.
PLACES = [
    ("hospital", "Addenbrooke's Hospital bus station",
     ["0500CCITY193", "0500CCITY202", "0500CCITY203", "0500CCITY294"], 150),
    ("station", "Cambridge railway station: station forecourt and busway stops",
     ["0500CAMBDGE0", "0500CCITY018", "0500CCITY507", "0500CCITY508", "0500CCITY525",
      "0500CCITY526", "0500CCITY527", "0500CCITY528", "0500CCITY529", "0500CCITY530",
      "0500CCITY531"], 200),
    ("centre", "Drummer Street bus station, city centre",
     ["0500CCITY114", "0500CCITY116", "0500CCITY118", "0500CCITY119", "0500CCITY121",
      "0500CCITY123", "0500CCITY124", "0500CCITY125", "0500CCITY126", "0500CCITY127",
      "0500CCITY129", "0500CCITY227", "0500CCITY228", "0500CCITY274", "0500CCITY484",
      "0500CCITY485", "0500CCITY486"], 120),
    ("park_and_ride_trumpington", "Trumpington Park-and-Ride (road and busway stops)",
     ["0500CCITY001", "0500CCITY012", "0500CCITY248"], 150),
    ("park_and_ride_madingley", "Madingley Road Park-and-Ride",
     ["0500CCITY084", "0500CCITY143", "0500CCITY144", "0500CCITY545", "0500CCITY546"], 150),
    ("park_and_ride_babraham", "Babraham Road Park-and-Ride",
     ["0500CCITY030"], 150),
    ("park_and_ride_newmarket", "Newmarket Road Park-and-Ride",
     ["0500SFENN003", "0500SFENN010"], 150),
    ("park_and_ride_milton", "Milton Park-and-Ride",
     ["0500SMILT010"], 150),
    ("cambridge_north", "Cambridge North railway station and its busway stop",
     ["9100CAMBNTH", "0500CCITY540", "0500CCITY541"], 150),
]

GEOD = Geod(ellps="WGS84")


def find_data(explicit: str | None) -> tuple[Path, Path]:
    """stops.csv and zones.json: from --data, else via spatec.datasets.registry."""
    if explicit:
        d = Path(explicit)
        return d / "stops.csv", d / "zones.json"
    sys.path.insert(0, str(REPO))
    from spatec.datasets.registry import resolve

    return resolve("cambridge-stops"), resolve("cambridge-zones")


def read_stops(path: Path) -> dict[str, dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return {r["stop_id"]: {"name": r["name"], "lon": float(r["lon"]), "lat": float(r["lat"])}
                for r in csv.DictReader(f)}


def ccw(ring: list[list[float]]) -> list[list[float]]:
    """The ring closed and wound anticlockwise (positive shoelace area in lon/lat)."""
    if ring[0] != ring[-1]:
        ring = ring + [ring[0]]
    area = sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(ring, ring[1:]))
    return ring if area > 0 else ring[::-1]


def circle_ring(lon: float, lat: float, radius_m: float, n: int = VERTICES) -> list[list[float]]:
    az = [360.0 * i / n for i in range(n)]
    lons, lats, _ = GEOD.fwd([lon] * n, [lat] * n, az, [radius_m] * n)
    # Azimuths run clockwise; reverse for an anticlockwise ring.
    ring = [[round(x, 7), round(y, 7)] for x, y in zip(lons, lats)][::-1]
    return ring + [ring[0]]


def place_feature(name: str, description: str, ids: list[str], min_r: float, stops) -> dict:
    missing = [i for i in ids if i not in stops]
    if missing:
        raise SystemExit(f"{name}: stops not in stops.csv: {missing}")
    lon = sum(stops[i]["lon"] for i in ids) / len(ids)
    lat = sum(stops[i]["lat"] for i in ids) / len(ids)
    lon, lat = round(lon, 6), round(lat, 6)
    far = max(GEOD.inv(lon, lat, stops[i]["lon"], stops[i]["lat"])[2] for i in ids)
    radius = max(float(min_r), math.ceil((far + MARGIN_M) / 10.0) * 10.0)
    return {
        "type": "Feature",
        "properties": {
            "name": name,
            "description": description,
            "kind": "circle",
            "center": [lon, lat],
            "radius_m": radius,
            "vertices": VERTICES,
            "stops": sorted(ids),
            "stop_names": sorted({stops[i]["name"] for i in ids}),
            "farthest_stop_m": round(far, 1),
            "source": SOURCE,
        },
        "geometry": {"type": "Polygon", "coordinates": [circle_ring(lon, lat, radius)]},
    }


def zone_feature(z: dict) -> dict:
    path = [[round(p["lng"], 7), round(p["lat"], 7)] for p in z["zone.path"]]
    fi = z.get("zone.finish_index")
    props = {
        "name": z["zone.id"],
        "title": z.get("zone.name"),
        "reverse": z.get("zone.reverse.id"),
        "center": [round(z["zone.center"]["lng"], 7), round(z["zone.center"]["lat"], 7)]
        if "zone.center" in z else None,
        "finish_index": fi,
        # tfc_server's zone module: the start line is path[0]-path[1], the
        # finish line path[finish_index]-path[finish_index+1].
        "start_line": path[0:2],
        "finish_line": path[fi:fi + 2] if isinstance(fi, int) and fi + 1 < len(path) else None,
        "source": ZONES_SOURCE,
    }
    return {"type": "Feature", "properties": props,
            "geometry": {"type": "Polygon", "coordinates": [ccw(path)]}}


def build(stops_csv: Path, zones_json: Path) -> dict[str, str]:
    stops = read_stops(stops_csv)
    places = {"type": "FeatureCollection",
              "name": "cambridge",
              "features": [place_feature(*p, stops) for p in PLACES]}
    with open(zones_json, encoding="utf-8") as f:
        zones_doc = json.load(f)
    zones = {"type": "FeatureCollection",
             "name": "cambridge_zones",
             "features": [zone_feature(z) for z in sorted(zones_doc["zone_list"], key=lambda z: z["zone.id"])]}
    return {"cambridge.geojson": dump(places), "zones.geojson": dump(zones)}


_PAIR = re.compile(r"\[\s*(-?[0-9.eE+-]+),\s*(-?[0-9.eE+-]+)\s*\]")


def dump(doc: dict) -> str:
    # Indented, but each [lon, lat] pair on one line: diffs stay readable.
    return _PAIR.sub(r"[\1, \2]", json.dumps(doc, indent=1, ensure_ascii=False)) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="directory holding stops.csv and zones.json")
    ap.add_argument("--out", default=str(HERE), help="output directory (default: geo/)")
    ap.add_argument("--check", action="store_true", help="only check that the files are up to date")
    args = ap.parse_args(argv)
    stops_csv, zones_json = find_data(args.data)
    out = Path(args.out)
    stale = []
    for name, text in build(stops_csv, zones_json).items():
        target = out / name
        if args.check:
            if not target.is_file() or target.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target}")
    if stale:
        print(f"out of date: {', '.join(stale)} (run python geo/build.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

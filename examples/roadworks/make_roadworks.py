"""Write roadworks_2019-10-01.csv: synthetic road works made by the project.

    python examples/roadworks/make_roadworks.py

Three imaginary works on roads that Cambridge buses use, each a rectangle laid
along the road (centre, bearing of the road, length, width), with the period
the works are on. Nothing here is a real road works record; see README.md.
Deterministic: no randomness.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

M_PER_DEG_LAT = 111_250.0   # at 52.2 N; metres per degree, good to 0.1 % here

# works_id, description, start, end, (lon, lat) centre, road bearing (deg), length m, width m
WORKS = [
    ("RW-001", "Hills Road, inner section (zone hills_road_inner): carriageway resurfacing (synthetic)",
     "2019-10-01T09:15:00+01:00", "2019-10-01T15:00:00+01:00",
     (0.12983, 52.19655), 151.0, 300.0, 40.0),
    ("RW-002", "Victoria Avenue (zone victoria_ave): gas main replacement (synthetic)",
     "2019-09-30T20:00:00+01:00", "2019-10-02T06:00:00+01:00",
     (0.12580, 52.21410), 0.0, 160.0, 40.0),
    ("RW-003", "Regent Street: overnight utility works, finished before the data (synthetic)",
     "2019-10-01T00:30:00+01:00", "2019-10-01T06:30:00+01:00",
     (0.12485, 52.20209), 160.0, 140.0, 30.0),
]


def rectangle(lon: float, lat: float, bearing: float, length: float, width: float) -> str:
    """WKT of a length x width rectangle centred on (lon, lat), long side along `bearing`."""
    mx = M_PER_DEG_LAT * math.cos(math.radians(lat))
    b = math.radians(bearing)
    along = (math.sin(b), math.cos(b))        # unit vector east, north
    across = (math.cos(b), -math.sin(b))
    corners = []
    for sa, sc in ((-1, -1), (1, -1), (1, 1), (-1, 1), (-1, -1)):
        dx = sa * length / 2 * along[0] + sc * width / 2 * across[0]
        dy = sa * length / 2 * along[1] + sc * width / 2 * across[1]
        corners.append((lon + dx / mx, lat + dy / M_PER_DEG_LAT))
    # Wind anticlockwise, as GeoJSON and most tools expect.
    area = sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(corners, corners[1:]))
    if area < 0:
        corners.reverse()
    return "POLYGON((" + ", ".join(f"{x:.6f} {y:.6f}" for x, y in corners) + "))"


def main(out: Path = Path(__file__).with_name("roadworks_2019-10-01.csv")) -> None:
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["works_id", "description", "start", "end", "area"])
        for works_id, text, start, end, (lon, lat), bearing, length, width in WORKS:
            w.writerow([works_id, text, start, end, rectangle(lon, lat, bearing, length, width)])
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""Write rain_2019-10-01.csv: synthetic rain-gauge readings made by the project.

    python examples/wet_weather/make_rain.py

Four imaginary gauges, each with a hand-drawn rectangular catchment (WKT, lon/lat)
covering one part of Cambridge; a reading every 15 minutes from 08:00 to 11:00
BST on Tuesday 2019-10-01, giving the mean rain rate (mm/h) over the 15 minutes
before it. The numbers are invented: a shower that crosses the city from
south to north during the Cambridge hour (08:54-10:00), over Addenbrooke's
first and the railway station a quarter of an hour later, so that the
RainySlowJourney phrase has rain at both ends of a journey. Nothing here was
measured; see README.md. Deterministic: no randomness.
"""
from __future__ import annotations

import csv
from datetime import datetime, timedelta, timezone
from pathlib import Path

BST = timezone(timedelta(hours=1))
FIRST = datetime(2019, 10, 1, 8, 0, tzinfo=BST)
READINGS = [FIRST + timedelta(minutes=15 * i) for i in range(13)]   # 08:00 .. 11:00

# gauge -> (lon_min, lat_min, lon_max, lat_max) of its catchment
CATCHMENTS = {
    "addenbrookes": (0.120, 52.160, 0.170, 52.186),      # hospital and Hills Road south
    "railway_station": (0.120, 52.186, 0.160, 52.199),   # station and Hills Road north
    "city_centre": (0.095, 52.199, 0.140, 52.215),       # Drummer Street, the colleges
    "cambridge_north": (0.110, 52.215, 0.180, 52.240),   # Chesterton, Cambridge North
}

# mm/h for the readings 08:00, 08:15, ..., 11:00
RATES = {
    "addenbrookes":    [0, 0, 0, 0, 0.4, 2.4, 3.1, 1.2, 0.2, 0, 0, 0, 0],
    "railway_station": [0, 0, 0, 0, 0, 0, 0.6, 2.8, 1.9, 0.4, 0, 0, 0],
    "city_centre":     [0, 0, 0, 0, 0, 0, 0, 0.3, 1.5, 2.2, 0.8, 0, 0],
    "cambridge_north": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0.2, 1.1, 0.6, 0],
}


def wkt_box(lon0: float, lat0: float, lon1: float, lat1: float) -> str:
    ring = [(lon0, lat0), (lon1, lat0), (lon1, lat1), (lon0, lat1), (lon0, lat0)]
    return "POLYGON((" + ", ".join(f"{x:.3f} {y:.3f}" for x, y in ring) + "))"


def rows():
    for gauge, box in CATCHMENTS.items():
        for when, rate in zip(READINGS, RATES[gauge], strict=True):
            yield {"gauge": gauge, "mm_h": f"{rate:.1f}", "reading": when.isoformat(),
                   "area": wkt_box(*box)}


def main(out: Path = Path(__file__).with_name("rain_2019-10-01.csv")) -> None:
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["gauge", "mm_h", "reading", "area"], lineterminator="\n")
        w.writeheader()
        w.writerows(rows())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

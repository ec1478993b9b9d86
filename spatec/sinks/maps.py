"""Composites on a Leaflet map (folium): one layer per phrase, each hull drawn,
a popup with the composite's times and emit fields."""
from __future__ import annotations

import html
import json
import math
from pathlib import Path

import pandas as pd
import shapely

COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
FIXED = ("phrase", "id", "lo", "hi", "hull", "events")


def _time(us) -> str:
    return pd.Timestamp(int(us), unit="us", tz="UTC").isoformat()


def _value(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return str(v)


def _popup(row: dict) -> str:
    lines = [f"<b>{html.escape(str(row['phrase']))}</b>",
             f"{_time(row['lo'])} .. {_time(row['hi'])}"]
    for k, v in row.items():
        if k not in FIXED:
            lines.append(f"{html.escape(k)}: {html.escape(_value(v))}")
    return "<br>".join(lines)


def write_map(frames: dict, path) -> Path:
    """Write ``frames`` (phrase → output rows, as the runners return them) as an HTML map."""
    import folium

    path = Path(path)
    bounds = []
    layers = []
    for i, (phrase, df) in enumerate(sorted(frames.items())):
        colour = COLOURS[i % len(COLOURS)]
        layer = folium.FeatureGroup(name=f"{phrase} ({len(df)})")
        for row in df.to_dict("records"):
            if not row.get("hull"):
                continue
            g = shapely.from_wkt(row["hull"])
            if g is None or g.is_empty:
                continue
            bounds.append(g.bounds)
            gj = json.loads(shapely.to_geojson(g))
            folium.GeoJson(gj, style_function=lambda _f, c=colour: {"color": c, "weight": 2, "fillOpacity": 0.2},
                           popup=folium.Popup(_popup(row), max_width=400),
                           tooltip=str(row["phrase"])).add_to(layer)
        layers.append(layer)
    if bounds:
        xs = [b[0] for b in bounds] + [b[2] for b in bounds]
        ys = [b[1] for b in bounds] + [b[3] for b in bounds]
        m = folium.Map(location=[(min(ys) + max(ys)) / 2, (min(xs) + max(xs)) / 2], zoom_start=13)
        m.fit_bounds([[min(ys), min(xs)], [max(ys), max(xs)]])
    else:
        m = folium.Map(location=[52.2053, 0.1218], zoom_start=12)
    for layer in layers:
        layer.add_to(m)
    folium.LayerControl().add_to(m)
    path.parent.mkdir(parents=True, exist_ok=True)
    m.save(str(path))
    return path

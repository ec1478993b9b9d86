"""Composites on a map: one HTML page that works offline.

The page (:func:`write_map`) draws every phrase's composites as one deck.gl
layer (WebGL) over a Leaflet map, with the program's places, a legend, a
choice of the field to colour by, a time slider and a popup per composite
with its times in the program's time zone. Leaflet and deck.gl come from the
npm packages that ``scripts/setup.sh`` installs in ``web/node_modules``
(pinned by ``web/package-lock.json``) and are inlined into the page: no CDN,
no request at all unless a tile server is asked for (``tiles``).

A bus-day of ``Stuck`` is about 260k composites; the page holds them as
columns (:func:`encode_layer`): hulls simplified to what a screen shows
(:data:`TOLERANCE`), their vertices quantised to 1e-6 degrees and
delta-encoded as int32, times as float64 epoch seconds, text fields as codes
into their distinct values; all of it gzip-compressed and base64-encoded in
the page, which the browser inflates itself (``DecompressionStream``).
"""
from __future__ import annotations

import base64
import gzip
import html
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import shapely

from spatec.errors import SpatecError

#: Colours of the phrases' layers, in order (RGB).
COLOURS = ((228, 26, 28), (55, 126, 184), (77, 175, 74), (152, 78, 163), (255, 127, 0),
           (166, 86, 40), (247, 129, 191), (23, 190, 207))
FIXED = ("phrase", "id", "lo", "hi", "hull", "events")
#: Degrees: hulls are simplified to within this of their outline (about a metre).
TOLERANCE = 1e-5
#: Vertices are stored in these units of a degree (about 0.1 m).
QUANTUM = 1e-6
#: The npm packages' files the page inlines, in load order (under ``web/node_modules``).
SCRIPTS = ("leaflet/dist/leaflet.js", "@deck.gl/core/dist.min.js", "@deck.gl/layers/dist.min.js",
           "@deck.gl/extensions/dist.min.js", "deck.gl-leaflet/dist/deck.gl-leaflet.umd.min.js")
STYLES = ("leaflet/dist/leaflet.css",)
#: Emit field types → how the page shows them.
KINDS = {"str": "text", "bool": "bool", "time": "time", "duration": "duration"}


class MapError(SpatecError):
    """The page cannot be made (its assets are missing, a bad field to colour by)."""


def assets_dir() -> Path:
    """``web/node_modules`` of this checkout (``SPATEC_WEB_MODULES`` overrides)."""
    env = os.environ.get("SPATEC_WEB_MODULES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "web" / "node_modules"


def _asset(name: str) -> str:
    path = assets_dir() / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        raise MapError(f"the map's assets are missing ({path}): run `bash scripts/setup.sh` "
                       "(it installs them from the npm registry into web/node_modules)") from None


def _inline_css(css: str, base: Path) -> str:
    """Leaflet's stylesheet with its images inlined (a ``url(images/x.png)`` would be a request)."""
    def data_uri(m):
        p = base / m.group(1)
        if not p.exists():
            return "none"
        return "url(data:image/png;base64," + base64.b64encode(p.read_bytes()).decode() + ")"
    return re.sub(r"url\((images/[^)]+\.png)\)", data_uri, css)


def _script(text: str) -> str:
    return "<script>" + text.replace("</script", "<\\/script") + "</script>"


# ------------------------------------------------------------------------------ columns

@dataclass
class Blob:
    """The page's binary columns, appended one after another (8-byte aligned)."""

    parts: list = field(default_factory=list)
    size: int = 0

    def add(self, arr: np.ndarray) -> dict:
        dtype = {np.dtype(np.uint8): "u8", np.dtype(np.int32): "i32", np.dtype(np.uint32): "u32",
                 np.dtype(np.float64): "f64"}[arr.dtype]
        arr = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False))
        spec = {"dtype": dtype, "offset": self.size, "length": int(arr.size)}
        data = arr.tobytes()
        pad = (-len(data)) % 8
        self.parts.append(data + b"\0" * pad)
        self.size += len(data) + pad
        return spec

    def encoded(self) -> str:
        return base64.b64encode(gzip.compress(b"".join(self.parts), compresslevel=6, mtime=0)).decode("ascii")


def drawable(hulls) -> np.ndarray:
    """Each hull (WKT) as a polygon to draw, simplified to :data:`TOLERANCE`; None where a
    composite has no place. A hull that is a point or a segment (discs of no radius) is
    drawn as a small polygon around it."""
    wkt = np.asarray(pd.Series(hulls).astype(object).where(pd.notna(pd.Series(hulls)), None), dtype=object)
    geoms = shapely.from_wkt(wkt)
    ok = ~(shapely.is_missing(geoms) | shapely.is_empty(geoms))
    g = geoms[ok]
    # (Douglas-Peucker without the topology checks: a hull is convex, so what it keeps is
    # too; five times faster on a bus-day)
    g = shapely.simplify(g, TOLERANCE, preserve_topology=False)
    flat = (shapely.get_type_id(g) != shapely.GeometryType.POLYGON) | shapely.is_empty(g)
    if flat.any():
        g[flat] = geoms[ok][flat]
        flat = shapely.get_type_id(g) != shapely.GeometryType.POLYGON
    if flat.any():
        g[flat] = shapely.buffer(shapely.convex_hull(g[flat]), 2 * TOLERANCE, quad_segs=2)
    out = np.full(len(geoms), None, dtype=object)
    out[ok] = g
    return out


def encode_layer(blob: Blob, df: pd.DataFrame, schema: list, origin: tuple) -> dict:
    """One phrase's composites as the page's columns (in ``blob``), and what the page
    needs to read them: the polygons' vertex starts and delta-encoded vertices, ``lo`` and
    ``hi`` (epoch seconds), the ids and each emit field (floats, NaN for none; text as
    codes into its distinct values). Composites with no place are left out (counted)."""
    polys = drawable(df["hull"].to_numpy(dtype=object)) if len(df) else np.array([], dtype=object)
    keep = np.flatnonzero(pd.notna(polys)) if len(polys) else np.array([], dtype=np.int64)
    df = df.iloc[keep]
    rings = shapely.get_exterior_ring(polys[keep]) if len(keep) else np.array([], dtype=object)
    coords, index = shapely.get_coordinates(rings, return_index=True) if len(keep) else (np.zeros((0, 2)), np.zeros(0, int))
    q = np.rint(coords / QUANTUM).astype(np.int64) - np.asarray(origin, dtype=np.int64)
    deltas = np.diff(q, axis=0, prepend=np.zeros((1, 2), dtype=np.int64)).astype(np.int32)
    starts = np.searchsorted(index, np.arange(len(keep) + 1)).astype(np.uint32)
    spec = {"n": int(len(keep)), "undrawn": int(len(polys) - len(keep)),
            "starts": blob.add(starts), "coords": blob.add(deltas.reshape(-1)),
            "lo": blob.add(df["lo"].to_numpy(dtype=np.int64) / 1e6),
            "hi": blob.add(df["hi"].to_numpy(dtype=np.int64) / 1e6)}
    ids = [str(i) for i in df["id"].tolist()]
    if ids and all(len(i) == 32 and re.fullmatch(r"[0-9a-f]{32}", i) for i in ids):
        spec["ids"] = blob.add(np.frombuffer(bytes.fromhex("".join(ids)), dtype=np.uint8))
    else:
        codes, uniques = pd.factorize(pd.Series(ids, dtype=object))
        spec["ids"] = blob.add(codes.astype(np.int32))
        spec["id_values"] = [str(u) for u in uniques]
    fields = []
    for name, t in schema:
        kind = KINDS.get(t, "number")
        s = df[name] if name in df.columns else pd.Series([None] * len(df), dtype=object)
        f = {"name": name, "kind": kind}
        if kind == "text":
            codes, uniques = pd.factorize(s.astype(object).where(s.notna(), None), use_na_sentinel=True)
            f["column"] = blob.add(codes.astype(np.int32))
            f["values"] = [str(u) for u in uniques]
        elif kind == "time":
            f["column"] = blob.add(pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64) / 1e6)
        else:
            f["column"] = blob.add(pd.to_numeric(s.astype(object).where(s.notna(), None).map(
                lambda v: float(v) if isinstance(v, (bool, np.bool_)) else v), errors="coerce").to_numpy(np.float64))
        fields.append(f)
    spec["fields"] = fields
    spec["bounds"] = (coords.min(axis=0).tolist() + coords.max(axis=0).tolist()) if len(coords) else None
    return spec


def places_geojson(program) -> dict:
    """The program's places as GeoJSON: circles as points with a ``radius`` (metres),
    polygons as they are declared (lon/lat)."""
    features = []
    for name, pd_ in sorted((program.places if program is not None else {}).items()):
        if pd_.kind == "circle":
            geom = {"type": "Point", "coordinates": [pd_.lon, pd_.lat]}
            props = {"name": name, "radius": pd_.radius}
        else:
            geom = json.loads(shapely.to_geojson(shapely.from_wkt(pd_.wkt)))
            props = {"name": name + (f" (+{pd_.widen:g} m)" if pd_.widen else ""), "radius": 0}
        features.append({"type": "Feature", "geometry": geom, "properties": props})
    return {"type": "FeatureCollection", "features": features}


# ------------------------------------------------------------------------------ the page

def write_map(frames: dict, path, program=None, plans=None, tz: str | None = None, colour: str | None = None,
              tiles: str | None = None, title: str | None = None) -> Path:
    """Write ``frames`` (phrase → output rows, as the runners return them) as an HTML map.

    ``program``: its places are drawn and its time zone is the popups' (``tz``
    overrides); ``plans``: phrase → plan, for the emit fields' types (else
    guessed from the columns); ``colour``: the emit field to colour by at
    first (the page can change it); ``tiles``: a tile URL template for a
    background map (off by default: it is the only thing that would leave
    the machine)."""
    path = Path(path)
    tz = tz or (program.timezone if program is not None else "UTC")
    blob = Blob()
    names = sorted(frames)
    los, his, bounds = [], [], []
    for name in names:
        df = frames[name]
        if len(df):
            los.append(int(df["lo"].min()))
            his.append(int(df["hi"].max()))
    t0 = min(los) / 1e6 if los else 0.0
    t1 = max(his) / 1e6 if his else 0.0
    origin = _origin(frames)
    layers = []
    fields_seen = set()
    for i, name in enumerate(names):
        df = frames[name]
        schema = _schema(df, (plans or {}).get(name))
        spec = encode_layer(blob, df, schema, origin)
        spec.update(phrase=name, colour=list(COLOURS[i % len(COLOURS)]))
        if spec["bounds"]:
            bounds.append(spec["bounds"])
        fields_seen.update(n for n, _ in schema)
        layers.append(spec)
    if colour and colour not in fields_seen:
        known = ", ".join(sorted(fields_seen)) or "none"
        raise MapError(f"--map-colour {colour!r}: no phrase emits a field of that name (fields: {known})")
    b = np.array(bounds) if bounds else None
    meta = {"title": title or (Path(program.root).name if program is not None else "spatec"),
            "tz": tz, "t0": t0, "t1": t1, "origin": list(origin), "layers": layers,
            "bounds": [float(b[:, 0].min()), float(b[:, 1].min()), float(b[:, 2].max()), float(b[:, 3].max())]
            if b is not None else None,
            "places": places_geojson(program), "colour": colour or "", "tiles": tiles}
    base = assets_dir()
    css = "\n".join(_inline_css(_asset(s), (base / s).parent) for s in STYLES)
    page = PAGE.format(title=html.escape(meta["title"]), css=css, style=STYLE,
                       scripts="\n".join(_script(_asset(s)) for s in SCRIPTS),
                       meta=_script("const SPATEC_META = " + json.dumps(meta, allow_nan=False) + ";"),
                       data=blob.encoded(),
                       app=_script((Path(__file__).parent / "mapview.js").read_text(encoding="utf-8")))
    path.parent.mkdir(parents=True, exist_ok=True)
    from spatec.storage.atomic import atomic_write

    atomic_write(path, lambda tmp: Path(tmp).write_text(page, encoding="utf-8"))
    return path


def _origin(frames: dict) -> tuple:
    """The quantised south-west corner the vertices are counted from (any point will do:
    the first delta is the first vertex itself; the corner keeps it small)."""
    for df in frames.values():
        for w in df["hull"].tolist()[:1]:
            if isinstance(w, str) and w:
                g = shapely.from_wkt(w)
                if g is not None and not g.is_empty:
                    x, y = g.bounds[:2]
                    return (int(math.floor(x / QUANTUM)), int(math.floor(y / QUANTUM)))
    return (0, 0)


def _schema(df: pd.DataFrame, plan) -> list:
    if plan is not None:
        return list(plan.schema)
    out = []
    for c in df.columns:
        if c in FIXED:
            continue
        out.append((c, "number" if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
                    else "bool" if pd.api.types.is_bool_dtype(df[c]) else "str"))
    return out


STYLE = """
html, body, #map { margin: 0; height: 100%; font: 13px/1.35 system-ui, sans-serif; }
#map { background: #f4f3ef; }
.spatec-panel { background: rgba(255,255,255,.94); padding: 8px 10px; border-radius: 6px;
  box-shadow: 0 1px 5px rgba(0,0,0,.3); max-width: 300px; }
.spatec-panel .title { font-weight: 600; font-size: 14px; }
.spatec-panel .sub, .spatec-panel .note { color: #666; font-size: 12px; }
.spatec-panel .section { margin-top: 6px; font-weight: 600; }
.spatec-panel .row { display: flex; align-items: center; gap: 5px; }
.spatec-panel .entry { font-size: 12px; }
.spatec-panel .ends { justify-content: space-between; }
.spatec-panel .n { color: #666; margin-left: auto; font-variant-numeric: tabular-nums; }
.sw { display: inline-block; width: 12px; height: 12px; border-radius: 2px; border: 1px solid rgba(0,0,0,.3); }
.sw.place { border: 2px dashed #222; background: transparent; margin-right: 4px; }
.ramp { height: 10px; margin: 4px 0 2px; border-radius: 2px; }
.spatec-time input[type=range] { width: 260px; display: block; }
.place-label { background: rgba(255,255,255,.8); border: 0; box-shadow: none; font-weight: 600; }
.leaflet-popup-content table { border-collapse: collapse; margin-top: 4px; }
.leaflet-popup-content th { text-align: left; padding-right: 8px; color: #555; font-weight: 500; }
.leaflet-popup-content td.id { font-family: monospace; font-size: 11px; }
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style><style>{style}</style>
</head><body><div id="map"></div>
{scripts}
{meta}
<script id="spatec-data" type="application/octet-stream">{data}</script>
{app}
</body></html>
"""

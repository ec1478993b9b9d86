"""Composites on a map: one HTML page that works offline.

The page (:func:`write_map`) draws every phrase's composites as one deck.gl
layer (WebGL) over a Leaflet map, with the places the program uses (place sets
clustered when many, labels placed so that none overlaps another), a background
of the input's own positions (the roads the buses drive: no tiles needed), a
legend, a choice of the field to colour by, a time slider and a popup per
composite with its times in the program's time zone. Leaflet and deck.gl come from the
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


def used_places(program) -> tuple[list, list]:
    """The names of the single places and of the place sets the program's phrases use
    (``at P``, ``within D of P``), in the order they are first used: the map draws these
    only, not every place an included file declares."""
    from spatec.frontend import ast as A

    singles, sets = {}, {}
    for info in (program.phrases if program is not None else ()):
        for node in A.walk(info.phrase):
            name = getattr(node, "place", None) if isinstance(node, (A.AtPlace, A.NearPlace)) else None
            if name is None:
                continue
            if name in program.place_sets:
                sets.setdefault(name, None)
            elif name in program.places:
                singles.setdefault(name, None)
    return list(singles), list(sets)


def _display_geometry(pd_):
    """A place's region as the page draws it, in lon/lat: a line widened into its corridor
    (buffered in the UTM zone of its centre), a polygon widened likewise; None for a circle."""
    if pd_.kind == "circle":
        return None
    g = shapely.from_wkt(pd_.wkt)
    if not pd_.widen:
        return g
    from pyproj import Transformer

    from spatec.spatial.crs import utm_epsg

    c = g.centroid
    crs = utm_epsg(c.x, c.y)
    fwd = Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    back = Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    metric = shapely.transform(g, lambda xy: np.column_stack(fwd.transform(xy[:, 0], xy[:, 1])))
    grown = shapely.simplify(shapely.buffer(metric, pd_.widen, quad_segs=4), 1.0)
    return shapely.transform(grown, lambda xy: np.column_stack(back.transform(xy[:, 0], xy[:, 1])))


def _feature(geom_or_circle, props: dict) -> dict:
    return {"type": "Feature", "geometry": geom_or_circle, "properties": props}


def places_geojson(program, names=None) -> dict:
    """The program's single places (``names``: these only; default: the ones its phrases
    use) as GeoJSON: circles as points with a ``radius`` (metres), polygons and corridors as
    the regions they are (lon/lat)."""
    if names is None:
        names = used_places(program)[0]
    features = []
    for name in sorted(names):
        pd_ = program.places[name]
        if pd_.kind == "circle":
            features.append(_feature({"type": "Point", "coordinates": [pd_.lon, pd_.lat]},
                                     {"name": name, "radius": pd_.radius}))
        else:
            geom = json.loads(shapely.to_geojson(_display_geometry(pd_)))
            label = name + (f" (±{pd_.widen:g} m)" if pd_.widen and pd_.kind != "line" else "")
            features.append(_feature(geom, {"name": label, "radius": 0}))
    return {"type": "FeatureCollection", "features": features}


#: the attribute a set's place is labelled by, the first of these it has (else its id)
LABEL_ATTRS = ("name", "stop_name", "route_short_name", "shape_id", "stop_id", "route_id", "id")


def place_sets_meta(program, names=None) -> list:
    """Each used place set for the page: its circles as ``[lon, lat, radius]``, its other
    places as GeoJSON features, and a label per place (the page clusters them when many)."""
    if names is None:
        names = used_places(program)[1]
    out = []
    for name in names:
        ps = program.place_sets[name]
        attr = next((a for a in LABEL_ATTRS if a in ps.attrs), None)
        labels = [str(v.get(attr)) if attr and v.get(attr) is not None else ps.place_id(i)
                  for i, v in enumerate(ps.values)]
        points, shapes = [], []
        for i, p in enumerate(ps.places):
            if p.kind == "circle":
                points.append([round(p.lon, 7), round(p.lat, 7), p.radius, i])
            else:
                g = _display_geometry(p)
                c = g.representative_point()
                shapes.append(_feature(json.loads(shapely.to_geojson(shapely.set_precision(g, 1e-6))),
                                       {"index": i, "at": [round(c.x, 7), round(c.y, 7)]}))
        out.append({"name": name, "n": len(ps), "labels": labels, "points": points,
                    "shapes": {"type": "FeatureCollection", "features": shapes}})
    return out


# ------------------------------------------------------------------------------ the background

#: positions further apart than these are not joined by a line (a gap in the feed, a jump)
BACKGROUND_GAP_S = 120
BACKGROUND_JUMP_M = 500.0
#: at most this many segments: past it, coarser grids until the repeats merge
BACKGROUND_SEGMENTS = 300_000


def background_segments(events: dict | None) -> tuple[np.ndarray, float]:
    """The roads the buses drive, from the input's own positions: each source's successive
    fixes (of event types with a source and a point), joined where they are close in time and
    space, as unique segments ``[x0, y0, x1, y1]`` on a grid of ``quantum`` degrees
    (1e-5, about a metre; coarser while there are more than :data:`BACKGROUND_SEGMENTS`)."""
    if not events:
        return np.zeros((0, 4), dtype=np.int64), 1e-5
    parts = [df[["_source", "_t", "_lon", "_lat"]] for df in events.values()
             if len(df) and "_place" in df.columns and df["_source"].notna().any()]
    parts = [p[p["_lon"].notna() & p["_lat"].notna()] for p in parts]
    if not parts or not sum(len(p) for p in parts):
        return np.zeros((0, 4), dtype=np.int64), 1e-5
    df = pd.concat(parts, ignore_index=True).sort_values(["_source", "_t"], kind="stable")
    src = df["_source"].astype(str).to_numpy()
    t = df["_t"].to_numpy(np.int64) / 1e6
    lon, lat = df["_lon"].to_numpy(float), df["_lat"].to_numpy(float)
    k = 111_320.0 * np.cos(np.radians(lat[1:]))
    step = np.hypot((lon[1:] - lon[:-1]) * k, (lat[1:] - lat[:-1]) * 110_540.0)
    join = (src[1:] == src[:-1]) & (t[1:] - t[:-1] <= BACKGROUND_GAP_S) & (step <= BACKGROUND_JUMP_M)
    a, b = np.flatnonzero(join), np.flatnonzero(join) + 1
    quantum = 1e-5
    while True:
        x0, y0 = np.rint(lon[a] / quantum), np.rint(lat[a] / quantum)
        x1, y1 = np.rint(lon[b] / quantum), np.rint(lat[b] / quantum)
        seg = np.column_stack([x0, y0, x1, y1]).astype(np.int64)
        flip = (seg[:, 0] > seg[:, 2]) | ((seg[:, 0] == seg[:, 2]) & (seg[:, 1] > seg[:, 3]))
        seg[flip] = seg[flip][:, [2, 3, 0, 1]]
        seg = seg[(seg[:, 0] != seg[:, 2]) | (seg[:, 1] != seg[:, 3])]   # standing still draws nothing
        seg = np.unique(seg, axis=0)
        if len(seg) <= BACKGROUND_SEGMENTS:
            return seg, quantum
        quantum *= 2


# ------------------------------------------------------------------------------ the page

def write_map(frames: dict, path, program=None, plans=None, tz: str | None = None, colour: str | None = None,
              tiles: str | None = None, title: str | None = None, background: dict | None = None) -> Path:
    """Write ``frames`` (phrase → output rows, as the runners return them) as an HTML map.

    ``program``: its places are drawn and its time zone is the popups' (``tz``
    overrides); ``plans``: phrase → plan, for the emit fields' types (else
    guessed from the columns); ``colour``: the emit field to colour by at
    first (the page can change it); ``tiles``: a tile URL template for a
    background map (off by default: it is the only thing that would leave
    the machine); ``background``: the input's canonical events (type → frame),
    whose positions draw the roads the buses drive (:func:`background_segments`).
    Only the places the phrases use are drawn: single places with their names,
    place sets clustered by the page when many."""
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
    singles, sets = used_places(program)
    seg, quantum = background_segments(background)
    bg_origin = seg.min(axis=0)[:2] if len(seg) else np.zeros(2, dtype=np.int64)
    rel = (seg - np.tile(bg_origin, 2)).astype(np.int32) if len(seg) else np.zeros((0, 4), dtype=np.int32)
    meta = {"title": title or (Path(program.root).name if program is not None else "spatec"),
            "tz": tz, "t0": t0, "t1": t1, "origin": list(origin), "layers": layers,
            "bounds": [float(b[:, 0].min()), float(b[:, 1].min()), float(b[:, 2].max()), float(b[:, 3].max())]
            if b is not None else None,
            "places": places_geojson(program, singles) if program is not None else places_geojson(None, []),
            "sets": place_sets_meta(program, sets) if program is not None else [],
            "background": {"n": int(len(seg)), "quantum": quantum, "origin": [int(v) for v in bg_origin],
                           "segments": blob.add(rel.reshape(-1))},
            "colour": colour or "", "tiles": tiles}
    if meta["bounds"] is None and len(seg):     # no composite: the input's extent
        lo_, hi_ = (seg[:, :2].min(axis=0) * quantum).tolist(), (seg[:, 2:].max(axis=0) * quantum).tolist()
        meta["bounds"] = [lo_[0], lo_[1], hi_[0], hi_[1]]
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
.place-label { background: rgba(255,255,255,.85); border-radius: 3px; font: 600 12px/18px system-ui, sans-serif;
  color: #111; text-align: center; white-space: nowrap; box-shadow: 0 0 2px rgba(0,0,0,.35); }
.place-label.set { font-weight: 500; color: #37474f; }
.cluster-count { color: #fff; font: 600 11px system-ui, sans-serif; display: flex; align-items: center;
  justify-content: center; }
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

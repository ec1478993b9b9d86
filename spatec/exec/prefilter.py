"""The leaf pre-filter: events that no part of a phrase can use dropped before
matching, by a spatial join of the events against the regions its leaves need
(the Sedona SQL dialect, run by the configured engine) — here the form that runs where
the events are Arrow batches or frames (a Spark task, this process); on Spark, a Sedona
join of the events' DataFrame where that pays (:mod:`spatec.runners.spark.sedona`).

Before any projection, a fix is tested in lon/lat against a box around each region
(:func:`candidates`): only the fixes near a region are projected and joined, a few
thousand of them in numpy (the shapely engine's answers, every engine's), more by the
configured engine."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import shapely

from spatec.frontend import ast as A
from spatec.plan.nodes import PhrasePlan
from spatec.spatial.crs import Projector
from spatec.storage.atomic import safe_name


def prefiltered(table: pa.Table, regions: dict, crs: str, engine: str) -> pa.Table:
    """The events of ``table`` (canonical columns) that possibly meet one of ``regions``."""
    names = sorted(regions)
    flags = [f"_in_{safe_name(n)}" for n in names]
    fn = flag_fn([(n, regions[n]) for n in names], flags, crs, task_engine(engine))
    kept = []
    # (one batch: the engine is called once per table, not per ingest chunk in it)
    for b in fn(table.combine_chunks().to_batches()):
        keep = np.zeros(b.num_rows, dtype=bool)
        for f in flags:
            keep |= b.column(b.schema.get_field_index(f)).to_numpy(zero_copy_only=False)
        kept.append(b.filter(pa.array(keep)).select(table.schema.names))
    if not kept:
        return table.slice(0, 0)
    return pa.Table.from_batches(kept).cast(table.schema)


def task_engine(name: str) -> str:
    """The engine that runs inside a Spark task for the configured ``name``: the
    staged exchange's tasks hold their events as Arrow, never as a DataFrame a Sedona
    join could take, so there ``sedona-spark`` runs the same SQL in SedonaDB."""
    from spatec.spatial.engines import SedonaDBEngine

    if name in ("sedona-spark", "sedonadb"):
        return "sedonadb" if SedonaDBEngine.available() else "shapely"
    return name


def prefilter_regions(plan: PhrasePlan, program, crs: str) -> dict:
    """Event type → ``{name: Loc}``: the phrase's pre-filter regions
    (``plan.physical.prefilter``, :mod:`spatec.plan.prefilter`) projected with ``crs``."""
    from spatec.automata.patterns import PatternCompiler

    from spatec.automata.places import place_loc

    proj = Projector(crs)
    compiler = PatternCompiler(program.places, program.timezone, proj)
    out: dict = {}
    for t, rs in plan.physical.prefilter:
        mine = out.setdefault(t, {})
        for r in rs:
            ps = program.place_sets.get(getattr(r.pattern, "place", None))
            if ps is not None:      # a place set: every place of it (in file order)
                for i, pd in enumerate(ps.places):
                    mine[f"{r.name}#{i}"] = place_loc(pd, proj)
            else:
                mine[r.name] = _region(r.pattern, compiler)
    return out


#: Regions above which the lon/lat boxes are not tried (a box test a region: the engine's
#: spatial index joins a place set at once).
BOXES_MAX = 64


def _region(p, compiler):
    if isinstance(p, A.AtPlace):
        return compiler.region(p.place)
    if isinstance(p, A.NearPlace):
        return compiler.region(p.place, p.distance.metres())
    return compiler.shape_region(p.shape)



def flag_fn(regions: list, flags: list, crs: str, engine: str):
    def run(batches):
        from spatec.spatial import engines as E

        eng = E.engine(engine)
        proj = Projector(crs)
        for b in batches:
            if b.num_rows:
                yield _flag_batch(b, regions, flags, proj, eng)

    return run


#: Candidates (:func:`candidates`) up to this many are joined in numpy (the shapely engine's
#: :func:`~spatec.spatial.stamps.relate_many`, whose answers are every engine's): a query of
#: SedonaDB costs ~10 ms whatever its size, more than a few thousand events take in numpy.
SMALL_JOIN = 20_000


def keep_mask(df, regions: dict, crs: str, engine: str) -> np.ndarray:
    """Which events of a canonical frame possibly meet one of ``regions`` (name → Loc)."""
    cols = {c: df[c] for c in ("_place", "_lon", "_lat", "_r", "_geom")}
    b = pa.RecordBatch.from_arrays([pa.array(np.asarray(cols["_place"], dtype=object), pa.string()),
                                    pa.array(np.asarray(cols["_lon"], dtype=float)),
                                    pa.array(np.asarray(cols["_lat"], dtype=float)),
                                    pa.array(np.asarray(cols["_r"], dtype=float)),
                                    pa.array(np.asarray(cols["_geom"], dtype=object), pa.string())],
                                   names=["_place", "_lon", "_lat", "_r", "_geom"])
    names = sorted(regions)
    flags = [f"_in_{safe_name(n)}" for n in names]
    from spatec.spatial import engines as E

    got = _flag_batch(b, [(n, regions[n]) for n in names], flags, Projector(crs), E.engine(task_engine(engine)))
    keep = np.zeros(len(df), dtype=bool)
    for f in flags:
        keep |= got.column(got.schema.get_field_index(f)).to_numpy(zero_copy_only=False)
    return keep


def _flag_batch(b: pa.RecordBatch, regions, flags, proj, eng) -> pa.RecordBatch:
    """The batch with a flag per region: its events that possibly meet it. Only the
    candidates (:func:`candidates`) are projected and joined by the engine; the
    others meet none."""
    n = b.num_rows
    kinds = b.column(b.schema.get_field_index("_place"))
    lon = b.column(b.schema.get_field_index("_lon")).to_numpy(zero_copy_only=False).astype(float)
    lat = b.column(b.schema.get_field_index("_lat")).to_numpy(zero_copy_only=False).astype(float)
    r = b.column(b.schema.get_field_index("_r")).to_numpy(zero_copy_only=False).astype(float)
    r = np.where(np.isfinite(r), r, 0.0)
    pts = _kind(kinds, "point")
    cand = np.flatnonzero(candidates(regions, proj, pts, lon, lat, r))
    m = len(cand)
    xs, ys = np.full(m, np.nan), np.full(m, np.nan)
    cpts = pts[cand]
    if cpts.any():
        xs[cpts], ys[cpts] = proj.forward(lon[cand][cpts], lat[cand][cpts])
    wkb = [None] * m
    geo = np.flatnonzero(_kind(kinds, "geom")[cand])
    if len(geo):
        wkts = np.asarray(b.column(b.schema.get_field_index("_geom")).take(pa.array(cand[geo])).to_pylist(),
                          dtype=object)
        gs = shapely.from_wkt(wkts)
        gs = shapely.transform(gs, lambda c: np.column_stack(proj.forward(c[:, 0], c[:, 1])))
        for i, g in zip(geo, gs):
            wkb[i] = shapely.to_wkb(g)
    events = pa.table({"ev": pa.array(cand.astype(np.int64)), "x": pa.array(xs), "y": pa.array(ys),
                       "r": pa.array(r[cand]), "wkb": pa.array(wkb, pa.binary())})
    if m <= SMALL_JOIN:
        from spatec.spatial import engines as E

        eng = E.engine("shapely")
    pairs = eng.join_arrow(events, regions)
    ev = pairs.column("ev").to_numpy()
    reg = np.asarray(pairs.column("region").to_pylist(), dtype=object)
    cols = list(b.columns)
    for (name, _), flag in zip(regions, flags):
        f = np.zeros(n, dtype=bool)
        f[ev[reg == name]] = True
        cols.append(pa.array(f))
    return pa.RecordBatch.from_arrays(cols, names=list(b.schema.names) + flags)


def _kind(kinds: pa.Array, name: str) -> np.ndarray:
    """Where the ``_place`` column says ``name`` (False where it is missing)."""
    if pa.types.is_dictionary(kinds.type):
        kinds = kinds.cast(kinds.type.value_type)
    return pc.fill_null(pc.equal(kinds, name), False).to_numpy(zero_copy_only=False)


#: Metres a region's box is grown by beyond its own radius and the events' largest.
BOX_MARGIN_M = 10.0
#: Degrees a region's box is grown by once in lon/lat (its edges are sampled: see :func:`lonlat_boxes`).
BOX_MARGIN_DEG = 1e-4
#: A region whose grown box is wider or taller than this many metres gets no box.
BOX_MAX_M = 50_000.0
#: Points sampled on each edge of a box, unprojected.
BOX_SAMPLES = 65
#: Degrees around the boxes within which a point outside them is left out; farther ones are
#: candidates (where the projection may not hold, the engine decides as without the boxes).
BOX_WINDOW_DEG = 5.0


def candidates(regions: list, proj, pts: np.ndarray, lon: np.ndarray, lat: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The events the engine is to join with ``regions`` (``[(name, Loc)]``): every event
    that is not a point (a geometry, or no place: the engine decides), and the points whose
    disc (radius ``r``) may meet a region, tested in lon/lat against a box around each
    (:func:`lonlat_boxes`), without projecting them; a point with no finite position (a
    stamp that may be anywhere), or more than :data:`BOX_WINDOW_DEG` from every box, too. A superset of the events that possibly meet a region:
    the engine's answer on them is the answer."""
    cand = ~pts
    if not pts.any():
        return cand
    if len(regions) > BOXES_MAX:
        return cand | pts
    boxes = lonlat_boxes(regions, proj, float(r[pts].max()))
    if boxes is None:
        return cand | pts
    b = np.array(boxes)
    w = BOX_WINDOW_DEG
    with np.errstate(invalid="ignore"):
        # a point far from every box (or with no finite position) is the engine's to decide: its
        # projection may fail, and a stamp with no finite centre may be anywhere
        near = ~((lon >= b[:, 0].min() - w) & (lon <= b[:, 1].max() + w)
                 & (lat >= b[:, 2].min() - w) & (lat <= b[:, 3].max() + w))
        for lon0, lon1, lat0, lat1 in boxes:
            near |= (lon >= lon0) & (lon <= lon1) & (lat >= lat0) & (lat <= lat1)
    return cand | (pts & near)


def lonlat_boxes(regions: list, proj, reach: float) -> list | None:
    """Per region (a :class:`~spatec.spatial.stamps.Loc` in ``proj``'s metres), a box
    ``(lon0, lon1, lat0, lat1)`` holding every position whose disc of radius at most
    ``reach`` possibly meets it: the region's bounds grown by its radius, ``reach`` and
    :data:`BOX_MARGIN_M`, the rectangle's edges sampled and unprojected, and the box of
    those grown by :data:`BOX_MARGIN_DEG` (on a rectangle under :data:`BOX_MAX_M` wide a
    sampled edge strays from the true one by far less). None when a region has no such box
    (unbounded, too large, across the antimeridian, near a pole): every point is a candidate."""
    t = np.linspace(0.0, 1.0, BOX_SAMPLES)
    out = []
    for _, loc in regions:
        if loc.geom is None or not np.isfinite(loc.r) or not np.isfinite(reach):
            return None
        x0, y0, x1, y1 = shapely.bounds(loc.geom).tolist()
        grow = loc.r + reach + BOX_MARGIN_M
        x0, y0, x1, y1 = x0 - grow, y0 - grow, x1 + grow, y1 + grow
        if not np.isfinite([x0, y0, x1, y1]).all() or x1 - x0 > BOX_MAX_M or y1 - y0 > BOX_MAX_M:
            return None
        xs = np.concatenate([x0 + (x1 - x0) * t, np.full_like(t, x1), x1 - (x1 - x0) * t, np.full_like(t, x0)])
        ys = np.concatenate([np.full_like(t, y0), y0 + (y1 - y0) * t, np.full_like(t, y1), y1 - (y1 - y0) * t])
        lon, lat = proj.inverse(xs, ys)
        lon, lat = np.asarray(lon, dtype=float), np.asarray(lat, dtype=float)
        if not (np.isfinite(lon).all() and np.isfinite(lat).all()) or lon.max() - lon.min() > 90 \
                or np.abs(lat).max() > 84:
            return None
        back_x, back_y = proj.forward(lon, lat)       # (a projection that holds there: it goes back)
        if not np.allclose(back_x, xs, rtol=0, atol=1e-3) or not np.allclose(back_y, ys, rtol=0, atol=1e-3):
            return None
        out.append((lon.min() - BOX_MARGIN_DEG, lon.max() + BOX_MARGIN_DEG,
                    lat.min() - BOX_MARGIN_DEG, lat.max() + BOX_MARGIN_DEG))
    return out

"""Canonical event rows (the frames of :mod:`spatec.events.canonical`) as run-time
events (:class:`~spatec.automata.machine.Ev`), projected to the metric CRS."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import shapely

from spatec.frontend.check import Program
from spatec.spatial import stamps as S
from spatec.spatial.crs import Projector


def attribute_names(program: Program, type_name: str) -> list[str]:
    return [a.name for a in program.events[type_name].attrs]


def to_evs(df: pd.DataFrame, program: Program, projector: Projector) -> list:
    """Canonical event rows (one type) → run-time events, projected."""
    from spatec.automata.machine import Ev

    n = len(df)
    if n == 0:
        return []
    type_name = df["_type"].iloc[0]
    names = attribute_names(program, type_name)
    attr_cols = [python_values(df[c]) for c in names]
    ids = df["_id"].tolist()
    srcs = source_values(df)
    ts, los, his = (df[c].to_numpy(np.int64).tolist() for c in ("_t", "_lo", "_hi"))
    rows = zip(*attr_cols) if names else itertools.repeat((), n)
    return [Ev(type_name, i, src, t, lo, hi, loc, dict(zip(names, vals)))
            for i, src, t, lo, hi, loc, vals in zip(ids, srcs, ts, los, his, _locs(df, projector), rows)]


def _locs(df: pd.DataFrame, projector: Projector) -> list:
    """Each row's location stamp: a disc for a point (all at once when every row is a
    point with finite coordinates: GPS fixes), a grown geometry, or UNIVERSE."""
    n = len(df)
    kinds = df["_place"].to_numpy()
    rs = df["_r"].to_numpy(float)
    xs = np.full(n, np.nan)
    ys = np.full(n, np.nan)
    pts = kinds == "point"
    if pts.any():
        x, y = projector.forward(df["_lon"].to_numpy(float)[pts], df["_lat"].to_numpy(float)[pts])
        xs[pts], ys[pts] = x, y
        if pts.all():
            locs = S.Loc.discs(xs, ys, rs)
            if locs is not None:
                return locs
    geoms = [None] * n
    geo = np.flatnonzero(kinds == "geom")
    if len(geo):
        gs = shapely.from_wkt(df["_geom"].to_numpy()[geo])
        gs = shapely.transform(gs, lambda c: np.column_stack(projector.forward(c[:, 0], c[:, 1])))
        for i, g in zip(geo, gs):
            geoms[i] = g
    out = []
    for i in range(n):
        k = kinds[i]
        if k == "point":
            out.append(S.Loc.disc(float(xs[i]), float(ys[i]), float(rs[i])))
        elif k == "geom":
            out.append(S.Loc.of(geoms[i], float(rs[i])))
        else:
            out.append(S.UNIVERSE)
    return out


def source_values(df: pd.DataFrame) -> list:
    """The frame's ``_source`` column as Python values, None where it is missing."""
    srcs = df["_source"].tolist()
    if float in set(map(type, srcs)):
        srcs = [None if is_missing(v) else v for v in srcs]
    return srcs


def is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def python_values(s: pd.Series) -> list:
    """A column as Python values with None for missing (NaN, NA)."""
    if s.dtype == object or s.dtype == np.float64:
        vals = s.tolist()
        miss = pd.isna(s.to_numpy())
        if miss.any():
            for i in np.flatnonzero(miss).tolist():
                vals[i] = None
        return vals
    if s.dtype.kind in "iub" and isinstance(s.dtype, np.dtype):
        return s.tolist()   # a numpy int or bool column (times: int64 µs) has nothing missing
    return s.astype(object).where(s.notna(), None).tolist()


def final_watermark(frames: dict) -> int:
    """The batch's final watermark: the latest event time (``_hi``) over every input event."""
    his = [int(df["_hi"].max()) for df in frames.values() if len(df)]
    return max(his) if his else 0


def event_order(ev):
    return (ev.hi, ev.lo, ev.type, ev.id)

"""Hull columns for GeoParquet: each hull's WKB written from its numbers, no text between.

GeoParquet stores a composite's hull as the WKB of its WKT text (7 decimals): until
now every hull was written as text (:func:`spatec.spatial.wkt.polygon_wkts`) and the
text read back (:func:`spatec.spatial.wkb.wkb_column`). For the polygons that
``polygon_wkts`` writes itself the text of a coordinate is the decimal ``n / 10**7``
(an integer ``n`` it rounds to, :func:`spatec.spatial.wkt.read_back`), and reading that
text back (``strtod``, correctly rounded) gives the double nearest ``n / 10**7``, which
is ``float(n) / 1e7``: ``n`` (below 2**53) and ``1e7`` are exact doubles and IEEE
division is correctly rounded. So the WKB can be written from those doubles, byte for
byte what the text gave.

A hull column is an Arrow struct array (:data:`HULL`), one row per hull: ``wkb`` where
its WKB was written from the numbers (a polygon, with its bounding box in ``xmin`` ..
``ymax``), else ``text``: the WKT, read as before (:func:`wkb_column`). It travels in the
rows frames as any Arrow column does (taken, sorted) and :func:`hull_wkb` gives the
:class:`~spatec.spatial.wkb.WkbColumn` that ``wkb_column`` gives for the texts.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import shapely

from spatec.spatial.wkb import WkbColumn, in_order, wkb_column, wkb_values

__all__ = ["HULL", "hull_array", "hull_texts", "hull_wkb", "polygon_hulls", "text_hulls"]

_BOX = ("xmin", "ymin", "xmax", "ymax")
#: The hull column's type.
HULL = pa.struct([("wkb", pa.binary()), ("text", pa.string())] + [(b, pa.float64()) for b in _BOX])


def polygon_hulls(values: np.ndarray, npts: np.ndarray, written: np.ndarray, texts: pa.Array | None) -> pa.StructArray:
    """A hull column of ``len(written)`` polygons: where ``written``, WKB of one closed
    ring of ``npts`` points (in order) of ``values`` (the doubles their text reads back
    as); the others' texts, in order, from ``texts``."""
    m = len(written)
    own = np.flatnonzero(written)
    rest = np.flatnonzero(~written)
    box = np.full((m, 4), np.nan)
    parts_wkb, parts_text = [], []
    if len(own):
        starts = np.zeros(len(npts), dtype=np.int64)
        np.cumsum(npts[:-1], out=starts[1:])
        box[own, :2] = np.minimum.reduceat(values, starts)
        box[own, 2:] = np.maximum.reduceat(values, starts)
        parts_wkb.append((own, wkb_values(values, npts, 3, 2)))
        parts_text.append((own, pa.nulls(len(own), pa.string())))
    if len(rest):
        parts_wkb.append((rest, pa.nulls(len(rest), pa.binary())))
        parts_text.append((rest, texts))
    if not m:
        return text_hulls(pa.array([], pa.string()))
    return _struct(in_order(parts_wkb, m), in_order(parts_text, m), box)


def text_hulls(texts: pa.Array) -> pa.StructArray:
    """A hull column of WKT texts (read as :func:`wkb_column` reads them)."""
    n = len(texts)
    return _struct(pa.nulls(n, pa.binary()), texts.cast(pa.string()), np.full((n, 4), np.nan))


def _struct(wkb: pa.Array, text: pa.Array, box: np.ndarray) -> pa.StructArray:
    return pa.StructArray.from_arrays([wkb, text] + [pa.array(box[:, i]) for i in range(4)], fields=list(HULL))


def hull_array(values) -> pa.StructArray | None:
    """The hull column behind a pandas Series (or array) of ``pd.ArrowDtype(HULL)``;
    None for a column held otherwise."""
    dtype = getattr(values, "dtype", None)
    if not (isinstance(dtype, pd.ArrowDtype) and dtype.pyarrow_dtype == HULL):
        return None
    arr = pa.array(values.array if isinstance(values, pd.Series) else values)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def hull_wkb(arr: pa.StructArray) -> WkbColumn:
    """``wkb_column`` of the hulls' texts: their WKB and GeoParquet facts."""
    n = len(arr)
    wkb, text, *box = arr.flatten()
    own = wkb.is_valid().to_numpy(zero_copy_only=False)
    rest = np.flatnonzero(~own)
    if len(rest) == n:
        return wkb_column(text)
    types, xs, ys, parts = {"Polygon"}, [], [], []
    b = np.column_stack([c.to_numpy(zero_copy_only=False) for c in box])[own]
    xs += [b[:, 0], b[:, 2]]
    ys += [b[:, 1], b[:, 3]]
    parts.append((np.flatnonzero(own), wkb.filter(pa.array(own)) if len(rest) else wkb))
    if len(rest):
        got = wkb_column(text.take(pa.array(rest)))
        types |= got.types
        parts.append((rest, got.wkb))
        if got.bbox is not None:
            xs.append(np.array(got.bbox[0::2]))
            ys.append(np.array(got.bbox[1::2]))
    x, y = np.concatenate(xs), np.concatenate(ys)
    bbox = [float(x.min()), float(y.min()), float(x.max()), float(y.max())]
    if 0.0 in bbox:        # (wkb_column then reads every row's geometry for the facts: as it does)
        return wkb_column(hull_texts(arr))
    return WkbColumn(in_order(parts, n), types, bbox)


def hull_texts(arr: pa.StructArray) -> np.ndarray:
    """The hulls' WKT (the text of a WKB written from the numbers is GEOS's of its
    doubles, which is the text they were read back from)."""
    wkb, text = arr.flatten()[:2]
    out = np.asarray(text.to_pylist(), dtype=object)
    own = np.flatnonzero(wkb.is_valid().to_numpy(zero_copy_only=False))
    if len(own):
        geoms = shapely.from_wkb(np.asarray(wkb.take(pa.array(own)).to_pylist(), dtype=object))
        out[own] = shapely.to_wkt(geoms, rounding_precision=7, trim=True)
    return out

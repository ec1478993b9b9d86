"""WKB of WKT text, column by column, without making a geometry per row.

``wkb_column(texts)`` is ``pa.array(list(shapely.to_wkb(shapely.from_wkt(texts))),
pa.binary())`` byte for byte, with the GeoParquet facts of the column (geometry types,
bounding box) as :func:`geo_facts` reads them from the geometries. GeoParquet output
writes every composite's hull this way (:func:`spatec.sinks.files.parquet_table`).

Rows in the forms spatec's own hulls take (:mod:`spatec.spatial.wkt`) —
``POINT (x y)``, ``LINESTRING (x y, ...)``, ``POLYGON ((x y, ...))`` with one closed ring,
two dimensions, numbers in plain decimal notation — are recognised by a regular
expression over the whole Arrow column, their numbers cut out and cast to doubles by
Arrow (correctly rounded, as GEOS's reader is: ``strtod``), and their WKB written into
one buffer by numpy: little-endian (the byte order ``to_wkb`` writes on this machine,
checked at import), a type word, counts, then the coordinates as they are. Every other
row (EMPTY, Z, holes, multi-parts, nulls, anything shapely would refuse) goes through
shapely as before, so it reads or fails exactly as it did.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import shapely

_NUM = r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_PAIR = _NUM + " " + _NUM
#: (prefix, suffix, WKB type, counts written, geometry type, pattern, least points)
_KINDS = (
    ("POINT (", ")", 1, 0, "Point", rf"^POINT \({_PAIR}\)$"),
    ("LINESTRING (", ")", 2, 1, "LineString", rf"^LINESTRING \({_PAIR}(?:, {_PAIR})+\)$"),
    ("POLYGON ((", "))", 3, 2, "Polygon", rf"^POLYGON \(\({_PAIR}(?:, {_PAIR}){{3,}}\)\)$"),
)
#: Whether this machine's WKB (``shapely.to_wkb``'s native byte order) is what we write.
LITTLE = sys.byteorder == "little" and shapely.to_wkb(shapely.Point(1, 2)) == (
    b"\x01\x01\x00\x00\x00" + np.array([1.0, 2.0], "<f8").tobytes())


@dataclass
class WkbColumn:
    """A hull column as WKB, with the GeoParquet facts of its geometries."""
    wkb: pa.Array                                   # binary, one value per row (null where the text was)
    types: set = field(default_factory=set)         # geometry types of the non-empty geometries
    bbox: list | None = None                        # [xmin, ymin, xmax, ymax] of them, None if none


def geo_facts(geoms: np.ndarray) -> tuple[set, list | None]:
    """Geometry types (with " Z" where they have z) of the non-empty geometries among
    ``geoms`` and their bounding box, as GeoParquet's ``geo`` metadata lists them."""
    present = geoms[~shapely.is_missing(geoms)] if len(geoms) else geoms
    types = {g.geom_type + (" Z" if shapely.has_z(g) else "") for g in present if not g.is_empty}
    nonempty = present[~shapely.is_empty(present)] if len(present) else present
    if not len(nonempty):
        return types, None
    b = shapely.bounds(nonempty)
    return types, [float(b[:, 0].min()), float(b[:, 1].min()), float(b[:, 2].max()), float(b[:, 3].max())]


def _slow(texts: np.ndarray) -> WkbColumn:
    geoms = shapely.from_wkt(texts) if len(texts) else np.array([], dtype=object)
    types, bbox = geo_facts(geoms)
    wkb = pa.array(list(shapely.to_wkb(geoms)) if len(geoms) else [], pa.binary())
    return WkbColumn(wkb, types, bbox)


def wkb_column(texts) -> WkbColumn:
    """WKB of a column of WKT (a pandas Series, numpy array or Arrow string array)."""
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        arr = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
        if not pa.types.is_string(arr.type) and not pa.types.is_large_string(arr.type):
            return _slow(np.asarray(arr.to_pylist(), dtype=object))
    else:
        objs = np.asarray(texts, dtype=object)
        try:
            arr = pa.array(objs, pa.string(), from_pandas=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return _slow(objs)
    if not LITTLE or not len(arr):
        return _slow(np.asarray(arr.to_pylist(), dtype=object))
    return _fast(arr)


def _fast(arr: pa.Array) -> WkbColumn:
    n = len(arr)
    kind = np.full(n, -1, dtype=np.int8)
    for k, (prefix, _, _, _, _, pattern) in enumerate(_KINDS):
        cand = pc.starts_with(arr, prefix).fill_null(False)
        if pc.any(cand).as_py():
            hit = pc.and_(cand, pc.match_substring_regex(arr, pattern).fill_null(False))
            kind[hit.to_numpy(zero_copy_only=False)] = k
    parts, types, xs, ys = [], set(), [], []
    for k, (prefix, suffix, wtype, counts, gtype, _) in enumerate(_KINDS):
        rows = np.flatnonzero(kind == k)
        if not len(rows):
            continue
        sub = arr.take(pa.array(rows))
        inner = pc.utf8_slice_codeunits(sub, len(prefix), -len(suffix))
        tokens = pc.split_pattern(pc.replace_substring(inner, ", ", " "), " ")
        nums = np.asarray(pc.cast(tokens.flatten(), pa.float64()).to_numpy(), dtype=np.float64)
        npts = np.diff(np.asarray(tokens.offsets.to_numpy(), dtype=np.int64)) // 2
        xy = nums.reshape(-1, 2)
        ends = np.cumsum(npts)
        if counts == 2:                              # a ring must be closed, as GEOS checks
            first, last = xy[ends - npts], xy[ends - 1]
            open_ = (first != last).any(axis=1)
            if open_.any():
                kind[rows[open_]] = -1
                keep = ~open_
                rows, npts = rows[keep], npts[keep]
                xy = xy[np.repeat(keep, np.diff(np.concatenate([[0], ends])))]
                if not len(rows):
                    continue
        types.add(gtype)
        xs.append(xy[:, 0])
        ys.append(xy[:, 1])
        parts.append((rows, wkb_values(xy, npts, wtype, counts)))
    slow_rows = np.flatnonzero(kind < 0)
    if len(slow_rows):
        objs = np.asarray(arr.take(pa.array(slow_rows)).to_pylist(), dtype=object)
        slow = _slow(objs)
        types |= slow.types
        parts.append((slow_rows, slow.wkb))
        if slow.bbox is not None:
            xs.append(np.array(slow.bbox[0::2]))
            ys.append(np.array(slow.bbox[1::2]))
    bbox = None
    if xs:
        x, y = np.concatenate(xs), np.concatenate(ys)
        bbox = [float(x.min()), float(y.min()), float(x.max()), float(y.max())]
        if 0.0 in bbox:          # a zero's sign depends on which row gave it: read as before
            return _slow(np.asarray(arr.to_pylist(), dtype=object))
    return WkbColumn(in_order(parts, n), types, bbox)


def wkb_values(xy: np.ndarray, npts: np.ndarray, wtype: int, counts: int) -> pa.Array:
    """WKB (little-endian, 2D) of rows of ``npts`` points each, taken in order from ``xy``:
    byte order, type, then for a line string its number of points, for a polygon its
    number of rings (1) and the ring's number of points, then the coordinates."""
    m = len(npts)
    head = 5 + 4 * counts
    sizes = head + 16 * npts
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError("a part's hulls exceed 2 GB of WKB")
    header = np.zeros((m, head), dtype=np.uint8)
    header[:, 0] = 1
    header[:, 1] = wtype
    words = header[:, 5:].view("<u4") if counts else None
    if counts == 1:
        words[:, 0] = npts
    elif counts == 2:
        words[:, 0] = 1
        words[:, 1] = npts
    # each row's header, then its coordinates: two binary columns over the two buffers
    # (no copy), joined row by row by Arrow
    heads = pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(np.arange(0, head * m + 1, head, dtype=np.int32)),
                                                   pa.py_buffer(header)])
    at = np.zeros(m + 1, dtype=np.int32)
    np.cumsum(16 * np.asarray(npts, dtype=np.int64), out=at[1:])
    coords = pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(at),
                                                    pa.py_buffer(np.ascontiguousarray(xy, dtype="<f8"))])
    return pc.binary_join_element_wise(heads, coords, pa.scalar(b"", pa.binary()))


def in_order(parts: list, n: int) -> pa.Array:
    """One binary array of ``n`` rows from pieces ``[(rows, values)]`` covering them all."""
    if len(parts) == 1:
        return parts[0][1]
    rows = np.concatenate([r for r, _ in parts])
    where = np.empty(n, dtype=np.int64)
    where[rows] = np.arange(n)
    return pa.concat_arrays([v for _, v in parts]).take(pa.array(where))

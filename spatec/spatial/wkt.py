"""WKT of lon/lat polygons written from their coordinate arrays.

:func:`polygon_wkts` gives, byte for byte, what ``shapely.to_wkt(polygons,
rounding_precision=7, trim=True)`` gives (GEOS 3.13 and later), without
building the polygons and without a string per number: every number is
formatted at once with numpy into one buffer, cut into one ``str`` per
polygon.

How GEOS writes a number ``d`` with ``1e-4 <= |d| < 1e17`` (``trim=True``):
it takes the *shortest* decimal that reads back as ``d`` (Ryu), rounds that
decimal to 7 places, half to even, drops trailing zeros (and the point if no
decimal is left) and writes no sign on a number that rounded to zero.
Rounding the shortest decimal rather than the double itself differs from
correct rounding (``"%.7f"``) only when the shortest decimal ends in a 5 at
the 8th place: ``0.12345665`` is written ``0.1234566`` though the double is a
little above it. So, in units of 1e-7 (:func:`_units`):

- ``f = floor(d * 1e7)`` (the product may be a unit in the last place off;
  the comparison below makes that harmless) and the half-way point
  ``b = (2 f + 1) / 2e7`` between ``f`` and ``f + 1``: ``2 f + 1`` and
  ``2e7`` are exact, so IEEE division gives ``fl(b)``, the double nearest to
  the decimal ``b``;
- ``d > fl(b)``: up; ``d < fl(b)``: down (``d < b`` implies ``d <= fl(b)``);
- ``d == fl(b)``: the shortest decimal of ``d`` is ``b`` itself (doubles
  below 400 are less than 1e-13 apart: no other decimal of 8 places or fewer
  reads back as ``d``), so half to even, as GEOS.

Numbers GEOS writes otherwise (below 1e-4 in magnitude, in scientific
notation, ``5e-5``) or that do not fit the layout below (400 or more, not
finite) are rare in lon/lat: within 11 m of the prime meridian or the
equator. A polygon with one is written by GEOS.

The layout: a vertex is a fixed-width row ``x-head x-tail " " y-head y-tail
sep`` (a record of numpy fields, :func:`_row_type`, each written from a table
at once): a head is the sign and integer digits left-aligned in 4 bytes, as
wide as the widest head of the column (the next field overwrites the rest), a
tail the point and 7 decimals, trailing zeros (and a point with no decimal
after it) as NUL bytes, ``sep`` is ``", "`` or, at a ring's end, ``")\\n"``.
The NUL bytes, few, are then deleted in one ``bytes.replace``.
"""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import shapely

from spatec.spatial.hullcol import polygon_hulls, text_hulls
from spatec.spatial.wkb import LITTLE

__all__ = ["polygon_wkts", "read_back"]

#: Decimals written, as ``rounding_precision`` in ``shapely.to_wkt``.
DECIMALS = 7
_UNIT = 10 ** DECIMALS
#: Magnitudes written here (and zero): within them the scaled numbers fit in
#: uint32 and the sign and integer digits in 4 bytes.
_LOW, _HIGH = 1e-4, 400.0
_CHUNK = 512          # polygons at a time: keeps numpy's arrays in cache
#: How far from a half-way point (in units of 1e-7) :func:`_scaled` rounds the product.
_NEAR = 0.5 - 1e-5


def _tables():
    u4 = np.dtype("<u4")
    # head: "-" and the integer digits of 0..400, left-aligned in 4 bytes (index: 2 * ip + neg)
    heads = [((b"-" if neg else b"") + str(i).encode()).ljust(4, b"\0") for i in range(401) for neg in (0, 1)]
    # tail: the point and the first three decimals (index: fhi + 1000 if the last four are
    # zero, when trailing zeros and a bare point become NUL), then the last four
    def trimmed(digits: str, point: bool) -> bytes:
        t = digits.rstrip("0")
        return ((b"." if point and t else b"") + t.encode()).ljust(len(digits) + point, b"\0")
    tail3 = [b"." + f"{i:03d}".encode() for i in range(1000)] + [trimmed(f"{i:03d}", True) for i in range(1000)]
    tail4 = [trimmed(f"{i:04d}", False) for i in range(10_000)]
    return tuple(np.frombuffer(b"".join(t), dtype=u4) for t in (heads, tail3, tail4))


_HEAD, _TAIL3, _TAIL4 = _tables()
#: Separators as little-endian 2-byte words: ", ", and at a ring's end ")" and NUL or ")\n".
_SEP, _CLOSE, _CLOSE_NL = (int.from_bytes(b, "little") for b in (b", ", b")\0", b")\n"))


def _scaled(v: np.ndarray) -> np.ndarray:
    """``v`` in units of 1e-7, rounded as GEOS rounds (module docstring), signed, as
    doubles (integers; ``-0.0`` for ``-0.0``); meaningful where ``|v| < _HIGH``.

    ``t = fl(v * 1e7)`` is within half a unit in the last place of the product (2.4e-7
    below 4e9), and the shortest decimal of ``v``, scaled, within 3e-7 of it: where
    ``t`` is further than :data:`_NEAR` from a half-way point ``rint(t)`` (nearest,
    symmetric about zero) is the integer both round to; the few others take the
    exact comparison (:func:`_scaled_exact`)."""
    t = v * float(_UNIT)
    k = np.rint(t)
    np.subtract(t, k, out=t)
    np.abs(t, out=t)
    near = np.flatnonzero(t > _NEAR)
    if len(near):
        k.reshape(-1)[near] = _scaled_exact(v.reshape(-1)[near])       # (k: new, contiguous)
    return k


def _scaled_exact(v: np.ndarray) -> np.ndarray:
    """:func:`_scaled` by the comparison with the half-way point (module docstring)."""
    f = np.floor(v * float(_UNIT))
    b = (2.0 * f + 1.0) / (2.0 * _UNIT)
    fi = f.astype(np.int64)
    fi += (v > b) | ((v == b) & (fi & 1).astype(bool))
    return fi.astype(np.float64)


def _units(v: np.ndarray) -> np.ndarray:
    """``|v|`` in units of 1e-7 as uint32, rounded as GEOS rounds (module
    docstring); meaningful where ``|v| < _HIGH``."""
    k = _scaled(v)
    np.abs(k, out=k)
    return k.astype(np.uint32)


def _digits(v: np.ndarray) -> tuple:
    """The numbers ``v`` as indices into the tables: ``_HEAD`` (sign and integer digits),
    ``_TAIL3`` (the point and first three decimals) and ``_TAIL4`` (the last four)."""
    k = _units(v)
    ip = k // np.uint32(_UNIT)
    fp = k - ip * np.uint32(_UNIT)
    fhi = fp // np.uint32(10_000)
    flo = fp - fhi * np.uint32(10_000)
    # a sign for negatives: -0.0 is not below zero, and any other number here is at least 1e-4
    return ip + ip + (v < 0), fhi + (flo == 0) * np.uint32(1000), flo


def _head_width(head: np.ndarray) -> int:
    """Bytes the widest head takes: 4 less the trailing bytes NUL in every head."""
    seen = int(np.bitwise_or.reduce(head)) if len(head) else 0
    w = 4
    while w > 1 and not (seen >> (8 * (w - 1))) & 0xFF:
        w -= 1
    return w


@functools.lru_cache(maxsize=None)
def _row_type(wx: int, wy: int) -> np.dtype:
    """A vertex's row for heads ``wx`` and ``wy`` bytes wide: fields written in order, a
    head's 4 bytes overlapping the next field by ``4 - w`` (its NULs, then overwritten)."""
    at = {"xh": 0, "x3": wx, "x4": wx + 4, "sp": wx + 8, "yh": wx + 9, "y3": wx + 9 + wy, "y4": wx + 13 + wy,
          "sep": wx + 17 + wy}
    formats = {"sp": "u1", "sep": "<u2"}
    return np.dtype({"names": list(at), "formats": [formats.get(f, "<u4") for f in at], "offsets": list(at.values()),
                     "itemsize": wx + wy + 19})


def _rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The vertices' rows (:func:`_row_type`), separators ``", "``."""
    hx, x3, x4 = _digits(x)
    hy, y3, y4 = _digits(y)
    hx, hy = _HEAD.take(hx), _HEAD.take(hy)
    row = np.empty(len(x), dtype=_row_type(_head_width(hx), _head_width(hy)))
    # (in the fields' order: a head's NULs beyond its width are overwritten by the next field)
    row["xh"] = hx
    np.take(_TAIL3, x3, out=row["x3"], mode="clip")
    np.take(_TAIL4, x4, out=row["x4"], mode="clip")
    row["sp"] = ord(" ")
    row["yh"] = hy
    np.take(_TAIL3, y3, out=row["y3"], mode="clip")
    np.take(_TAIL4, y4, out=row["y4"], mode="clip")
    row["sep"] = _SEP
    return row


def read_back(v: np.ndarray) -> np.ndarray:
    """The doubles the numbers ``v`` are read back as from the text this module writes
    of them (``strtod`` of the 7 decimals): ``n / 1e7`` for the integer ``n`` the text
    shows, signed; meaningful where this module writes the number (``|v|`` in
    ``[1e-4, 400)`` or zero). ``float(n) / 1e7`` is the double nearest the decimal
    ``n / 10**7`` (both exact doubles, IEEE division correctly rounded), as ``strtod``'s;
    a zero is ``0.0``, unsigned, as its text ``0``."""
    q = _scaled(v)
    q /= float(_UNIT)
    q += 0.0                 # (-0.0 + 0.0 is 0.0; the others as they are)
    return q


def polygon_wkts(xy: np.ndarray, offsets: np.ndarray, arrow: bool | str = False):
    """``shapely.to_wkt(polygons, rounding_precision=7, trim=True).tolist()`` of the
    polygons whose (closed, non-empty) rings are ``xy[offsets[i]:offsets[i + 1]]``.
    ``arrow``: the same texts as an Arrow string array, cut from the buffer they are
    written in, without a Python string each (for a writer that takes Arrow);
    ``"wkb"``: instead of the texts a hull column (:mod:`spatec.spatial.hullcol`) of
    the WKB they read back as, written from the numbers where this module writes the
    text, the texts of the others (for GeoParquet).

    >>> polygon_wkts(np.array([[0.1, 52.0], [0.2, 52.0], [-0.2, 52.1234567], [0.1, 52.0]]), np.array([0, 4]))
    ['POLYGON ((0.1 52, 0.2 52, -0.2 52.1234567, 0.1 52))']
    """
    xy = np.asarray(xy, dtype=float)
    offsets = np.asarray(offsets, dtype=np.int64)
    if arrow == "wkb":
        return _hulls(xy, offsets)
    out: list = []
    for a in range(0, len(offsets) - 1, _CHUNK):
        o = offsets[a:a + _CHUNK + 1]
        got = _chunk(xy[o[0]:o[-1]], o - o[0], arrow)
        out += [got] if arrow else got
    if arrow:
        return pa.concat_arrays(out) if out else pa.array([], pa.string())
    return out


def _hulls(xy: np.ndarray, offsets: np.ndarray) -> pa.StructArray:
    """:func:`polygon_wkts` with ``arrow="wkb"``: the polygons this module writes and
    :func:`~spatec.spatial.wkb.wkb_column` reads as a polygon (a closed ring of four
    points or more, as it reads them back) as WKB from :func:`read_back`'s doubles."""
    m = len(offsets) - 1
    if not LITTLE or not m:
        return text_hulls(polygon_wkts(xy, offsets, arrow=True))
    ours = _ours(xy, offsets)
    counts = np.diff(offsets)
    every = bool(ours.all()) and offsets[0] == 0 and offsets[-1] == len(xy)
    keep = np.repeat(ours, counts) if not every else None
    values = read_back(xy if every else xy[keep])
    npts = counts[ours]
    if len(npts):
        ends = np.cumsum(npts)
        ring = (npts >= 4) & (values[ends - npts] == values[ends - 1]).all(axis=1)
        if not ring.all():
            values = values[np.repeat(ring, npts)]
            npts = npts[ring]
            ours[np.flatnonzero(ours)[~ring]] = False
            keep = np.repeat(ours, counts)
    texts = None
    if not ours.all():
        texts = polygon_wkts(xy[~keep], np.r_[0, np.cumsum(counts[~ours])], arrow=True)
    return polygon_hulls(values, npts, ours, texts)


def _ours(xy: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Which polygons this module writes (the others: GEOS)."""
    m = len(offsets) - 1
    if len(xy) and xy.min() >= _LOW and xy.max() < _HIGH:        # (all positive: no |xy| made)
        return np.diff(offsets) > 0
    a = np.abs(xy)
    if len(xy) and a.min() >= _LOW and a.max() < _HIGH:
        return np.diff(offsets) > 0
    ok = (((a >= _LOW) & (a < _HIGH)) | (xy == 0)).all(axis=1)
    # (an empty polygon's start may be len(xy), out of reduceat's range: clipped, it is masked anyway)
    ours = np.logical_and.reduceat(ok, np.minimum(offsets[:-1], len(xy) - 1)) if len(xy) else np.ones(m, dtype=bool)
    return ours & (np.diff(offsets) > 0)


def _chunk(xy: np.ndarray, offsets: np.ndarray, arrow: bool = False):
    """:func:`polygon_wkts` of a few polygons (offsets from 0)."""
    m = len(offsets) - 1
    ours = _ours(xy, offsets)
    if not ours.all():
        # GEOS writes the polygons with a number it writes otherwise; this module the rest
        out = np.empty(m, dtype=object)
        rings = np.diff(offsets)
        keep = np.repeat(ours, rings)
        out[ours] = _chunk(xy[keep], np.r_[0, np.cumsum(rings[ours])]) if ours.any() else []
        polys = shapely.from_ragged_array(shapely.GeometryType.POLYGON, xy[~keep],
                                          (np.r_[0, np.cumsum(rings[~ours])], np.arange(m - ours.sum() + 1)))
        out[~ours] = shapely.to_wkt(polys, rounding_precision=DECIMALS, trim=True)
        return pa.array(out.tolist(), pa.string()) if arrow else out.tolist()
    if not m:
        return pa.array([], pa.string()) if arrow else []
    row = _rows(np.ascontiguousarray(xy[:, 0]), np.ascontiguousarray(xy[:, 1]))
    sep = row["sep"]
    end = offsets[1:] - 1
    if arrow:
        # a ring's last row ends ")" and nothing: with the NULs gone, the polygons' texts
        # (less "POLYGON ((" and the last ")") follow one another, each ending at its
        # only ")"; Arrow puts the rest around them
        sep[end] = _CLOSE
        data = row.tobytes().replace(b"\0", b"")
        ends = np.empty(m + 1, dtype=np.int32)
        ends[0] = 0
        ends[1:] = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord(")")) + 1
        body = pa.StringArray.from_buffers(m, pa.py_buffer(ends), pa.py_buffer(data))
        return pc.binary_join_element_wise("POLYGON ((", body, ")", "")
    sep[end] = _CLOSE_NL
    text = row.tobytes().replace(b"\0", b"").decode("ascii")
    return ("POLYGON ((" + text.replace("\n", ")\nPOLYGON ((")).split("\n")[:-1]

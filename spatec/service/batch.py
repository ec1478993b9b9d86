"""The groups with an area, matched against a batch of alerts at once.

At city scale most groups are places: a stop's surroundings, a line near a stop, a zone.
An alert lies in dozens of them, and testing each candidate in Python costs about a
microsecond and a half per candidate and per alert. :class:`AreaTable` keeps every group
with an area (and, if it has a filter, one with an equality comparison — ``line == "4"``
near a stop) in arrays, one row a group, and matches a batch of alerts in a few numpy and
GEOS calls:

- **candidates**: the rows whose lon/lat box meets an alert's box, from an STR-tree of
  the rows' boxes (made again once :data:`FRESH` rows were added since, or a quarter were
  removed: adding and removing cost a few array writes) and the rows added since, compared
  with every alert's box at once; an alert with no place meets every row;
- **equality**: the row's (field, value), coded as integers, compared with the alert's
  value for that field (a dictionary lookup an alert and a field);
- **the exact test**, the same arithmetic as :func:`spatec.spatial.stamps.possibly_in`
  and :func:`~spatec.spatial.stamps.certainly_in` (and the index's
  :func:`~spatec.spatial.stamps.relate_discs`, :func:`~spatec.spatial.stamps.overlap_many`)
  over all the batch's (alert, row) pairs: a disc's distance to the hull, bounded first
  from both sides by the hull's first vertex and its box (GEOS computes only the pairs
  within the hull's size of the circle's edge; the bounds are kept a micrometre and a
  billionth of the distance away from the decision, far beyond the rounding of either
  computation); a polygon's, accepted at once when the hull's first vertex lies in it;
  "certainly" from the hull's vertices (discs) or GEOS's ``covered_by`` (polygons). A
  rectangle GEOS finds inside each polygon (and inside its containment polygon) answers
  most of those two without GEOS: a first vertex in it, or a hull's box in it
  (:func:`inner_boxes`; with the matches taken as group numbers from ``gid``, a batch at
  100,000 subscriptions costs 1.5x less CPU: `bench/bench_match.py`).
  A row's filter is then tested in full, unless it is that one comparison alone.

A row whose area cannot be made (its stamp in the service's CRS, its containment
polygon) fails when an alert first meets its box, with the reason, and is never tested
again (:mod:`spatec.service.index`'s isolation); should a vectorised call raise, the
batch's pairs are tested one by one, each failure its group's own.
"""
from __future__ import annotations

import gc

import numpy as np
import shapely

from spatec.service.areas import project


#: rows added since the tree was made, compared with every alert's box; beyond, the tree is made again
FRESH = 512
#: rows removed (of all) beyond which the arrays are compacted and the tree made again
DEAD = 0.25
#: the margin of the distance bounds, relative and absolute (m)
REL, ABS = 1e-9, 1e-6

DISC, POLY, SLOW = 0, 1, 2
#: how far a polygon's box is shrunk about its centre for a rectangle inside it, tried in turn,
#: then about a point GEOS finds inside it (``point_on_surface``: a polygon that is not convex)
SHRINK = (0.95, 0.85, 0.7, 0.5, 0.3)
SHRINK_INSIDE = (0.3, 0.15, 0.05)
#: a box nothing lies in
EMPTY = (np.inf, np.inf, -np.inf, -np.inf)


def inner_boxes(geoms: np.ndarray) -> np.ndarray:
    """For each polygon a rectangle ``(x0, y0, x1, y1)`` that GEOS finds it covers: its box
    shrunk about the box's centre, the least of :data:`SHRINK` that fits, else about a point
    inside it (:data:`SHRINK_INSIDE`); :data:`EMPTY` if none does. A point in the rectangle,
    or a shape whose box is in it, lies in the polygon (exactly: the rectangle is the polygon
    GEOS tested, its corners the same doubles), so most pairs need no GEOS call."""
    n = len(geoms)
    out = np.tile(np.array(EMPTY), (n, 1))
    if not n:
        return out
    was = gc.isenabled()
    gc.disable()            # (its rectangles are temporaries: no full pass over the index for them)
    try:
        return _inner_boxes(geoms, out)
    finally:
        if was:
            gc.enable()


def _inner_boxes(geoms: np.ndarray, out: np.ndarray) -> np.ndarray:
    b = shapely.bounds(geoms)
    todo = np.flatnonzero(np.isfinite(b).all(axis=1))
    hw, hh = (b[:, 2] - b[:, 0]) / 2, (b[:, 3] - b[:, 1]) / 2
    cx, cy = (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2
    for k, f in enumerate(SHRINK + SHRINK_INSIDE):
        if not len(todo):
            break
        if k == len(SHRINK):                # not about the box's centre: about a point inside
            inner = shapely.get_coordinates(shapely.point_on_surface(geoms[todo]))
            if len(inner) != len(todo):     # (an empty one among them)
                break
            cx[todo], cy[todo] = inner[:, 0], inner[:, 1]
        c = np.column_stack([cx[todo] - f * hw[todo], cy[todo] - f * hh[todo],
                             cx[todo] + f * hw[todo], cy[todo] + f * hh[todo]])
        ok = shapely.covered_by(shapely.box(c[:, 0], c[:, 1], c[:, 2], c[:, 3]), geoms[todo])
        out[todo[ok]] = c[ok]
        todo = todo[~ok]
    return out


def in_boxes(x0, y0, x1, y1, boxes: np.ndarray) -> np.ndarray:
    """Whether each box ``(x0, y0, x1, y1)`` (a point: ``x0 == x1``) lies in the box beside it."""
    return (x0 >= boxes[:, 0]) & (y0 >= boxes[:, 1]) & (x1 <= boxes[:, 2]) & (y1 <= boxes[:, 3])


def or_exact(known: np.ndarray, exact) -> np.ndarray:
    """``known`` (a decision each pair, true where a rectangle decided it) with the others
    decided by ``exact`` (GEOS), called with their positions only if there are any."""
    t = np.flatnonzero(~known)
    if len(t):
        known[t] = exact(t)
    return known


def tabled(g) -> bool:
    """Whether a group is matched by an :class:`AreaTable`: it has an area, and no filter or
    one whose top-level conjunction has an equality comparison (a necessary condition)."""
    if g.area is None:
        return False
    f = g.filter
    return f is None or _eq_atom(f) is not None


def _eq_atom(f):
    return next((a for a in f.atoms if a.op == "==" and a.kind in ("str", "num", "bool")), None)


class AreaTable:
    """Groups with an area, one row each (see the module docstring)."""

    def __init__(self):
        self.rows: list = []             # row → Group (None: removed)
        self.row_of: dict = {}           # Group → row
        self.n = 0
        self.dead = 0
        cap = 64
        self.box = np.zeros((cap, 4))
        self.live = np.zeros(cap, dtype=bool)      # present and not failed
        self.grp = np.empty(cap, dtype=object)     # row → Group, as an array (a batch's matches taken at once)
        self.gid = np.zeros(cap, dtype=np.int64)   # row → its group's number
        self.full = np.zeros(cap, dtype=bool)      # its filter is more than the one comparison: tested in full
        self.eqf = np.full(cap, -1, dtype=np.int32)
        self.eqv = np.zeros(cap, dtype=np.int64)
        self.cert = np.zeros(cap, dtype=bool)
        self.ready = np.zeros(cap, dtype=bool)     # its metric part made (in the current CRS)
        # the metric parts: a disc's centre and radius (or a polygon's growth), its centre point
        # or polygon, a "certainly" polygon's containment polygon, its boundary, whether areal
        self.kind = np.zeros(cap, dtype=np.int8)
        self.x, self.y, self.r = np.zeros(cap), np.zeros(cap), np.zeros(cap)
        self.geom = np.empty(cap, dtype=object)
        self.q = np.empty(cap, dtype=object)
        self.edge = np.empty(cap, dtype=object)
        self.areal = np.zeros(cap, dtype=bool)
        self.mbox, self.qbox = np.zeros((cap, 4)), np.zeros((cap, 4))
        # rectangles inside a polygon and inside its containment polygon (:func:`inner_boxes`)
        self.ibox, self.iqbox = np.tile(np.array(EMPTY), (cap, 1)), np.tile(np.array(EMPTY), (cap, 1))
        # a circle (not a named place) in lon/lat, projected for all such rows at once, and
        # the number of its areas' owner (:class:`~spatec.service.areas.Areas`: its CRS)
        self.circle = np.zeros(cap, dtype=bool)
        self.lon, self.lat, self.r0 = np.zeros(cap), np.zeros(cap), np.zeros(cap)
        self.own = np.zeros(cap, dtype=np.int32)
        self.owners: list = []
        self.fields: dict = {}           # equality field → its number
        self.codes: list = []            # per field number: value → code
        self.tree = None
        self.in_tree = 0                 # rows [0, in_tree) are in the tree
        self._projs: dict = {}           # id(Areas) → (Areas, its projector) the metric parts were made with
        self.bad: dict = {}              # row → why its area cannot be made
        self.tests = 0                   # (alert, row) pairs tested exactly

    def __len__(self) -> int:
        return len(self.row_of)

    def __bool__(self) -> bool:
        return bool(self.row_of)

    # -- rows
    def put(self, g) -> None:
        if self.n == len(self.live):
            self._grow()
        i = self.n
        self.n += 1
        self.rows.append(g)
        self.grp[i] = g
        self.gid[i] = g.gid or 0
        self.row_of[g] = i
        f = g.filter
        self.full[i] = f is not None and bool(f.rest or len(f.atoms) > 1)
        self.box[i] = g.area.box
        self.live[i] = g.error is None
        self.cert[i] = bool(g.area.certainly)
        self.ready[i] = False
        self.ibox[i] = self.iqbox[i] = EMPTY
        area = g.area
        self.own[i] = self._owner(area.owner)
        self.circle[i] = circle = area.is_disc and not isinstance(area.spec, str)
        if circle:
            self.lon[i], self.lat[i], self.r0[i] = area.shape
        a = _eq_atom(g.filter) if g.filter is not None else None
        if a is None:
            self.eqf[i] = -1
        else:
            f = self.fields.get(a.field)
            if f is None:
                f = self.fields[a.field] = len(self.codes)
                self.codes.append({})
            codes = self.codes[f]
            c = codes.get(a.value)
            if c is None:
                c = codes[a.value] = len(codes)
            self.eqf[i], self.eqv[i] = f, c

    def _owner(self, owner) -> int:
        for k, o in enumerate(self.owners):
            if o is owner:
                return k
        self.owners.append(owner)
        return len(self.owners) - 1

    def drop(self, g) -> None:
        i = self.row_of.pop(g)
        self.rows[i] = None
        self.grp[i] = None
        self.live[i] = False
        self.bad.pop(i, None)
        self.dead += 1

    def all(self) -> list:
        return list(self.row_of)

    _ARRAYS = ("box", "live", "grp", "gid", "full", "eqf", "eqv", "cert", "ready", "kind", "x", "y", "r", "geom", "q",
               "edge", "areal", "mbox", "qbox", "ibox", "iqbox", "circle", "lon", "lat", "r0", "own")

    def _grow(self) -> None:
        cap = 2 * len(self.live)
        for name in self._ARRAYS:
            old = getattr(self, name)
            new = np.empty((cap,) + old.shape[1:], dtype=old.dtype) if old.dtype == object else \
                np.zeros((cap,) + old.shape[1:], dtype=old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def _compact(self) -> None:
        keep = [i for i in range(self.n) if self.rows[i] is not None]
        k = np.array(keep, dtype=np.int64)
        m = len(keep)
        for name in self._ARRAYS:
            arr = getattr(self, name)
            arr[:m] = arr[k]
            if arr.dtype == object:
                arr[m:] = None
        self.bad = {j: self.bad[i] for j, i in enumerate(keep) if i in self.bad}
        self.rows = [self.rows[i] for i in keep]
        self.row_of = {g: j for j, g in enumerate(self.rows)}
        self.n, self.dead = m, 0

    def prepare(self) -> None:
        """The tree and the rows' metric parts made now (else at the next match)."""
        self._index()
        self._prepare()

    def _index(self) -> None:
        """The tree made again when many rows came or went since."""
        if self.dead > DEAD * max(self.n, 1) and self.dead > 64:
            self._compact()
            self.tree, self.in_tree = None, 0
        if self.n - self.in_tree > FRESH:
            b = self.box[:self.n]
            self.tree = shapely.STRtree(shapely.box(b[:, 0], b[:, 1], b[:, 2], b[:, 3]))
            self.in_tree = self.n

    def _prepare(self) -> None:
        """The rows' metric parts (disc centres and radii, polygons, containment) in the CRS
        of their areas' owner; made again after a CRS change. Circles and GeoJSON polygons
        are projected for all rows at once, with the arithmetic of the areas' own stamps
        (:meth:`~spatec.service.areas.Areas.stamp`); a row that does not project cleanly,
        and a named place, is made from its area alone (and fails there, with the reason)."""
        for owner, proj in self._projs.values():
            if owner.proj is not proj:
                self.ready[:] = False
                self._projs = {}
                self.bad = {}
                break
        n = self.n
        todo = np.flatnonzero(~self.ready[:n] & self.live[:n])
        if not len(todo):
            return
        for k, owner in enumerate(self.owners):
            self._projs.setdefault(id(owner), (owner, owner.proj))
        self.q[todo] = None
        self.iqbox[todo] = EMPTY
        alone = []
        polys = []
        for k, owner in enumerate(self.owners):
            mine = todo[self.own[todo] == k]
            if not len(mine):
                continue
            circ = self.circle[mine]
            self._circles(mine[circ], owner.proj)
            made, rest = self._polygons(mine[~circ], owner.proj)
            polys.extend(made)
            alone.extend(rest)
        kind, xs, ys, rs, geom = self.kind, self.x, self.y, self.r, self.geom
        for i in alone:
            a = self.rows[i].area
            self.bad.pop(i, None)
            try:
                if a.is_disc:
                    x, y, r, pt = a.disc()[:4]
                    kind[i], xs[i], ys[i], rs[i], geom[i] = DISC, x, y, r, pt
                else:
                    loc = a.loc
                    if loc.xy is not None:         # a place that is a disc without being a circle: alone
                        kind[i] = SLOW
                    else:
                        kind[i], geom[i], rs[i] = POLY, loc.geom, loc.r
                        polys.append(i)
            except Exception as e:  # noqa: BLE001 - its own failure, reported when an alert meets it
                self.bad[i] = f"{type(e).__name__}: {e}"
        if polys:
            p = np.array(polys)
            shapely.prepare(geom[p])
            self.mbox[p] = mb = shapely.bounds(geom[p])
            grow = rs[p][:, None] * np.array([-1.0, -1.0, 1.0, 1.0])
            self.qbox[p] = mb + grow          # holds the containment polygon (made when first needed)
            self.ibox[p] = inner_boxes(geom[p])
        self.ready[todo] = True

    def _circles(self, rows, proj) -> None:
        """Circle rows' centres in metres (``Areas.stamp``'s projection, for all at once); a
        centre that does not project to finite metres fails its row, with the reason."""
        if not len(rows):
            return
        x, y = proj.forward(self.lon[rows], self.lat[rows])
        x, y = np.atleast_1d(x), np.atleast_1d(y)
        ok = np.isfinite(x) & np.isfinite(y)
        good = rows[ok]
        self.kind[good] = DISC
        self.x[good], self.y[good] = x[ok], y[ok]
        self.r[good] = self.r0[good]
        self.geom[good] = shapely.points(x[ok], y[ok])
        self._mended(good)
        for i in rows[~ok].tolist():
            self.bad[i] = (f"its circle's centre ({self.lon[i]:g}, {self.lat[i]:g}) does not project to "
                           f"{proj.crs}")

    def _mended(self, rows) -> None:
        """Rows whose area was made: no longer failed for it."""
        if self.bad:
            for i in rows.tolist():
                self.bad.pop(i, None)

    def _polygons(self, rows, proj) -> tuple:
        """GeoJSON polygon rows projected at once (``Areas.stamp``'s transform): the rows made,
        and those left to be made alone (a named place; a polygon not valid once projected: its
        own failure is found there). A polygon that does not project to finite metres fails."""
        if not len(rows):
            return [], []
        areas = [self.rows[i].area for i in rows.tolist()]
        geojson = np.array([not isinstance(a.spec, str) for a in areas], dtype=bool)
        rest = rows[~geojson].tolist()
        rows = rows[geojson]
        if not len(rows):
            return [], rest
        try:
            made = project(proj, np.array([a.shape for a, j in zip(areas, geojson) if j], dtype=object))
            coords, idx = shapely.get_coordinates(made, return_index=True)
            finite = np.bincount(idx[~np.isfinite(coords).all(axis=1)], minlength=len(rows)) == 0
            ok = shapely.is_valid(made) & ~shapely.is_empty(made) & finite
        except Exception:  # noqa: BLE001 - each made (and failing) alone
            return [], rest + rows.tolist()
        for i in rows[~finite].tolist():
            self.bad[i] = f"its polygon does not project to {proj.crs}"
        good = rows[ok]
        self.kind[good] = POLY
        self.geom[good] = made[ok]
        self.r[good] = 0.0
        self._mended(good)
        return good.tolist(), rest + rows[~ok & finite].tolist()

    # -- matching
    def match(self, wheres: list, envs: list, hulls: list, ids: bool = False) -> list:
        """Per alert (``wheres``: where each is, :class:`~spatec.service.index.CoveringIndex`'s,
        ``envs``: their values, ``hulls``: functions giving their hull stamps), ``[matched
        groups (``ids``: their numbers), failed groups, what its hull raised or None]``."""
        B = len(wheres)
        out = [[[], [], None] for _ in range(B)]
        if not self.row_of or not B:
            return out
        self._index()
        self._prepare()
        ai, si = self._candidates(wheres)
        if not len(ai):
            return out
        # equality: the alert's value for the row's field, coded
        eqf = self.eqf[si]
        if self.fields:
            codes = np.full((len(self.codes), B), -1, dtype=np.int64)
            for f, k in self.fields.items():
                table = self.codes[k]
                row = codes[k]
                for b, env in enumerate(envs):
                    v = env.get(f)
                    if v is not None:
                        c = table.get(v)
                        if c is not None:
                            row[b] = c
            ok = (eqf < 0) | (codes[np.maximum(eqf, 0), ai] == self.eqv[si])
        else:
            ok = eqf < 0
        ok &= self.live[si]
        ai, si = ai[ok], si[ok]
        if len(ai) and self.bad:               # rows whose area cannot be made: failed at their first alert
            bm = np.zeros(self.n, dtype=bool)
            bm[list(self.bad)] = True
            isbad = bm[si]
            if isbad.any():
                for b, s in zip(ai[isbad].tolist(), si[isbad].tolist()):
                    self._fail(s, self.bad[s], out[b])
                ai, si = ai[~isbad], si[~isbad]
        if not len(ai):
            return out
        self.tests += len(ai)
        # the hulls of the alerts that have candidates (an alert whose hull raises: that alert's)
        locs = [None] * B
        for b in np.unique(ai).tolist():
            try:
                locs[b] = hulls[b]()
            except Exception as e:  # noqa: BLE001 - that alert's own: the caller says
                out[b][2] = e
        if any(o[2] is not None for o in out):
            keep = np.array([locs[b] is not None for b in range(B)], dtype=bool)[ai]
            ai, si = ai[keep], si[keep]
        hit = self._exact(ai, si, locs, out)
        ai, si = ai[hit], si[hit]
        ok = self.live[si]                     # (not failed in this batch)
        full = np.flatnonzero(ok & self.full[si])
        for k, b, s in zip(full.tolist(), ai[full].tolist(), si[full].tolist()):
            if not self.live[s]:               # failed on an earlier alert of the batch
                ok[k] = False
                continue
            g = self.rows[s]                   # more than the one comparison: the filter in full
            try:
                ok[k] = bool(g.filter.test(envs[b]))
            except Exception as e:  # noqa: BLE001 - its own failure, isolated
                ok[k] = False
                self._fail(s, f"{type(e).__name__}: {e}", out[b])
        ai, si = ai[ok], si[ok]
        if len(ai):                            # (sorted by alert) each alert's groups in one slice
            bs, starts = np.unique(ai, return_index=True)
            for b, part in zip(bs.tolist(), np.split((self.gid if ids else self.grp)[si], starts[1:])):
                out[b][0].extend(part.tolist())
        return out

    def _fail(self, row: int, reason: str, res: list) -> None:
        """Row ``row``'s group failed (on the alert of ``res``): never tested again."""
        g = self.rows[row]
        self.live[row] = False
        if g.error is None:
            g.error = reason
            res[1].append(g)

    def _candidates(self, wheres: list) -> tuple:
        """(alert, row) pairs whose boxes meet, sorted by alert."""
        n = self.n
        parts_a, parts_s = [], []
        boxes, which = [], []
        for b, w in enumerate(wheres):
            if w.universe():
                rows = np.flatnonzero(self.live[:n])
                parts_a.append(np.full(len(rows), b, dtype=np.int64))
                parts_s.append(rows)
                continue
            box = w.box()
            if box is not None:
                boxes.append(box)
                which.append(b)
        if boxes:
            bx = np.array(boxes, dtype=np.float64)
            wh = np.array(which, dtype=np.int64)
            if self.tree is not None and self.in_tree:
                ia, ib = self.tree.query(shapely.box(bx[:, 0], bx[:, 1], bx[:, 2], bx[:, 3]))
                parts_a.append(wh[ia])
                parts_s.append(ib.astype(np.int64))
            if n > self.in_tree:
                fb = self.box[self.in_tree:n]
                m = ((fb[None, :, 0] <= bx[:, None, 2]) & (bx[:, None, 0] <= fb[None, :, 2])
                     & (fb[None, :, 1] <= bx[:, None, 3]) & (bx[:, None, 1] <= fb[None, :, 3]))
                ia, ib = np.nonzero(m)
                parts_a.append(wh[ia])
                parts_s.append(ib.astype(np.int64) + self.in_tree)
        if not parts_a:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        ai, si = np.concatenate(parts_a), np.concatenate(parts_s)
        order = np.argsort(ai, kind="stable")
        return ai[order], si[order]

    def _exact(self, ai, si, locs: list, out: list) -> np.ndarray:
        """Whether each pair's hull meets (or lies in, for a "certainly" row) the row's area."""
        try:
            return self._exact_many(ai, si, locs, out)
        except Exception:  # noqa: BLE001 - one of them cannot be tested with the others: each alone
            return self._each_alone(np.arange(len(ai)), ai, si, locs, out, np.zeros(len(ai), dtype=bool))

    def _each_alone(self, which, ai, si, locs: list, out: list, hit: np.ndarray) -> np.ndarray:
        for k in which.tolist():
            b, s = int(ai[k]), int(si[k])
            g = self.rows[s]
            if g.error is not None:
                continue
            try:
                hit[k] = bool(g.area.test(locs[b]))
            except Exception as e:  # noqa: BLE001 - its own failure
                self._fail(s, f"{type(e).__name__}: {e}", out[b])
        return hit

    def _exact_many(self, ai, si, locs: list, out: list) -> np.ndarray:
        P = len(ai)
        hit = np.zeros(P, dtype=bool)
        B = len(locs)
        # the hulls: universe, disc (point ⊕ r) or geometry ⊕ r; first vertex, metric box
        uni = np.zeros(B, dtype=bool)
        pt = np.zeros(B, dtype=bool)
        hx, hy, hr = np.zeros(B), np.zeros(B), np.zeros(B)
        hgeom = np.empty(B, dtype=object)
        for b, loc in enumerate(locs):
            if loc is None:
                continue
            if loc.geom is None:
                uni[b] = True
                continue
            hgeom[b] = loc.geom
            hr[b] = loc.r
            xy = loc.xy
            if xy is not None:
                pt[b] = True
                hx[b], hy[b] = xy
        poly_b = np.flatnonzero(~uni & ~pt & np.array([lc is not None for lc in locs], dtype=bool))
        hbox = np.zeros((B, 4))
        vstart = np.zeros(B + 1, dtype=np.int64)
        vcount = np.zeros(B, dtype=np.int64)
        coords = np.zeros((0, 2))
        if len(poly_b):
            coords, idx = shapely.get_coordinates(hgeom[poly_b], return_index=True)
            counts = np.bincount(idx, minlength=len(poly_b))
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            hx[poly_b], hy[poly_b] = coords[starts, 0], coords[starts, 1]       # first vertices
            hbox[poly_b] = shapely.bounds(hgeom[poly_b])
            vstart[poly_b] = starts
            vcount[poly_b] = counts
        pb = pt[ai]
        hbox[pt] = np.column_stack([hx[pt], hy[pt], hx[pt], hy[pt]])
        kind = self.kind[si]
        cert = self.cert[si]
        uni_p = uni[ai]
        # no place: possibly everywhere, certainly nowhere
        hit[uni_p] = ~cert[uni_p]
        rest = ~uni_p
        x, y, r = self.x[si], self.y[si], self.r[si]
        ha, hxa, hya, hra = ai, hx[ai], hy[ai], hr[ai]
        # -- discs
        d = rest & (kind == DISC)
        if d.any():
            dx = hxa - x
            dy = hya - y
            d2 = dx * dx + dy * dy
            s = hra + r
            # a point hull: overlap's and certainly_in's arithmetic
            k = d & pb & ~cert
            hit[k] = (d2 <= s * s)[k]
            room = r - hra
            k = d & pb & cert
            hit[k] = ((room >= 0) & (d2 <= room * room))[k]
            # a polygon hull, possibly: the distance to the centre, bounded by the first vertex and the box
            k = np.flatnonzero(d & ~pb & ~cert)
            if len(k):
                kb = ha[k]
                up = np.sqrt(d2[k])
                bx = np.maximum(np.maximum(hbox[kb, 0] - x[k], x[k] - hbox[kb, 2]), 0.0)
                by = np.maximum(np.maximum(hbox[kb, 1] - y[k], y[k] - hbox[kb, 3]), 0.0)
                lo = np.sqrt(bx * bx + by * by)
                sk = s[k]
                tol = REL * sk + ABS
                yes = up <= sk - tol
                no = lo > sk + tol
                hit[k[yes]] = True
                near = k[~yes & ~no]
                if len(near):
                    hit[near] = shapely.distance(hgeom[ha[near]], self.geom[si[near]]) <= s[near]
            # a polygon hull, certainly: its farthest vertex
            k = np.flatnonzero(d & ~pb & cert)
            if len(k):
                kb = ha[k]
                cnt = vcount[kb]
                owner = np.repeat(np.arange(len(k)), cnt)
                first = np.repeat(vstart[kb], cnt)
                off = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
                v = coords[first + off]
                ddx = v[:, 0] - x[k][owner]
                ddy = v[:, 1] - y[k][owner]
                dist = np.sqrt(ddx * ddx + ddy * ddy)
                far = np.full(len(k), -np.inf)
                np.maximum.at(far, owner, dist)
                hit[k] = far + hra[k] <= r[k]
        # -- polygons
        p = rest & (kind == POLY)
        if p.any():
            geom = self.geom
            mbox = self.mbox[si]
            k = np.flatnonzero(p & ~cert)
            if len(k):
                kb = ha[k]
                s = hra[k] + r[k]
                gx = np.maximum(np.maximum(mbox[k, 0] - hbox[kb, 2], hbox[kb, 0] - mbox[k, 2]), 0.0)
                gy = np.maximum(np.maximum(mbox[k, 1] - hbox[kb, 3], hbox[kb, 1] - mbox[k, 3]), 0.0)
                lo = np.sqrt(gx * gx + gy * gy)
                k = k[lo <= s + REL * s + ABS]
                if len(k):
                    kb = ha[k]
                    # distance 0: the hull's first vertex in the polygon (in its inner box: no GEOS)
                    inside = or_exact(in_boxes(hx[kb], hy[kb], hx[kb], hy[kb], self.ibox[si[k]]),
                                      lambda t: shapely.intersects_xy(geom[si[k[t]]], hx[kb[t]], hy[kb[t]]))
                    hit[k[inside]] = True
                    k = k[~inside]
                    if len(k):
                        hit[k] = shapely.distance(hgeom[ha[k]], geom[si[k]]) <= hra[k] + r[k]
            k = np.flatnonzero(p & cert)
            if len(k):
                kb = ha[k]
                qbox = self.qbox[si[k]]
                within = ((hbox[kb, 0] >= qbox[:, 0]) & (hbox[kb, 1] >= qbox[:, 1])
                          & (hbox[kb, 2] <= qbox[:, 2]) & (hbox[kb, 3] <= qbox[:, 3]))
                k = k[within]
                made = []
                for row in np.unique(si[k]).tolist():
                    if self.q[row] is None:       # its containment polygon, made once
                        try:
                            self.q[row], self.edge[row], self.areal[row] = self.rows[row].area.inside()
                            made.append(row)
                        except Exception as e:  # noqa: BLE001 - its own failure, on the first alert that needs it
                            first = int(ai[k[si[k] == row][0]])
                            self._fail(row, f"{type(e).__name__}: {e}", out[first])
                if made:
                    self.iqbox[made] = inner_boxes(self.q[made])
                k = k[self.live[si[k]]]
                if len(k):
                    kb = ha[k]
                    # the hull in its containment polygon: its box in the polygon's inner box, else GEOS
                    cov = or_exact(in_boxes(hbox[kb, 0], hbox[kb, 1], hbox[kb, 2], hbox[kb, 3], self.iqbox[si[k]]),
                                   lambda t: shapely.covered_by(hgeom[kb[t]], self.q[si[k[t]]]))
                    grown = hra[k] != 0
                    good = cov & ~grown
                    t = np.flatnonzero(cov & grown)
                    if len(t):
                        good[t] = self.areal[si[k[t]]] & (
                            shapely.distance(hgeom[kb[t]], self.edge[si[k[t]]]) >= hra[k[t]])
                    hit[k] = good
        # -- the rest, one by one
        slow = np.flatnonzero(rest & (kind == SLOW))
        if len(slow):
            self._each_alone(slow, ai, si, locs, out, hit)
        return hit

"""A set of many places (SPEC §9) behind a spatial index: which places a stamp meets, which
it lies inside, and whether it lies inside their union, without testing every place.

The places are location stamps (:class:`~spatec.spatial.stamps.Loc`: discs, or
polygons grown by a radius). A shapely ``STRtree`` over their bounding boxes finds the
candidates of a stamp; each candidate is then decided exactly by the same tests as a
single place (:func:`~spatec.spatial.stamps.overlap`,
:func:`~spatec.spatial.stamps.certainly_in`), so a set of one place answers as that place.

Examples
--------
>>> from spatec.spatial.stamps import Loc
>>> ix = PlaceIndex([Loc.disc(0, 0, 40), Loc.disc(60, 0, 40), Loc.disc(1000, 0, 40)])
>>> ix.meeting(Loc.disc(30, 0, 15))
[0, 1]
>>> ix.containing(Loc.disc(30, 0, 15)), ix.containing(Loc.disc(5, 0, 15))
([], [0])
>>> ix.inside_union(Loc.disc(30, 0, 15))          # inside the union of the first two
True
>>> ix.grown(100.0).meeting(Loc.disc(900, 0, 1))  # within 100 m of
[2]
"""
from __future__ import annotations

import math

import numpy as np
import shapely

from spatec.spatial import stamps as S

#: Metres added around every box, so that rounding in a box test never skips a candidate.
SLACK = 1.0


class PlaceIndex:
    """Places (``locs[i]``, each a non-UNIVERSE stamp) indexed by their bounding boxes."""

    def __init__(self, locs: list):
        self.locs = list(locs)
        boxes = [_box(loc) for loc in self.locs]
        self.tree = shapely.STRtree(shapely.box(*np.array(boxes, dtype=float).T)) if boxes else None
        self._grown: dict = {}
        self._union = None
        self._centres: dict | None = None

    def __len__(self) -> int:
        return len(self.locs)

    def grown(self, d: float) -> "PlaceIndex":
        """The same places each grown by ``d`` metres (``within D of SET``)."""
        if d == 0:
            return self
        ix = self._grown.get(d)
        if ix is None:
            ix = self._grown[d] = PlaceIndex([S.Loc(loc.geom, loc.r + d) if loc.xy is None
                                              else S.Loc.disc(loc.xy[0], loc.xy[1], loc.r + d)
                                              for loc in self.locs])
        return ix

    def candidates(self, loc) -> list:
        """Indices of the places whose box meets the stamp's box (every place for UNIVERSE), ascending."""
        if self.tree is None:
            return []
        if loc.geom is None:
            return list(range(len(self.locs)))
        return sorted(self.tree.query(shapely.box(*_box(loc))).tolist())

    def meeting(self, loc) -> list:
        """Indices of the places the stamp possibly meets (``at SET -> S``), ascending."""
        return [i for i in self.candidates(loc) if S.overlap(loc, self.locs[i])]

    def containing(self, loc) -> list:
        """Indices of the places the stamp lies inside (``certainly at SET -> S``), ascending."""
        if loc.geom is None:
            return []
        return [i for i in self.candidates(loc) if S.certainly_in(loc, self.locs[i])]

    def meets_any(self, loc) -> bool:
        """``at SET``: the stamp meets the union of the places."""
        if loc.geom is None:
            return bool(self.locs)
        return any(S.overlap(loc, self.locs[i]) for i in self.candidates(loc))

    def inside_one(self, loc) -> bool:
        """``certainly at SET``: the stamp lies inside one of the places."""
        if loc.geom is None:
            return False
        return any(S.certainly_in(loc, self.locs[i]) for i in self.candidates(loc))

    def inside_union(self, loc) -> bool:
        """The stamp lies inside the union of the places (``not at SET`` possibly matches the
        stamps that do not). Inside one place, or else inside the union of the candidates,
        with circles drawn as inscribed polygons within 1 cm (never claimed wrongly)."""
        if loc.geom is None:
            return False
        cand = self.candidates(loc)
        if any(S.certainly_in(loc, self.locs[i]) for i in cand):
            return True
        if len(cand) < 2:
            return False
        u = shapely.union_all([_inner(self.locs[i]) for i in cand])
        return S.certainly_in(loc, S.Loc.of(u, 0.0))

    def nearest(self, loc, indices: list) -> list:
        """Of the places ``indices`` (ascending), the one whose centre is nearest the stamp's
        centre (``at nearest SET -> S``, SPEC §9), as a list of at most one index: a disc's
        centre, else its region's centroid (:func:`~spatial.stamps.centroid`); ties go to the
        first. A stamp without a location (UNIVERSE) is as near to every place: the first.

        >>> from spatec.spatial.stamps import Loc
        >>> ix = PlaceIndex([Loc.disc(0, 0, 40), Loc.disc(60, 0, 40), Loc.disc(30, 0, 40)])
        >>> ix.nearest(Loc.disc(40, 0, 15), [0, 1, 2]), ix.nearest(Loc.disc(45, 0, 15), [0, 1])
        ([2], [1])
        """
        if len(indices) < 2:
            return list(indices)
        x, y = S.centroid(loc)
        if not (math.isfinite(x) and math.isfinite(y)):
            return [indices[0]]
        best, best_d = indices[0], math.inf
        for i in indices:
            cx, cy = self.centre(i)
            d = math.hypot(cx - x, cy - y)
            if d < best_d:
                best, best_d = i, d
        return [best]

    def centre(self, i: int) -> tuple:
        """Place ``i``'s centre: a disc's, else its region's centroid (made once)."""
        if self._centres is None:
            self._centres = {}
        c = self._centres.get(i)
        if c is None:
            c = self._centres[i] = S.centroid(self.locs[i])
        return c

    def union_geom(self):
        """The union of every place as one geometry, circles drawn within 1 cm outside
        (for combinations with other patterns; made once)."""
        if self._union is None:
            self._union = shapely.union_all([_outer(loc) for loc in self.locs]) if self.locs \
                else shapely.Polygon()
        return self._union


def _box(loc) -> tuple:
    x0, y0, x1, y1 = shapely.bounds(loc.geom).tolist()
    g = loc.r + SLACK
    return (x0 - g, y0 - g, x1 + g, y1 + g)


def _quad_segs(r: float) -> int:
    """Segments per quarter circle of a polygon within 1 cm of a circle of radius ``r``."""
    sides = math.pi / math.acos(max(-1.0, 1.0 - 0.01 / r))
    return max(2, int(math.ceil(sides / 4)))


def _outer(loc):
    """A polygon around the stamp (circumscribed), within 1 cm of it."""
    if loc.r == 0:
        return loc.geom
    q = _quad_segs(loc.r)
    return loc.geom.buffer(loc.r / math.cos(math.pi / (4 * q)), quad_segs=q)


def _inner(loc):
    """A polygon inside the stamp (inscribed), within 1 cm of it."""
    if loc.r == 0:
        return loc.geom
    return loc.geom.buffer(loc.r, quad_segs=_quad_segs(loc.r))

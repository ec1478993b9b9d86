"""Space in spatec: the metric CRS, location stamps and their exact
relations, and the engines that evaluate space patterns in bulk.

``crs`` projects WGS84 input to metres; ``stamps`` defines :class:`Loc` and
the relations of SPEC §1–3 on it; ``approx`` builds the few polygons that
stand in for circles, with bounded error; ``engines`` joins many events
against a program's places in one SQL text run by shapely, SedonaDB or
Sedona on Spark.
"""
from spatec.spatial.crs import Projector, data_centre, utm_epsg
from spatec.spatial.stamps import (
    UNIVERSE,
    Loc,
    area,
    centroid,
    certainly_in,
    certainly_in_many,
    certainly_in_many_geoms,
    disjoint,
    distance,
    hull,
    overlap,
    possibly_in,
    possibly_in_many,
    possibly_in_many_geoms,
    relate_many,
)

__all__ = [
    "Projector", "data_centre", "utm_epsg",
    "UNIVERSE", "Loc", "area", "centroid", "certainly_in", "certainly_in_many",
    "certainly_in_many_geoms", "disjoint", "distance", "hull", "overlap", "possibly_in",
    "possibly_in_many", "possibly_in_many_geoms", "relate_many",
]

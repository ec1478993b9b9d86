"""Places from a GTFS static feed: ``places NAME = gtfs "feed.zip" TABLE [± D]`` and
``places gtfs "feed.zip" routes [± D]`` (``lang/REFERENCE.md``, *Places from a GTFS feed*).

The feed is read with gtfs-kit (its own table types, a zip or a folder); this module
only turns the rows of one table into places:

- ``stops``: one place per stop of ``stops.txt`` (its point, widened by D); the row's
  columns are its attributes.
- ``shapes``: one corridor per shape of ``shapes.txt`` (the polyline, widened by D),
  with the route and direction of the trips that follow it (``route_id``,
  ``route_short_name``, ``direction_id``, ...), so a phrase can compare them with a
  bus's line and direction.
- ``routes``: one corridor per route of ``routes.txt``, the union of its trips' shapes.

A problem in the feed is an error of the program, positioned in the feed's file
(``feed.zip/stops.txt:12:1``) with the row shown, as for a CSV place set.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from spatec.errors import Span

TABLES = ("stops", "shapes", "routes")
#: a corridor is a line widened: the width a GTFS line needs, in the hint
_CORRIDOR_HINT = "a route's line is a corridor once widened: `± 30 m`"


class FeedProblem(Exception):
    """What makes a feed (or one of its rows) unusable: ``message``, and where in the feed."""

    def __init__(self, message: str, hint: str | None = None, member: str | None = None,
                 line: int = 0, text: str | None = None):
        super().__init__(message)
        self.message, self.hint, self.member, self.line, self.text = message, hint, member, line, text


def read_feed(target: Path):
    """The feed at ``target`` (a zip or a folder), read by gtfs-kit; :class:`FeedProblem` if it
    cannot be. Never goes online: gtfs-kit reads a path that does not exist as a URL."""
    import zipfile

    if not (target.is_file() or target.is_dir()):
        raise FeedProblem(f"no such file ({os.path.normpath(str(target))})",
                          "feed paths are relative to the including file")
    import gtfs_kit

    try:
        return gtfs_kit.read_feed(target, dist_units="km")
    except zipfile.BadZipFile:
        raise FeedProblem("not a GTFS feed (not a zip file)",
                          "a GTFS feed is a zip of .txt tables (stops.txt, routes.txt, ...) or a folder of them") \
            from None
    except (ValueError, TypeError, KeyError, OSError, UnicodeDecodeError) as e:
        raise FeedProblem(f"not a GTFS feed gtfs-kit can read ({_short(e)})") from None


def _short(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def _member_lines(target: Path, member: str) -> list[str]:
    """The lines of one table of the feed, for the source line of an error."""
    import zipfile

    try:
        if target.is_dir():
            raw = (target / member).read_bytes()
        else:
            with zipfile.ZipFile(target) as z:
                raw = z.read(member)
    except (OSError, KeyError, zipfile.BadZipFile):
        return []
    return raw.decode("utf-8-sig", errors="replace").splitlines()


def _type_word(series) -> str:
    import pandas as pd

    if pd.api.types.is_bool_dtype(series):
        return "bool"
    if pd.api.types.is_integer_dtype(series):
        return "int"
    if pd.api.types.is_float_dtype(series):
        return "float"
    return "str"


def _value(v, type_word: str):
    import pandas as pd

    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return None
    if type_word == "int":
        return int(v)
    if type_word == "float":
        return float(v)
    if type_word == "bool":
        return bool(v)
    return str(v)


def _attrs_and_values(df, columns) -> tuple[dict, list]:
    attrs = {c: _type_word(df[c]) for c in columns}
    rows = df[list(columns)].to_dict("records")
    return attrs, [{c: _value(r[c], attrs[c]) for c in columns} for r in rows]


def table_places(feed, table: str, target: Path) -> tuple[dict, list, list]:
    """``(attrs, regions, values)`` of one table: ``regions[i]`` is ``("point", lon, lat)`` or
    ``("line", geometry)``; ``values[i]`` the place's attributes. :class:`FeedProblem` when
    the table is missing or a row cannot be a place."""
    if table == "stops":
        return _stops(feed, target)
    if table == "shapes":
        return _shapes(feed, target)
    return _routes(feed, target)


def _need(feed, table: str, columns=()):
    df = getattr(feed, table, None)
    if df is None or len(df) == 0:
        raise FeedProblem(f"the feed has no {table}.txt (or it is empty)")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise FeedProblem(f"{table}.txt has no column {missing[0]}", member=f"{table}.txt", line=1)
    return df


def _stops(feed, target: Path):
    df = _need(feed, "stops", ("stop_id", "stop_lat", "stop_lon"))
    # generic nodes and boarding areas (location_type 3, 4) need no position: they are no place
    if "location_type" in df.columns:
        df = df[~df["location_type"].fillna(0).isin([3, 4])]
    regions = []
    lines = None
    for i, (lon, lat) in enumerate(zip(df["stop_lon"].tolist(), df["stop_lat"].tolist())):
        why = _position_problem(lon, lat)
        if why:
            lines = lines if lines is not None else _member_lines(target, "stops.txt")
            line = int(df.index[i]) + 2              # the header is line 1
            raise FeedProblem(f"stop {df['stop_id'].iloc[i]}: {why}", "coordinates are WGS84 degrees",
                              member="stops.txt", line=line,
                              text=lines[line - 1] if line - 1 < len(lines) else None)
        regions.append(("point", float(lon), float(lat)))
    columns = [c for c in df.columns if c not in ("stop_lat", "stop_lon")] + ["stop_lat", "stop_lon"]
    attrs, values = _attrs_and_values(df, columns)
    return attrs, regions, values


def _position_problem(lon, lat) -> str | None:
    import pandas as pd

    if pd.isna(lon) or pd.isna(lat):
        return "no stop_lat, stop_lon"
    lon, lat = float(lon), float(lat)
    if not (math.isfinite(lon) and -180 <= lon <= 180):
        return f"stop_lon {lon:g} is not a longitude"
    if not (math.isfinite(lat) and -90 <= lat <= 90):
        return f"stop_lat {lat:g} is not a latitude"
    return None


def _shape_lines(feed) -> dict:
    """{shape_id: LineString in lon/lat}, built by gtfs-kit (points in shape_pt_sequence order)."""
    import gtfs_kit

    shapes = _need(feed, "shapes", ("shape_id", "shape_pt_lat", "shape_pt_lon", "shape_pt_sequence"))
    bad = shapes[~(shapes["shape_pt_lon"].between(-180, 180) & shapes["shape_pt_lat"].between(-90, 90))]
    if len(bad):
        row = bad.iloc[0]
        raise FeedProblem(f"shape {row['shape_id']}: ({row['shape_pt_lon']}, {row['shape_pt_lat']}) is not a "
                          "longitude, latitude pair", "coordinates are WGS84 degrees",
                          member="shapes.txt", line=int(bad.index[0]) + 2)
    out = {}
    for sid, geom in gtfs_kit.build_geometry_by_shape(feed).items():
        if geom.geom_type != "LineString":   # a shape of one point: gtfs-kit makes it a Point
            raise FeedProblem(f"shape {sid} has one point: a shape is a line", member="shapes.txt")
        out[str(sid)] = geom
    return out


def _trip_routes(feed):
    """Trips joined to their routes (the columns a corridor carries), or a FeedProblem."""
    trips = _need(feed, "trips", ("trip_id", "route_id"))
    routes = _need(feed, "routes", ("route_id",))
    return trips.merge(routes, on="route_id", how="left", suffixes=("", "_route"))


_ROUTE_COLUMNS = ("route_id", "agency_id", "route_short_name", "route_long_name", "route_type")


def _shapes(feed, target: Path):
    import pandas as pd

    lines = _shape_lines(feed)
    trips = _trip_routes(feed)
    if "shape_id" not in trips.columns:
        raise FeedProblem("trips.txt has no column shape_id: no trip follows a shape", member="trips.txt", line=1)
    cols = [c for c in ("route_id", "direction_id", "trip_headsign") + _ROUTE_COLUMNS[1:] if c in trips.columns]
    cols = list(dict.fromkeys(cols))
    used = trips[trips["shape_id"].notna()]
    # the route and direction of a shape: those of the first trip (in trips.txt) that follows it
    first = used.drop_duplicates("shape_id").set_index("shape_id")
    ids = sorted(lines)
    df = pd.DataFrame({"shape_id": pd.array(ids, dtype="string")})
    for c in cols:
        df[c] = first[c].reindex(ids).to_numpy() if len(first) else None
        df[c] = df[c].astype(trips[c].dtype)
    attrs, values = _attrs_and_values(df, ["shape_id"] + cols)
    return attrs, [("line", lines[s]) for s in ids], values


def _routes(feed, target: Path):
    import shapely

    lines = _shape_lines(feed)
    trips = _trip_routes(feed)
    routes = _need(feed, "routes", ("route_id",))
    by_route: dict = {}
    if "shape_id" in trips.columns:
        for rid, sid in zip(trips["route_id"].tolist(), trips["shape_id"].tolist()):
            if isinstance(sid, str) and sid in lines:
                by_route.setdefault(str(rid), {})[sid] = None
    missing = [str(r) for r in routes["route_id"].tolist() if str(r) not in by_route]
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise FeedProblem(f"{len(missing)} route{'s have' if len(missing) > 1 else ' has'} no shape "
                          f"({shown}): a route's corridor is made of its trips' shapes",
                          "give their trips a shape_id in trips.txt, or match `shapes` instead",
                          member="routes.txt")
    cols = [c for c in routes.columns]
    attrs, values = _attrs_and_values(routes, cols)
    regions = []
    for rid in routes["route_id"].tolist():
        parts = [lines[s] for s in by_route[str(rid)]]
        regions.append(("line", parts[0] if len(parts) == 1 else shapely.MultiLineString(parts)))
    return attrs, regions, values


def place_name(table: str, value: dict) -> str:
    """The name a row's place gets in ``places gtfs "feed.zip" TABLE``: its id (``route_id``,
    ``stop_id``, ``shape_id``), unique in a feed by GTFS's rules (a route's short name is not:
    several operators run a line "1")."""
    return str(value[{"routes": "route_id", "stops": "stop_id", "shapes": "shape_id"}[table]])


def problem_span(target: Path, shown_path: str, p: FeedProblem, fallback: Span) -> tuple[Span, str | None]:
    """Where a feed problem is shown: the feed's member at its line, or the declaration."""
    if p.member is None or not p.line:
        return fallback, None
    return Span(f"{shown_path}/{p.member}", p.line, 1, p.line, 1 + max(1, len(p.text or " "))), p.text


"""Places from files: ``places "FILE.geojson"`` (each named feature a place) and place sets
``places NAME = "FILE" [place EXPR]`` from CSV or GeoJSON (SPEC §5, §9).

Reading a file is part of checking a program: a file that cannot be read, a
row that cannot be a place, is an error reported before anything runs. An
error in a data row is positioned in the data file itself (``stops.csv:17:22``:
the row's line and the offending field), with the row as the source line.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from spatec.errors import Diagnostic, Span
from spatec.frontend import ast as A

#: at most this many bad rows of one file are reported one by one
MAX_BAD_ROWS = 10


@dataclass(frozen=True)
class PlaceDef:
    """A named place, resolved: a circle (centre + radius) or a polygon, in lon/lat."""

    name: str
    kind: str                      # "circle" | "polygon" | "line" (a GTFS shape: ``widen`` makes it a corridor)
    lon: float = 0.0
    lat: float = 0.0
    radius: float = 0.0            # metres, circles only (a point place has radius = its widening)
    wkt: str = ""                  # polygons (lon/lat), may be a MultiPolygon
    widen: float = 0.0             # metres added around a polygon
    span: Span = field(default=Span("<none>", 0, 0, 0, 0), compare=False)


@dataclass(frozen=True, eq=False)
class PlaceSet:
    """A set of places read from one file: ``at NAME`` matches any of them (SPEC §9).

    ``places[i]`` is the region of the i-th row (or feature) and ``values[i]``
    its attributes (``None`` for an empty cell); ``attrs`` gives each
    attribute's type: ``int``, ``float``, ``bool`` or ``str``. The id of the
    i-th place is ``NAME:i+1`` (:meth:`place_id`).
    """

    name: str
    path: str
    attrs: dict
    places: tuple
    values: tuple
    span: Span = field(default=Span("<none>", 0, 0, 0, 0))

    def place_id(self, index: int) -> str:
        return f"{self.name}:{index + 1}"

    def __len__(self) -> int:
        return len(self.places)


Report = Callable[[Diagnostic], None]
LineOf = Callable[[Span], Optional[str]]   # the program line a span points into


def _at(span: Span, message: str, hint: str | None, line: str | None) -> Diagnostic:
    return Diagnostic(span, message, hint, line)


# ------------------------------------------------------------------------------ unnamed GeoJSON


def load_named_features(target: Path, decl: A.PlacesFile, report: Report, line_of: LineOf) -> dict:
    """``places "FILE.geojson"``: {name: PlaceDef} of every feature with a ``name`` property;
    ``places gtfs "feed.zip" TABLE``: every row of the table, by its name (:func:`gtfs.place_name`)."""
    if decl.gtfs is not None:
        return _gtfs_named(target, decl, report, line_of)
    import shapely
    from shapely.geometry import shape as to_shape

    span = decl.path_span if decl.path_span.line else decl.span

    def diag(message: str, hint: str | None = None) -> None:
        report(_at(span, message, hint, line_of(span)))

    if not target.is_file():
        diag(f"cannot read places \"{decl.path}\": no such file ({target})",
             "places paths are relative to the including file")
        return {}
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:      # (UnicodeDecodeError is a ValueError)
        diag(f"cannot read places \"{decl.path}\": not GeoJSON ({e})")
        return {}
    except RecursionError:
        diag(f"cannot read places \"{decl.path}\": not GeoJSON (nested too deeply)")
        return {}
    feats = data.get("features", []) if isinstance(data, dict) else []
    if not isinstance(feats, list):
        feats = []
    out: dict = {}
    named = 0
    twice: list = []
    for i, f in enumerate(feats):
        props = f.get("properties") if isinstance(f, dict) else None
        name = props.get("name") if isinstance(props, dict) else None
        if not name or not isinstance(name, str):
            continue
        named += 1
        try:
            g = to_shape(f["geometry"])
        except Exception as e:  # noqa: BLE001 - any bad geometry is a user error here (RecursionError too)
            why = "nested too deeply" if isinstance(e, RecursionError) else e
            diag(f"places \"{decl.path}\": feature {i} ({name}) has a bad geometry: {why}")
            continue
        problem = geometry_problem(g)
        if problem:
            diag(f"places \"{decl.path}\": feature {i} ({name}) {problem[0]}", problem[1])
            continue
        try:
            radius = float(props.get("radius_m") or 0.0)
        except (TypeError, ValueError):
            radius = -1.0
        if not (0.0 <= radius < 4e7):  # a typo, not a place the size of the Earth
            diag(f"places \"{decl.path}\": feature {name} has a bad radius_m {props.get('radius_m')!r}",
                 "radius_m is a number of metres")
            continue
        if g.geom_type == "Point":
            pd = PlaceDef(name, "circle", g.x, g.y, radius, span=decl.span)
        elif g.geom_type in ("Polygon", "MultiPolygon"):
            pd = PlaceDef(name, "polygon", wkt=shapely.to_wkt(g, rounding_precision=-1), span=decl.span)
        else:
            diag(f"places \"{decl.path}\": feature {name} is a {g.geom_type}; places are points or polygons")
            continue
        if name in out:
            twice.append(name)
            continue
        out[name] = pd
    if twice:
        shown = ", ".join(f'"{n}"' for n in twice[:3]) + (", ..." if len(twice) > 3 else "")
        diag(f"places \"{decl.path}\": {len(twice)} feature name{'s are' if len(twice) > 1 else ' is'} "
             f"used twice ({shown})",
             f"names must be unique to be places of their own; to match them as a set, write "
             f"`places NAME = \"{decl.path}\"` and `at NAME`")
    if named == 0:
        diag(f"places \"{decl.path}\" has no feature with a `name` property")
    return out


def geometry_problem(g) -> tuple[str, str] | None:
    """What makes a place's geometry unusable, with a hint: none at all, coordinates that are
    not WGS84 longitude/latitude, a polygon that crosses itself. None when it is usable."""
    import shapely

    if g.is_empty:
        return "has an empty geometry", "give the place a point or a polygon"
    x0, y0, x1, y1 = g.bounds
    if not all(map(math.isfinite, (x0, y0, x1, y1))) or x0 < -180 or x1 > 180 or y0 < -90 or y1 > 90:
        bad = next((c for c in shapely.get_coordinates(g).tolist()
                    if not (-180 <= c[0] <= 180 and -90 <= c[1] <= 90)), (x0, y0))
        return (f"has coordinates out of range: ({bad[0]:g}, {bad[1]:g}) is not a longitude, latitude pair",
                "coordinates are WGS84 longitude first, then latitude")
    if not g.is_valid:
        return (f"is not a valid {g.geom_type}: {shapely.is_valid_reason(g)}",
                "corners go round the boundary once, without crossing")
    return None


# ------------------------------------------------------------------------------ place sets


_INT = re.compile(r"[+-]?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_LEADING_ZERO = re.compile(r"[+-]?0[0-9]+")   # an id such as 0500, not a number


class _SetReader:
    """Reads one place set, reporting every problem."""

    def __init__(self, decl: A.PlaceSetDecl, target: Path, report: Report, line_of: LineOf):
        self.decl, self.target, self.report, self.line_of = decl, target, report, line_of
        self.shown = os.path.normpath(str(target))
        self.bad = 0
        self.ok = True

    # problems in the program ---------------------------------------------------------
    def program_error(self, span: Span, message: str, hint: str | None = None) -> None:
        self.ok = False
        span = span if span.line else self.decl.span
        self.report(_at(span, message, hint, self.line_of(span)))

    # problems in the data -------------------------------------------------------------
    def row_error(self, line_no: int, col: int, width: int, text: str | None, message: str,
                  hint: str | None = None) -> None:
        self.ok = False
        self.bad += 1
        if self.bad > MAX_BAD_ROWS:
            return
        span = Span(self.shown, line_no, col, line_no, col + max(1, width))
        self.report(_at(span, f"places {self.decl.name}: {message}", hint, text))

    def finish(self) -> None:
        if self.bad > MAX_BAD_ROWS:
            self.program_error(self.decl.path_span, f"places {self.decl.name}: {self.bad - MAX_BAD_ROWS} "
                                                    f"more bad rows in \"{self.decl.path}\"")

    # the region of one place ------------------------------------------------------------
    def widen(self) -> float:
        pc = self.decl.place
        if pc is None or pc.widen is None:
            return 0.0
        return pc.widen.metres()

    def check_clause(self, columns) -> bool:
        """The `place` clause: names existing columns, widens by a distance."""
        pc = self.decl.place
        if pc is None:
            return True
        if pc.widen is not None:
            if pc.widen.dimension != "distance":
                self.program_error(pc.widen.span, f"expected a distance, got a {pc.widen.dimension} "
                                                  f"`{pc.widen.value:g} {pc.widen.unit}`",
                                   "distances use `m` or `km`")
                return False
            if not (0 <= pc.widen.metres() < 4e7):
                self.program_error(pc.widen.span, "a widening must be a distance from 0 to 40,000 km")
                return False
        if columns is _GEOJSON_COLUMNS:
            return True  # a feature's properties are its own: checked feature by feature
        ok = True
        for n in (pc.lon, pc.lat, pc.geom):
            if n is not None and n not in columns:
                self.program_error(pc.span, f"\"{self.decl.path}\" has no column {n}",
                                   _did_you_mean(n, columns) or "columns: " + ", ".join(sorted(columns)[:12]))
                ok = False
        return ok


_GEOJSON_COLUMNS: set = set()  # marker: a GeoJSON set's names are properties, checked per feature


def _did_you_mean(name: str, options) -> str | None:
    import difflib

    close = difflib.get_close_matches(name, sorted(options), n=1)
    return f"did you mean `{close[0]}`?" if close else None


def _field_starts(line: str) -> list[int]:
    """0-based offsets where the fields of one CSV line start (quotes respected)."""
    starts, quoted = [0], False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            starts.append(i + 1)
    return starts


def _unclosed_quote(line: str) -> int | None:
    """The 0-based offset of a quote that opens a field of ``line`` and is not closed on it
    (inside a quoted field, `""` is a quote)."""
    i, n, field_start = 0, len(line), True
    while i < n:
        if field_start and line[i] == '"':
            at, i = i, i + 1
            while i < n and not (line[i] == '"' and line[i + 1:i + 2] != '"'):
                i += 2 if line[i] == '"' else 1
            if i >= n:
                return at
            field_start = False
            i += 1
            continue
        field_start = line[i] == ","
        i += 1
    return None


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _column_type(values: list) -> str:
    """A CSV column's type from its non-empty values: int, float or str (ids such as 0500 stay text)."""
    seen = [v for v in values if v != ""]
    if not seen:
        return "str"
    if any(_LEADING_ZERO.match(v) for v in seen):
        return "str"
    if all(_INT.fullmatch(v) for v in seen):
        return "int"
    if all(_FLOAT.fullmatch(v) for v in seen):
        return "float"
    return "str"


def _convert(value: str, type_word: str):
    if value == "":
        return None
    if type_word == "int":
        return int(value)
    if type_word == "float":
        return float(value)
    return value


def load_place_set(decl: A.PlaceSetDecl, base: Path, report: Report, line_of: LineOf) -> PlaceSet | None:
    """Read a place set; report every problem; None if it cannot be used."""
    target = base / decl.path
    r = _SetReader(decl, target, report, line_of)
    if decl.gtfs is not None:
        got = _gtfs_places(decl, target, r.widen() if r.check_clause(_GEOJSON_COLUMNS) else None,
                           r.program_error, report)
        if got is None:
            return None
        attrs, places, values = got
        return PlaceSet(decl.name, r.shown, attrs, tuple(places), tuple(values), span=decl.span)
    if not target.is_file():
        r.program_error(decl.path_span, f"cannot read places \"{decl.path}\": no such file ({r.shown})",
                        "places paths are relative to the including file")
        return None
    try:
        text = target.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        why = "not UTF-8 text" if isinstance(e, UnicodeDecodeError) else (e.strerror or str(e))
        r.program_error(decl.path_span, f"cannot read places \"{decl.path}\": {why}")
        return None
    suffix = target.suffix.lower()
    if suffix == ".csv":
        out = _read_csv(r, text)
    elif suffix in (".geojson", ".json"):
        out = _read_geojson(r, text)
    else:
        r.program_error(decl.path_span, f"places {decl.name}: \"{decl.path}\" is neither CSV nor GeoJSON",
                        "a place set is read from a .csv or a .geojson file")
        return None
    r.finish()
    if out is None or not r.ok:
        return None
    attrs, places, values = out
    if not places:
        r.program_error(decl.path_span, f"places {decl.name}: \"{decl.path}\" has no places")
        return None
    return PlaceSet(decl.name, r.shown, attrs, tuple(places), tuple(values), span=decl.span)


def _region(r: _SetReader, index: int, lon, lat, geom, radius_default: float = 0.0):
    """A PlaceDef from coordinates (lon, lat) or a shapely geometry; a message when it cannot be one."""
    import shapely

    name = f"{r.decl.name}:{index + 1}"
    grow = r.widen()
    if geom is None:
        if not (-180 <= lon <= 180):
            return None, f"{lon} is not a longitude"
        if not (-90 <= lat <= 90):
            return None, f"{lat} is not a latitude"
        return PlaceDef(name, "circle", lon, lat, grow or radius_default, span=r.decl.span), None
    if geom.is_empty:
        return None, "the geometry is empty"
    if geom.geom_type == "Point":
        return _region(r, index, geom.x, geom.y, None, radius_default)
    if geom.geom_type not in ("Polygon", "MultiPolygon"):
        return None, f"a {geom.geom_type} is not a place (places are points or polygons)"
    if not geom.is_valid:
        return None, f"the polygon is not valid: {shapely.is_valid_reason(geom)}"
    minx, miny, maxx, maxy = geom.bounds
    if not (-180 <= minx and maxx <= 180 and -90 <= miny and maxy <= 90):
        return None, "the polygon is not in longitude, latitude"
    return PlaceDef(name, "polygon", wkt=shapely.to_wkt(geom, rounding_precision=-1), widen=grow,
                    span=r.decl.span), None


def _read_csv(r: _SetReader, text: str):
    import shapely

    decl = r.decl
    lines = text.splitlines()
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        r.program_error(decl.path_span, f"places {decl.name}: \"{decl.path}\" has no header row")
        return None
    columns = [h.strip() for h in header]
    seen: set = set()
    for i, c in enumerate(columns):
        if c in seen or not c:
            starts = _field_starts(lines[0] if lines else "")
            col = starts[i] + 1 if i < len(starts) else 1
            r.row_error(1, col, len(header[i]) or 1, lines[0] if lines else None,
                        f"column {i + 1} of the header is {'empty' if not c else f'`{c}` again'}",
                        "every column needs a name of its own")
        seen.add(c)
    if not r.ok:
        return None
    if decl.place is None:
        r.program_error(decl.path_span, f"places {decl.name}: a CSV place set needs a `place` clause",
                        "say how each row's region is made, e.g. `place point(lon, lat) ± 40 m`")
        return None
    if not r.check_clause(set(columns)):
        return None
    pc = decl.place
    rows: list = []      # (first line of the row, its fields)
    line_no = 1
    try:
        for fields in reader:
            start = line_no + 1
            line_no = reader.line_num
            if not fields or all(not f.strip() for f in fields):
                continue
            rows.append((start, fields, line_no))
    except csv.Error as e:
        r.row_error(line_no + 1, 1, 1, lines[line_no] if line_no < len(lines) else None,
                    f"not CSV: {e}")
        return None
    index = {c: i for i, c in enumerate(columns)}
    places, cells = [], []
    for start, fields, end in rows:
        raw = lines[start - 1] if start - 1 < len(lines) else None

        def bad(col_name: str | None, message: str, hint: str | None = None, _s=start, _raw=raw,
                _f=fields) -> None:
            i = index.get(col_name, 0) if col_name else 0
            st = _field_starts(_raw or "")   # only for a row in error: where its fields start
            col = st[i] + 1 if i < len(st) else 1
            width = len(_f[i]) if col_name and i < len(_f) else 1
            r.row_error(_s, col, width, _raw, message, hint)

        if len(fields) != len(columns):
            quote = _unclosed_quote(raw or "")
            if quote is not None:
                runs = f" (it runs on to line {end}, the rows after it read into it)" if end > start else ""
                r.row_error(start, quote + 1, 1, raw, f"an unclosed quote: the field at column {quote + 1} has no "
                            f"closing `\"`{runs}",
                            'close the quote (`"Drummer Street, Bay 4"`), or write a quote inside a quoted field '
                            'twice (`""`)')
                continue
            bad(None, f"the row has {len(fields)} fields, the header {len(columns)}")
            continue
        if pc.geom is not None:
            value = fields[index[pc.geom]].strip()
            try:
                geom = shapely.from_wkt(value)
            except Exception:  # noqa: BLE001 - shapely raises several kinds for bad WKT
                bad(pc.geom, f"`{pc.geom}` is not WKT: {_shown(value)}",
                    "a geometry column holds WKT in longitude, latitude: POINT (0.12 52.2)")
                continue
            region, why = _region(r, len(places), 0.0, 0.0, geom)
            if region is None:
                bad(pc.geom, f"`{pc.geom}`: {why}")
                continue
        else:
            lon, lat = _number(fields[index[pc.lon]].strip()), _number(fields[index[pc.lat]].strip())
            if lon is None or lat is None:
                name = pc.lon if lon is None else pc.lat
                bad(name, f"`{name}` is {_shown(fields[index[name]])}, not a number")
                continue
            region, why = _region(r, len(places), lon, lat, None)
            if region is None:
                bad(pc.lon if "longitude" in why else pc.lat, why,
                    "coordinates are WGS84 longitude and latitude in degrees")
                continue
        places.append(region)
        cells.append(fields)
    if not r.ok:
        return None
    attrs = {c: _column_type([f[i] for f in cells]) for i, c in enumerate(columns)}
    values = [{c: _convert(f[i], attrs[c]) for i, c in enumerate(columns)} for f in cells]
    return attrs, places, values


def _shown(value: str) -> str:
    return "empty" if value.strip() == "" else json.dumps(value, ensure_ascii=False)


def _json_type(values: list) -> str:
    kinds = set()
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, int):
            kinds.add("int")
        elif isinstance(v, float):
            kinds.add("float")
        else:
            kinds.add("str")
    if kinds == {"int"}:
        return "int"
    if kinds and kinds <= {"int", "float"}:
        return "float"
    if kinds == {"bool"}:
        return "bool"
    return "str"


def _json_value(v, type_word: str):
    if v is None:
        return None
    if type_word == "float":
        return float(v)
    if type_word == "str" and not isinstance(v, str):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return v


def _read_geojson(r: _SetReader, text: str):
    from shapely.geometry import shape as to_shape

    decl = r.decl
    try:
        data = json.loads(text)
    except ValueError as e:
        r.program_error(decl.path_span, f"cannot read places \"{decl.path}\": not GeoJSON ({e})")
        return None
    except RecursionError:
        r.program_error(decl.path_span, f"cannot read places \"{decl.path}\": not GeoJSON (nested too deeply)")
        return None
    feats = data.get("features") if isinstance(data, dict) else None
    if not isinstance(feats, list):
        r.program_error(decl.path_span, f"places {decl.name}: \"{decl.path}\" is not a GeoJSON "
                                        "FeatureCollection")
        return None
    if not r.check_clause(_GEOJSON_COLUMNS):
        return None
    pc = decl.place

    def bad(i: int, message: str, hint: str | None = None) -> None:
        r.bad += 1
        if r.bad <= MAX_BAD_ROWS:
            r.program_error(decl.path_span, f"places {decl.name}: \"{decl.path}\" feature {i + 1}: {message}",
                            hint)

    places, props_list = [], []
    for i, f in enumerate(feats):
        props = f.get("properties") if isinstance(f, dict) else None
        props = props if isinstance(props, dict) else {}
        radius = 0.0
        try:
            if pc is not None and pc.geom is None:
                lon, lat = props.get(pc.lon), props.get(pc.lat)
                lon = _number(lon) if isinstance(lon, (int, float, str)) and not isinstance(lon, bool) else None
                lat = _number(lat) if isinstance(lat, (int, float, str)) and not isinstance(lat, bool) else None
                if lon is None or lat is None:
                    name = pc.lon if lon is None else pc.lat
                    bad(i, f"property `{name}` is {json.dumps(props.get(name))}, not a number")
                    continue
                region, why = _region(r, len(places), lon, lat, None)
            else:
                if pc is not None and pc.geom in props:
                    raw = props[pc.geom]
                    if isinstance(raw, str):
                        import shapely

                        g = shapely.from_wkt(raw)
                    else:
                        g = to_shape(raw)
                else:
                    g = to_shape(f["geometry"])
                    if pc is None:
                        rad = props.get("radius_m")
                        radius = float(rad) if rad is not None else 0.0
                        if not (0.0 <= radius < 4e7):
                            raise ValueError(f"bad radius_m {rad!r}")
                region, why = _region(r, len(places), 0.0, 0.0, g, radius)
        except Exception as e:  # noqa: BLE001 - any bad geometry is a user error here
            bad(i, f"cannot be a place: {e}")
            continue
        if region is None:
            bad(i, why)
            continue
        places.append(region)
        props_list.append(props)
    if not r.ok:
        return None
    keys: list = []
    for p in props_list:
        for k in p:
            if k not in keys:
                keys.append(k)
    attrs = {k: _json_type([p.get(k) for p in props_list]) for k in keys}
    values = [{k: _json_value(p.get(k), attrs[k]) for k in keys} for p in props_list]
    return attrs, places, values


# ------------------------------------------------------------------------------ GTFS feeds


def _gtfs_places(decl, target: Path, widen: float | None, program_error, report: Report):
    """``(attrs, places, values)`` of a GTFS table, each place a PlaceDef; None (and every problem
    reported) when the feed or the table cannot give places."""
    from spatec.frontend import gtfs

    name = getattr(decl, "name", None)
    label = f"places {name}" if name else "places"
    table_span = decl.table_span if decl.table_span.line else decl.span
    if widen is None:
        return None
    if decl.gtfs not in gtfs.TABLES:
        program_error(table_span, f"{label}: a GTFS feed has no table {decl.gtfs} to make places of",
                      _did_you_mean(decl.gtfs, gtfs.TABLES) or "tables: " + ", ".join(gtfs.TABLES))
        return None
    if decl.gtfs != "stops" and widen <= 0:
        program_error(table_span, f"{label}: the {decl.gtfs} of a feed are lines; a line needs a width to be "
                                  "a corridor", "widen it: `" + decl.gtfs + " ± 30 m`")
        return None
    try:
        feed = gtfs.read_feed(target)
        attrs, regions, values = gtfs.table_places(feed, decl.gtfs, target)
    except gtfs.FeedProblem as p:
        shown = os.path.normpath(str(target))
        span, text = gtfs.problem_span(target, shown, p, decl.path_span if decl.path_span.line else decl.span)
        if text is None:
            program_error(span, f"{label}: cannot read GTFS feed \"{decl.path}\": {p.message}", p.hint)
        else:
            report(_at(span, f"{label}: {p.message}", p.hint, text))
        return None
    places = []
    for i, reg in enumerate(regions):
        pname = f"{name}:{i + 1}" if name else gtfs.place_name(decl.gtfs, values[i])
        if reg[0] == "point":
            places.append(PlaceDef(pname, "circle", reg[1], reg[2], widen, span=decl.span))
        else:
            import shapely

            places.append(PlaceDef(pname, "line", wkt=shapely.to_wkt(reg[1], rounding_precision=-1), widen=widen,
                                   span=decl.span))
    return attrs, places, values


def _gtfs_named(target: Path, decl: A.PlacesFile, report: Report, line_of: LineOf) -> dict:
    ok = [True]

    def program_error(span, message, hint=None):
        ok[0] = False
        report(_at(span, message, hint, line_of(span)))

    widen = 0.0
    if decl.widen is not None:
        if decl.widen.dimension != "distance" or not (0 <= decl.widen.metres() < 4e7):
            program_error(decl.widen.span, "a widening must be a distance from 0 to 40,000 km",
                          "distances use `m` or `km`")
            return {}
        widen = decl.widen.metres()
    got = _gtfs_places(decl, target, widen, program_error, report)
    if got is None:
        return {}
    out, twice = {}, []
    for pd in got[1]:
        if pd.name in out:
            twice.append(pd.name)
        out[pd.name] = pd
    if twice:
        shown = ", ".join(f'"{n}"' for n in twice[:3]) + (", ..." if len(twice) > 3 else "")
        program_error(decl.path_span, f"places gtfs \"{decl.path}\" {decl.gtfs}: {len(twice)} name"
                                      f"{'s are' if len(twice) > 1 else ' is'} used twice ({shown})",
                      f"to match them as a set, write `places NAME = gtfs \"{decl.path}\" {decl.gtfs}`")
        return {}
    return out

"""Loading a program: the root file, its includes (relative paths, no cycles) and
its place files. Produces the merged declarations with every problem found.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from spatec.errors import DataError, Diagnostic, ParseError, Span
from spatec.frontend import ast as A
from spatec.frontend.parse import parse_text
from spatec.frontend.source import BOM, read_program


@dataclass(frozen=True)
class PlaceDef:
    """A named place, resolved: a circle (centre + radius) or a polygon, in lon/lat."""

    name: str
    kind: str                      # "circle" | "polygon"
    lon: float = 0.0
    lat: float = 0.0
    radius: float = 0.0            # metres, circles only (a point place has radius = its widening)
    wkt: str = ""                  # polygons (lon/lat), may be a MultiPolygon
    widen: float = 0.0             # metres added around a polygon
    span: Span = field(default=Span("<none>", 0, 0, 0, 0), compare=False)


@dataclass
class Loaded:
    """Everything the files of a program declare, in file order, with their texts."""

    root: str
    decls: list = field(default_factory=list)
    texts: dict = field(default_factory=dict)     # file → text, for error lines
    places: dict = field(default_factory=dict)    # name → PlaceDef from `places` files
    diagnostics: list = field(default_factory=list)

    def line(self, span: Span) -> str | None:
        text = self.texts.get(span.file)
        if text is None or span.line <= 0:
            return None
        lines = text.splitlines()
        return lines[span.line - 1] if span.line <= len(lines) else None

    def diag(self, span: Span, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(span, message, hint, self.line(span)))


_DECLARATION = re.compile(r"(phrase|event|place|places|include|timezone|crs)\b")


def looks_like_program(text: str) -> bool:
    """Whether the first line that is not blank or a comment starts with a declaration."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return _DECLARATION.match(stripped) is not None
    return True     # nothing but comments: an empty program


def load_program(path: str | Path, text: str | None = None) -> Loaded:
    """Parse ``path`` (or ``text`` as if it were that file) with everything it includes."""
    path = Path(path)
    out = Loaded(root=str(path))
    _load(path, text, out, stack=[], seen=set())
    return out


def _load(path: Path, text: str | None, out: Loaded, stack: list[Path], seen: set[Path],
          via: A.Include | None = None) -> None:
    key = path.resolve() if text is None else path
    if key in seen:
        return  # included twice (diamond): declarations once
    seen.add(key)
    if text is None:
        try:
            text = read_program(path)
        except OSError as e:
            why = e.strerror or str(e)
            if via is None:
                raise DataError(f"{path}: cannot read: {why}") from None
            out.diag(via.span, f"cannot include \"{via.path}\": {why}")
            return
        except ParseError as e:
            if via is None:
                raise
            d = e.first      # (the content of a file that is not a program is never shown)
            out.diag(via.span, f"cannot include \"{via.path}\": {d.message} at line {d.span.line}, "
                               f"column {d.span.col}")
            return
    else:
        text = text.removeprefix(BOM)
    out.texts[str(path)] = text
    try:
        module = parse_text(text, str(path))
    except ParseError as e:
        if via is not None and not looks_like_program(text):
            # an included file that is not a program (a secret, /proc/self/environ): say
            # where it stops parsing, never what it holds
            d = e.first
            out.diag(via.span, f"cannot include \"{via.path}\": not a SpaTeC program (it does not start "
                               f"with a declaration; syntax error at line {d.span.line}, column {d.span.col})",
                     "include names a .spatec file of declarations")
            return
        out.diagnostics.extend(e.diagnostics)
        return
    for decl in module.decls:
        if isinstance(decl, A.Include):
            target = (path.parent / decl.path)
            if not target.is_file():  # first: a path that cannot exist (NUL byte) cannot be resolved
                out.diag(decl.span, f"cannot include \"{decl.path}\": no such file ({os.path.normpath(target)})",
                         "include paths are relative to the including file")
                continue
            if target.resolve() in [p.resolve() for p in stack + [path]]:
                chain = " → ".join(p.name for p in stack + [path, target])
                out.diag(decl.span, f"cyclic include of \"{decl.path}\" ({chain})",
                         "move the shared declarations to a file that includes nothing")
                continue
            _load(target, None, out, stack + [path], seen, via=decl)
        elif isinstance(decl, A.PlacesFile):
            _load_places(path.parent / decl.path, decl, out)
            out.decls.append(decl)
        else:
            out.decls.append(decl)


def _load_places(target: Path, decl: A.PlacesFile, out: Loaded) -> None:
    import shapely
    from shapely.geometry import shape as to_shape

    if not target.is_file():
        out.diag(decl.span, f"cannot read places \"{decl.path}\": no such file ({target})",
                 "places paths are relative to the including file")
        return
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:      # (UnicodeDecodeError is a ValueError)
        out.diag(decl.span, f"cannot read places \"{decl.path}\": not GeoJSON ({e})")
        return
    except RecursionError:
        out.diag(decl.span, f"cannot read places \"{decl.path}\": not GeoJSON (nested too deeply)")
        return
    feats = data.get("features", []) if isinstance(data, dict) else []
    if not isinstance(feats, list):
        feats = []
    named = 0
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
            out.diag(decl.span, f"places \"{decl.path}\": feature {i} ({name}) has a bad geometry: {why}")
            continue
        problem = geometry_problem(g)
        if problem:
            out.diag(decl.span, f"places \"{decl.path}\": feature {i} ({name}) {problem[0]}", problem[1])
            continue
        try:
            radius = float(props.get("radius_m") or 0.0)
        except (TypeError, ValueError):
            radius = -1.0
        if not (0.0 <= radius < 4e7):  # a typo, not a place the size of the Earth
            out.diag(decl.span, f"places \"{decl.path}\": feature {name} has a bad radius_m "
                                f"{props.get('radius_m')!r}", "radius_m is a number of metres")
            continue
        if g.geom_type == "Point":
            pd = PlaceDef(name, "circle", g.x, g.y, radius, span=decl.span)
        elif g.geom_type in ("Polygon", "MultiPolygon"):
            pd = PlaceDef(name, "polygon", wkt=shapely.to_wkt(g, rounding_precision=-1), span=decl.span)
        else:
            out.diag(decl.span, f"places \"{decl.path}\": feature {name} is a {g.geom_type}; "
                                "places are points or polygons")
            continue
        if name in out.places:
            out.diag(decl.span, f"place {name} is defined twice in \"{decl.path}\"")
            continue
        out.places[name] = pd
    if named == 0:
        out.diag(decl.span, f"places \"{decl.path}\" has no feature with a `name` property")


def geometry_problem(g) -> tuple[str, str] | None:
    """What makes a place's geometry unusable, with a hint: none at all, coordinates that are
    not WGS84 longitude/latitude, a polygon that crosses itself. None when it is usable."""
    import math

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

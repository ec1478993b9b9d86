"""Loading a program: the root file, its includes (relative paths, no cycles) and
its place files (:mod:`spatec.frontend.places`). Produces the merged
declarations with every problem found.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from spatec.errors import DataError, Diagnostic, ParseError, Span
from spatec.frontend import ast as A
from spatec.frontend.parse import parse_text
from spatec.frontend.places import PlaceDef, PlaceSet, geometry_problem, load_named_features, load_place_set
from spatec.frontend.source import BOM, read_program

__all__ = ["Loaded", "PlaceDef", "PlaceSet", "geometry_problem", "load_program", "looks_like_program"]


@dataclass
class Loaded:
    """Everything the files of a program declare, in file order, with their texts."""

    root: str
    decls: list = field(default_factory=list)
    texts: dict = field(default_factory=dict)     # file → text, for error lines
    places: dict = field(default_factory=dict)    # name → PlaceDef from `places` files
    place_sets: dict = field(default_factory=dict)  # id(PlaceSetDecl) → PlaceSet, for each set that loaded
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
            out.diag(_file_string(via), f"cannot include \"{via.path}\": {why}")
            return
        except ParseError as e:
            if via is None:
                raise
            d = e.first      # (the content of a file that is not a program is never shown)
            out.diag(_file_string(via), f"cannot include \"{via.path}\": {d.message} at line {d.span.line}, "
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
            out.diag(_file_string(via), f"cannot include \"{via.path}\": not a SpaTeC program (it does not start "
                               f"with a declaration; syntax error at line {d.span.line}, column {d.span.col})",
                     "include names a .spatec file of declarations")
            return
        out.diagnostics.extend(e.diagnostics)
        if e.module is None:
            return
        module = e.module       # slips read past (`90 mins`): check the rest of the program too
    for decl in module.decls:
        if isinstance(decl, A.Include):
            target = (path.parent / decl.path)
            at = _file_string(decl)
            if not target.is_file():  # first: a path that cannot exist (NUL byte) cannot be resolved
                out.diag(at, f"cannot include \"{decl.path}\": no such file ({os.path.normpath(target)})",
                         "include paths are relative to the including file")
                continue
            if target.resolve() in [p.resolve() for p in stack + [path]]:
                chain = " → ".join(p.name for p in stack + [path, target])
                out.diag(at, f"cyclic include of \"{decl.path}\" ({chain})",
                         "move the shared declarations to a file that includes nothing")
                continue
            _load(target, None, out, stack + [path], seen, via=decl)
        elif isinstance(decl, A.PlacesFile):
            _load_places(path.parent / decl.path, decl, out)
            out.decls.append(decl)
        elif isinstance(decl, A.PlaceSetDecl):
            loaded = load_place_set(decl, path.parent, out.diagnostics.append, out.line)
            if loaded is not None:
                out.place_sets[id(decl)] = loaded
            out.decls.append(decl)
        else:
            out.decls.append(decl)


def _file_string(decl) -> Span:
    """The span of a declaration's file string (errors point at it), or of the declaration."""
    return decl.path_span if decl.path_span.line else decl.span


def _load_places(target: Path, decl: A.PlacesFile, out: Loaded) -> None:
    for name, pd in load_named_features(target, decl, out.diagnostics.append, out.line).items():
        if name in out.places:
            out.diag(_file_string(decl), f"place {name} is defined twice in \"{decl.path}\"")
            continue
        out.places[name] = pd

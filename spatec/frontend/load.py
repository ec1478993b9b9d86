"""Loading a program: the root file, its includes (relative paths, no cycles) and
its place files (:mod:`spatec.frontend.places`). Produces the merged
declarations with every problem found.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from spatec.errors import Diagnostic, ParseError, Span
from spatec.frontend import ast as A
from spatec.frontend.parse import parse_text
from spatec.frontend.places import PlaceDef, PlaceSet, load_named_features, load_place_set

__all__ = ["Loaded", "PlaceDef", "PlaceSet", "load_program"]


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
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            if via is None:
                raise  # the root file: the caller says it cannot be read
            why = "not UTF-8 text" if isinstance(e, UnicodeDecodeError) else (e.strerror or str(e))
            out.diag(via.path_span if via.path_span.line else via.span, f"cannot include \"{via.path}\": {why}")
            return
    out.texts[str(path)] = text
    try:
        module = parse_text(text, str(path))
    except ParseError as e:
        out.diagnostics.extend(e.diagnostics)
        return
    for decl in module.decls:
        if isinstance(decl, A.Include):
            target = (path.parent / decl.path)
            at = decl.path_span if decl.path_span.line else decl.span  # the file string itself
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


def _load_places(target: Path, decl: A.PlacesFile, out: Loaded) -> None:
    for name, pd in load_named_features(target, decl, out.diagnostics.append, out.line).items():
        if name in out.places:
            out.diag(decl.path_span if decl.path_span.line else decl.span,
                     f"place {name} is defined twice in \"{decl.path}\"")
            continue
        out.places[name] = pd

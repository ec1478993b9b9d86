"""Helpers for the front-end tests: check a program text, collect its diagnostics."""
from __future__ import annotations

from pathlib import Path

from spatec.errors import ProgramError
from spatec.frontend.check import check_file

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "lang" / "corpus"
SHARED = ROOT.parent / "shared"
BUS = (ROOT / "examples" / "bus.spatec").read_text(encoding="utf-8")


def check_text(body: str, tmp_path: Path | None = None, name: str = "prog.spatec"):
    """Check ``body`` after the bus declarations, as ``name`` (in ``tmp_path`` when given)."""
    path = (tmp_path / name) if tmp_path is not None else Path(name)
    return check_file(path, BUS + "\n" + body)


def diagnostics(body: str, tmp_path: Path | None = None, name: str = "prog.spatec") -> list:
    """The diagnostics of a program that must not check."""
    try:
        check_text(body, tmp_path, name)
    except ProgramError as e:
        return e.diagnostics
    raise AssertionError("the program checked")


def messages(body: str, tmp_path: Path | None = None) -> list[str]:
    return [d.message for d in diagnostics(body, tmp_path)]


def one(body: str, tmp_path: Path | None = None):
    """The only diagnostic of a program."""
    ds = diagnostics(body, tmp_path)
    assert len(ds) == 1, [d.render() for d in ds]
    return ds[0]


def at(d, line_text: str, token: str, after: str = "") -> bool:
    """Does diagnostic ``d`` point at ``token`` (the first after ``after``) on its line, which
    contains ``line_text``?"""
    assert d.source_line is not None and line_text in d.source_line, d.render()
    col = d.source_line.index(token, d.source_line.index(after) + len(after) if after else 0) + 1
    return d.span.col == col and d.span.end_col - d.span.col == len(token)

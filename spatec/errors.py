"""One error base class for spatec, one subclass per stage.

A positioned error carries its file, line, column and the offending source line
as fields, so tools can use them; ``str()`` renders the familiar
``file:line:col: message`` form followed by the line and a caret.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A region of source text: 1-based line and column, end exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<none>", 0, 0, 0, 0)


@dataclass(frozen=True)
class Diagnostic:
    """One problem in a program, tied to where it is."""

    span: Span
    message: str
    hint: str | None = None
    source_line: str | None = None

    def render(self) -> str:
        out = f"{self.span}: {self.message}"
        if self.source_line is not None and self.span.line > 0:
            line = self.source_line.rstrip("\n")
            width = 1
            if self.span.end_line == self.span.line and self.span.end_col > self.span.col:
                width = self.span.end_col - self.span.col
            out += f"\n    {line}\n    {' ' * (self.span.col - 1)}{'^' * width}"
        if self.hint:
            out += f"\n    hint: {self.hint}"
        return out


class SpatecError(Exception):
    """Base class of every error spatec raises on purpose."""


class ProgramError(SpatecError):
    """A program has one or more errors; all of them are in ``diagnostics``."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(d.render() for d in self.diagnostics))

    @property
    def first(self) -> Diagnostic:
        return self.diagnostics[0]


class ParseError(ProgramError):
    """The text is not a SpaTeC program.

    ``module``: when every problem is a slip the parser could read past with its meaning
    plain (a unit written `mins`), the syntax tree as if it had been written right, so
    that the checker can report the program's other errors too; else None."""

    def __init__(self, diagnostics: list[Diagnostic], module=None):
        super().__init__(diagnostics)
        self.module = module


class CheckError(ProgramError):
    """The program parses but is not meaningful (names, types, units, bounds)."""


class PlanError(SpatecError):
    """The planner cannot lower a checked program."""


class DataError(SpatecError):
    """Input data cannot be read at all (not one bad row: those are rejects)."""


class OutputError(SpatecError):
    """An output cannot be written where it was asked to go (a file where a directory
    should be, no permission, another run writing there): found before any input is read."""


class UnsupportedError(SpatecError):
    """A runner or engine does not support an operation in a mode."""

    def __init__(self, what: str, mode: str, reason: str = ""):
        self.what, self.mode = what, mode
        super().__init__(f"{what} is not supported in {mode} mode" + (f": {reason}" if reason else ""))

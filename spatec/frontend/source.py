"""A program file's text: UTF-8 without its byte-order mark, or a positioned error."""
from __future__ import annotations

from pathlib import Path

from spatec.errors import Diagnostic, ParseError, Span

#: The largest program file read (a path such as /proc/kcore is a file too).
PROGRAM_LIMIT = 8 << 20
BOM = "\ufeff"


def read_program(path: Path) -> str:
    """The text of a program file: UTF-8, a byte-order mark dropped. Bytes that are not
    UTF-8 are a :class:`~spatec.errors.ParseError` at the line and column of the first;
    a file over :data:`PROGRAM_LIMIT` one at 1:1. Neither shows the file's content."""
    with open(path, "rb") as f:
        data = f.read(PROGRAM_LIMIT + 1)
    file = str(path)
    if len(data) > PROGRAM_LIMIT:
        raise ParseError([Diagnostic(Span(file, 1, 1, 1, 2), f"not a program: larger than {PROGRAM_LIMIT >> 20} MiB")])
    try:
        return data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        line = data.count(b"\n", 0, e.start) + 1
        col = len(data[start:e.start].decode("utf-8", "replace").removeprefix(BOM)) + 1
        raise ParseError([Diagnostic(Span(file, line, col, line, col + 1),
                                     f"not UTF-8: byte 0x{data[e.start]:02X}",
                                     "save the program as UTF-8")]) from None

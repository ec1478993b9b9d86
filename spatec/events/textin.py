"""Text input that never stops with a traceback: decoding, damaged gzip, CSV records.

Three things go wrong with text files in the field, and each becomes a reject
naming the file and row rather than an exception:

- **Bytes that are not UTF-8.** Text is decoded with ``surrogateescape``, so a
  bad byte stays itself; a record holding one is a reject
  (:func:`~spatec.events.raw.utf8_problem`). Decoding with replacement would
  make ``BUS-\\xe9`` and ``BUS-\\xe8`` one vehicle.
- **A truncated or corrupt gzip file.** :func:`open_text` reads up to the last
  whole line before the damage; :func:`damage_of` then says what happened and
  gives the partial line that was cut, which the reader reports as one reject
  after the last record.
- **A quote that is never closed** (CSV). A quoted value may span lines, but
  a quote that runs to the end of the file, that runs a row into the next
  lines and leaves it with the wrong number of fields, or that runs it into a
  line that is a whole row by itself, is an *unbalanced quote*: the row it
  opens on is a reject naming the quote's column, and the lines after it are
  read as rows of their own (:func:`csv_rows`) — never swallowed silently
  into one.

Fields up to :data:`FIELD_LIMIT` long are read; a row with a longer one is a
reject.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import zlib
from collections import deque
from typing import Iterator

from spatec.errors import DataError
from spatec.events.raw import json_record, printable, utf8_problem

#: The longest CSV field read (Python's csv module stops at 128 KiB by default; a polygon's
#: WKT can be longer). A row with a longer field is a reject.
FIELD_LIMIT = 16 << 20
csv.field_size_limit(FIELD_LIMIT)


# --------------------------------------------------------------------------- bytes

def is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


class Decompressed(io.RawIOBase):
    """The decompressed bytes of a gzip file up to its last whole line before any damage.

    A file that ends inside compressed data (a download cut short) or whose data
    is corrupt does not raise: the stream ends at the last newline before the
    damage, :attr:`damage` says what happened and :attr:`tail` holds the bytes
    of the line that was cut.
    """

    def __init__(self, path: str):
        self._f = gzip.open(path, "rb")
        self._held = b""        # bytes after the last newline, until more come
        self._out = memoryview(b"")
        self._eof = False
        self.damage: str | None = None
        self.tail = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while not len(self._out):
            if self._eof:
                return 0
            try:
                chunk = self._f.read(1 << 16)
            except EOFError:
                self._damaged("truncated gzip data: the file ends inside its compressed data")
                continue
            except (zlib.error, gzip.BadGzipFile) as e:
                self._damaged(f"corrupt gzip data ({e})")
                continue
            if not chunk:
                self._out, self._held, self._eof = memoryview(self._held), b"", True
                continue
            data = self._held + chunk
            cut = data.rfind(b"\n") + 1
            self._out, self._held = memoryview(data)[:cut], data[cut:]
        n = min(len(buf), len(self._out))
        buf[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def _damaged(self, why: str) -> None:
        self.damage, self.tail, self._held, self._eof = why, self._held, b"", True

    def close(self) -> None:
        self._f.close()
        super().close()


def open_text(path: str) -> io.TextIOBase:
    """A text stream over a plain or gzip-compressed file (told apart by content): UTF-8,
    a byte-order mark skipped, bytes that are not UTF-8 kept (``surrogateescape``), a
    damaged gzip stream ended at its last whole line (:func:`damage_of`)."""
    if is_gzip(path):
        return io.TextIOWrapper(io.BufferedReader(Decompressed(path)), encoding="utf-8-sig",
                                errors="surrogateescape", newline="")
    return open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")


def damage_of(f: io.TextIOBase) -> tuple[str | None, str]:
    """What cut a stream of :func:`open_text` short (None: nothing), and the cut line's text."""
    raw = getattr(getattr(f, "buffer", None), "raw", None)
    if not isinstance(raw, Decompressed) or raw.damage is None:
        return None, ""
    return raw.damage, raw.tail.decode("utf-8", "surrogateescape")


def damage_reject(f: io.TextIOBase, row: int) -> tuple[int, str, str] | None:
    """The reject that reports a damaged stream, numbered ``row`` (after the last record
    read), or None when the stream was whole."""
    why, tail = damage_of(f)
    if why is None:
        return None
    return (row, f"{why}; the rest of the file is lost (this line was cut: it is not read)",
            json.dumps(printable(tail.rstrip("\r\n"))))


# --------------------------------------------------------------------------- CSV records

_END_MARK = "\ufdd0spatec: end of input\ufdd0"
_END = _END_MARK + "\n"       # a line no file holds (U+FDD0 is a noncharacter): the input's end


class _Lines:
    """Physical lines, the end marked by :data:`_END`; lines can be put back (the lines
    a row took are read again from its second when the row is cut short)."""

    def __init__(self, f):
        self._f = iter(f)
        self._back: deque = deque()
        self._ended = False
        self.taken: list[str] = []    # lines the current record took

    def __iter__(self):
        return self

    def __next__(self) -> str:
        if self._back:
            line = self._back.popleft()
        else:
            line = next(self._f, None)
            if line is None:
                if self._ended:
                    raise StopIteration
                self._ended, line = True, _END
        self.taken.append(line)
        return line

    def put_back(self, lines: list[str]) -> None:
        self._back.extendleft(reversed(lines))


def quote_column(line: str) -> int | None:
    """The 1-based column of the quote that opens a value left open at the end of ``line``.

    >>> quote_column('a,b,"c,d')
    5
    >>> quote_column('a,"b, c",d') is None
    True
    """
    opened, at_start, quoted = None, True, False
    i, n = 0, len(line.rstrip("\r\n"))
    while i < n:
        c = line[i]
        if quoted:
            if c == '"':
                if i + 1 < n and line[i + 1] == '"':
                    i += 1
                else:
                    quoted = False
        elif c == '"' and at_start:
            quoted, opened = True, i + 1
        at_start = c == "," and not quoted
        i += 1
    return opened if quoted else None


def csv_header(lines, f, path: str) -> list[str]:
    """The first record of a CSV file (``lines``: a :class:`_Lines` of the stream ``f``):
    its column names."""
    for record in csv.reader(lines):
        if record == [_END_MARK]:
            break
        if not record:
            continue
        if _END_MARK in record[-1]:
            raise DataError(f"{path}: unbalanced quote in the header row (column {quote_column(record[0]) or '?'})")
        bad = next((p for p in map(utf8_problem, record) if p), None)
        if bad:
            raise DataError(f"{path}: the header row is not UTF-8 ({bad}); convert the file to UTF-8")
        return record
    damage, _ = damage_of(f)
    raise DataError(f"{path}: {damage}" if damage else f"{path}: empty file, no header row")


def read_header(path: str) -> list[str]:
    """The column names of a CSV file (a :class:`~spatec.errors.DataError` when it has none)."""
    with open_text(path) as f:
        try:
            return csv_header(_Lines(f), f, path)
        except csv.Error as e:
            raise DataError(f"{path}: cannot read the header row: {e}") from None


def csv_rows(f, path: str) -> tuple[list[str], Iterator[tuple[int, list[str] | None, str | None, str]]]:
    """The header of a CSV text stream and an iterator over its data records, numbered
    from 1 (blank lines skipped): ``(number, fields, None, "")`` for a record of the
    header's width, and ``(number, None, reason, record JSON)`` for a row that is a
    reject — a wrong number of fields, an unbalanced quote (then the lines after it are
    read as rows of their own), a byte that is not UTF-8, a field longer than
    :data:`FIELD_LIMIT`. A damaged gzip stream ends with one more reject
    (:func:`damage_reject`)."""
    lines = _Lines(f)
    header = csv_header(lines, f, path)
    lines.taken = []
    return header, _rows(lines, f, header)


def _rows(lines: _Lines, f, header: list[str]):
    width = len(header)
    number = 0
    while True:
        reader = csv.reader(lines)
        try:
            for record in reader:
                taken, lines.taken = lines.taken, []
                if record == [_END_MARK]:
                    tail = damage_reject(f, number + 1)
                    if tail is not None:
                        yield tail[0], None, tail[1], tail[2]
                    return
                if not record:
                    continue      # a blank line is no record
                number += 1
                ended = _END_MARK in record[-1]
                if len(taken) > 1 and (ended or len(record) != width or _rows_alone(taken[1:], width)):
                    # an unbalanced quote: the row it opens on is the reject; the lines it
                    # swallowed are read again as rows
                    lines.put_back(taken[1:])
                    col = quote_column(taken[0])
                    at = f"the quote at column {col}" if col else "a quote"
                    why = ("is never closed" if ended else
                           f"runs the row on into the next line ({len(record)} fields, expected {width})"
                           if len(record) != width else "runs the row on into the next line, a row of its own")
                    yield (number, None, f"unbalanced quote: {at} {why}; the lines after it are read as rows",
                           json.dumps(printable(taken[0].rstrip("\r\n"))))
                    break
                if len(record) != width:
                    yield (number, None, f"malformed CSV row: expected {width} fields, found {len(record)}",
                           json_record([printable(v) for v in record]))
                    continue
                bad = None if len(taken) == 1 and taken[0].isascii() else _utf8_field(record, header)
                if bad:
                    yield number, None, bad, json_record(dict(zip(header, map(printable, record))))
                    continue
                yield number, record, None, ""
            else:
                return
        except csv.Error as e:
            # (the reader starts afresh at the next line; put back what the row took beyond its first)
            taken, lines.taken = lines.taken, []
            number += 1
            lines.put_back(taken[1:])
            why = f"a field longer than {FIELD_LIMIT >> 20} MiB" if "field larger" in str(e) else str(e)
            yield number, None, f"malformed CSV row: {why}", json.dumps(printable(taken[0][:200].rstrip("\r\n")))


def _rows_alone(lines: list[str], width: int) -> bool:
    """Whether one of the lines a quoted value ran into is, read alone, a whole row: then
    the quote swallowed rows (a value that spans lines on purpose holds text, not rows)."""
    for line in lines:
        if line != _END and len(next(csv.reader([line]), [])) == width:
            return True
    return False


def _utf8_field(record: list[str], header: list[str]) -> str | None:
    """Which field of a record holds a byte that is not UTF-8, and where (None: none)."""
    try:
        "".join(record).encode("utf-8")
        return None
    except UnicodeEncodeError:
        pass
    for name, value in zip(header, record):
        bad = utf8_problem(value)
        if bad:
            return (f"{printable(name)}: not UTF-8 ({bad}); convert the file to UTF-8, "
                    "e.g. iconv -f latin1 -t utf-8")
    return None

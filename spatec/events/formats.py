"""File formats: which files a path means, what format each is, and reading one into a RawBatch.

Formats (``FORMATS``): ``csv`` (also gzip-compressed), ``parquet``,
``jsonl`` (one JSON object a line; ``.jsonl``, ``.ndjson``, ``.json``, gzip
too) and ``sirivm`` (SIRI-VM feed polls: see :mod:`spatec.events.sirivm`).

The format comes from the name: ``.csv[.gz]``, ``.parquet``/``.pq``,
``.jsonl[.gz]``/``.ndjson[.gz]``, ``.tar.gz``/``.tgz``/``.tar`` (an archive
of SIRI-VM polls). A ``.json[.gz]`` file is a SIRI-VM poll when its first
64 KiB mention ``"request_data"``, else JSON lines — except beside polls in a
directory or glob, where it is a poll (a damaged one is then a reject, and
the directory still loads). An explicit ``fmt`` overrides all of this.

A path is a file, a directory (its files of the format, not recursive; names
starting with ``.`` or ``_`` skipped) or a glob. Files are read in name order;
SIRI-VM polls in the time order of their names (``<epoch>_<date>.json``).

Record numbers: CSV counts data records (header excluded, blank lines
skipped); JSON lines counts lines (blank lines are skipped but counted, so
the number is the line to look at); Parquet counts rows.
"""
from __future__ import annotations

import glob
import json
import os
import re
from typing import Collection

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from spatec.errors import DataError
from spatec.events.raw import RawBatch, json_record, printable, utf8_problem
from spatec.events.textin import FIELD_LIMIT, csv_rows, damage_reject, is_gzip, open_text, read_header

__all__ = ["FORMATS", "StreamFailed", "csv_slices", "detect_format", "expand", "open_text", "parse_json_lines",
           "parquet_slices", "poll_order", "read_csv", "read_jsonl", "read_parquet", "slice_fetch"]

FORMATS = ("csv", "parquet", "jsonl", "sirivm")
_SUFFIXES = (
    (".csv", "csv"), (".csv.gz", "csv"),
    (".parquet", "parquet"), (".pq", "parquet"),
    (".jsonl", "jsonl"), (".jsonl.gz", "jsonl"), (".ndjson", "jsonl"), (".ndjson.gz", "jsonl"),
    (".tar.gz", "sirivm"), (".tgz", "sirivm"), (".tar", "sirivm"),
)
_GLOB_CHARS = re.compile(r"[*?\[]")


# --------------------------------------------------------------------------- which files

def detect_format(path: str) -> str | None:
    """The format of one file from its name (and, for ``.json``, its first bytes); None if unknown."""
    name = os.path.basename(path).lower()
    for suffix, fmt in _SUFFIXES:
        if name.endswith(suffix):
            return fmt
    if name.endswith(".json") or name.endswith(".json.gz"):
        try:
            with open_text(path) as f:
                head = f.read(65536)
        except OSError:
            head = ""       # unreadable: the reader says why
        return "sirivm" if '"request_data"' in head else "jsonl"
    return None


def _ambiguous(path: str) -> bool:
    """Whether a file's name leaves its format to its content (``.json``: a poll or JSON lines)."""
    return path.lower().endswith((".json", ".json.gz"))


def poll_order(path: str) -> tuple[float, str]:
    """Sort key of a SIRI-VM poll: the epoch its name starts with, then the name."""
    base = os.path.basename(path)
    m = re.match(r"(\d+(?:\.\d+)?)", base)
    return (float(m.group(1)) if m else float("inf"), base)


def expand(path: str, fmt: str | None = None) -> list[tuple[str, str]]:
    """The files a path means, each with its format, in reading order."""
    if fmt is not None and fmt not in FORMATS:
        raise DataError(f"unknown input format {fmt!r}; expected one of {', '.join(FORMATS)}")
    path = os.fspath(path)
    if os.path.isdir(path):
        names = [os.path.join(path, n) for n in os.listdir(path) if not n.startswith((".", "_"))]
        candidates = [p for p in names if os.path.isfile(p)]
        explicit = False
    elif os.path.isfile(path):
        candidates, explicit = [path], True
    elif _GLOB_CHARS.search(path):
        candidates = [p for p in glob.glob(path) if os.path.isfile(p)]
        explicit = False
        if not candidates:
            raise DataError(f"{path}: no files match")
    else:
        raise DataError(f"{path}: no such file or directory")
    found = []
    for p in candidates:
        detected = detect_format(p)
        if fmt is not None:
            # a poll that does not look like one is still read as one when asked
            if explicit or detected == fmt or (fmt == "sirivm" and p.lower().endswith((".json", ".json.gz"))):
                found.append((p, fmt))
        elif detected is not None:
            found.append((p, detected))
        elif explicit:
            raise DataError(f"{p}: cannot tell the format from the name; pass one of {', '.join(FORMATS)}")
    kinds = {f for _, f in found}
    if kinds == {"sirivm", "jsonl"} and all(f == "sirivm" or _ambiguous(p) for p, f in found):
        # a .json file that does not look like a poll, among polls, is a damaged poll: read as
        # one, it is a reject naming it, not a reason to refuse the whole directory
        found, kinds = [(p, "sirivm") for p, _ in found], {"sirivm"}
    if len(kinds) > 1:
        raise DataError(f"{path}: files of several formats ({', '.join(sorted(kinds))}); pass the format to read")
    if not found:
        raise DataError(f"{path}: no {fmt or 'readable'} files in it")
    key = poll_order if kinds == {"sirivm"} else (lambda p: p)
    return sorted(found, key=lambda pf: key(pf[0]))


# --------------------------------------------------------------------------- readers

_CSV_PARSE = pacsv.ParseOptions(newlines_in_values=True)
SMALL_CSV = 1 << 20     # bytes: a CSV file below this is parsed on the calling thread


def _csv_convert(header: list, include: list | None) -> pacsv.ConvertOptions:
    """Every column as text (none missing: an empty field is an empty string)."""
    return pacsv.ConvertOptions(column_types={h: pa.string() for h in header}, include_columns=include,
                                strings_can_be_null=False)


def read_csv(path: str, columns: Collection[str] | None = None) -> RawBatch:
    """Every column as text; Arrow's reader, or Python's when a record is malformed, a
    byte is not UTF-8, a value spans lines (a quote perhaps left open), a field is very
    long or the gzip data is damaged (then each bad record is a reject, named, and the
    numbering stays exact: :func:`spatec.events.textin.csv_rows`).

    With ``columns`` only those are loaded (the rest are still parsed past);
    whole records of rejects are then read again from the file.
    """
    header = read_header(path)
    subset = columns is not None and len(set(header)) == len(header)
    include = [h for h in header if h in set(columns)] if subset else None
    counted = _Counted(path)
    # Arrow's thread pool only pays off for big files: for a small one (a live directory's
    # file of a few hundred records) handing it over costs more than parsing it
    threads = os.path.getsize(path) >= SMALL_CSV
    try:
        table = pacsv.read_csv(counted.stream, read_options=pacsv.ReadOptions(use_threads=threads),
                               parse_options=_CSV_PARSE, convert_options=_csv_convert(header, include))
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError):
        # (OSError: gzip data that ends early or is corrupt)
        return _read_csv_slowly(path)
    finally:
        counted.close()
    if (not subset and table.num_columns != len(header)) or not counted.one_line_each(table.num_rows) \
            or _long_field(table):
        return _read_csv_slowly(path)
    rows = np.arange(1, table.num_rows + 1, dtype=np.int64)
    fetch = slice_fetch("csv" if subset else None, path, header, rows)
    return RawBatch.of(path, table, rows=rows, present=header, fetch=fetch)


class _Counted:
    """A file's bytes for Arrow's reader (decompressed if gzip), their newlines counted on
    the way: then whether every record took one line is known without a second pass.

    Arrow reads a quoted value across lines whatever the parse options say; a quote
    left open in the last field of a row makes it swallow every line after, silently,
    and one that closes lines later can leave the row with the right number of
    fields. Only Python's reader tells those from a value that spans lines on
    purpose (:func:`spatec.events.textin.csv_rows`): a file where any record spans
    lines is read by it.
    """

    def __init__(self, path: str):
        self._native = pa.input_stream(path, compression="gzip" if is_gzip(path) else None)
        self.newlines, self.last = 0, b""
        self.closed = False
        self.stream = pa.PythonFile(self, mode="r")

    def read(self, n: int = -1) -> bytes:
        data = self._native.read(n)
        if data:
            self.newlines += data.count(b"\n")
            self.last = data[-1:]
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self._native.close()
            self.closed = True

    def one_line_each(self, records: int) -> bool:
        """Whether the header and ``records`` records took one line each, and nothing else
        did (a blank line, a value across lines: then the slow reader decides)."""
        return self.newlines == records + (1 if self.last == b"\n" else 0)


def _long_field(table: pa.Table) -> bool:
    """Whether a field is longer than :data:`~spatec.events.textin.FIELD_LIMIT`."""
    return any(col.nbytes > FIELD_LIMIT and pc.max(pc.binary_length(col)).as_py() > FIELD_LIMIT
               for col in table.columns)


class StreamFailed(Exception):
    """A CSV file Arrow's streaming reader could not read to the end (read it whole)."""


def csv_slices(path: str, columns: Collection[str], rows: int = 250_000):
    """:func:`read_csv` in slices of about ``rows`` records, streamed (the file is never
    whole in memory); records are numbered as in the whole file. Raises
    :class:`StreamFailed` — possibly after some slices — where Arrow cannot parse a
    record or :func:`read_csv` would not take Arrow's reading: then the file must be
    read by :func:`read_csv`, whose Python path numbers malformed records exactly."""
    header = read_header(path)
    if len(set(header)) != len(header):
        raise StreamFailed(path)
    include = [h for h in header if h in set(columns)]
    counted = _Counted(path)
    start, pending, held = 0, [], 0
    try:
        reader = pacsv.open_csv(
            counted.stream, read_options=pacsv.ReadOptions(block_size=max(1 << 16, min(1 << 24, rows * 128))),
            parse_options=_CSV_PARSE, convert_options=_csv_convert(header, include))

        def cut(batches):
            nonlocal start
            table = pa.Table.from_batches(batches, schema=reader.schema)
            if _long_field(table):
                raise StreamFailed(path)
            numbers = np.arange(start + 1, start + 1 + table.num_rows, dtype=np.int64)
            start += table.num_rows
            return RawBatch.of(path, table, rows=numbers, present=header,
                               fetch=slice_fetch("csv", path, header, numbers))

        for b in reader:
            pending.append(b)
            held += b.num_rows
            if held >= rows:
                yield cut(pending)
                pending, held = [], 0
        last = cut(pending) if pending or start == 0 else None
        if not counted.one_line_each(start):
            raise StreamFailed(path)
        if last is not None:
            yield last
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError):
        raise StreamFailed(path) from None
    finally:
        counted.close()


def _read_csv_slowly(path: str) -> RawBatch:
    with open_text(path) as f:
        header, records = csv_rows(f, path)
        cols: list[list[str]] = [[] for _ in header]
        rows, unreadable = [], []
        for number, fields, reason, record in records:
            if fields is None:
                unreadable.append((number, reason, record))
                continue
            rows.append(number)
            for c, v in zip(cols, fields):
                c.append(v)
    table = pa.table([pa.array(c, pa.string()) for c in cols], names=header)
    return RawBatch.of(path, table, rows=rows, unreadable=unreadable)


def _csv_records(path: str, header: list[str], numbers: list[int]) -> list[str]:
    """The records with these record numbers, as JSON objects of every column."""
    wanted = set(numbers)
    found: dict[int, str] = {}
    with open_text(path) as f:
        _, records = csv_rows(f, path)
        for number, fields, _reason, _record in records:
            if number in wanted and fields is not None:
                found[number] = json_record(dict(zip(header, fields)))
                if len(found) == len(wanted):
                    break
    return [found[n] for n in numbers]


def read_parquet(path: str, columns: Collection[str] | None = None) -> RawBatch:
    """With ``columns`` only those are loaded; whole records of rejects are read again."""
    try:
        present = pq.read_schema(path).names
        load = [c for c in present if columns is None or c in set(columns)]
        table = pq.read_table(path, columns=load)
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{path}: cannot read as Parquet: {e}") from None
    fetch = (lambda idx: _parquet_records(path, idx)) if len(load) < len(present) else None
    return RawBatch.of(path, table, present=present, fetch=fetch)


def parquet_slices(path: str, columns: Collection[str] | None = None, rows: int = 250_000):
    """:func:`read_parquet` in slices of at most ``rows`` rows, read one at a time (the
    file is never whole in memory); records are numbered as in the whole file."""
    try:
        f = pq.ParquetFile(path)
        present = f.schema_arrow.names
        load = [c for c in present if columns is None or c in set(columns)]
        partial = len(load) < len(present)
        start, any_ = 0, False
        for b in f.iter_batches(batch_size=max(1, rows), columns=load):
            table = pa.Table.from_batches([b])
            numbers = np.arange(start + 1, start + 1 + table.num_rows, dtype=np.int64)
            start += table.num_rows
            any_ = True
            yield RawBatch.of(path, table, rows=numbers, present=present,
                              fetch=slice_fetch("parquet" if partial else None, path, present, numbers))
        if not any_:
            yield RawBatch.of(path, f.schema_arrow.empty_table().select(load), present=present)
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{path}: cannot read as Parquet: {e}") from None


def slice_fetch(kind: str | None, path: str, header, rows: np.ndarray):
    """The ``fetch`` of a batch of a CSV or Parquet file whose loaded columns are a
    subset (``kind``: ``csv`` or ``parquet``; None: records come from the table),
    its records numbered ``rows`` in the file: the whole records, read again."""
    if kind == "csv":
        header = list(header)
        return lambda idx: _csv_records(path, header, [int(rows[i]) for i in idx])
    if kind == "parquet":
        return lambda idx: _parquet_records(path, [int(rows[i]) - 1 for i in idx])
    return None


def _parquet_records(path: str, indices) -> list[str]:
    whole = RawBatch.of(path, pq.read_table(path).take(pa.array(list(indices), pa.int64())))
    return whole.records(range(len(whole.rows)))


def parse_json_lines(lines, path: str) -> tuple[list[dict], list[int], list[tuple[int, str, str]]]:
    """JSON objects of a line-per-record text: (records, their line numbers, unreadable lines:
    not JSON, not an object, nested too deeply, holding a byte that is not UTF-8)."""
    records, rows, unreadable = [], [], []
    number = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        shown = json.dumps(printable(line.rstrip("\r\n")))
        bad = utf8_problem(line)
        if bad:
            unreadable.append((number, f"not UTF-8 ({bad}); convert the file to UTF-8", shown))
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            unreadable.append((number, f"invalid JSON: {e.msg} at column {e.colno}", shown))
            continue
        except RecursionError:
            unreadable.append((number, "invalid JSON: nested too deeply", json.dumps(line[:200])))
            continue
        if not isinstance(obj, dict):
            unreadable.append((number, f"not a JSON object: {type(obj).__name__}", shown))
            continue
        records.append(obj)
        rows.append(number)
    tail = damage_reject(lines, number + 1)
    if tail is not None:
        unreadable.append(tail)
    return records, rows, unreadable


def read_jsonl(path: str, columns: Collection[str] | None = None) -> RawBatch:
    """With ``columns``, only those fields become columns; reject records are the objects."""
    with open_text(path) as f:
        records, rows, unreadable = parse_json_lines(f, path)
    return RawBatch.from_records(path, records, rows, unreadable, columns)

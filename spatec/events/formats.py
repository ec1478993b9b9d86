"""File formats: which files a path means, what format each is, and reading one into a RawBatch.

Formats (``FORMATS``): ``csv`` (also gzip-compressed), ``parquet``,
``jsonl`` (one JSON object a line; ``.jsonl``, ``.ndjson``, ``.json``, gzip
too) and ``sirivm`` (SIRI-VM feed polls: see :mod:`spatec.events.sirivm`).

The format comes from the name: ``.csv[.gz]``, ``.parquet``/``.pq``,
``.jsonl[.gz]``/``.ndjson[.gz]``, ``.tar.gz``/``.tgz``/``.tar`` (an archive
of SIRI-VM polls). A ``.json[.gz]`` file is a SIRI-VM poll when its first
64 KiB mention ``"request_data"``, else JSON lines. An explicit ``fmt``
overrides all of this.

A path is a file, a directory (its files of the format, not recursive; names
starting with ``.`` or ``_`` skipped) or a glob. Files are read in name order;
SIRI-VM polls in the time order of their names (``<epoch>_<date>.json``).

Record numbers: CSV counts data records (header excluded, blank lines
skipped); JSON lines counts lines (blank lines are skipped but counted, so
the number is the line to look at); Parquet counts rows.
"""
from __future__ import annotations

import csv
import glob
import gzip
import io
import json
import os
import re
from typing import Collection

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from spatec.errors import DataError
from spatec.events.raw import RawBatch, json_record

FORMATS = ("csv", "parquet", "jsonl", "sirivm")
_SUFFIXES = (
    (".csv", "csv"), (".csv.gz", "csv"),
    (".parquet", "parquet"), (".pq", "parquet"),
    (".jsonl", "jsonl"), (".jsonl.gz", "jsonl"), (".ndjson", "jsonl"), (".ndjson.gz", "jsonl"),
    (".tar.gz", "sirivm"), (".tgz", "sirivm"), (".tar", "sirivm"),
)
_GLOB_CHARS = re.compile(r"[*?\[]")


# --------------------------------------------------------------------------- which files

def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def open_text(path: str) -> io.TextIOBase:
    """A text stream over a plain or gzip-compressed file (told apart by content)."""
    if _is_gzip(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", errors="replace", newline="")
    return open(path, encoding="utf-8-sig", errors="replace", newline="")


def detect_format(path: str) -> str | None:
    """The format of one file from its name (and, for ``.json``, its first bytes); None if unknown."""
    name = os.path.basename(path).lower()
    for suffix, fmt in _SUFFIXES:
        if name.endswith(suffix):
            return fmt
    if name.endswith(".json") or name.endswith(".json.gz"):
        with open_text(path) as f:
            head = f.read(65536)
        return "sirivm" if '"request_data"' in head else "jsonl"
    return None


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
    """Every column as text; Arrow's reader, or Python's when a record is malformed
    (then each malformed record is a reject and the numbering stays exact).

    With ``columns`` only those are loaded (the rest are still parsed past);
    whole records of rejects are then read again from the file.
    """
    with open_text(path) as f:
        header = next(csv.reader(f), None)
    if header is None:
        raise DataError(f"{path}: empty file, no header row")
    subset = columns is not None and len(set(header)) == len(header)
    include = [h for h in header if h in set(columns)] if subset else []
    stream = pa.input_stream(path, compression="gzip" if _is_gzip(path) else None)
    # Arrow's thread pool only pays off for big files: for a small one (a live directory's
    # file of a few hundred records) handing it over costs more than parsing it
    threads = os.path.getsize(path) >= SMALL_CSV
    try:
        table = pacsv.read_csv(stream, read_options=pacsv.ReadOptions(use_threads=threads),
                               parse_options=_CSV_PARSE,
                               convert_options=_csv_convert(header, include if subset else None))
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return _read_csv_slowly(path)
    finally:
        stream.close()
    if not subset and table.num_columns != len(header):
        return _read_csv_slowly(path)
    rows = np.arange(1, table.num_rows + 1, dtype=np.int64)
    fetch = slice_fetch("csv" if subset else None, path, header, rows)
    return RawBatch.of(path, table, rows=rows, present=header, fetch=fetch)


class StreamFailed(Exception):
    """A CSV file Arrow's streaming reader could not read to the end (read it whole)."""


def csv_slices(path: str, columns: Collection[str], rows: int = 250_000):
    """:func:`read_csv` in slices of about ``rows`` records, streamed (the file is never
    whole in memory); records are numbered as in the whole file. Raises
    :class:`StreamFailed` — possibly after some slices — where Arrow cannot parse a
    record: then the file must be read by :func:`read_csv`, whose Python path numbers
    malformed records exactly."""
    with open_text(path) as f:
        header = next(csv.reader(f), None)
    if header is None:
        raise DataError(f"{path}: empty file, no header row")
    if len(set(header)) != len(header):
        raise StreamFailed(path)
    include = [h for h in header if h in set(columns)]
    stream = pa.input_stream(path, compression="gzip" if _is_gzip(path) else None)
    start, pending, held = 0, [], 0
    try:
        reader = pacsv.open_csv(
            stream, read_options=pacsv.ReadOptions(block_size=max(1 << 16, min(1 << 24, rows * 128))),
            parse_options=_CSV_PARSE, convert_options=_csv_convert(header, include))

        def cut(batches):
            nonlocal start
            table = pa.Table.from_batches(batches, schema=reader.schema)
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
        if pending or start == 0:
            yield cut(pending)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        raise StreamFailed(path) from None
    finally:
        stream.close()


def _read_csv_slowly(path: str) -> RawBatch:
    with open_text(path) as f:
        reader = csv.reader(f)
        header = next(reader)
        cols: list[list[str]] = [[] for _ in header]
        rows, unreadable = [], []
        number = 0
        for record in reader:
            if not record:
                continue  # a blank line is no record
            number += 1
            if len(record) != len(header):
                unreadable.append((number, f"malformed CSV row: expected {len(header)} fields, found {len(record)}",
                                   json_record(record)))
                continue
            rows.append(number)
            for c, v in zip(cols, record):
                c.append(v)
    table = pa.table([pa.array(c, pa.string()) for c in cols], names=header)
    return RawBatch.of(path, table, rows=rows, unreadable=unreadable)


def _csv_records(path: str, header: list[str], numbers: list[int]) -> list[str]:
    """The records with these record numbers, as JSON objects of every column."""
    wanted = set(numbers)
    found: dict[int, str] = {}
    with open_text(path) as f:
        reader = csv.reader(f)
        next(reader)
        number = 0
        for record in reader:
            if not record:
                continue
            number += 1
            if number in wanted:
                found[number] = json_record(dict(zip(header, record)))
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
    """JSON objects of a line-per-record text: (records, their line numbers, unreadable lines)."""
    records, rows, unreadable = [], [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            unreadable.append((number, f"invalid JSON: {e.msg} at column {e.colno}", json.dumps(line.rstrip("\r\n"))))
            continue
        if not isinstance(obj, dict):
            unreadable.append((number, f"not a JSON object: {type(obj).__name__}", json.dumps(line.rstrip("\r\n"))))
            continue
        records.append(obj)
        rows.append(number)
    return records, rows, unreadable


def read_jsonl(path: str, columns: Collection[str] | None = None) -> RawBatch:
    """With ``columns``, only those fields become columns; reject records are the objects."""
    with open_text(path) as f:
        records, rows, unreadable = parse_json_lines(f, path)
    return RawBatch.from_records(path, records, rows, unreadable, columns)

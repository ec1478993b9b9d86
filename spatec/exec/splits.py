"""Inputs cut into splits, and one split read and typed.

A *split* is the unit of reading: rows ``[a, b)`` of a Parquet file (from its row groups,
decoded no further than ``b``), a CSV or JSON lines file (whole, or part ``k`` of ``n`` of
its records when it is large: every part parses the file, and types only its records), a
SIRI-VM poll file or archive, or a few poll files of a directory. Splits are numbered in
input order (input, file, part), which is the order the duplicate rule and the rejects file
follow.

:func:`plan_splits` runs where the run is planned (it lists files and reads Parquet footers
and CSV headers, so that a file unusable as a whole fails before any task starts);
:func:`read_split` runs wherever the split is read (a Spark task, or this process): the same
readers, types, rejects and duplicate rule within the split as every runner
(:func:`spatec.events.canonical.to_events`). Copies across splits are decided afterwards
(:mod:`spatec.exec.decide`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spatec.errors import DataError
from spatec.events.canonical import IngestResult, check_columns, to_events
from spatec.events.raw import RawBatch

#: Text files below this many bytes are one split whatever their rows.
SMALL_TEXT = 8 << 20
#: Bytes a CSV or JSON lines record is reckoned to take (gzip: on disk, compressed).
ROW_BYTES = {"csv": 90, "jsonl": 160}
GZIP_RATIO = 6
#: Poll files of a directory read by one split.
POLLS_PER_SPLIT = 64


@dataclass(frozen=True)
class Split:
    """One unit of reading (see the module)."""

    index: int
    input: int
    type: str
    files: tuple            # one file, or (SIRI-VM) a few poll files of a directory
    fmt: str
    part: int = 0           # text formats: this split's part of the file's records ...
    parts: int = 1          # ... of this many
    rows: tuple | None = None   # Parquet: rows [a, b) of the file
    estimate: int = 0       # records expected (for dealing splits to tasks)
    #: a frame given as the input (the Python API: pandas, or a Spark DataFrame's rows), as Arrow
    table: object = field(default=None, compare=False, repr=False)

    @property
    def file(self) -> str:
        return self.files[0]


def plan_splits(program, inputs, split_rows: int, cores: int = 1, spark_frames: bool = False) -> list:
    """Every input (``[(type, path)]``) cut into splits, in input order. Paths are
    listed and checked here: a missing file, a format that cannot be told, a Parquet file
    that cannot be read or a CSV header without a declared column is a
    :class:`~spatec.errors.DataError` now."""
    from spatec.events.formats import expand

    out: list = []
    for i, (t, path) in enumerate(inputs):
        decl = program.events[t]
        if not isinstance(path, (str, os.PathLike)):
            if spark_frames and is_spark_frame(path):
                out += spark_frame_splits(path, len(out), i, t, decl)
                continue
            table = path.toArrow() if hasattr(path, "toArrow") else pa.Table.from_pandas(path, preserve_index=False)
            out.append(Split(len(out), i, t, (f"<{t} DataFrame>",), "frame", estimate=table.num_rows, table=table))
            continue
        files = expand(os.fspath(path))
        polls = [f for f, fmt in files if fmt == "sirivm"]
        if polls and len(polls) == len(files) and len(files) > 1:
            for a in range(0, len(files), POLLS_PER_SPLIT):
                group = tuple(f for f, _ in files[a:a + POLLS_PER_SPLIT])
                out.append(Split(len(out), i, t, group, "sirivm", estimate=len(group) * 300))
            continue
        for file, fmt in files:
            if fmt == "parquet":
                for r in parquet_ranges(file, decl, split_rows, cores):
                    out.append(Split(len(out), i, t, (file,), fmt, rows=r, estimate=r[1] - r[0]))
            elif fmt in ("csv", "jsonl"):
                if fmt == "csv":
                    _check_header(file, decl)
                n = text_parts(file, fmt, split_rows, cores)
                rows = estimated_rows(file, fmt)
                for k in range(n):
                    out.append(Split(len(out), i, t, (file,), fmt, part=k, parts=n, estimate=max(1, rows // n)))
            else:
                out.append(Split(len(out), i, t, (file,), fmt, estimate=estimated_rows(file, "jsonl")))
    return out


def is_spark_frame(x) -> bool:
    """A Spark DataFrame (not imported: pandas frames and paths are the other inputs)."""
    return hasattr(x, "sparkSession") and hasattr(x, "mapInArrow")


def spark_frame_splits(df, first: int, i: int, t: str, decl) -> list:
    """A Spark DataFrame given as an input, read where its partitions are: one split per
    partition (``part``: its index; its records numbered within it, and rejects name it),
    in partition order (the frame's order). Its columns are checked here, before any task
    runs; its rows are counted by Spark (one job) for the grouping's sizes."""
    name = f"<{t} DataFrame>"
    check_columns(RawBatch.of(name, pa.table({c: pa.nulls(0) for c in dict.fromkeys(df.columns)}),
                              present=tuple(df.columns)), decl)
    n = max(1, df.rdd.getNumPartitions())
    rows = df.count()
    return [Split(first + p, i, t, (f"{name} partition {p}",), "spark", part=p, parts=n,
                  estimate=max(1, rows // n), table=df) for p in range(n)]


def parquet_ranges(file: str, decl, split_rows: int, cores: int) -> list:
    """Rows ``[a, b)`` of a Parquet file in equal slices of at most ``split_rows``, as many
    as the ``cores`` share evenly (:func:`even_rows`); a declared column missing from its
    schema is a :class:`~spatec.errors.DataError`."""
    try:
        f = pq.ParquetFile(file)
        n = f.metadata.num_rows
        names = f.schema_arrow.names
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{file}: cannot read as Parquet: {e}") from None
    check_columns(RawBatch.of(file, pa.table({c: pa.nulls(0) for c in names}), present=names), decl)
    if n == 0:
        return [(0, 0)]
    step = even_rows(n, split_rows, cores)
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def even_rows(n: int, rows: int, cores: int) -> int:
    """Rows per slice of ``n`` rows: at most ``rows``, in as many slices as the ``cores``
    share evenly (a multiple of them, when there is more than one slice), so that the
    slices' tasks end together.

    >>> even_rows(1_318_584, 250_000, 2), even_rows(100, 250_000, 2), even_rows(600_000, 250_000, 4)
    (219764, 100, 150000)
    """
    count = -(-n // max(1, rows))
    if count > 1 and cores > 1:
        count = -(-count // cores) * cores
    return max(1, -(-n // max(1, count)))


def estimated_rows(file: str, fmt: str) -> int:
    """Records a text file is reckoned to hold, from its size."""
    size = os.path.getsize(file)
    if file.lower().endswith(".gz"):
        size *= GZIP_RATIO
    return max(1, size // ROW_BYTES.get(fmt, 160))


def text_parts(file: str, fmt: str, split_rows: int, cores: int) -> int:
    """How many parts a CSV or JSON lines file's records are typed in (each part's split
    parses the file whole: worth it where typing costs more than parsing)."""
    if os.path.getsize(file) < SMALL_TEXT:
        return 1
    n = -(-estimated_rows(file, fmt) // max(1, split_rows))
    if n > 1 and cores > 1:
        n = -(-n // cores) * cores
    return max(1, n)


def _check_header(file: str, decl) -> None:
    from spatec.events.textin import read_header

    header = read_header(file)
    check_columns(RawBatch.of(file, pa.table({c: pa.nulls(0) for c in dict.fromkeys(header)}), present=header), decl)


# --------------------------------------------------------------------------- reading one

def read_split(split: Split, program) -> IngestResult:
    """The split's records as canonical events of its type and rejects (copies within the
    split are rejects already; copies of other splits' events are decided later)."""
    decl = program.events[split.type]
    return to_events(split_batches(split, decl), decl, tz=program.timezone)


def split_batches(split: Split, decl) -> list:
    """The split's raw batches (:class:`~spatec.events.raw.RawBatch`), records numbered as
    in their whole file."""
    from spatec.events.formats import read_csv, read_jsonl
    from spatec.events.read import wanted_columns
    from spatec.events.sirivm import read_polls

    cols = wanted_columns(decl)
    if split.fmt == "frame":
        return [RawBatch.of(split.file, split.table)]
    if split.fmt == "parquet":
        return [parquet_batch(split.file, cols, *split.rows)]
    if split.fmt == "sirivm":
        return [b for f in split.files for b in read_polls(f, cols)]
    whole = read_csv(split.file, cols) if split.fmt == "csv" else read_jsonl(split.file, cols)
    return [part_of(whole, split.part, split.parts)]


def part_of(b: RawBatch, k: int, n: int) -> RawBatch:
    """Part ``k`` of ``n`` of a whole file's batch: its ``k``-th slice of records (the
    unreadable ones with the first)."""
    if n <= 1:
        return b
    rows = b.table.num_rows
    a, z = rows * k // n, rows * (k + 1) // n
    return RawBatch(b.file, b.table.slice(a, z - a), b.rows[a:z], b.names,
                    b.unreadable if k == 0 else [], b.provides, b.present,
                    None if b.fetch is None else _shifted(b.fetch, a))


def _shifted(fetch, a: int):
    return lambda idx: fetch([int(i) + a for i in idx])


def parquet_batch(file: str, columns, a: int, b: int) -> RawBatch:
    """Rows ``[a, b)`` of a Parquet file: its row groups that hold them, decoded in batches
    from the first one's start (a row group is Parquet's least unit of reading) up to row
    ``b`` and no further (:func:`rows_of`)."""
    from spatec.events.formats import slice_fetch

    try:
        f = pq.ParquetFile(file)
        present = f.schema_arrow.names
        load = [c for c in present if c in set(columns)]
        table = rows_of(f, load, a, b)
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{file}: cannot read as Parquet: {e}") from None
    numbers = np.arange(a + 1, a + 1 + table.num_rows, dtype=np.int64)
    partial = len(load) < len(present)
    return RawBatch.of(file, table, rows=numbers, present=present,
                       fetch=slice_fetch("parquet" if partial else None, file, present, numbers))


#: Rows a batch of :func:`rows_of` decodes at a time.
PARQUET_BATCH = 65_536


def rows_of(f: pq.ParquetFile, columns: list, a: int, b: int) -> pa.Table:
    """Rows ``[a, b)`` of the columns ``columns`` of the Parquet file ``f``. Only the row
    groups that hold them are read, and the last one only as far as row ``b``: a split of
    a row group larger than the split decoded its whole group (or two) — on 4 bus-days in
    row groups of 2**20 rows, 22 splits decoded 28 groups where 6 hold the file."""
    md = f.metadata
    groups, start, at = [], None, 0
    for g in range(md.num_row_groups):
        m = md.row_group(g).num_rows
        if at < b and at + m > a:
            groups.append(g)
            start = at if start is None else start
        at += m
    whole = f.schema_arrow
    parts, at = [], start
    batches = f.iter_batches(batch_size=PARQUET_BATCH, row_groups=groups, columns=columns) if groups else ()
    for batch in batches:
        n = batch.num_rows
        lo, hi = max(a - at, 0), min(b - at, n)
        if hi > lo:
            parts.append(batch.slice(lo, hi - lo))
        at += n
        if at >= b:
            break
    return pa.Table.from_batches(parts, schema=pa.schema([whole.field(c) for c in columns], metadata=whole.metadata))

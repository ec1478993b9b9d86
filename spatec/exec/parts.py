"""A phrase's composites as parts of its output: rendered where they are matched, placed in
ranges of ``(lo, hi, id)``, each part in that order.

A phrase's output is cut into ``k`` ranges of ``lo`` (:func:`range_bounds`, from quantiles of
its events' ``lo``: a composite starts at its first event's start); part ``r`` holds the
composites whose ``lo`` falls in range ``r``, in ``(lo, hi, id)`` order, so the parts in
order are the whole output in order: a reader of the folder reads one sorted dataset, and
one file is the parts put end to end (:mod:`spatec.exec.commit`).

Each composite is rendered once, by the same encoders as a whole file (:func:`render`):
JSON lines (one line each, times in the run's zone), GeoJSON (one feature each) or
GeoParquet rows (a table of the phrase's schema). A value's text depends on its own value
and its field's type alone, never on the other rows (:func:`spatec.runtime.rows.rows_frame`),
so a part is the same bytes as its lines of the whole file.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from spatec.runtime.rows import rows_frame, time_fields

#: The formats written as parts; their file extensions.
EXTENSIONS = {"jsonl": "jsonl", "parquet": "parquet", "geojson": "geojson"}

#: Quantiles of the events' ``lo`` the ranges are chosen from.
QUANTILES = 64
#: Texts joined at a time (:func:`text_runs`).
TEXT_RUN = 8192


def range_bounds(quantiles: list, k: int) -> np.ndarray:
    """``k - 1`` increasing bounds of ``lo`` cutting a phrase's output into ``k`` ranges,
    taken from ``quantiles`` (the events' ``lo`` at ``1/Q .. (Q-1)/Q``); fewer where they
    repeat. Range ``r`` is ``bounds[r-1] <= lo < bounds[r]``."""
    if k <= 1 or not quantiles:
        return np.zeros(0, dtype=np.int64)
    q = np.asarray(sorted(quantiles), dtype=np.int64)
    at = [int(round(len(q) * i / k)) for i in range(1, k)]
    return np.unique(q[np.clip(at, 0, len(q) - 1)])


def range_of(bounds: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Each composite's range (:func:`range_bounds`)."""
    if not len(bounds):
        return np.zeros(len(lo), dtype=np.int64)
    return np.searchsorted(bounds, np.asarray(lo, dtype=np.int64), side="right").astype(np.int64)


def render(plan, rows, fmt: str, tz: str | None = None, newline: bool = False):
    """A phrase's rows as ``(frame, payload)``: the sorted frame (``lo``, ``hi``, ``id``) and
    its rendering — JSON lines or GeoJSON features as an Arrow string array (a text each,
    without the separator; JSON lines with their newline if ``newline``, so that the array's
    bytes are the file's), GeoParquet as an Arrow table."""
    df = rows_frame(plan, rows)
    times = time_fields(plan)
    if fmt == "jsonl":
        from spatec.sinks.files import jsonl_texts

        return df, jsonl_texts(df, times, tz, newline=newline)
    if fmt == "geojson":
        from spatec.sinks.files import geojson_texts

        return df, geojson_texts(df, times, tz)
    if fmt == "parquet":
        from spatec.sinks.files import parquet_table

        return df, parquet_table(df, times, plan=plan)
    raise ValueError(f"unknown output format {fmt!r}")


def text_frame(fmt: str) -> tuple[bytes, bytes, bytes]:
    """``(head, between, tail)`` of a file of ``fmt``'s text parts put end to end: GeoJSON's
    FeatureCollection around its features and the separator between parts; nothing for
    JSON lines (a part ends with its newline)."""
    if fmt == "geojson":
        from spatec.sinks.files import GEOJSON_BETWEEN, GEOJSON_HEAD, GEOJSON_TAIL

        return GEOJSON_HEAD.encode(), GEOJSON_BETWEEN.encode(), GEOJSON_TAIL.encode()
    return b"", b"", b""


def text_runs(lines):
    """``(start, list, count)`` of runs of :data:`TEXT_RUN` texts of ``lines``, each run one
    list value (for Arrow's ``binary_join``)."""
    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    for a in range(0, len(lines), TEXT_RUN):
        part = lines.slice(a, TEXT_RUN)
        yield a, pa.ListArray.from_arrays(pa.array([0, len(part)], pa.int32()), part), len(lines)


def keys_of(df) -> tuple:
    return (np.asarray(df["lo"].to_numpy(), dtype=np.int64), np.asarray(df["hi"].to_numpy(), dtype=np.int64),
            pa.array(df["id"].astype(object).tolist(), pa.string()))


def frame_of_lines(plan, texts) -> "pd.DataFrame":
    """A phrase's JSON lines (texts, in order) as the frame they were rendered from: times back
    to µs (:func:`~spatec.runtime.rows.rows_frame`'s types, as a runner's rows give them)."""
    import json

    import pandas as pd

    from spatec.events.timefmt import parse_times

    rows = [json.loads(t) for t in texts]
    for c in ("lo", "hi", *time_fields(plan)):
        if not rows or c not in rows[0]:
            continue
        p = parse_times(pd.Series([r.get(c) for r in rows], dtype=object))
        if p.errors:
            raise ValueError(f"{c}: {next(iter(p.errors.values()))}")
        for r, v, miss in zip(rows, p.values.tolist(), p.missing.tolist()):
            r[c] = None if miss else int(v)
    return rows_frame(plan, rows)

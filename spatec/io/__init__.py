"""Input and output: files of records to canonical events, composite events to files.

- :mod:`~spatec.io.sources`: ``read_events`` / ``iter_events`` / ``write_rejects``;
- :mod:`~spatec.io.formats`, :mod:`~spatec.io.sirivm`: which files, which format, reading one;
- :mod:`~spatec.io.canonical`: the canonical events frame and ``IngestResult``;
- :mod:`~spatec.io.columns`, :mod:`~spatec.io.timefmt`: typing values; times and event ids;
- :mod:`~spatec.io.sinks`: composites to JSON lines, GeoParquet, GeoJSON.

Names are loaded on first use, so ``from spatec.io import datasets`` stays light.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "read_events": "sources", "iter_events": "sources", "write_rejects": "sources",
    "iter_batches": "sources",
    "IngestResult": "canonical", "event_columns": "canonical", "to_events": "canonical",
    "format_time": "timefmt", "format_times": "timefmt", "parse_time": "timefmt",
    "parse_times": "timefmt", "event_id": "timefmt",
    "write_jsonl": "sinks", "write_parquet": "sinks", "write_geojson": "sinks", "writer": "sinks", "extension": "sinks",
    "read_jsonl_composites": "sinks", "read_parquet_composites": "sinks",
    "SIRIVM_FIELDS": "sirivm", "FORMATS": "formats",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"spatec.io.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'spatec.io' has no attribute {name!r}")

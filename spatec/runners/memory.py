"""Freed memory kept by Arrow's allocator for the next arrays, not handed back to the kernel.

A matching task allocates and frees Arrow arrays of tens of MB again and again (a group's
columns, its matches, their rendered texts, the blobs it reads and writes). pyarrow's
default pool, mimalloc, hands freed memory back to the kernel 10 ms after it is freed
(``purge_delay``), so the next array faults fresh pages in, zeroed by the kernel — and on a
virtual machine whose host reclaims freed memory (DAMON), each of those costs the host's
work too. :func:`keep_freed` turns the purge off for a process that has not loaded pyarrow
yet: a process's peak memory is what it was, it just keeps it until it ends (Spark's Python
workers end when idle a minute). Set where it pays: in Spark's Python workers
(:mod:`spatec.runners.spark.daemon`). The local runner's process measured no gain (1 bus-day,
four runs alternating: 25-32 s either way; its kernel time is elsewhere), so it is not set there.

Measured on this 2-core VM, the three-phrase program on 4 bus-days on local Spark, warm
session (``/tmp/t/delta.py``-style CPU accounting of the Python workers): kernel time of
the workers 19-25 s -> 7-8 s, their CPU 50-55 s -> 42-43 s.

mimalloc reads the setting once, when it starts (when pyarrow is first imported): a value
the environment already has is kept (``MIMALLOC_PURGE_DELAY``; ``ARROW_DEFAULT_MEMORY_POOL``
chooses another pool, which this leaves alone).
"""
from __future__ import annotations

import os

__all__ = ["keep_freed"]

#: ``MIMALLOC_PURGE_DELAY``: never purge (ms; mimalloc's own default is 10).
PURGE_DELAY = "-1"


def keep_freed(environ=os.environ) -> None:
    """Set mimalloc's purge delay for this process (and those it starts), unless set."""
    environ.setdefault("MIMALLOC_PURGE_DELAY", PURGE_DELAY)

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

__all__ = ["keep_freed", "keep_freed_malloc", "mapped_bytes"]

#: ``MIMALLOC_PURGE_DELAY``: never purge (ms; mimalloc's own default is 10).
PURGE_DELAY = "-1"


def keep_freed(environ=os.environ) -> None:
    """Set mimalloc's purge delay for this process (and those it starts), unless set."""
    environ.setdefault("MIMALLOC_PURGE_DELAY", PURGE_DELAY)


#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4


def keep_freed_malloc() -> bool:
    """The same for glibc's malloc (numpy's arrays, Python's objects), in this process and
    the processes it forks: every block from the heap, none mapped on its own
    (``M_MMAP_MAX`` 0: blocks over 32 MB were mapped afresh and unmapped when freed, each
    time), and the heap never trimmed (``M_TRIM_THRESHOLD``). Measured on 4 bus-days (a perf
    profile of a session's first replay): 9.5 % of the machine's samples were the kernel
    zeroing pages a task touched for the first time, most of them numpy's large temporaries.
    False where the C library is not glibc (nothing set)."""
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mapped = mallopt(M_MMAP_MAX, 0)
    trimmed = mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
    return bool(mapped and trimmed)



def mapped_bytes() -> int | None:
    """Bytes glibc's malloc holds in blocks mapped on their own (``mallinfo2``'s ``hblkhd``):
    none after :func:`keep_freed_malloc`. None where it cannot be read."""
    import ctypes

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")]

    try:
        f = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    f.restype = Mallinfo2
    return int(f().hblkhd)
"""Freed memory kept by the C heap for the next allocation, not handed back to the kernel.

A matching task allocates and frees arrays of tens of MB again and again (a
group's columns, its matches, their hulls). glibc's ``malloc`` gives memory at
the top of its heap back to the kernel as soon as 128 KB of it is free, so the
next array faults fresh pages in again: kernel time, and on a virtual machine
whose host takes freed memory back, about 1 s of it per GiB. :func:`keep_freed`
raises that threshold (``M_TRIM_THRESHOLD``) and makes the heap grow in larger
steps (``M_TOP_PAD``). A process's peak memory is what it was; the kernel just
gets it back when the process ends. Measured on the serial replay of a bus-day
of the scaling program (four runs alternating, loaded machine): kernel time
2.1–2.7 s → 1.5–1.9 s, resident peak 466–481 MB → 499–500 MB.

The setting is the process's and is inherited by processes it forks (Spark's
Python workers fork from :mod:`spatec.runners.spark.daemon`). Where the C
library is not glibc nothing changes.
"""
from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["keep_freed"]

#: ``mallopt``'s parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2


def keep_freed(trim: int = 1 << 30, pad: int = 256 << 20) -> bool:
    """Let the C heap keep up to ``trim`` bytes free at its top and grow ``pad`` bytes beyond
    each request; False where this is not glibc (nothing changed)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version       # (glibc's own: musl and others have no such settings)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_TRIM_THRESHOLD, trim)) and bool(mallopt(M_TOP_PAD, pad))

"""Scratch files in memory while the machine has room for them, on disk otherwise.

A replay on the staged exchange writes its input three times over as scratch
files (raw chunks, staged groups, the tasks' parts of the output), each read
once and removed. On disk every fresh page of them costs the kernel twice —
the file system's allocation and write-back, then freeing it — about 2.2 s per
GiB written on this project's VM, where a memory file system (``tmpfs``, such
as Linux's ``/dev/shm``) takes 0.8 s. So a staging folder on disk gets a twin
in memory (:func:`pair`), and each scratch file is written in the twin while
the machine keeps :func:`reserve` bytes of memory available besides it and the
twin has room for it (:func:`place`), on disk otherwise: memory a run's
processes may still need is never given to its scratch files, however large
the input. A write the twin refuses all the same (it filled meanwhile) is made
again on disk (:func:`written`). Readers take the path a writer returns;
:func:`remove` removes both folders.

The twin is found from any path under the folder (its ``rows-*`` subfolders
too) by a marker file naming it, so Spark tasks need nothing besides the paths
they were given.

>>> import tempfile
>>> root = tempfile.mkdtemp()
>>> pair(root, None)            # no memory file system: every file on disk
>>> place(os.path.join(root, "a.arrow"), 1 << 20) == os.path.join(root, "a.arrow")
True
>>> remove(root); os.path.exists(root)
False
"""
from __future__ import annotations

import errno
import functools
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from typing import TypeVar

from spatec.storage import sweep

__all__ = ["MARK", "memory_dir", "pair", "place", "remove", "remove_orphans", "reserve", "top_files", "twin",
           "written"]

T = TypeVar("T")

#: The marker file in a staging folder naming its twin in memory.
MARK = ".spatec-memory"
#: Where Linux mounts a memory file system every user may write.
SHM = "/dev/shm"
#: A twin's name: this, the process's id, a dash, a random part.
PREFIX = "spatec-stage-"


@functools.cache
def memory_dir(candidate: str = SHM) -> str | None:
    """``candidate`` if it is a writable ``tmpfs`` mount point (read from ``/proc/mounts``), else None."""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            mounts = {fields[1]: fields[2] for fields in (line.split() for line in f) if len(fields) > 2}
    except OSError:
        return None
    if mounts.get(candidate) != "tmpfs" or not os.access(candidate, os.W_OK | os.X_OK):
        return None
    return candidate


def pair(root: str, memory: str | None) -> None:
    """Give the staging folder ``root`` a twin folder in the memory file system ``memory``
    (None: no twin, every scratch file on disk)."""
    os.makedirs(root, exist_ok=True)
    if memory is None:
        return
    remove_orphans(memory)
    mem = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=memory)
    with open(os.path.join(root, MARK), "w", encoding="utf-8") as f:
        f.write(mem)


def remove_orphans(memory: str) -> list[str]:
    """Remove the twins in ``memory`` whose process has ended without removing them (killed):
    a memory file system holds its files in memory until they are removed. Returns them."""
    gone = []
    try:
        entries = list(os.scandir(memory))
    except OSError:
        return gone
    for e in entries:
        pid = e.name[len(PREFIX):].split("-", 1)[0]
        if not (e.name.startswith(PREFIX) and pid.isdigit() and e.is_dir(follow_symlinks=False)):
            continue
        try:
            os.kill(int(pid), 0)
            continue                    # (alive, or another user's: left alone)
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(e.path, ignore_errors=True)
        gone.append(e.path)
    return gone


def twin(path: str) -> tuple[str, str] | None:
    """``(root, twin)`` of the staging folder ``path`` is in (directly or in a subfolder), or None."""
    d = os.path.dirname(os.path.abspath(path))
    for root in (d, os.path.dirname(d)):
        mem = _marked(root)
        if mem is not None:
            return root, mem
    return None


@functools.lru_cache(maxsize=256)
def _marked(root: str) -> str | None:
    try:
        with open(os.path.join(root, MARK), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def reserve(total: int | None = None) -> int:
    """Bytes of memory kept available to the processes (a quarter of it, and 2 GiB at least)."""
    total = _meminfo().get("MemTotal", 0) if total is None else total
    return max(2 << 30, total // 4)


_MEMINFO = re.compile(rb"^(MemTotal|MemAvailable):\s+(\d+)\s*(kB)?", re.MULTILINE)


def _meminfo() -> dict:
    """``/proc/meminfo``'s ``MemTotal`` and ``MemAvailable`` in bytes (empty where it cannot be
    read). Read for every file placed: only those two lines parsed."""
    try:
        with open("/proc/meminfo", "rb") as f:
            data = f.read()
    except OSError:
        return {}
    return {m[1].decode(): int(m[2]) * (1024 if m[3] else 1) for m in _MEMINFO.finditer(data)}


def _cgroup_memory() -> tuple[int, int] | None:
    """This process's control group's memory limit and use in bytes (cgroup v2 or v1), None
    where it has no limit or none can be read. A memory file system's pages count against
    the group that writes them, whatever the machine has. Which files hold them is found
    once a process (:func:`_cgroup_files`); they are read every time."""
    found = _cgroup_files()
    if found is None:
        return None
    try:
        with open(found[0], encoding="utf-8") as f:
            limit = f.read().strip()
        if not (limit.isdigit() and int(limit) < 1 << 60):
            return None                                 # (no limit: its use is not read)
        with open(found[1], encoding="utf-8") as f:
            return int(limit), int(f.read().strip())
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=1)
def _cgroup_files() -> tuple[str, str] | None:
    """The files of this process's control group's memory limit and use (cgroup v2 or v1)."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    for _, controllers, where in (x for x in lines if len(x) == 3):
        if controllers == "":
            base, files = "/sys/fs/cgroup", ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base, files = "/sys/fs/cgroup/memory", ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        for d in (os.path.join(base, where.lstrip("/")), base):      # (a container sees its group as the root)
            limit, used = (os.path.join(d, name) for name in files)
            if os.path.exists(limit) and os.path.exists(used):
                return limit, used
    return None


def place(path: str, size: int) -> str:
    """Where to write the scratch file meant for ``path``, of about ``size`` bytes: the same
    name in its staging folder's twin in memory, when the folder has one, the twin has room
    for it and the machine keeps :func:`reserve` available besides it; ``path`` otherwise."""
    found = twin(path)
    if found is None:
        return path
    root, mem = found
    info = _meminfo()
    available, total = info.get("MemAvailable"), info.get("MemTotal", 0)
    group = _cgroup_memory()
    if group is not None and available is not None:
        available, total = min(available, group[0] - group[1]), min(total, group[0])
    if available is None or available - size < reserve(total):
        return path
    try:
        st = os.statvfs(mem)
    except OSError:
        return path
    if st.f_bavail * st.f_frsize - size < min(1 << 30, st.f_blocks * st.f_frsize // 10):
        return path
    there = os.path.join(mem, os.path.relpath(os.path.abspath(path), root))
    _folder(os.path.dirname(there))
    return there


@functools.lru_cache(maxsize=1024)
def _folder(path: str) -> None:
    """Make the folder ``path`` (once a process: twins' folders are removed with the twin,
    whose name is never used again)."""
    os.makedirs(path, exist_ok=True)


def written(path: str, size: int, write: Callable[[str], T]) -> tuple[T, str]:
    """``write(p)`` at :func:`place`'s ``p`` for ``path``; where the memory file system turns
    out full, what it wrote is removed and ``write(path)`` made on disk instead.
    Returns ``write``'s value and the path written."""
    p = place(path, size)
    if p == path:
        return write(path), path
    try:
        return write(p), p
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        try:
            os.unlink(p)
        except OSError:
            pass
        return write(path), path


def top_files(root: str) -> list[str]:
    """The files directly in ``root`` and directly in its twin (not their folders, nor the marker)."""
    found = _marked(os.path.abspath(root))
    return [p for d in ((root, found) if found else (root,)) for p in sweep.top_files(d)
            if os.path.basename(p) != MARK]


def remove(root: str) -> None:
    """Remove the staging folder ``root`` and its twin in memory."""
    mem = _marked(os.path.abspath(root))
    if mem is not None:
        shutil.rmtree(mem, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    _marked.cache_clear()

"""Scratch files in memory while the machine has room for them, on disk otherwise.

The files exchange (:class:`~spatec.exec.tasks.Files`) writes a replay's events and its
rendered composites once each as scratch files, read once and removed with the exchange's
folder. Written on disk, every fresh page of them costs the kernel the file system's
allocation and write-back: on this project's VM 3.5 s of kernel time per GiB written
through ext4's page cache, where a memory file system (``tmpfs``, as Linux's ``/dev/shm``)
takes 0.43 s (``/tmp/t/thp3.py``-style: 1.4 GB written in 8 MB ``pwrite`` calls, each
file fresh). So the exchange's folder on disk gets a twin in memory (:func:`twin_folder`),
and each scratch file is written in the twin while the machine keeps :func:`reserve` bytes
of memory available besides it and the twin has room for it (:func:`has_room`), on disk
otherwise: memory a run's processes may still need is never given to its scratch files,
however large the input. A write the twin refuses all the same (it filled meanwhile) is
made again on disk (:func:`written`). Readers take the path a writer returns.

A memory file system keeps its files until they are removed, so a twin is named after its
process, and the twins of processes that ended without removing theirs (killed) are removed
when the next is made (:func:`remove_orphans`).
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

__all__ = ["SHM", "chosen_memory", "has_room", "memory_dir", "remove_orphans", "reserve", "twin_folder", "written"]

T = TypeVar("T")

#: Where Linux mounts a memory file system every user may write.
SHM = "/dev/shm"
#: A twin's name: this, the process's id, a dash, a random part.
PREFIX = "spatec-exchange-"


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


def chosen_memory(setting: str, here: bool = True) -> str | None:
    """The memory file system a setting names: ``auto``, :func:`memory_dir` (``/dev/shm``
    where it is one) if every writer and reader of the files runs on this machine (``here``),
    else none (another machine's ``/dev/shm`` is not this one's); ``off``, none; otherwise the
    folder it names (made)."""
    setting = (setting or "auto").strip()
    if setting.lower() == "off":
        return None
    if setting.lower() == "auto":
        return memory_dir() if here else None
    os.makedirs(setting, exist_ok=True)
    return setting


def twin_folder(memory: str) -> str:
    """A new folder for this process's scratch files in the memory file system ``memory``
    (the orphans of ended processes removed first)."""
    remove_orphans(memory)
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=memory)


def has_room(folder: str, size: int) -> bool:
    """Whether a scratch file of about ``size`` bytes may go in ``folder`` (a twin in a memory
    file system): it has room for it, and the machine (and this process's control group)
    keeps :func:`reserve` available besides it. Unknown memory: no."""
    info = _meminfo()
    available, total = info.get("MemAvailable"), info.get("MemTotal", 0)
    group = _cgroup_memory()
    if group is not None and available is not None:
        available, total = min(available, group[0] - group[1]), min(total, group[0])
    if available is None or available - size < reserve(total):
        return False
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize - size >= min(1 << 30, st.f_blocks * st.f_frsize // 10)


def written(disk: str, memory: str | None, size: int, write: Callable[[str], T]) -> tuple[T, str]:
    """``write(p)`` of a scratch file of about ``size`` bytes: ``p`` is ``memory`` (its path in
    a twin) where :func:`has_room` allows it, ``disk`` otherwise; where the memory file system
    turns out full, what it wrote is removed and ``write(disk)`` made instead. Returns
    ``write``'s value and the path written."""
    if memory is None or not has_room(os.path.dirname(memory), size):
        return write(disk), disk
    try:
        return write(memory), memory
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        try:
            os.unlink(memory)
        except OSError:
            pass
        return write(disk), disk

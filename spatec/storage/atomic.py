"""Whole files, or nothing: a file is written beside its final name and renamed in.

A reader never sees half a file; a crash leaves the old file (or none) and a
temporary one that the next write replaces.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Union

PathLike = Union[str, os.PathLike]


def temporary_name(path: PathLike) -> Path:
    """The temporary file a write of ``path`` goes through (hidden, beside it)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp")


def atomic_write(path: PathLike, write: Callable[[str], None], sync: bool = False) -> None:
    """``write(tmp)`` writes the whole file at ``tmp``; it then replaces ``path``. ``sync``:
    the file's bytes are on disk before the rename (a checkpoint's commit)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        write(str(tmp))
        if sync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)     # no half file left beside the outputs
        raise
    os.replace(tmp, path)


def atomic_bytes(path: PathLike, data: bytes, sync: bool = True) -> None:
    """``data`` as the whole content of ``path`` (synced by default)."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    atomic_write(path, write, sync=sync)


def write_synced(path: PathLike, data: bytes, mode: str = "wb", at: int | None = None) -> int:
    """Write ``data`` to ``path`` (``"wb"``) or append it at byte ``at`` (``"ab"``: whatever a
    crash left past ``at`` is cut first), and fsync; the number of bytes written."""
    path = Path(path)
    with open(path, "r+b" if mode == "ab" and path.exists() else "wb") as f:
        if mode == "ab":
            f.seek(at or 0)
            f.truncate()
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return len(data)


def remove_soon(path: PathLike) -> None:
    """The folder ``path`` removed by a thread of its own (nothing waits for it but the
    interpreter's exit): renamed aside first, so that its name is free at once."""
    import shutil
    import threading
    import uuid

    path = Path(path)
    aside = path.with_name(f".{path.name}.removed-{uuid.uuid4().hex[:8]}")
    try:
        os.replace(path, aside)
    except OSError:
        aside = path
    threading.Thread(target=shutil.rmtree, args=(aside,), kwargs={"ignore_errors": True},
                     name="spatec-remove", daemon=False).start()


def safe_name(text: str) -> str:
    """``text`` as a file name: letters, digits, ``-``, ``_`` and ``.`` kept, the rest ``_``;
    at most 120 characters."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:120]

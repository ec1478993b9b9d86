"""Checks a command makes before it reads any input: options that name nothing, a CRS
that is not metric, outputs that cannot be written. Each fails with one clear line
(a :class:`~spatec.errors.SpatecError`) instead of a traceback after minutes of ingest."""
from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path

from spatec.errors import OutputError, SpatecError


def check_phrases(compiled, names) -> None:
    """Every ``--phrase`` names a phrase of the program."""
    known = [p.name for p in compiled.plans]
    for name in names or ():
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise SpatecError(f"--phrase {name}: the program has no such phrase "
                              f"(phrases: {', '.join(known) or 'none'}){hint}")


def check_crs(crs: str | None) -> None:
    """``--crs`` is a projected CRS in metres that pyproj knows."""
    if crs is None:
        return
    from spatec.spatial.crs import metric_crs

    try:
        metric_crs(crs)
    except ValueError as e:
        raise SpatecError(f"--crs {crs}: {e}; give a projected CRS in metres, e.g. EPSG:32631 "
                          "(a UTM zone) or EPSG:27700") from None


def writable_dir(path, what: str) -> Path:
    """``path`` as a directory this process can write files in: made if missing; an
    :class:`~spatec.errors.OutputError` naming ``what`` (the option) otherwise."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{what} {path}: is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".spatec-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(f"{what} {path}: cannot write there ({e.strerror or e})") from None
    return path


def writable_file(path, what: str) -> Path:
    """``path`` as a file this process can create or replace (its folder made if missing)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} {path}: is a directory, not a file")
    writable_dir(path.parent if str(path.parent) else Path("."), what)
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"{what} {path}: cannot write there (permission denied)")
    return path


def locked(path, what: str):
    """The directory's lock (:class:`~spatec.storage.lock.DirLock`), taken: one run at a time."""
    from spatec.storage.lock import Busy, DirLock

    try:
        return DirLock(path).acquire()
    except Busy as e:
        raise OutputError(f"{what} {path}: another spatec run is writing there"
                          + (f" (pid {e.pid})" if e.pid else "")
                          + "; wait for it to end or choose another directory") from None

"""The project's datasets: where they are, how to fetch them, how to open them.

``datasets/registry.toml`` describes each dataset (file name, public origin,
licence, sha256, size, rows, time span). The files themselves are never part
of the repository; :func:`resolve` finds one locally, in this order:

1. every directory in ``$SPATEC_DATA`` (``os.pathsep``-separated);
2. ``../shared/datasets/cambridge/`` beside the repository root (found from
   this file's location);
3. ``../shared/datasets/cambridge/`` relative to the working directory;
4. the download cache, ``$SPATEC_CACHE`` or ``~/.cache/spatec/datasets/``;

and otherwise downloads it with :func:`fetch`, which streams the file into the
cache and keeps it only if its sha256 is the registry's.

>>> entry("cambridge-stops").rows
1388
"""
from __future__ import annotations

import hashlib
import json
import os
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

import tomllib

from spatec.errors import DataError

REPO_ROOT = Path(__file__).resolve().parents[2]
REGISTRY_PATH = REPO_ROOT / "datasets" / "registry.toml"
SHARED_SUBDIR = Path("shared") / "datasets" / "cambridge"

REGISTRY_ENV = "SPATEC_REGISTRY"     # another registry.toml
DATA_ENV = "SPATEC_DATA"             # directories searched first
CACHE_ENV = "SPATEC_CACHE"           # download cache directory
MIRROR_ENV = "SPATEC_DATASETS_URL"   # base URL serving <base>/<file>

CHUNK = 1 << 20

Progress = Callable[[int, Optional[int]], None]
"""``progress(bytes_done, bytes_total_or_None)``, called as a download streams."""


class ChecksumError(DataError):
    """A dataset file's bytes are not the ones the registry describes."""

    def __init__(self, name: str, where: str, expected: str, actual: str, removed: bool):
        self.name, self.where, self.expected, self.actual = name, where, expected, actual
        msg = (f"dataset {name!r}: sha256 mismatch for {where}\n"
               f"    expected {expected}\n    got      {actual}")
        if removed:
            msg += "\n    the downloaded file was removed"
        super().__init__(msg)


@dataclass(frozen=True)
class Dataset:
    """One registry entry."""

    name: str
    file: str
    format: str
    sha256: str
    url: str = ""
    size: Optional[int] = None
    rows: Optional[int] = None
    description: str = ""
    origin: str = ""
    homepage: str = ""
    licence: str = ""
    licence_file: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)


_FIELDS = set(Dataset.__dataclass_fields__) - {"name", "extra"}


def registry(path: str | os.PathLike | None = None) -> dict[str, Dataset]:
    """Every dataset in the registry, by name.

    ``path`` defaults to ``$SPATEC_REGISTRY`` or ``datasets/registry.toml`` in
    the repository.
    """
    path = Path(path or os.environ.get(REGISTRY_ENV) or REGISTRY_PATH)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise DataError(f"dataset registry not found: {path} (set ${REGISTRY_ENV})") from None
    except tomllib.TOMLDecodeError as e:
        raise DataError(f"dataset registry {path} is not valid TOML: {e}") from None
    out = {}
    for name, raw in doc.get("datasets", {}).items():
        missing = {"file", "format", "sha256"} - raw.keys()
        if missing:
            raise DataError(f"dataset registry {path}: entry {name!r} lacks {sorted(missing)}")
        known = {k: v for k, v in raw.items() if k in _FIELDS}
        extra = {k: v for k, v in raw.items() if k not in _FIELDS}
        out[name] = Dataset(name=name, extra=extra, **known)
    return out


def entry(name: str, path: str | os.PathLike | None = None) -> Dataset:
    """The registry entry called ``name``; an unknown name suggests close ones."""
    reg = registry(path)
    if name not in reg:
        close = get_close_matches(name, reg, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(reg))}"
        raise DataError(f"unknown dataset {name!r}{hint}")
    return reg[name]


def cache_dir() -> Path:
    """Where downloads go: ``$SPATEC_CACHE`` or ``~/.cache/spatec/datasets``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "spatec" / "datasets"


def search_dirs() -> list[Path]:
    """The local directories :func:`resolve` looks in, in order (cache last)."""
    dirs = [Path(p) for p in os.environ.get(DATA_ENV, "").split(os.pathsep) if p]
    dirs.append(REPO_ROOT.parent / SHARED_SUBDIR)
    dirs.append(Path.cwd().parent / SHARED_SUBDIR)
    dirs.append(cache_dir())
    seen, out = set(), []
    for d in dirs:
        key = os.path.abspath(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


# Digests of local files already checked, so that resolving the same file
# many times in one process hashes it once.
_verified: dict[tuple[str, int, int], str] = {}


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _verified:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                h.update(chunk)
        _verified[key] = h.hexdigest()
    return _verified[key]


def verify(name: str, path: str | os.PathLike, *, ds: Dataset | None = None) -> Path:
    """Check that ``path`` holds dataset ``name``; raise :class:`ChecksumError` if not."""
    ds = ds or entry(name)
    actual = sha256_of(path)
    if actual != ds.sha256.lower():
        raise ChecksumError(name, str(path), ds.sha256, actual, removed=False)
    return Path(path)


def resolve(name: str, *, download: bool = True, check: bool = True,
            progress: Progress | None = None) -> Path:
    """The local path of dataset ``name``, downloading it if no copy is found.

    ``check`` verifies the sha256 of a copy found locally (a copy in the cache
    that fails is removed and downloaded again). ``download=False`` raises
    :class:`~spatec.errors.DataError` instead of fetching.
    """
    ds = entry(name)
    cache = cache_dir()
    for d in search_dirs():
        p = d / ds.file
        if not p.is_file():
            continue
        if check:
            try:
                verify(name, p, ds=ds)
            except ChecksumError:
                if os.path.abspath(d) == os.path.abspath(cache) and download:
                    p.unlink()
                    break
                raise
        return p
    if not download:
        looked = "\n    ".join(str(d) for d in search_dirs())
        raise DataError(f"dataset {name!r} ({ds.file}) not found; looked in\n    {looked}")
    return fetch(name, progress=progress)


def _download_url(ds: Dataset, url: str | None) -> str:
    if url:
        return url
    mirror = os.environ.get(MIRROR_ENV)
    if mirror:
        return mirror.rstrip("/") + "/" + ds.file
    if ds.url:
        return ds.url
    raise DataError(
        f"no download URL is known for dataset {ds.name!r} ({ds.file}); its origin is "
        f"{ds.origin or 'unknown'} ({ds.homepage or 'no homepage'}). Put the file in "
        f"${DATA_ENV}, pass url=..., or set ${MIRROR_ENV} to a mirror serving <url>/{ds.file}")


def fetch(name: str, url: str | None = None, *, dest_dir: str | os.PathLike | None = None,
          progress: Progress | None = None, timeout: float = 60.0) -> Path:
    """Download dataset ``name`` into the cache (or ``dest_dir``) and verify it.

    The URL is ``url`` if given, else ``$SPATEC_DATASETS_URL/<file>``, else the
    registry's ``url``. The download streams to a temporary file beside the
    destination and replaces it only once the sha256 matches; on a mismatch
    the temporary file is removed and :class:`ChecksumError` raised.
    """
    ds = entry(name)
    src = _download_url(ds, url)
    dest_dir = Path(dest_dir) if dest_dir is not None else cache_dir()
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / ds.file
    fd, tmp_name = tempfile.mkstemp(prefix=ds.file + ".", suffix=".part", dir=dest_dir)
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                resp = urllib.request.urlopen(src, timeout=timeout)
            except (OSError, ValueError) as e:
                raise DataError(f"cannot download dataset {name!r} from {src}: {e}") from None
            with resp:
                length = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
                total = int(length) if length and length.isdigit() else ds.size
                done = 0
                if progress:
                    progress(done, total)
                for chunk in iter(lambda: resp.read(CHUNK), b""):
                    out.write(chunk)
                    h.update(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, total)
        actual = h.hexdigest()
        if actual != ds.sha256.lower():
            tmp.unlink(missing_ok=True)
            raise ChecksumError(name, src, ds.sha256, actual, removed=True)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


# --------------------------------------------------------------------------- opening

def load(name: str, **kwargs):
    """Open a dataset: a ``pandas.DataFrame`` for csv/csv.gz (``kwargs`` go to
    ``read_csv``), the parsed document for json, a string for text.

    Archives are read member by member with :func:`members`.
    """
    ds = entry(name)
    path = resolve(name)
    if ds.format in ("csv", "csv.gz"):
        import pandas as pd

        return pd.read_csv(path, **kwargs)
    if ds.format == "json":
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    if ds.format == "text":
        return path.read_text(encoding="utf-8")
    raise DataError(f"dataset {name!r} is a {ds.format} archive: read it with members({name!r})")


def members(name: str, suffix: str = "") -> Iterator[tuple[str, bytes]]:
    """``(member name, bytes)`` for each file in a tar.gz dataset, in name order."""
    ds = entry(name)
    if ds.format != "tar.gz":
        raise DataError(f"dataset {name!r} is {ds.format}, not an archive")
    with tarfile.open(resolve(name), "r:gz") as tar:
        files = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(suffix)),
                       key=lambda m: m.name)
        for m in files:
            f = tar.extractfile(m)
            yield m.name, (f.read() if f is not None else b"")


def describe(name: str) -> str:
    """A short human summary of one entry (for ``spatec datasets`` style listings)."""
    ds = entry(name)
    lines = [f"{ds.name}: {ds.file} ({ds.format}, {ds.size or '?'} bytes, {ds.rows or '?'} rows)",
             f"  origin:  {ds.origin}", f"  licence: {ds.licence}", f"  sha256:  {ds.sha256}"]
    span = (ds.extra.get("time_start"), ds.extra.get("time_end"))
    if span[0] is not None:
        lines.append(f"  span:    {span[0]} .. {span[1]}")
    return "\n".join(lines)

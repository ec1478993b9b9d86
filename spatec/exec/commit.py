"""A replay's outputs committed: all of them in place once the run has succeeded, or none.

Executors write each phrase's parts (:mod:`spatec.exec.parts`) under the run's hidden folder
``out/.spatec-run-<id>/<phrase>/`` — on Spark, Spark's own writer with its commit protocol —
and the rejects' parts under ``.../_rejects/<type>/``. :meth:`Outputs.commit` then puts
every phrase's output in its place, in one step each (a rename):

- ``merged`` (one machine): ``out/<phrase>.<ext>``, the parts put end to end in order —
  streamed file to file by the kernel (``copy_file_range``), never held; or, where the write
  tasks can, written by them into that one file at their offsets (:mod:`spatec.exec.inplace`);
- ``dataset`` (a cluster): the folder ``out/<phrase>/`` of parts ``part-00000.<ext>`` ...,
  in ``(lo, hi, id)`` order, one dataset for DuckDB (``read_json('out/P/*.jsonl')``),
  GeoPandas, Sedona and Spark.

A run that fails removes its hidden folder (:meth:`Outputs.discard`): the earlier outputs
stay as they were.
"""
from __future__ import annotations

import errno
import os
from collections.abc import Mapping
import shutil
import uuid
from pathlib import Path

from spatec.errors import OutputError
from spatec.exec.parts import EXTENSIONS, text_frame
from spatec.storage.atomic import safe_name

RUN_PREFIX = ".spatec-run-"


class Outputs:
    """Where one run's outputs are written, and their commit (see the module)."""

    def __init__(self, out, fmt: str, merged: bool, phrases: list):
        self.out = Path(out)
        self.fmt, self.merged, self.phrases = fmt, merged, list(phrases)
        self.ext = EXTENSIONS[fmt]
        self.root = self.out / f"{RUN_PREFIX}{uuid.uuid4().hex[:12]}"
        self.root.mkdir(parents=True, exist_ok=True)

    def folder(self, phrase: str) -> Path:
        """Where a phrase's parts are written."""
        return self.root / safe_name(phrase)

    def rejects_folder(self) -> Path:
        return self.root / "_rejects"

    def path(self, phrase: str) -> Path:
        """Where a phrase's output is once committed: its file, or its folder."""
        return self.out / (f"{phrase}.{self.ext}" if self.merged else phrase)

    def staged(self, phrase: str) -> Path:
        """Where a phrase's merged file is made before its commit (hidden in the run's
        folder); parts given as this one file are that file (:mod:`spatec.exec.inplace`)."""
        return self.root / f".{safe_name(phrase)}.{self.ext}"

    def commit(self, parts: dict, rejects: dict | None = None) -> dict:
        """Every phrase's output in place (``parts``: phrase → its part files in order), and
        the rejects (type → part files in order) as ``out/_rejects/<type>.jsonl``; phrase →
        where it is."""
        done = {}
        try:
            staged = {}
            for phrase in self.phrases:
                staged[phrase] = self._stage(phrase, parts.get(phrase, []))
            rej = {}
            for t, files in (rejects or {}).items():
                self.rejects_folder().mkdir(parents=True, exist_ok=True)
                target = self.rejects_folder() / f".{safe_name(t)}.jsonl"
                concatenate(files, target)
                rej[t] = target
            for phrase, got in staged.items():
                final = self.path(phrase)
                _replace(got, final)
                done[phrase] = final
            for t, got in rej.items():
                (self.out / "_rejects").mkdir(exist_ok=True)
                os.replace(got, self.out / "_rejects" / f"{t}.jsonl")
        except OSError as e:
            raise write_error(e, self.out) from None
        finally:
            self.discard()
        return done

    def _stage(self, phrase: str, files: list) -> Path:
        """The phrase's output made beside its place (hidden in the run's folder)."""
        if self.merged:
            target = self.staged(phrase)
            if [Path(f) for f in files] == [target]:        # (written in place)
                return target
            if self.fmt == "parquet":
                from spatec.sinks.files import merge_parquet_files

                merge_parquet_files(files, target)
            else:
                concatenate(files, target, *text_frame(self.fmt))
            return target
        folder = self.root / f".{safe_name(phrase)}.parts"
        folder.mkdir()
        for i, f in enumerate(files):
            os.replace(f, folder / f"part-{i:05d}.{self.ext}")
        return folder

    def discard(self) -> None:
        """Remove what this run wrote and did not commit."""
        shutil.rmtree(self.root, ignore_errors=True)


def _replace(src: Path, final: Path) -> None:
    """``src`` (a file or a folder) where ``final`` is, in one rename (a folder there before
    is moved aside first and removed after)."""
    if final.is_dir() and not final.is_symlink():
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
        os.replace(src, final)
        shutil.rmtree(old, ignore_errors=True)
        return
    if src.is_dir() and final.exists():
        final.unlink()
    os.replace(src, final)


def concatenate(files: list, target: Path, head: bytes = b"", between: bytes = b"", tail: bytes = b"") -> None:
    """``files`` end to end into ``target`` (with ``head``, ``between`` non-empty ones, and
    ``tail``): copied by the kernel, a file at a time."""
    with open(target, "wb") as out:
        out.write(head)
        fd = out.fileno()
        first = True
        for f in files:
            size = os.path.getsize(f)
            if not size:
                continue
            if not first and between:
                out.write(between)
            first = False
            out.flush()
            with open(f, "rb") as src:
                _copy(src.fileno(), fd, size)
        out.write(tail)


def _copy(src: int, dst: int, size: int) -> None:
    left = size
    try:
        while left:
            n = os.copy_file_range(src, dst, left)
            if n == 0:
                break
            left -= n
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    while left:
        n = os.sendfile(dst, src, None, min(left, 1 << 30))
        if n == 0:
            break
        left -= n


def write_error(e: OSError, where) -> OutputError:
    """An error writing the outputs, in one line (a full disk, no permission)."""
    if e.errno == errno.ENOSPC:
        return OutputError(f"{where}: no space left on the device while writing the outputs; the earlier "
                           "outputs there are as they were. Free some space and run again")
    return OutputError(f"{e.filename or where}: cannot write the outputs: {e.strerror or e}")


def reject_parts(rejects, outputs: Outputs) -> dict:
    """Rejects held as a frame (in input order) written as one part per type; type → [file]."""
    if rejects is None or not len(rejects):
        return {}
    from spatec.events.read import write_rejects

    stage = outputs.root / "_rejects_held"
    return {p.stem: [p] for p in write_rejects(rejects, stage)}


class WrittenFrames(Mapping):
    """Phrase → its output rows, read back from the JSON lines or GeoParquet outputs a replay
    wrote (on first use; a folder of parts read in order): for runners that write the files
    without holding the rows."""

    def __init__(self, paths: dict, plans: dict):
        self._paths, self._plans, self._frames = dict(paths), plans, {}

    def __getitem__(self, name):
        if name not in self._frames:
            import pandas as pd

            from spatec.runtime.rows import rows_frame, time_fields
            from spatec.sinks.files import read_jsonl_composites, read_parquet_composites

            plan = self._plans[name]
            path = Path(self._paths[name])
            files = sorted(path.glob("part-*")) if path.is_dir() else [path]
            frames = []
            for f in files:
                if f.suffix == ".parquet":
                    frames.append(read_parquet_composites(f))
                elif f.suffix == ".jsonl":
                    frames.append(read_jsonl_composites(f, time_fields(plan)))
            frames = [df for df in frames if len(df)]
            df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else (frames[0] if frames else None)
            self._frames[name] = df if df is not None else rows_frame(plan, [])    # its columns, from the plan
        return self._frames[name]

    def __iter__(self):
        return iter(self._paths)

    def __len__(self):
        return len(self._paths)

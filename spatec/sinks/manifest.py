"""What a replay wrote to its output folder: ``<out>/_manifest.json``.

One JSON object, written last (whole, then renamed into place): the program
(path, SHA-256 of its text, time zone, phrases run), the inputs with their
rows read, used and rejected, the output of each phrase (file, format,
composites, bytes), the rejects files, the map, the logs, the time zone of
the text outputs, the runner and when it ran.

Outputs of an earlier run that this run did not write again (a phrase since
removed from the program, a format changed, rejects of a type that now has
none) would sit beside the new ones looking current. Spatec removes them —
but only the files the earlier run's manifest names (inside ``out``): a file
no manifest names is never deleted. Files that only look like outputs
(``*.jsonl``, ``*.parquet``, ``*.geojson`` at the top of ``out``, and
``_rejects/*.jsonl``) but that no manifest claims are listed under
``unclaimed`` and named in a warning instead.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from pathlib import Path

from spatec.storage.atomic import atomic_write

NAME = "_manifest.json"
VERSION = 1
LOOKS_LIKE_OUTPUT = ("*.jsonl", "*.parquet", "*.geojson")


def read_manifest(out) -> dict | None:
    """The manifest an earlier run left in ``out`` (None if there is none, or it is unreadable)."""
    try:
        with open(Path(out) / NAME, encoding="utf-8") as f:
            got = json.load(f)
        return got if isinstance(got, dict) else None
    except (OSError, ValueError):
        return None


def written_files(manifest: dict | None) -> list[str]:
    """The files (relative to ``out``) a manifest says its run wrote."""
    if not manifest:
        return []
    files = [o.get("path") for o in manifest.get("outputs", [])]
    files += [r.get("path") for r in manifest.get("rejects", [])]
    files += list(manifest.get("logs", []))
    if manifest.get("map", {}) and manifest["map"].get("inside"):
        files.append(manifest["map"]["path"])
    return [f for f in files if isinstance(f, str) and f]


def _inside(out: Path, rel: str) -> Path | None:
    """``out/rel`` when it lies inside ``out`` (a manifest is data: never follow it out)."""
    p = (out / rel).resolve()
    root = out.resolve()
    return p if p != root and root in p.parents else None


def remove_stale(out, previous: dict | None, now: set) -> list[str]:
    """Delete the files ``previous`` (an earlier run's manifest) names that this run did not
    write (``now``: paths relative to ``out``); return them."""
    out = Path(out)
    removed = []
    for rel in written_files(previous):
        if rel in now:
            continue
        p = _inside(out, rel)
        if p is not None and p.is_file():
            p.unlink()
            removed.append(rel)
    return sorted(removed)


def unclaimed(out, previous: dict | None, now: set) -> list[str]:
    """Files in ``out`` that look like outputs that neither this run nor the earlier run's
    manifest claims (left as they are: spatec does not know they are its own)."""
    out = Path(out)
    claimed = set(now) | set(written_files(previous))
    found = []
    for pattern in LOOKS_LIKE_OUTPUT:
        found += [p.name for p in out.glob(pattern) if p.is_file()]
    found += [f"_rejects/{p.name}" for p in (out / "_rejects").glob("*.jsonl") if p.is_file()]
    return sorted(f for f in found if f not in claimed)


def program_entry(compiled, phrases=None) -> dict:
    program = compiled.program
    root = Path(program.root)
    try:
        digest = hashlib.sha256(root.read_bytes()).hexdigest()
    except OSError:
        digest = None
    ran = [p.name for p in compiled.plans if not phrases or p.name in phrases]
    return {"path": str(root.resolve()) if root.exists() else str(root), "sha256": digest,
            "timezone": program.timezone, "phrases": ran}


def write_manifest(out, *, compiled, result, runner: str, fmt: str, tz: str, phrases=None,
                   started: float, finished: float, map_path=None, logs=(), previous: dict | None = None) -> dict:
    """Remove the earlier run's stale outputs, then write this run's manifest; return it."""
    out = Path(out)
    outputs = []
    for name, path in sorted(getattr(result, "paths", {}).items()):
        p = Path(path)
        outputs.append({"phrase": name, "path": os.path.relpath(p, out), "format": fmt,
                        "composites": int(result.counts.get(name, 0)),
                        "bytes": p.stat().st_size if p.exists() else None})
    rejects = []
    ingest = getattr(result, "ingest", None)
    inputs = []
    if ingest is not None:
        by_type: dict = {}
        for t, path, read, used, rejected in ingest.rows:
            inputs.append({"type": t, "path": str(path), "read": int(read), "used": int(used),
                           "rejected": int(rejected)})
            by_type[t] = by_type.get(t, 0) + int(rejected)
        for t, n in sorted(by_type.items()):
            if n:
                rejects.append({"type": t, "path": f"_rejects/{t}.jsonl", "rows": n})
    logs = [os.path.relpath(Path(p), out) for p in logs if Path(p).exists()]
    entry_map = None
    if map_path is not None:
        mp = Path(map_path)
        inside = _inside(out, os.path.relpath(mp.resolve(), out.resolve())) is not None
        entry_map = {"path": os.path.relpath(mp.resolve(), out.resolve()) if inside else str(mp.resolve()),
                     "inside": inside}
    if phrases:
        # a run of some phrases (--phrase) keeps the outputs an earlier run wrote for the
        # program's other phrases: they are not stale, only not rewritten
        others = {p.name for p in compiled.plans} - set(phrases)
        outputs += [{**o, "kept": True} for o in (previous or {}).get("outputs", [])
                    if o.get("phrase") in others and isinstance(o.get("path"), str)
                    and _inside(out, o["path"]) is not None and (out / o["path"]).is_file()]
    now = {o["path"] for o in outputs} | {r["path"] for r in rejects} | set(logs)
    if entry_map and entry_map["inside"]:
        now.add(entry_map["path"])
    removed = remove_stale(out, previous, now)
    manifest = {
        "manifest": VERSION,
        "command": "replay",
        "runner": runner,
        "started": _iso(started), "finished": _iso(finished), "seconds": round(finished - started, 3),
        "program": program_entry(compiled, phrases),
        "inputs": inputs,
        "read": int(ingest.read) if ingest is not None else None,
        "used": int(ingest.used) if ingest is not None else None,
        "rejected": int(ingest.rejected) if ingest is not None else None,
        "crs": getattr(result, "crs", None),
        "format": fmt, "tz": tz,
        "outputs": outputs, "rejects": rejects, "map": entry_map, "logs": logs,
        "removed": removed,
        "unclaimed": unclaimed(out, None, now | set(removed)),
    }
    atomic_write(out / NAME, lambda tmp: Path(tmp).write_text(json.dumps(manifest, indent=2) + "\n",
                                                              encoding="utf-8"))
    return manifest


def _iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")

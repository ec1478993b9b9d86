"""Recorded feed polls: a ``.tar.gz`` of SIRI-VM polls, a directory of them, or one poll."""
from __future__ import annotations

import gzip
import json
import os
import tarfile
from dataclasses import dataclass

from spatec.errors import DataError
from spatec.events.formats import poll_order
from spatec.events.sirivm import POLL_SUFFIXES


@dataclass(frozen=True)
class Poll:
    """One recorded poll: when it was received (epoch s), its name and its bytes (SIRI-VM JSON)."""

    received: float
    name: str
    data: bytes


def load_recording(path, start: float | None = None, end: float | None = None) -> list[Poll]:
    """The SIRI-VM polls of a recording (a ``.tar.gz`` of polls, a directory of them or one
    poll), in time order; ``start``/``end`` (epoch s, inclusive) keep a slice of it."""
    path = os.fspath(path)
    items: list[tuple[str, bytes]] = []
    if os.path.isdir(path):
        for n in os.listdir(path):
            if n.lower().endswith(POLL_SUFFIXES) and not n.startswith((".", "_")):
                with open(os.path.join(path, n), "rb") as f:
                    items.append((n, f.read()))
    elif os.path.isfile(path) and tarfile.is_tarfile(path):
        with tarfile.open(path, "r:*") as tar:
            items = [(m.name, tar.extractfile(m).read()) for m in tar
                     if m.isfile() and m.name.lower().endswith(POLL_SUFFIXES)]
    elif os.path.isfile(path):
        with open(path, "rb") as f:
            items = [(os.path.basename(path), f.read())]
    else:
        raise DataError(f"{path}: no such recording (a .tar.gz of SIRI-VM polls, a directory or a poll)")
    polls = [Poll(poll_order(n)[0], n, d) for n, d in items]
    polls.sort(key=lambda p: (p.received, p.name))
    if start is not None:
        polls = [p for p in polls if p.received >= start]
    if end is not None:
        polls = [p for p in polls if p.received <= end]
    if not polls:
        raise DataError(f"{path}: no SIRI-VM polls in it")
    return polls


def poll_records(data: bytes) -> list:
    """The records of a SIRI-VM poll (``request_data``, or a bare list); [] if it is not one."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return []
    if isinstance(doc, dict) and isinstance(doc.get("request_data"), list):
        return doc["request_data"]
    return doc if isinstance(doc, list) else []

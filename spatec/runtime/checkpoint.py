"""A live run's checkpoint directory: the run state, saved incrementally, as data.

``state.ck`` (watermark, offsets, counters, broadcast buffers, the list of
segments) plus ``segments/<n>.ck``: a full snapshot of every key's run state and
the ids seen, then one delta per save with only the keys changed since the save
before, the keys dropped and the ids added. A save writes its segment, then
``state.ck`` (atomically); the rename is the commit.

Every file is MessagePack with a magic and a version (:data:`CHECKPOINT_VERSION`),
each key's run state in the automaton's own versioned codec
(:mod:`spatec.automata.codec`): loading a checkpoint cannot run code, and one
written for another program (its automata's fingerprints differ) or by another
version is refused with a clear error. A checkpoint directory that another user
can write is refused too: whoever can write it can feed the run any state.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgpack

from spatec.automata.codec import (
    CodecError,
    decode_events,
    decode_state,
    encode_events,
    encode_state,
)
from spatec.automata.compile import compile_automaton
from spatec.automata.machine import NEG_INF
from spatec.errors import SpatecError
from spatec.plan.program import Compiled
from spatec.storage import forked
from spatec.storage.atomic import atomic_bytes, write_synced

CHECKPOINT_MAGIC = b"SPCK"
CHECKPOINT_VERSION = 3
STATE_FILE = "state.ck"
BATCH_LOG = "batches.log"
FULL_EVERY = 50                # saves between two full snapshots (bounds the number of deltas)


class CheckpointError(SpatecError):
    """A checkpoint directory that cannot be used (another program's, another version's, unsafe)."""


def fingerprint(compiled: Compiled, phrases=None) -> str:
    """What a checkpoint's run states depend on: the fingerprints of the phrases' automata
    (:meth:`~spatec.automata.compile.AutomatonSpec.fingerprint`, from their data)."""
    parts = [f"{p.name}={compile_automaton(p, compiled.program).fingerprint()}"
             for p in compiled.plans if not phrases or p.name in phrases]
    return hashlib.sha256(";".join(parts).encode("utf-8")).hexdigest()[:16]


@dataclass
class LiveState:
    """Everything a live run carries from one micro-batch to the next (saved as the checkpoint)."""

    fingerprint: str
    lateness: int
    crs: str | None = None
    watermark: int = NEG_INF
    max_hi: int = NEG_INF
    keys: dict = field(default_factory=dict)       # phrase → {key → RunState}
    bcast: dict = field(default_factory=dict)      # phrase → [Ev] (broadcast events still useful)
    offsets: dict = field(default_factory=dict)    # source id → offset (as of the last save)
    seen: dict = field(default_factory=dict)       # event id → hi (duplicates across polls)
    counts: Counter = field(default_factory=Counter)
    batches: int = 0
    finished: bool = False
    segments: list = field(default_factory=list)   # the checkpoint's segment files, oldest first
    saves: int = 0                                 # saves so far (names the segments)
    version: int = CHECKPOINT_VERSION


class Checkpoint:
    """A live run's directory: the run state, ``delivered.jsonl``, ``spool/``, ``late/``, ``_rejects/``.

    The run state is ``state.ck`` (watermark, offsets, counters, broadcast
    buffers, the list of segments) plus ``segments/<n>.ck``: a full snapshot
    of every key's run state and the ids seen, then one delta per save with
    only the keys changed since the save before, the keys dropped and the ids
    added. A save writes its segment, then ``state.pkl`` through a temporary
    file and a rename: the rename is the commit, and segments no
    ``state.ck`` names are left-overs of a crash, deleted.
    """

    def __init__(self, directory: Path | None):
        self.dir = Path(directory) if directory is not None else None
        if self.dir is not None:
            (self.dir / "segments").mkdir(parents=True, exist_ok=True)
            _refuse_shared(self.dir)

    @property
    def state_path(self) -> Path | None:
        return self.dir / STATE_FILE if self.dir is not None else None

    def load(self) -> LiveState | None:
        p = self.state_path
        if p is None:
            return None
        forked.wait_for(str(self.dir))
        if not p.exists():
            return None
        st = _state_back(_read(p))
        for name in st.segments:
            seg = _segment_back(_read(self.dir / "segments" / name))
            if seg["full"]:
                st.keys = {ph: {} for ph in seg["phrases"]}
                st.seen = {}
            for ph, k in seg.get("dropped", ()):
                st.keys.get(ph, {}).pop(k, None)
            for (ph, k), rs in seg["keys"].items():
                st.keys.setdefault(ph, {})[k] = rs
            st.seen.update(seg["seen"])
        self._clean(st.segments)
        return st

    def segment(self, st: LiveState, dirty=(), dropped=(), new_seen=None, full: bool = False) -> dict:
        """What the next save writes (taken from ``st`` now: in a forked child it is encoded later)."""
        if full or not st.segments:
            return {"full": True, "phrases": list(st.keys),
                    "keys": {(ph, k): rs for ph, ks in st.keys.items() for k, rs in ks.items()},
                    "seen": st.seen}
        return {"full": False, "keys": {(ph, k): st.keys[ph][k] for ph, k in dirty if k in st.keys.get(ph, {})},
                "dropped": [(ph, k) for ph, k in dropped if k not in st.keys.get(ph, {})],
                "seen": new_seen or {}}

    def names(self, st: LiveState, full: bool) -> tuple[str, list]:
        """(the segment's file name, the segment list after the save); ``full``: the segment is
        a full snapshot (as :meth:`segment` makes it when asked for one or when there is none yet)."""
        name = f"{st.saves + 1:012d}.ck"
        return name, ([name] if full or not st.segments else [*st.segments, name])

    def write(self, st: LiveState, seg: dict, name: str, segments: list) -> None:
        """Write ``seg`` and then ``state.ck`` naming ``segments`` (the commit)."""
        atomic_bytes(self.dir / "segments" / name, _encode(_segment_data(seg)))
        atomic_bytes(self.state_path, _encode(_state_data(st, segments, st.saves + 1)))
        self._clean(segments)

    def save(self, st: LiveState, dirty=(), new_seen=None, full: bool = False, dropped=()) -> None:
        """A save, in this process."""
        if self.dir is None:
            return
        seg = self.segment(st, dirty, dropped, new_seen, full)
        name, segments = self.names(st, seg["full"])
        self.write(st, seg, name, segments)
        st.segments, st.saves = segments, st.saves + 1

    def _clean(self, keep) -> None:
        keep = set(keep)
        for q in (self.dir / "segments").iterdir():
            if q.name not in keep:
                q.unlink(missing_ok=True)


def _refuse_shared(d: Path) -> None:
    """A checkpoint directory another user can write could hold any state for this run:
    refuse one owned by another user, or writable by others (or by a group not the user's)."""
    st = os.stat(d)
    others = st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid != os.getgid())
    if (hasattr(os, "getuid") and st.st_uid != os.getuid()) or others:
        raise CheckpointError(f"checkpoint directory {d} can be written by other users "
                              f"(mode {stat.S_IMODE(st.st_mode):04o}); use a directory of your own "
                              f"(chmod go-w {d}, or another path)")


def _encode(body) -> bytes:
    return CHECKPOINT_MAGIC + bytes([CHECKPOINT_VERSION]) + msgpack.packb(body, use_bin_type=True)


def _read(path: Path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != CHECKPOINT_MAGIC:
        raise CheckpointError(f"{path}: not a spatec checkpoint file (checkpoints of spatec before "
                              f"version {CHECKPOINT_VERSION} were pickles, which are not read); "
                              f"use a new checkpoint directory")
    if data[4:5] != bytes([CHECKPOINT_VERSION]):
        raise CheckpointError(f"{path}: checkpoint format version {data[4]}, this spatec reads "
                              f"{CHECKPOINT_VERSION}; use a new checkpoint directory")
    try:
        return msgpack.unpackb(data[5:], raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise CheckpointError(f"{path}: a damaged checkpoint file ({e})") from None


def _key(k):
    return tuple(k) if isinstance(k, list) else k


def _states(items) -> list:
    return [[ph, list(k), encode_state(rs)] for (ph, k), rs in items]


def _state_data(st: LiveState, segments: list, saves: int) -> dict:
    return {"fingerprint": st.fingerprint, "lateness": st.lateness, "crs": st.crs, "watermark": st.watermark,
            "max_hi": st.max_hi, "bcast": [[ph, encode_events(evs)] for ph, evs in st.bcast.items()],
            "offsets": [[s, sorted(o) if isinstance(o, (set, frozenset)) else o] for s, o in st.offsets.items()],
            "counts": dict(st.counts), "batches": st.batches, "finished": st.finished, "segments": list(segments),
            "saves": saves}


def _state_back(d: dict) -> LiveState:
    try:
        return LiveState(d["fingerprint"], d["lateness"], d["crs"], d["watermark"], d["max_hi"], {},
                         {ph: decode_events(b) for ph, b in d["bcast"]}, {s: o for s, o in d["offsets"]}, {},
                         Counter(d["counts"]), d["batches"], d["finished"], list(d["segments"]), d["saves"])
    except (KeyError, TypeError, ValueError, CodecError) as e:
        raise CheckpointError(f"a damaged checkpoint state ({e})") from None


def _segment_data(seg: dict) -> dict:
    return {"full": seg["full"], "phrases": list(seg.get("phrases", ())), "keys": _states(seg["keys"].items()),
            "dropped": [[ph, list(k)] for ph, k in seg.get("dropped", ())], "seen": list(seg["seen"].items())}


def _segment_back(d: dict) -> dict:
    try:
        return {"full": d["full"], "phrases": d["phrases"],
                "keys": {(ph, _key(k)): decode_state(b) for ph, k, b in d["keys"]},
                "dropped": [(ph, _key(k)) for ph, k in d["dropped"]], "seen": dict(d["seen"])}
    except (KeyError, TypeError, ValueError, CodecError) as e:
        raise CheckpointError(f"a damaged checkpoint segment ({e})") from None


class BatchLog:
    """The micro-batches a live run made since its last save, in order: the items each took
    (source id, offset), appended and synced before the batch is processed.

    What a batch decides depends on how the input was cut into batches: an event is late
    behind the watermark of the batches before its own. A run restarted on its checkpoint
    replays the items it finds again (spooled polls, files not done) in the batches logged,
    so it decides what the run that died decided, and delivered, rather than taking
    everything spooled as one batch, in which an event found late before might no longer be
    (REFERENCE decision 39). A save drops the entries it covers."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / BATCH_LOG
        self.entries: list = []
        self.owed = 0           # entries found again after a restart and not yet replayed
        self.size = 0           # the file's length (an append cuts what a crash left past it)
        if self.path.exists():
            lines = self.path.read_bytes().split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                try:
                    self.entries.append(tuple((str(s), o) for s, o in json.loads(line)))
                except (ValueError, TypeError):
                    break           # a line a crash cut short: it and what follows are dropped
            self._rewrite()

    def append(self, items) -> None:
        entry = tuple((it.source, it.offset) for it in items)
        self.size += write_synced(self.path, _log_line(entry), "ab", at=self.size)
        self.entries.append(entry)

    def processed(self) -> int:
        """How many entries, from the first, a save made now covers (not those still to replay)."""
        return len(self.entries) - self.owed

    def replayed(self) -> None:
        """A batch :meth:`replay` gave is being processed."""
        self.owed = max(0, self.owed - 1)

    def drop_first(self, n: int) -> None:
        """A save covers the first ``n`` entries."""
        if n > 0:
            self.entries = self.entries[n:]
            self._rewrite()

    def _rewrite(self) -> None:
        data = b"".join(_log_line(e) for e in self.entries)
        atomic_bytes(self.path, data)
        self.size = len(data)

    def replay(self, items: list) -> list:
        """``items`` found again after a restart as ``[(batch, logged)]``: cut in the batches
        logged (those the checkpoint already covers are not found: their items are gone),
        then one batch of the items no batch took (``logged`` False: not in the log yet)."""
        by = {(it.source, it.offset): it for it in items}
        out, kept = [], []
        for entry in self.entries:
            batch = [by.pop(k) for k in entry if k in by]
            if batch:
                out.append((batch, True))
                kept.append(entry)
        # what the log holds now: the batches to replay (the others are covered by the checkpoint)
        self.entries, self.owed = kept, len(kept)
        self._rewrite()
        rest = [it for it in items if (it.source, it.offset) in by]
        if rest:
            out.append((rest, False))
        return out


def _log_line(entry) -> bytes:
    return json.dumps([list(k) for k in entry]).encode("utf-8") + b"\n"

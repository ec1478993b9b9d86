"""A live run's checkpoint directory: the run state, saved incrementally.

``state.pkl`` (watermark, offsets, counters, broadcast buffers, the list of
segments) plus ``segments/<n>.pkl``: a full snapshot of every key's run state
and the ids seen, then one delta per save with only the keys changed since the
save before, the keys dropped and the ids added. A save writes its segment,
then ``state.pkl`` (atomically); the rename is the commit.
"""
from __future__ import annotations

import hashlib
import pickle
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from spatec.automata.machine import NEG_INF
from spatec.plan.program import Compiled
from spatec.spatial import stamps as S
from spatec.storage import forked
from spatec.storage.atomic import atomic_write

CHECKPOINT_VERSION = 2


STATE_FILE = "state.pkl"


FULL_EVERY = 50                # saves between two full snapshots (bounds the number of deltas)


def fingerprint(compiled: Compiled) -> str:
    """What a checkpoint's run states depend on: the plans of the program's phrases."""
    return hashlib.sha256(repr(compiled.plans).encode("utf-8")).hexdigest()[:16]


@dataclass
class LiveState:
    """Everything a live run carries from one micro-batch to the next (pickled as the checkpoint)."""

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


def _disc(x, y, r):
    return S.Loc.disc(x, y, r)


class StatePickler(pickle.Pickler):
    """Discs (every GPS fix's stamp) as three floats, not as a WKB geometry: the state of a
    live run is mostly discs."""

    def reducer_override(self, obj):
        if type(obj) is S.Loc and obj._xy is not None:
            return _disc, (obj._xy[0], obj._xy[1], obj.r)
        return NotImplemented


class Checkpoint:
    """A live run's directory: the run state, ``delivered.jsonl``, ``spool/``, ``late/``, ``_rejects/``.

    The run state is ``state.pkl`` (watermark, offsets, counters, broadcast
    buffers, the list of segments) plus ``segments/<n>.pkl``: a full snapshot
    of every key's run state and the ids seen, then one delta per save with
    only the keys changed since the save before, the keys dropped and the ids
    added. A save writes its segment, then ``state.pkl`` through a temporary
    file and a rename: the rename is the commit, and segments no
    ``state.pkl`` names are left-overs of a crash, deleted.
    """

    def __init__(self, directory: Path | None):
        self.dir = Path(directory) if directory is not None else None
        if self.dir is not None:
            (self.dir / "segments").mkdir(parents=True, exist_ok=True)

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
        with open(p, "rb") as f:
            st = pickle.load(f)
        if getattr(st, "version", None) != CHECKPOINT_VERSION:
            raise ValueError(f"{p}: checkpoint version {getattr(st, 'version', None)}, "
                             f"this spatec writes {CHECKPOINT_VERSION}; use a new checkpoint directory")
        for name in st.segments:
            with open(self.dir / "segments" / name, "rb") as f:
                seg = pickle.load(f)
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
        """What the next save writes (taken from ``st`` now: in a forked child it is pickled later)."""
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
        name = f"{st.saves + 1:012d}.pkl"
        return name, ([name] if full or not st.segments else [*st.segments, name])

    def write(self, st: LiveState, seg: dict, name: str, segments: list) -> None:
        """Write ``seg`` and then ``state.pkl`` naming ``segments`` (the commit)."""
        _atomic_pickle(self.dir / "segments" / name, seg)
        keys, seen, old = st.keys, st.seen, (st.segments, st.saves)
        st.keys, st.seen, st.segments, st.saves = {}, {}, segments, st.saves + 1
        try:
            _atomic_pickle(self.state_path, st)
        finally:
            st.keys, st.seen = keys, seen
            st.segments, st.saves = old
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


def _atomic_pickle(path: Path, obj) -> None:
    atomic_write(path, lambda tmp: _dump(tmp, obj), sync=True)


def _dump(path: str, obj) -> None:
    with open(path, "wb") as f:
        StatePickler(f, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)

"""Per-key run state and events as bytes: a versioned codec that cannot run code.

After Flink CEP's ``NFAStateSerializer``: a key's :class:`~spatec.automata.machine.RunState`
is written with its own format version (:data:`STATE_VERSION`), so a checkpoint
survives code changes knowingly: a state of another version is refused with a
clear error rather than misread. The format is MessagePack (data only: decoding
cannot execute anything, unlike a pickle). Events are written once per state
(partial matches refer to them by number), so two partial matches that share an
event share it again after decoding, as the automaton needs (distinct variables
bind distinct events, compared by identity). A GPS fix's disc is three floats;
another location stamp is its geometry as WKB and its radius.
"""
from __future__ import annotations

import msgpack
import shapely

from spatec.automata.machine import PM, Ev, HistoryEv, RunState
from spatec.spatial import stamps as S

STATE_MAGIC = b"SPST"
STATE_VERSION = 1
EVENTS_MAGIC = b"SPEV"
EVENTS_VERSION = 1


class CodecError(ValueError):
    """Bytes that are not a state or events of the version this spatec reads."""


def encode_state(rs: RunState) -> bytes:
    """A key's run state as bytes (:func:`decode_state` reads them back)."""
    t = _Table()
    body = [
        rs.watermark,
        [[nid, side, [_pm(p, t) for p in pms]] for (nid, side), pms in rs.buffers.items()],
        [_pm(p, t) for p in rs.pending],
        [[nid, [t.ref(e) for e in evs]] for nid, evs in rs.xbuf.items()],
        [[typ, src, list(ts)] for (typ, src), ts in rs.history.items()],
        list(rs.emitted.items()),
        rs.since_prune,
        [[nid, side] for nid, side in rs.lo_sorted],
        t.rows,
    ]
    return STATE_MAGIC + bytes([STATE_VERSION]) + msgpack.packb(body, use_bin_type=True, default=_plain)


def decode_state(data: bytes) -> RunState:
    body = _unpack(data, STATE_MAGIC, STATE_VERSION, "run state")
    wm, buffers, pending, xbuf, history, emitted, since_prune, lo_sorted, rows = body
    evs = [_ev(r) for r in rows]
    rs = RunState()
    rs.watermark = wm
    rs.buffers = {(nid, side): [_pm_back(p, evs) for p in pms] for nid, side, pms in buffers}
    rs.pending = [_pm_back(p, evs) for p in pending]
    rs.xbuf = {nid: [evs[i] for i in refs] for nid, refs in xbuf}
    rs.history = {(typ, src): list(ts) for typ, src, ts in history}
    rs.emitted = {cid: hi for cid, hi in emitted}
    rs.since_prune = since_prune
    rs.lo_sorted = {(nid, side) for nid, side in lo_sorted}
    return rs


def encode_events(evs) -> bytes:
    """Events (a broadcast buffer, a batch of a live fan-out) as bytes."""
    t = _Table()
    refs = [t.ref(e) for e in evs]
    return EVENTS_MAGIC + bytes([EVENTS_VERSION]) + msgpack.packb([refs, t.rows], use_bin_type=True,
                                                                  default=_plain)


def decode_events(data: bytes) -> list:
    refs, rows = _unpack(data, EVENTS_MAGIC, EVENTS_VERSION, "events")
    evs = [_ev(r) for r in rows]
    return [evs[i] for i in refs]


# ------------------------------------------------------------------------------ parts

class _Table:
    """Events by identity, each written once."""

    def __init__(self):
        self.index: dict = {}
        self.rows: list = []
        self._alive: list = []      # (ids stay unique while the events are held here)

    def ref(self, ev) -> int:
        i = self.index.get(id(ev))
        if i is None:
            i = self.index[id(ev)] = len(self.rows)
            self.rows.append(_ev_row(ev))
            self._alive.append(ev)
        return i


def _ev_row(ev) -> list:
    return [ev.type, ev.id, ev.source, ev.t, ev.lo, ev.hi, _loc(ev.loc), ev.attrs,
            ev.__class__ is HistoryEv]


def _ev(row) -> Ev:
    typ, id_, src, t, lo, hi, loc, attrs, hist = row
    return (HistoryEv if hist else Ev)(typ, id_, src, t, lo, hi, _loc_back(loc), attrs)


def _loc(loc):
    if loc is S.UNIVERSE:
        return None
    if loc._xy is not None:
        return [loc._xy[0], loc._xy[1], loc.r]
    return [shapely.to_wkb(loc.geom), loc.r]


def _loc_back(v):
    if v is None:
        return S.UNIVERSE
    if len(v) == 3:
        return S.Loc.disc(v[0], v[1], v[2])
    return S.Loc(shapely.from_wkb(v[0]), v[1])


def _pm(pm: PM, t: _Table) -> list:
    return [[-1 if e is None else t.ref(e) for e in pm.ev], pm.lo, pm.hi, list(pm.checks)]


def _pm_back(v, evs: list) -> PM:
    refs, lo, hi, checks = v
    return PM(tuple(None if i < 0 else evs[i] for i in refs), lo, hi, tuple(checks))


def _plain(v):
    """Values MessagePack does not know: numpy scalars as Python values."""
    item = getattr(v, "item", None)
    if item is None:
        raise TypeError(f"cannot encode {type(v).__name__} in a run state")
    return item()


def _unpack(data: bytes, magic: bytes, version: int, what: str):
    if not isinstance(data, (bytes, bytearray, memoryview)) or bytes(data[:4]) != magic:
        raise CodecError(f"not a spatec {what} (an old checkpoint, or not spatec's)")
    if data[4] != version:
        raise CodecError(f"a spatec {what} of format version {data[4]}; this spatec reads version {version}")
    try:
        return msgpack.unpackb(memoryview(data)[5:], raw=False, strict_map_key=False, use_list=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise CodecError(f"a damaged spatec {what}: {e}") from None

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

Version 2 (runs and place sets, SPEC §7 and §9): a key's open runs (per run leaf and
source, the unsettled events and the open run's summary, never its events), complete
runs in partial matches (a run refers to its first and last events), and the places a
partial match binds (id, attributes, region).
"""
from __future__ import annotations

import msgpack
import shapely

from spatec.automata.machine import PM, Ev, HistoryEv, RunState
from spatec.automata.places import Place
from spatec.automata.runs import Cut, Open, RunEv
from spatec.spatial import stamps as S

STATE_MAGIC = b"SPST"
STATE_VERSION = 2
EVENTS_MAGIC = b"SPEV"
EVENTS_VERSION = 2

_EV, _HISTORY, _RUN = 0, 1, 2


class CodecError(ValueError):
    """Bytes that are not a state or events of the version this spatec reads."""


def encode_state(rs: RunState) -> bytes:
    """A key's run state as bytes (:func:`decode_state` reads them back)."""
    t = _Table()
    body = [
        rs.watermark,
        [[key[0], key[1], [_pm(p, t) for p in pms], *key[2:]] for key, pms in rs.buffers.items()],
        [_pm(p, t) for p in rs.pending],
        [[nid, [t.ref(e) for e in evs]] for nid, evs in rs.xbuf.items()],
        [[typ, src, list(ts)] for (typ, src), ts in rs.history.items()],
        list(rs.emitted.items()),
        rs.since_prune,
        [list(key) for key in rs.lo_sorted],
        [[lid, src, [t.ref(e) for e in cut.pending], _open(cut.open, t)] for (lid, src), cut in rs.runs.items()],
        t.rows,
    ]
    return STATE_MAGIC + bytes([STATE_VERSION]) + msgpack.packb(body, use_bin_type=True, default=_plain)


def decode_state(data: bytes) -> RunState:
    body = _unpack(data, STATE_MAGIC, STATE_VERSION, "run state")
    wm, buffers, pending, xbuf, history, emitted, since_prune, lo_sorted, runs, rows = body
    evs = _evs(rows)
    rs = RunState()
    rs.watermark = wm
    # a keyed join's buffers (:mod:`spatec.automata.access`) carry their key after the matches
    rs.buffers = {(e[0], e[1], *map(_key_back, e[3:])): [_pm_back(p, evs) for p in e[2]] for e in buffers}
    rs.pending = [_pm_back(p, evs) for p in pending]
    rs.xbuf = {nid: [evs[i] for i in refs] for nid, refs in xbuf}
    rs.history = {(typ, src): list(ts) for typ, src, ts in history}
    rs.emitted = {cid: hi for cid, hi in emitted}
    rs.since_prune = since_prune
    rs.lo_sorted = {tuple(map(_key_back, key)) for key in lo_sorted}
    for lid, src, pend, o in runs:
        cut = rs.runs[(lid, src)] = Cut()
        cut.pending = [evs[i] for i in pend]
        cut.open = _open_back(o, evs)
    return rs


def _key_back(k):
    """A buffer key's part as it was: msgpack gives a grid cell's tuple back as a list."""
    return tuple(k) if isinstance(k, list) else k


def encode_events(evs) -> bytes:
    """Events (a broadcast buffer, a batch of a live fan-out) as bytes."""
    t = _Table()
    refs = [t.ref(e) for e in evs]
    return EVENTS_MAGIC + bytes([EVENTS_VERSION]) + msgpack.packb([refs, t.rows], use_bin_type=True,
                                                                  default=_plain)


def decode_events(data: bytes) -> list:
    refs, rows = _unpack(data, EVENTS_MAGIC, EVENTS_VERSION, "events")
    evs = _evs(rows)
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
            if ev.is_run:   # its first and last events are rows before it
                row = [self.ref(ev.first), self.ref(ev.last), ev.count, ev.lo, ev.hi, _loc(ev.loc),
                       [[f, a, v] for (f, a), v in ev.aggs.items()], _RUN]
            else:
                row = [ev.type, ev.id, ev.source, ev.t, ev.lo, ev.hi, _loc(ev.loc), ev.attrs,
                       _HISTORY if ev.__class__ is HistoryEv else _EV]
            i = self.index[id(ev)] = len(self.rows)
            self.rows.append(row)
            self._alive.append(ev)
        return i


def _evs(rows) -> list:
    """The events of a table's rows, in order (a run's row refers to rows before it)."""
    out = []
    for row in rows:
        if row[-1] == _RUN:
            first, last, count, lo, hi, loc, aggs, _ = row
            out.append(RunEv(out[first], out[last], count, lo, hi, _loc_back(loc),
                             {(f, a): v for f, a, v in aggs}))
        else:
            typ, id_, src, t, lo, hi, loc, attrs, kind = row
            out.append((HistoryEv if kind == _HISTORY else Ev)(typ, id_, src, t, lo, hi, _loc_back(loc), attrs))
    return out


def _open(o, t: _Table):
    """An open run's summary (:class:`~spatec.automata.runs.Open`) as data."""
    if o is None:
        return None
    return [t.ref(o.first), t.ref(o.last), o.count, o.lo, o.hi,
            None if o.pts is None else [list(p) for p in o.pts], o.r, None if o.loc is None else _loc(o.loc),
            [[f, a, acc] for (f, a), acc in o.aggs.items()], o.same]


def _open_back(v, evs: list):
    if v is None:
        return None
    first, last, count, lo, hi, pts, r, loc, aggs, same = v
    o = Open.__new__(Open)
    o.first, o.last, o.count, o.lo, o.hi = evs[first], evs[last], count, lo, hi
    o.pts = None if pts is None else [tuple(p) for p in pts]
    o.r = r
    o.loc = None if loc is None else _loc_back(loc)
    o.aggs = {(f, a): acc for f, a, acc in aggs}
    o.same = same
    return o


def _loc(loc):
    if loc is S.UNIVERSE:
        return None
    if loc.xy is not None:
        return [loc.xy[0], loc.xy[1], loc.r]
    return [shapely.to_wkb(loc.geom), loc.r]


def _loc_back(v):
    if v is None:
        return S.UNIVERSE
    if len(v) == 3:
        return S.Loc.disc(v[0], v[1], v[2])
    return S.Loc(shapely.from_wkb(v[0]), v[1])


def _pm(pm: PM, t: _Table) -> list:
    return [[-1 if e is None else t.ref(e) for e in pm.ev], pm.lo, pm.hi, list(pm.checks),
            [[v, p.id, p.attrs, _loc(p.loc)] for v, p in pm.places]]


def _pm_back(v, evs: list) -> PM:
    refs, lo, hi, checks, places = v
    return PM(tuple(None if i < 0 else evs[i] for i in refs), lo, hi, tuple(checks),
              tuple((var, Place(pid, attrs, _loc_back(loc))) for var, pid, attrs, loc in places))


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

"""Per-key run state as bytes: the versioned codec gives back states that step on exactly
as the originals, shares events where the original did, and refuses what it did not write."""
from __future__ import annotations

import pickle

import pytest
from automata_support import CRS, compile_text, frames, row

from spatec.automata import codec
from spatec.automata.machine import RunState, build
from spatec.automata.step import step
from spatec.runtime.events import to_evs
from spatec.runtime.routing import partitions
from spatec.spatial.crs import Projector

PROGRAM = """
phrase Silent per vehicle = Bus -> A ; not Bus -> X within 2 min emit last = A.t
phrase Pair per line = Bus -> A || Bus -> B where A.vehicle < B.vehicle and distance(A, B) < 300 m
phrase Chain per vehicle = Bus -> A ;= Bus -> B ;= Bus -> C where successive(A, B, C)
"""


def trace():
    """Four buses of one line, each standing still in spells, a gap in one."""
    return [row("Bus", f"V{v}", 20 * i + v + (200 if i >= 30 and v == 1 else 0), dx=8.0 * (i // 5) + 40 * v)
            for i in range(60) for v in range(4)]


def test_a_decoded_state_steps_on_as_the_original():
    c = compile_text(PROGRAM)
    proj = Projector(CRS)
    evs = {"Bus": to_evs(frames(trace())["Bus"], c.program, proj)}
    for plan in c.plans:
        am = build(plan, c.program, proj)
        found = 0
        for part in partitions(plan, evs).values():
            half = len(part) // 2
            st = RunState()
            step(am, st, part[:half])
            back = codec.decode_state(codec.encode_state(st))
            assert back.size() == st.size() and back.watermark == st.watermark
            # events shared by partial matches stay shared (distinct variables bind distinct events)
            ids = {id(e) for pms in back.buffers.values() for pm in pms for e in pm.ev if e is not None}
            refs = [e for pms in back.buffers.values() for pm in pms for e in pm.ev if e is not None]
            assert len(ids) == len({e.id for e in refs})
            got1, _ = step(am, st, part[half:], final=True)
            got2, _ = step(am, back, part[half:], final=True)
            assert [x.id for x in got1] == [x.id for x in got2], plan.name
            found += len(got1)
        assert found, plan.name


def test_events_round_trip_with_their_stamps():
    c = compile_text(PROGRAM)
    proj = Projector(CRS)
    evs = to_evs(frames(trace()[:10])["Bus"], c.program, proj)
    back = codec.decode_events(codec.encode_events(evs))
    assert [(e.id, e.source, e.t, e.lo, e.hi, e.attrs, e.loc) for e in back] == \
        [(e.id, e.source, e.t, e.lo, e.hi, e.attrs, e.loc) for e in evs]


def test_pickles_and_other_versions_are_refused():
    planted = pickle.dumps(RunState())
    with pytest.raises(codec.CodecError, match="not a spatec run state"):
        codec.decode_state(planted)
    good = codec.encode_state(RunState())
    with pytest.raises(codec.CodecError, match="format version 9"):
        codec.decode_state(good[:4] + bytes([9]) + good[5:])
    with pytest.raises(codec.CodecError, match="damaged"):
        codec.decode_state(good[:5] + b"\xc1")

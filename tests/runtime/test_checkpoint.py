"""Checkpoints are data: loading one cannot run code, another program's or another version's
is refused, and a directory other users can write is refused."""
from __future__ import annotations

import os
import pickle
from collections import Counter
from pathlib import Path

import pytest

from spatec.automata.machine import Ev, RunState
from spatec.plan.program import compile_program
from spatec.runtime.checkpoint import (
    STATE_FILE,
    Checkpoint,
    CheckpointError,
    LiveState,
    fingerprint,
)
from spatec.spatial import stamps as S

REPO = Path(__file__).resolve().parents[2]


class Boom:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_a_planted_pickle_is_refused_and_never_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ck = tmp_path / "ck"
    Checkpoint(ck)
    for name in (STATE_FILE, "state.pkl"):
        (ck / name).write_bytes(pickle.dumps(Boom()))
    with pytest.raises(CheckpointError, match="not a spatec checkpoint file"):
        Checkpoint(ck).load()
    assert not (tmp_path / "PWNED").exists()


def test_round_trip_of_state_segments_and_offsets(tmp_path):
    ev = Ev("Bus", "Bus:V1:t", "V1", 5, 0, 5, S.Loc.disc(1.0, 2.0, 15.0), {"vehicle": "V1", "n": 3})
    st = LiveState("fp", 7, "EPSG:32631", 10, 20)
    rs = RunState()
    rs.xbuf = {3: [ev]}
    rs.history = {("Bus", "V1"): [1, 5]}
    st.keys = {"P": {("V1",): rs}}
    st.bcast = {"P": [ev]}
    st.offsets = {"dir:x": {"b.csv", "a.csv"}, "http:y": {"seq": 4, "server": None}}
    st.seen = {"Bus:V1:t": 5}
    st.counts = Counter(read=3)
    ck = Checkpoint(tmp_path / "ck")
    ck.save(st)
    ck.save(st, dirty=[("P", ("V1",))], new_seen={"x": 1})
    back = Checkpoint(tmp_path / "ck").load()
    assert back.keys["P"][("V1",)].history == rs.history
    assert [e.id for e in back.keys["P"][("V1",)].xbuf[3]] == [ev.id]
    assert back.bcast["P"][0].loc == ev.loc and back.bcast["P"][0].attrs == ev.attrs
    assert back.offsets["dir:x"] == ["a.csv", "b.csv"] and back.offsets["http:y"] == {"seq": 4, "server": None}
    assert back.seen == {"Bus:V1:t": 5, "x": 1} and back.counts == Counter(read=3)
    assert len(back.segments) == 2 and back.saves == 2


def test_a_directory_others_can_write_is_refused(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    with pytest.raises(CheckpointError, match="can be written by other users"):
        Checkpoint(d)
    os.chmod(d, 0o755)
    Checkpoint(d)


def test_fingerprint_is_of_the_automata_data():
    a = compile_program(REPO / "examples" / "silent" / "silent.spatec")
    b = compile_program(REPO / "examples" / "silent" / "silent.spatec")
    assert fingerprint(a) == fingerprint(b)
    c = compile_program(REPO / "examples" / "stuck" / "stuck.spatec")
    assert fingerprint(a) != fingerprint(c)

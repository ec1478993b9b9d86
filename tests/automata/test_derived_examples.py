"""Phrases over phrases (SPEC §8) of the spec and of examples/ in the local runner, against the
oracle, on small hand-made traces whose answers are worked out by hand: stuck_together (runs,
then a phrase over them), examples/stuck_together (three levels: episodes, pairs, blockages) and
examples/headway (`successive` between calls with a source and a time of their own, decided by
the producer's frontier)."""
from __future__ import annotations

from pathlib import Path

from automata_support import both_all
from test_oracle_spec_examples import LAT0, LON0, M_LAT, M_LON, T0, US, fix, spec, stay  # noqa: F401

from spatec.plan.program import compile_program

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: examples/bus.spatec's station: circle(0.13610, 52.19300, 200 m), as metres from the origin
STATION = ((0.13610 - LON0) / M_LON, (52.19300 - LAT0) / M_LAT)


def runner_equals_oracle(path, rows) -> dict:
    """Phrase → its composites (id, lo, hi, bindings), after checking runner == oracle for each."""
    got = both_all(compile_program(path), rows)
    for name, (orc, sut) in got.items():
        assert sut == orc, name
    return {name: orc for name, (orc, _sut) in got.items()}


def test_spec_stuck_together(spec):
    rows = (stay("a", 0, 5, 0) + [fix("a", 100, 3000)]
            + stay("b", 10, 5, 10) + [fix("b", 110, -3000)]            # beside a, at the same time
            + stay("c", 0, 5, 1000) + [fix("c", 100, 5000)]            # same time, 1 km away
            + stay("d", 7200, 5, 0) + [fix("d", 7300, 3000)])          # same place, two hours later
    got = runner_equals_oracle(spec / "stuck_together.spatec", rows)
    assert len(got["StuckEpisode"]) == 4
    assert len(got["StuckTogether"]) == 1
    assert (got["StuckTogether"][0][1], got["StuckTogether"][0][2]) == (T0 - 30 * US, T0 + 90 * US)


def test_examples_stuck_together_three_levels():
    far = 2500.0                                   # 2.5 km east of the centre: no station near
    rows = (stay("a", 0, 5, far, line="1") + [fix("a", 100, 9000, line="1")]
            + stay("b", 10, 5, far + 10, line="2") + [fix("b", 110, -9000, line="2")]   # other line: a blockage
            + stay("c", 0, 5, 0, line="1") + [fix("c", 100, 9000, line="1")]
            + stay("d", 5, 5, 10, line="3") + [fix("d", 105, -9000, line="3")])        # at the centre: a queue
    got = runner_equals_oracle(EXAMPLES / "stuck_together" / "stuck_together.spatec", rows)
    assert len(got["StuckTogether"]) == 2
    assert len(got["Blockage"]) == 1
    (bid, _lo, _hi, binds), = got["Blockage"]
    assert [v for v, _ in binds] == ["T"]


def call(vehicle, start_s, n=3, line="U"):
    """``n`` fixes of a bus at the station, 20 s apart."""
    return [fix(vehicle, start_s + 20 * i, STATION[0], STATION[1], line=line) for i in range(n)]


def away(vehicle, t_s, line="U"):
    return fix(vehicle, t_s, 0.0, line=line)      # at the centre, 1.5 km from the station


def test_headway_successive_calls():
    """examples/headway: calls of a line and direction are events with that source and their
    arrival as time (`as event`); a headway is two successive ones by two buses."""
    path = EXAMPLES / "headway" / "headway.spatec"
    rows = (call("a", 0) + [away("a", 60)] + call("b", 600) + [away("b", 660)]
            + call("d", 900, line="V") + [away("d", 960, line="V")]
            + call("c", 1200) + [away("c", 1260)])
    got = runner_equals_oracle(path, rows)
    assert len(got["StationCall"]) == 4
    calls = {c[0] for c in got["StationCall"]}
    pairs = [(dict(b)["C1"], dict(b)["C2"]) for *_x, b in got["Headway"]]
    assert len(pairs) == 2                        # a then b, b then c; not a then c (b in between)
    assert all(i in calls for p in pairs for i in p)
    # bus e's call is open at the end of the data (no fix elsewhere, no five silent minutes):
    # StationCall's frontier stops at its lo (1,220 s), after c's arrival (1,200 s): no call
    # can still arrive between b and c, both headways are decided
    got = runner_equals_oracle(path, rows + call("e", 1250))
    assert len(got["StationCall"]) == 4 and len(got["Headway"]) == 2
    # an open call that began before c arrived may still arrive between b and c: b then c is
    # not decided (a then b is: b arrived before it)
    got = runner_equals_oracle(path, rows + call("e", 1190, n=4))
    assert len(got["StationCall"]) == 4 and len(got["Headway"]) == 1


def test_corpus_convoy_three_levels_with_an_absence_between():
    """lang/corpus derived_events: Stop (runs) → StoppedTogether → Convoy (an absence between
    derived events) and LongStop."""
    path = Path(__file__).resolve().parents[2] / "lang" / "corpus" / "valid" / "derived_events.spatec"

    def both_stop(t0, dx):
        # a and b stopped side by side for 3 min 20 s, then driving on (a fix 400 m further)
        return (stay("a", t0, 11, dx) + stay("b", t0 + 5, 11, dx + 5)
                + [fix("a", t0 + 240, dx + 400), fix("b", t0 + 245, dx - 400)])

    rows = both_stop(0, 3000) + both_stop(600, 6000) + both_stop(1200, 9000)
    got = runner_equals_oracle(path, rows)
    assert len(got["Stop"]) == 6
    assert len(got["StoppedTogether"]) == 3
    # first then second, second then third; not first then third (the second lies between)
    assert len(got["Convoy"]) == 2
    assert got["LongStop"] == []            # none at the centre

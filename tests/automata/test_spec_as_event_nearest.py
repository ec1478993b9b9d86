"""The two spec examples of SPEC §8's `as event` and §9's `at nearest`
(../shared/spec/examples/headway_at_stop.spatec, dwell_nearest_stop.spatec) on small hand-made
traces whose answers are worked out by hand: the brute-force oracle gives them, and the local
runner gives the oracle's composites.

- headway_at_stop: calls of one line and direction are ordered by their arrival, exactly, even
  when two calls overlap in time (the case of issue 32: a bus arriving while the one before
  it is still at the station is its successor, and the one before is not skipped).
- dwell_nearest_stop: a bus standing among several stops is one dwell, at the nearest stop;
  the dwell is measured between its first and last fix (`R.last.t - R.first.t`), not by
  `duration(R)`, which includes the 30 s read window of the first fix.
"""
from __future__ import annotations

from automata_support import both_all
from test_derived_examples import STATION
from test_oracle_spec_examples import T0, US, evaluate, fix, spec, stay  # noqa: F401

from spatec.plan.program import compile_program


def runner_equals_oracle(path, rows) -> dict:
    got = both_all(compile_program(path), rows)
    for name, (orc, sut) in got.items():
        assert sut == orc, name
    return {name: orc for name, (orc, _sut) in got.items()}


def call(vehicle, start_s, n=3, line="U", direction="INBOUND", every=20):
    """``n`` fixes of a bus at the station, ``every`` s apart."""
    return [fix(vehicle, start_s + every * i, STATION[0], STATION[1], line=line, direction=direction)
            for i in range(n)]


def away(vehicle, t_s, line="U", direction="INBOUND"):
    return fix(vehicle, t_s, 0.0, line=line, direction=direction)      # 1.5 km from the station


def headways(o) -> list:
    """(first, second, minutes) of each Headway, by the first's arrival."""
    out = [(e.attrs["first"], e.attrs["second"], round(e.attrs["minutes"], 4)) for e in o.derived("Headway")]
    return sorted(out, key=lambda h: (h[0], h[1]))


def test_headway_orders_overlapping_calls_by_arrival(spec):
    path = spec / "headway_at_stop.spatec"
    rows = (call("a", 0) + [away("a", 60)]
            # b arrives at 1000 s and stays to 1200 s; c arrives 11 s after b, while b is there:
            # the two calls overlap in time, and c is b's successor all the same
            + call("b", 1000, n=11) + [away("b", 1230)]
            + call("c", 1011, n=3) + [away("c", 1080)]
            # another direction and another line at the station in between: other sources
            + call("x", 500, direction="OUTBOUND") + [away("x", 560, direction="OUTBOUND")]
            + call("y", 1005, line="V") + [away("y", 1065, line="V")])
    o = evaluate(path, rows)
    calls = {e.attrs["vehicle"]: e for e in o.derived("StopCall")}
    assert set(calls) == {"a", "b", "c", "x", "y"}
    # each call is an event of its line and direction, at its first fix's time
    assert calls["b"].source == calls["c"].source == ("U", "INBOUND") != calls["x"].source
    assert calls["c"].t - calls["b"].t == 11 * US
    assert headways(o) == [("a", "b", round(1000 / 60, 4)), ("b", "c", round(11 / 60, 4))]
    got = runner_equals_oracle(path, rows)
    assert len(got["Headway"]) == 2 and len(got["StopCall"]) == 5


def test_headway_waits_for_a_call_still_open(spec):
    """A call open at the end of the data (no fix elsewhere, not five minutes silent) may
    still become a call arriving between two others: the headway after it is not decided
    (StopCall's frontier is that call's lo, SPEC §8)."""
    path = spec / "headway_at_stop.spatec"
    rows = call("a", 0) + [away("a", 60)] + call("b", 600) + [away("b", 660)] + call("c", 590, n=12)
    got = runner_equals_oracle(path, rows)
    assert len(got["StopCall"]) == 2            # c's call is open (its last fix is the data's last)
    # a then b: b arrived at 600 s, after the frontier (c's lo, 560 s): c may still arrive between
    assert got["Headway"] == []
    got = runner_equals_oracle(path, rows + [away("c", 850)])
    assert len(got["StopCall"]) == 3
    o = evaluate(path, rows + [away("c", 850)])
    assert headways(o) == [("a", "c", round(590 / 60, 4)), ("c", "b", round(10 / 60, 4))]


def test_dwell_is_one_row_at_the_nearest_stop(spec):
    path = spec / "dwell_nearest_stop.spatec"
    # the stops of the fixture: S1 at 0 m, S1b at 10 m, S2 at 1000 m, S3 at 2000 m (40 m discs)
    rows = (stay("a", 0, 13, 3) + [fix("a", 300, 3000)]         # 4 min between S1 and S1b: nearer S1
            + stay("b", 0, 13, 8) + [fix("b", 300, 3000)]       # nearer S1b
            + stay("c", 0, 13, 1000) + [fix("c", 300, 3000)]    # at S2 alone
            + stay("d", 0, 10, 2000) + [fix("d", 300, 3000)])   # 3 min from first to last fix: not more
    o = evaluate(path, rows)
    got = sorted((e.attrs["vehicle"], e.attrs["stop"]) for e in o.derived("Dwell"))
    assert got == [("a", "S1"), ("b", "S1b"), ("c", "S2")]
    runner = runner_equals_oracle(path, rows)
    assert len(runner["Dwell"]) == 3
    # every stop it lies inside, as dwell_at_stops (duration(R), 30 s more than the fixes span,
    # so d's three minutes count there)
    o = evaluate(spec / "dwell_at_stops.spatec", rows)
    got = sorted((e.attrs["vehicle"], e.attrs["stop"]) for e in o.derived("DwellAtStop"))
    assert got == [("a", "S1"), ("a", "S1b"), ("b", "S1"), ("b", "S1b"), ("c", "S2"), ("d", "S3")]


def test_nearest_ties_go_to_the_first_stop_in_the_file(spec):
    """Two stops at one point (a bus station's bays listed twice): as near as each other, the
    first in the file is bound, whichever order they come in."""
    from test_oracle_spec_examples import lonlat

    stops = spec.parent.parent / "datasets" / "cambridge" / "stops.csv"
    for first, second in (("Bay1", "Bay2"), ("Bay2", "Bay1")):
        lon, lat = lonlat(500)
        stops.write_text(f"stop_id,name,lat,lon\n{first},{first},{lat:.8f},{lon:.8f}\n"
                         f"{second},{second},{lat:.8f},{lon:.8f}\n", encoding="utf-8")
        rows = stay("t", 0, 13, 505) + [fix("t", 300, 3000)]
        o = evaluate(spec / "dwell_nearest_stop.spatec", rows)
        assert [e.attrs["stop"] for e in o.derived("Dwell")] == [first]
        runner = runner_equals_oracle(spec / "dwell_nearest_stop.spatec", rows)
        assert [dict(b)["S"] for *_x, b in runner["Dwell"]] == ["stops:1"]

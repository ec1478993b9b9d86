"""Phrases as event types (SPEC §8) in the front end: derived types, the flow graph,
cycles named phrase by phrase, and programs that include other programs' phrases."""
from __future__ import annotations

import pytest
from lang_support import SHARED, at, check_text, diagnostics, one

from spatec.frontend.check import check_file

STOP = """
phrase Stop per vehicle =
    run BusGPS -> R while overlap(R.first, R.this)
  where duration(R) > 1 min
  emit vehicle = R.vehicle, line = R.line, since = R.first.t, stopped = duration(R), n = count(R)
"""


class TestDerivedTypes:
    def test_emit_fields_are_the_attributes(self):
        program = check_text(STOP + """
phrase Pair =
    Stop -> S1 ||= Stop -> S2
  where S1.vehicle < S2.vehicle and S1.stopped > 2 min and S1.n + S2.n > 8 and S1.since < S2.since
  within 3 h
  emit first = S1.vehicle, total = S1.stopped + S2.stopped, lo_ = S1.lo, area = hull_area(S1, S2)
""")
        stop = program.event_types["Stop"]
        assert stop.derived and stop.phrase == "Stop" and stop.source is None and stop.has_place
        assert stop.attrs == {"vehicle": "str", "line": "str", "since": "time", "stopped": "duration", "n": "number"}
        assert stop.stamp_length is None  # a run may last any time
        pair = program.phrase("Pair")
        assert pair.vars == {"S1": "Stop", "S2": "Stop"} and pair.inputs == ("Stop",)
        assert pair.schema == [("first", "str"), ("total", "duration"), ("lo_", "time"), ("area", "area")]
        assert program.event_types["Pair"].stamp_length == 3 * 3600 * 1_000_000

    def test_stamp_length_of_a_producer_bounds_its_consumers(self):
        check_text("""
phrase Near =
    BusGPS -> A ||= BusGPS -> B
  where A.vehicle < B.vehicle

phrase NearTwice =
    Near -> X || Near -> Y
  where X.lo < Y.lo
""")  # Near's stamps are at most 60 s long (two concurrent 30 s stamps): `||` bounds NearTwice

    def test_order_is_producers_first(self):
        program = check_text(STOP.replace("phrase Stop", "phrase Later") + """
phrase First =
    Second -> S
  emit v = S.v

phrase Second =
    Stop -> X
  emit v = X.vehicle
""" + STOP)
        assert [p.name for p in program.phrases] == ["Later", "Stop", "Second", "First"]
        assert program.flow.inputs == {"Later": (), "Stop": (), "Second": ("Stop",), "First": ("Second",)}
        assert program.flow.consumers("Stop") == ("Second",)

    @pytest.mark.parametrize("body, message, token", [
        ("phrase P = Stop -> A ; Stop -> B\n  where successive(A, B)\n",
         "successive does not apply to Stop: a phrase's composites have no source", "successive(A, B)"),
        ("phrase P = run Stop -> R\n", "Stop is a phrase: its composites have no source, so they cannot form runs",
         "Stop"),
        ("phrase P = Stop -> A\n  emit x = A.route\n", "Stop has no attribute route", "route"),
        ("phrase P = Stop -> A\n  where A.stopped > 5\n", "unit mismatch: cannot compare a duration with a number",
         "A.stopped > 5"),
        ("phrase P = Stpo -> A\n", "unknown event type Stpo", "Stpo"),
    ])
    def test_errors(self, body, message, token):
        d = one(STOP + body)
        assert d.message == message
        assert at(d, token.split()[0], token)

    def test_a_phrase_may_not_take_an_event_types_name(self):
        d = one("phrase BusGPS = BusGPS -> A\n")
        assert d.message == "phrase BusGPS has the name of an event type"
        assert at(d, "phrase BusGPS", "BusGPS")


class TestCycles:
    def test_a_cycle_names_each_phrase_at_the_reference(self):
        ds = diagnostics("""
phrase A1 = A3 -> X ; BusGPS -> B
  within 1 h
phrase A2 = A1 -> X ||= BusGPS -> B
phrase A3 = A2 -> X and at centre
phrase Me = Me -> M
phrase Fine = BusGPS -> B
phrase Downstream = A3 -> D
  emit v = D.lo
""")
        assert [d.message for d in ds] == [
            "phrases A1, A3, A2 form a cycle: A1 → A3 → A2 → A1",
            "phrase Me matches its own composites (Me → Me)",
        ]
        assert at(ds[0], "phrase A1", "A3") and at(ds[1], "phrase Me", "Me", after="= ")

    def test_a_long_cycle_is_found_without_recursion(self):
        n = 1500
        body = "\n".join(f"phrase P{i} = P{(i + 1) % n} -> X\n  emit v = X.v" for i in range(n))
        ds = diagnostics(body)
        assert len(ds) == 1 and ds[0].message.startswith(f"phrases P0, P1, P2,")
        assert ds[0].message.endswith(f"P{n - 1} → P0")

    def test_a_long_chain_is_ordered(self):
        n = 1500
        body = "\n".join(f"phrase P{i} = P{i + 1} -> X\n  emit v = X.v" for i in range(n - 1))
        body += f"\nphrase P{n - 1} = BusGPS -> A\n  emit v = A.vehicle"
        program = check_text(body)
        assert [p.name for p in program.phrases] == [f"P{i}" for i in reversed(range(n))]
        assert program.event_types["P0"].attrs == {"v": "str"}


class TestIncludes:
    def test_phrases_of_an_included_program_are_event_types(self):
        path = SHARED / "spec" / "examples" / "stuck_together.spatec"
        if not path.is_file():
            pytest.skip("shared spec not available")
        program = check_file(path)
        assert [p.name for p in program.phrases] == ["StuckEpisode", "StuckTogether"]
        info = program.phrase("StuckTogether")
        assert info.inputs == ("StuckEpisode",) and info.constructs == {"phrases as event types"}
        assert program.event_types["StuckEpisode"].attrs == {
            "vehicle": "str", "line": "str", "since": "time", "until": "time", "fixes": "number"}

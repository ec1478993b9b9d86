"""Runs (SPEC §7) in the front end: syntax, where each run expression may stand, what
the checker hands the back end (RunInfo), and boundedness."""
from __future__ import annotations

import pytest
from lang_support import SHARED, at, check_text, diagnostics, one

from spatec.errors import UnsupportedError
from spatec.frontend import ast as A
from spatec.frontend.parse import parse_text
from spatec.frontend.printer import print_match
from spatec.frontend.runs import RunRef, run_ref
from spatec.frontend.schema import json_schema
from spatec.plan.program import compile_program

EPISODES = """
phrase Episode per vehicle =
    run (BusGPS and not at centre and weekday) -> R while overlap(R.first, R.this) gap 10 min
  where count(R) >= 4 and max(R.lon) - min(R.lon) < 0.01
  emit vehicle = R.vehicle, since = R.first.t, until = R.last.t, mean = avg(R.lat), n = count(R)
"""


class TestSyntax:
    def test_a_run_and_its_parts(self):
        run = parse_text("phrase P = run (BusGPS and not at centre and weekday) -> R "
                         "while overlap(R.first, R.this) gap 10 min").decls[0].match
        assert isinstance(run, A.Run)
        assert (run.type, run.var, run.gap) == ("BusGPS", "R", A.Quantity(10, "min"))
        assert run.filter == A.Binary("and", A.Not(A.AtPlace("centre")), A.DayPattern("weekday"))
        assert run.cond == A.Call("overlap", (A.Attr("R", "first"), A.Attr("R", "this")))

    def test_patterns_may_come_first(self):
        a = parse_text("phrase P = run (at centre and BusGPS) -> R").decls[0].match
        assert (a.type, a.filter) == ("BusGPS", A.AtPlace("centre"))
        assert print_match(a) == "run (BusGPS and at centre) -> R"

    def test_a_run_with_while_is_parenthesised_inside_a_larger_match(self):
        m = parse_text("phrase P = (run BusGPS -> R while overlap(R.first, R.this)) and at centre").decls[0].match
        assert print_match(m) == "(run BusGPS -> R while overlap(R.first, R.this)) and at centre"
        assert print_match(m.left) == "run BusGPS -> R while overlap(R.first, R.this)"

    def test_member_attributes(self):
        e = parse_text("phrase P = BusGPS -> A where R.first.t < R.last.t").decls[0].where
        assert e.left == A.Attr("R", "t", "first") and e.right == A.Attr("R", "t", "last")

    @pytest.mark.parametrize("inside, message", [
        ("BusGPS -> X and at centre", "bind the run after the parentheses"),
        ("BusGPS ; BusGPS", "a run is made of one event type"),
        ("at centre", "a run is made of one event type"),
    ])
    def test_what_a_run_is_made_of(self, inside, message):
        d = one(f"phrase P = run ({inside}) -> R\n")
        assert message in d.message


class TestWhereRunExpressionsStand:
    """The table in spatec/frontend/check_phrase.py."""

    @pytest.mark.parametrize("cond", [
        "overlap(R.first, R.this)", "distance(R.prev, R.this) < 100 m", "R.this.t - R.prev.t < 2 min",
        "R.line == R.this.line", "before(R.first, R.this) and R.first.hi < R.this.lo",
    ])
    def test_allowed_in_while(self, cond):
        check_text(f"phrase P per vehicle = run BusGPS -> R while {cond}\n")

    @pytest.mark.parametrize("cond, message, token", [
        ("R.last.lon > 0", "R.last is not known while the run grows", "last"),
        ("count(R) < 5", "count describes the whole run", "count"),
        ("max(R.lon) < 5", "max describes the whole run", "max"),
        ("overlap(R, R.this)", "in `while`, the run R is not complete", "R"),
        ("R.hi > R.this.lo", "R.hi is the whole run's", "hi"),
        ("overlap(R.first, A)", "may use only R.first, R.prev and R.this, not A", "A"),
    ])
    def test_refused_in_while(self, cond, message, token):
        d = diagnostics(f"phrase P per vehicle = (run BusGPS -> R while {cond}) ; BusGPS -> A\n  within 1 h\n")[0]
        assert message in d.message
        assert at(d, "while", token, after="while ")

    @pytest.mark.parametrize("expr", [
        "count(R) > 3", "duration(R) > 3 min", "hull_area(R) < 100 m * 100 m", "max(R.lon) - min(R.lon) > 0",
        "avg(R.lat) > 52", "R.vehicle == \"1\"", "R.first.t < R.last.t", "R.hi - R.lo > 1 min",
        "overlap(R, R.first)", "distance(R.first, R.last) < 10 m", "speed(R.first, R.last) < 3 km/h",
    ])
    def test_allowed_in_where(self, expr):
        info = check_text(f"phrase P per vehicle = run BusGPS -> R\n  where {expr}\n").phrase("P")
        assert info.types[info.phrase.where] == "bool"

    @pytest.mark.parametrize("expr, message, token", [
        ("R.prev.lon > 0", "R.prev exists only in the run's `while` condition", "prev"),
        ("R.this.lon > 0", "R.this exists only in the run's `while` condition", "this"),
        ("R.t > 2019-10-01T09:00", "a run has no single local time", "t"),
        ("speed(R, R.last) > 3 km/h", "R is a run, not an event: speed needs events", "R"),
        ("max(R.line) == \"x\"", "max needs a numeric attribute: R.line is a string", "line"),
        ("max(R.ts) > 2019-10-01T09:00", "max needs a numeric attribute: R.ts is a time", "ts"),
        ("max(R.first) > 0", "max takes an attribute of the run's events", "first"),
        ("R.middle.t > 2019-10-01T09:00", "a run has no member middle", "middle"),
        ("R.first.route == \"\"", "R.first has no attribute route", "route"),
    ])
    def test_refused_in_where(self, expr, message, token):
        d = one(f"phrase P per vehicle = run BusGPS -> R\n  where {expr}\n")
        assert message in d.message
        assert at(d, "where", token, after="where ")

    def test_a_run_variable_where_an_event_is_needed(self):
        d = one("phrase P per vehicle = (run BusGPS -> R) ; BusGPS -> B\n  where successive(R, B)\n")
        assert d.message == "R is a run, not an event: successive needs events"
        assert d.hint == "use R.first or R.last"

    def test_count_of_an_event(self):
        d = one("phrase P = BusGPS -> A\n  emit n = count(A)\n")
        assert d.message == "count counts the events of a run: A is not a run variable"

    def test_a_run_needs_a_source(self, tmp_path):
        d = one("event Gauge(mm: float, at_: time)\n    time at_\n\nphrase P = run Gauge -> G\n")
        assert d.message == "a run needs an event type with a `source`; Gauge has none"


class TestWhatTheBackEndGets:
    def test_run_info(self):
        info = check_text(EPISODES).phrase("Episode")
        r = info.runs["R"]
        assert (r.var, r.type, r.source, r.gap) == ("R", "BusGPS", "vehicle", 600_000_000)
        assert r.filter == A.Binary("and", A.Not(A.AtPlace("centre")), A.DayPattern("weekday"))
        assert set(r.aggregates) == {("max", "lon"), ("min", "lon"), ("avg", "lat")}
        assert info.vars == {"R": "BusGPS"} and not info.waits_for_sources
        assert info.constructs == {"runs"}
        assert info.span_bound is None  # a run may last any time
        assert info.schema == [("vehicle", "str"), ("since", "time"), ("until", "time"), ("mean", "number"),
                               ("n", "number")]

    def test_without_gap_a_run_waits_for_its_source(self):
        assert check_text("phrase P = run BusGPS -> R\n").phrase("P").waits_for_sources

    def test_run_refs_resolve_every_run_expression(self):
        info = check_text(EPISODES).phrase("Episode")
        refs = {f.name: run_ref(f.expr, info.runs) for f in info.phrase.emit}
        assert refs == {"vehicle": RunRef("R", "attr", "first", "vehicle"), "since": RunRef("R", "attr", "first", "t"),
                        "until": RunRef("R", "attr", "last", "t"), "mean": RunRef("R", "aggregate", "avg", "lat"),
                        "n": RunRef("R", "count")}

    def test_schema_names_the_first_event_of_the_run(self):
        program = check_text(EPISODES)
        events = json_schema(program, program.phrase("Episode"))["properties"]["events"]
        assert events["properties"]["R"]["description"] == "id of the first BusGPS event of run R"

    def test_runs_and_phrases_over_phrases_are_planned_in_every_mode(self, tmp_path, monkeypatch):
        """Runs have a back end in every mode (a run leaf in the plan); so does a phrase over a
        phrase's composites (batch and local live; the Spark runners refuse it by runner:
        tests/runners/test_derived_refused.py); a construct without a back end in a mode would
        be refused in that mode, naming the construct and the phrase."""
        bus = SHARED / "spec" / "examples" / "bus.spatec"
        if not bus.is_file():
            pytest.skip("shared spec not available")
        p = tmp_path / "episodes.spatec"
        p.write_text(bus.read_text() + EPISODES, encoding="utf-8")
        for mode in ("batch", "live"):
            (leaf,) = compile_program(p, mode=mode).plan("Episode").leaves
            assert (leaf.var, leaf.run.source, leaf.run.gap) == ("R", "vehicle", 600_000_000)
        p.write_text(bus.read_text() + EPISODES + "phrase Long =\n    Episode -> E\n  where E.n > 10\n",
                     encoding="utf-8")
        for mode in ("batch", "live"):
            assert compile_program(p, mode=mode).plan("Long").physical.derived == ("Episode",)
        from spatec.plan import support

        monkeypatch.setattr(support, "NOT_YET_IN", {"live": ("phrases as event types",)})
        with pytest.raises(UnsupportedError) as e:
            compile_program(p, mode="live")
        assert (e.value.what, e.value.mode) == ("phrases as event types", "live")
        assert "phrase Long" in str(e.value)
        monkeypatch.setattr(support, "NOT_YET", ("runs",))    # the refusal, were runs not built
        with pytest.raises(UnsupportedError) as e:
            compile_program(p)
        assert (e.value.what, e.value.mode) == ("runs", "batch")
        assert "phrase Episode" in str(e.value)


class TestBounds:
    def test_a_run_alone_is_bounded(self):
        check_text("phrase P = run BusGPS -> R while overlap(R.first, R.this)\n")

    def test_a_run_joined_to_a_later_event_needs_a_bound(self):
        d = one("phrase P per vehicle = (run BusGPS -> R) ; BusGPS -> B\n")
        assert "phrase P is unbounded" in d.message
        check_text("phrase P per vehicle = (run BusGPS -> R) ; BusGPS -> B\n  where successive(R.last, B)\n")
        check_text("phrase P per vehicle = (run BusGPS -> R) ; BusGPS -> B\n  within 1 h\n")

    def test_runs_have_stamps_of_unbounded_length(self):
        d = one("phrase P = (run BusGPS -> R) || BusGPS -> B\n")
        assert "time stamps of unbounded length" in d.message

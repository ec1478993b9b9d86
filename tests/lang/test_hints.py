"""Errors point at the offending token itself, with a hint that says what to write."""
from __future__ import annotations

import pytest
from lang_support import at, diagnostics, one

from spatec.errors import ParseError
from spatec.frontend.parse import parse_text


def syntax(text: str):
    with pytest.raises(ParseError) as e:
        parse_text(text, "x.spatec")
    return e.value.diagnostics[0]


class TestKeywordSlips:
    @pytest.mark.parametrize("text, slip, keyword", [
        ("phrase P = BusGPS -> A ; BusGPS -> B\n  withn 90 min", "withn", "within"),
        ("phrase P = BusGPS -> A ; BusGPS -> B\n  wher A.x > 1", "wher", "where"),
        ("phrase P = BusGPS -> A ; BusGPS -> B\n  within 1 h\n  emitt x = A.x", "emitt", "emit"),
        ("phrase P = BusGPS -> A andd at centre", "andd", "and"),
        ("phrase P = run BusGPS -> R whille overlap(R.first, R.this)", "whille", "while"),
    ])
    def test_did_you_mean(self, text, slip, keyword):
        d = syntax(text)
        assert d.hint == f"did you mean `{keyword}`?"
        assert at(d, slip, slip)

    def test_no_hint_for_an_unrelated_name(self):
        d = syntax("phrase P = BusGPS -> A ; BusGPS -> B\n  zebra 90 min")
        assert d.hint is None or "did you mean" not in d.hint


class TestPatternsInConditions:
    def test_where_not_at(self):
        d = syntax("phrase P = BusGPS -> A ; BusGPS -> B\n  where A.x > 1 and not (at centre)")
        assert d.message == "`at centre` is a pattern: patterns cannot stand in a condition"
        assert d.hint.startswith("patterns belong in the match: `BusGPS -> A and not at centre`")
        assert at(d, "where", "at", after="(")

    def test_a_runs_while_runs_on(self):
        d = syntax("phrase P = run BusGPS -> R while overlap(R.first, R.this) and certainly at stops -> S")
        assert d.message == "`certainly at` is a pattern: patterns cannot stand in a condition"
        assert "put the run in parentheses" in d.hint

    def test_a_day_in_where(self):
        d = one("phrase P = BusGPS -> A\n  where A.lon > 0 and Tuesday\n")
        assert d.message == "variable Tuesday is used but never bound"
        assert d.hint == "patterns (`Tuesday`, `at P`, ...) belong in the match: `BusGPS -> A and Tuesday`"


class TestTheOffendingToken:
    @pytest.mark.parametrize("body, token, after", [
        ("phrase P = BusGSP -> A\n", "BusGSP", ""),
        ("phrase P = BusGPS -> A and at hospitl\n", "hospitl", ""),
        ("phrase P = BusGPS -> A\n  where A.route == \"U\"\n", "route", ""),
        ("phrase P = BusGPS -> A\n  where C.line == \"U\"\n", "C", "where "),
        ("phrase P = BusGPS -> A\n  where distnce(A, A) < 5 m\n", "distnce", ""),
        ("phrase P = BusGPS -> A and within 50 m of airport\n", "airport", ""),
    ])
    def test_points_at_the_name(self, body, token, after):
        assert at(one(body), token, token, after=after)

    def test_the_include_string(self, tmp_path):
        d = diagnostics('include "nope.spatec"\n', tmp_path)[0]
        assert d.message.startswith('cannot include "nope.spatec": no such file')
        assert at(d, "include", '"nope.spatec"')

"""Times in, times out, event ids: spatec.events.timefmt."""
from __future__ import annotations

import datetime as dt
import doctest
import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spatec.events import timefmt
from spatec.events.timefmt import (
    MAX_US,
    MIN_US,
    event_id,
    format_time,
    format_times,
    parse_time,
    parse_times,
)

LONDON = "Europe/London"


def test_doctests():
    assert doctest.testmod(timefmt).failed == 0


class TestFormat:
    def test_whole_seconds_have_no_fraction(self):
        assert format_time(1569916778_000000) == "2019-10-01T07:59:38Z"

    def test_fraction_is_always_six_digits(self):
        assert format_time(1569916778_500000) == "2019-10-01T07:59:38.500000Z"
        assert format_time(1569916778_000001) == "2019-10-01T07:59:38.000001Z"

    def test_before_the_epoch(self):
        assert format_time(-1) == "1969-12-31T23:59:59.999999Z"
        assert format_time(MIN_US) == "0001-01-01T00:00:00Z"

    def test_vectorised_missing_is_none(self):
        assert format_times(np.array([0.0, np.nan])).tolist() == ["1970-01-01T00:00:00Z", None]

    @given(st.integers(MIN_US, MAX_US))
    @settings(max_examples=300)
    def test_matches_python_datetime(self, us):
        d = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=us)
        want = f"{d.year:04d}-{d:%m-%dT%H:%M:%S}" + (f".{d.microsecond:06d}" if d.microsecond else "") + "Z"
        assert format_time(us) == want
        assert parse_time(want) == us

    @given(st.lists(st.integers(MIN_US, MAX_US), min_size=1, max_size=40))
    @settings(max_examples=300)
    def test_small_int64_arrays_are_formatted_as_one_by_one(self, xs):
        # a few int64 times are formatted by numpy, anything else through Arrow: the same text
        got = format_times(np.array(xs, dtype=np.int64))
        assert got.dtype == object and got.tolist() == [format_time(x) for x in xs]

    @given(st.lists(st.integers(MIN_US, MAX_US), min_size=1, max_size=30), st.integers(4096, 9000),
           st.integers(0, 2**32))
    @settings(max_examples=40, deadline=None)
    def test_repeated_times_formatted_once_each_agree(self, xs, n, seed):
        # a long array of few distinct times: those are formatted, then taken (ids too)
        us = np.random.default_rng(seed).choice(np.array(xs, dtype=np.int64), n)
        want = [format_time(x) for x in xs]
        want = [want[xs.index(x)] for x in us.tolist()]
        assert format_times(us).tolist() == want
        ids = event_id("T", np.array(["a"] * n, dtype=object), us)
        assert ids.tolist() == [f"T:a:{w}" for w in want]


class TestParse:
    def test_epoch_seconds_in_any_form(self):
        assert parse_time(1569916778) == parse_time("1569916778") == parse_time(" 1569916778.0 ") \
            == 1569916778_000000
        assert parse_time(1569916801.703) == parse_time("1569916801.703") == 1569916801_703000

    def test_iso_with_offset_ignores_program_zone(self):
        for tz in ("UTC", LONDON, "America/New_York"):
            assert parse_time("2019-10-01T08:59:38+01:00", tz) == 1569916778_000000
            assert parse_time("2019-10-01T07:59:38Z", tz) == 1569916778_000000

    def test_naive_iso_is_program_local_bst_and_gmt(self):
        # 1 October: BST (UTC+1); 1 December: GMT (UTC+0)
        assert format_time(parse_time("2019-10-01T08:59:38", LONDON)) == "2019-10-01T07:59:38Z"
        assert format_time(parse_time("2019-12-01T08:59:38", LONDON)) == "2019-12-01T08:59:38Z"
        assert format_time(parse_time("2019-10-01T08:59:38")) == "2019-10-01T08:59:38Z"   # default UTC

    def test_transitions_take_fold_0(self):
        # 01:30 happens twice on 2019-10-27: the first (BST) is taken
        assert format_time(parse_time("2019-10-27T01:30:00", LONDON)) == "2019-10-27T00:30:00Z"
        # 01:30 never happens on 2019-03-31: read with the offset before the gap (GMT)
        assert format_time(parse_time("2019-03-31T01:30:00", LONDON)) == "2019-03-31T01:30:00Z"

    def test_fractional_and_space_separated(self):
        assert parse_time("2019-10-01 07:59:38.25Z") == 1569916778_250000
        assert parse_time("2019-10-01T07:59:38.1234567Z") == 1569916778_123456  # truncated to µs

    def test_outside_pandas_range(self):
        assert format_time(parse_time("3000-01-01T00:00:00Z")) == "3000-01-01T00:00:00Z"
        assert format_time(parse_time("1500-06-01T00:00:00", LONDON)) == "1500-06-01T00:01:15Z"  # LMT

    def test_datetimes(self):
        assert parse_time(dt.datetime(2019, 10, 1, 8, 59, 38), LONDON) == 1569916778_000000
        aware = dt.datetime(2019, 10, 1, 7, 59, 38, tzinfo=dt.timezone.utc)
        assert parse_time(aware, LONDON) == 1569916778_000000

    @pytest.mark.parametrize("bad", ["2019-13-45", "yesterday", "nan", "1e30", True])
    def test_bad_values_say_so(self, bad):
        with pytest.raises(ValueError, match="cannot parse .* as a time"):
            parse_time(bad)

    def test_vectorised_reasons_per_row(self):
        p = parse_times(["1569916778", "", "2019-13-45", None, "2019-10-01T08:59:38+01:00"], LONDON)
        assert p.missing.tolist() == [False, True, False, True, False]
        assert p.errors == {2: 'cannot parse "2019-13-45" as a time'}
        assert p.values[[0, 4]].tolist() == [1569916778_000000] * 2


# Each element alone through the per-row path must give what the vectorised path gives.
_iso = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1))
_value = st.one_of(
    st.integers(-2_000_000_000, 5_000_000_000),
    st.floats(-2e9, 5e9, allow_nan=False).map(lambda x: round(x, 3)),
    st.integers(0, 5_000_000_000).map(str),
    _iso.map(lambda d: d.isoformat()),
    _iso.map(lambda d: d.isoformat(sep=" ", timespec="milliseconds")),
    st.tuples(_iso, st.integers(-14, 14)).map(lambda p: p[0].isoformat() + f"{p[1]:+03d}:00"),
    _iso.map(lambda d: d.isoformat() + "Z"),
    st.text(max_size=12),
)


@given(st.lists(_value, min_size=1, max_size=30), st.sampled_from(["UTC", LONDON, "Australia/Lord_Howe"]))
@settings(max_examples=150, deadline=None)
def test_vectorised_equals_per_value(values, tz):
    p = parse_times(values, tz)
    for i, v in enumerate(values):
        try:
            one = parse_time(v, tz)
        except ValueError as e:
            assert p.missing[i] or p.errors[i] == str(e)
        else:
            assert not p.missing[i] and i not in p.errors and p.values[i] == one


class TestEventId:
    def test_with_source(self):
        assert event_id("BusGPS", "WP-101", 1569916778_000000) == "BusGPS:WP-101:2019-10-01T07:59:38Z"
        assert event_id("BusGPS", "WP-101", 1569916778_000500) == "BusGPS:WP-101:2019-10-01T07:59:38.000500Z"

    def test_vectorised_equals_scalar(self):
        ts = np.array([1569916778_000000, 1569916778_000500])
        assert event_id("B", np.array(["a", "b"], dtype=object), ts).tolist() == \
            [event_id("B", "a", ts[0]), event_id("B", "b", ts[1])]

    def test_without_source_hashes_canonical_json(self):
        rec = {"mm_h": 1.5, "cell": "c1", "start": "2019-10-01T07:00:00Z"}
        text = '{"cell":"c1","mm_h":1.5,"start":"2019-10-01T07:00:00Z"}'
        assert event_id("Cell", record=rec) == "Cell:#" + hashlib.sha256(text.encode()).hexdigest()[:16]
        assert event_id("Cell", record=dict(reversed(list(rec.items())))) == event_id("Cell", record=rec)
        assert event_id("Cell", record={**rec, "mm_h": 1.25}) != event_id("Cell", record=rec)

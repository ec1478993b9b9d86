"""A zone's UTC offsets from its offsets per hour (spatec.events.zoneoffsets) against the
definition, zoneinfo asked per instant, and the wall-clock texts built from them against
pandas' time zone conversion (what format_times_in did before), across DST transitions."""
import datetime as dt
import doctest
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest
import pytz
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatec.events import timefmt, zoneoffsets
from spatec.events.timefmt import format_times, format_times_in, time_texts, zone_offsets, zone_offsets_pandas
from spatec.events.zoneoffsets import utc_offsets

US = 1_000_000
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
ZONES = ["Europe/London", "America/New_York", "Australia/Lord_Howe", "UTC", "Etc/GMT+5", "Etc/GMT-14",
         "Asia/Kolkata", "America/St_Johns", "Pacific/Apia", "Europe/Dublin"]


def _instant(s: str) -> int:
    return int(dt.datetime.fromisoformat(s).timestamp()) * US


# transitions (UTC): London and New York 2019, Lord Howe's half-hour DST (+10:30 <-> +11:00),
# Apia skipping 2011-12-30, Dublin's negative DST, St John's -03:30/-02:30
EDGES = [_instant(s) for s in [
    "2019-03-31T01:00:00+00:00", "2019-10-27T01:00:00+00:00", "2019-03-10T07:00:00+00:00",
    "2019-11-03T06:00:00+00:00", "2019-04-06T15:00:00+00:00", "2019-10-05T15:30:00+00:00",
    "2011-12-30T10:00:00+00:00", "2019-03-10T05:30:00+00:00", "2019-11-03T03:30:00+00:00",
    "1916-05-21T02:00:00+00:00", "1847-12-01T00:01:15+00:00"]]


def _reference(us: int, tz: str) -> int:
    """The definition: zoneinfo's offset at the instant, asked on its own."""
    off = (EPOCH + dt.timedelta(microseconds=int(us))).astimezone(ZoneInfo(tz)).utcoffset()
    return off // dt.timedelta(microseconds=1)


def _pandas_texts(us: list, tz: str) -> list:
    """format_times_in as it was: offsets by pandas' conversion, per instant."""
    arr = pd.array(us, dtype="Int64")
    valid = ~np.asarray(arr.isna())
    ints = np.asarray(arr.fillna(0), dtype=np.int64)
    out = [None] * len(us)
    if valid.any():
        offset = zone_offsets_pandas(ints[valid], tz)
        text = format_times(ints[valid] + offset)
        for k, i in enumerate(np.flatnonzero(valid)):
            o = int(offset[k]) // US
            sign = "-" if o < 0 else "+"
            out[i] = text[k][:-1] + f"{sign}{abs(o) // 3600:02d}:{abs(o) % 3600 // 60:02d}"
    return out


_near_edge = st.tuples(st.sampled_from(EDGES), st.integers(-3 * 3600 * US, 3 * 3600 * US)).map(sum)
_anywhere = st.integers(zoneoffsets.LOW_S * US, zoneoffsets.HIGH_S * US - 1)
_times = _near_edge | _anywhere | st.sampled_from(EDGES) | st.sampled_from(EDGES).map(lambda t: t - 1)


def test_doctests():
    assert doctest.testmod(zoneoffsets).failed == 0


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_times, min_size=1, max_size=60), st.sampled_from(ZONES))
def test_offsets_are_zoneinfos_at_each_instant(us, tz):
    got = utc_offsets(np.array(us, dtype=np.int64), tz)
    assert got.tolist() == [_reference(u, tz) for u in us]
    # asked again (hours remembered) the same
    assert utc_offsets(np.array(us, dtype=np.int64), tz).tolist() == got.tolist()


def test_every_second_around_transitions(monkeypatch):
    """Each second from 2 h before to 2 h after each transition, in each zone, with the
    hours remembered and with none remembered (a tiny cache, cleared all the time)."""
    for kept in (zoneoffsets.KEPT, 1):
        monkeypatch.setattr(zoneoffsets, "KEPT", kept)
        zoneoffsets._hours.cache_clear()
        for tz in ZONES:
            for edge in EDGES:
                us = edge + np.arange(-7200, 7200, dtype=np.int64) * US + 999_999 * (edge % 2)
                want = zone_offsets_pandas(us, tz)
                assert (utc_offsets(us, tz) == want).all(), (tz, edge)


def test_outside_1800_to_2200_falls_back_to_pandas():
    far = np.array([-10_000_000_000 * US, 0, 8_000_000_000 * US], dtype=np.int64)
    assert utc_offsets(far, "Europe/London") is None
    assert zone_offsets(far, "Europe/London").tolist() == zone_offsets_pandas(far, "Europe/London").tolist()
    assert utc_offsets(np.zeros(0, np.int64), "Europe/London").tolist() == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_times | st.none(), min_size=0, max_size=40), st.sampled_from(ZONES),
       st.sampled_from(["list", "Int64", "int64"]))
def test_wall_clock_texts_are_pandas_conversions(us, tz, kind):
    """format_times_in (and time_texts, its Arrow form) give the texts the pandas
    conversion gave, for lists, nullable and int64 columns, missing times as None."""
    if kind == "int64":
        us = [u for u in us if u is not None]
        values = pd.Series(us, dtype="int64")
    else:
        values = pd.Series(us, dtype="Int64") if kind == "Int64" else us
    want = _pandas_texts(us, tz)
    assert format_times_in(values, tz).tolist() == want
    utc = [None if u is None else timefmt.format_time(u) for u in us]
    assert format_times(values, tz).tolist() == (want if tz != "UTC" else utc)
    assert time_texts(values, tz).to_pylist() == (want if tz != "UTC" else utc)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(timefmt.MIN_US, timefmt.MAX_US) | st.none(), min_size=0, max_size=600),
       st.sampled_from(["series", "ndarray"]))
def test_utc_texts_are_format_times(us, kind):
    """time_texts without a zone: format_times's texts as Arrow, nulls where missing."""
    if kind == "ndarray":
        values = np.array([u for u in us if u is not None], dtype=np.int64)
    else:
        values = pd.Series(us, dtype="Int64" if None in us else "int64")
    assert time_texts(values).to_pylist() == [None if v is None else v for v in format_times(values).tolist()]


def test_many_repeated_times_and_a_long_array():
    rng = np.random.default_rng(7)
    us = np.sort(EDGES[1] + rng.integers(-86400, 86400, 20_000) * US)
    assert format_times_in(us, "Europe/London").tolist() == _pandas_texts(us.tolist(), "Europe/London")
    assert time_texts(np.repeat(us[:100], 50)).to_pylist() == format_times(np.repeat(us[:100], 50)).tolist()


def test_no_zone_changes_and_changes_back_within_an_hour():
    """What utc_offsets assumes, checked on the tz database's transition tables as pytz
    has them: no two transitions of a zone under an hour apart where the offset changes
    and comes back."""
    short = []
    for name in pytz.all_timezones:
        zone = pytz.timezone(name)
        times = getattr(zone, "_utc_transition_times", None)
        infos = getattr(zone, "_transition_info", None)
        if not times or not infos:
            continue
        offsets = [info[0] for info in infos]
        for i in range(1, len(times) - 1):
            if offsets[i] != offsets[i - 1] and offsets[i + 1] != offsets[i] \
                    and offsets[i + 1] == offsets[i - 1] and times[i + 1] - times[i] < dt.timedelta(hours=1):
                short.append((name, times[i]))
    assert not short

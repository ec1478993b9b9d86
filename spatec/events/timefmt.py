"""Times at the edges of spatec, and event ids.

Inside spatec a time is an ``int``: microseconds since the Unix epoch, UTC.
Input times become that here (:func:`parse_times`, :func:`parse_time`);
output times leave as ISO 8601 UTC text (:func:`format_time`):
``2019-10-01T07:59:38Z``, or ``2019-10-01T07:59:38.500000Z`` when there are
fractional seconds (always six digits then).

Accepted input:

- epoch seconds: ints, floats, or text in the number grammar of
  :mod:`spatec.events.raw` (``1569916778``, ``"1569916801.703"``); a number is
  always epoch seconds, even ``"20191001"``. A number must be positive: 0 and
  negative numbers (``-1``) are what feeds write for a time they do not have,
  so they are not read as 1970 or earlier (:data:`NO_EPOCH`); a time before
  1970 can still be written as ISO text or a timestamp;
- ISO 8601 text, with or without an offset, ``Z`` accepted, fractional
  seconds accepted (beyond microseconds they are truncated);
- timestamps (Parquet, pandas, ``datetime``), with or without a zone.

A time without an offset is wall-clock time in the program's time zone (an
IANA name, default ``"UTC"``). At a daylight-saving transition a wall-clock
time may occur twice or never; spatec takes ``fold=0`` as :mod:`zoneinfo`
defines it: the first of two occurrences (e.g. 01:30 on 2019-10-27 in
Europe/London is 01:30 BST = 00:30Z), and for a time in the gap the offset in
force before the gap (01:30 on 2019-03-31 is read with GMT: 01:30Z).

>>> format_time(1569916778_000000)
'2019-10-01T07:59:38Z'
>>> parse_time("2019-10-01T08:59:38+01:00") == parse_time(1569916778)
True
>>> event_id("BusGPS", "WP-101", 1569916778_000000)
'BusGPS:WP-101:2019-10-01T07:59:38Z'
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spatec.errors import DataError
from spatec.events.raw import (
    FLOAT_PATTERN,
    FLOAT_RE,
    INT_PATTERN,
    INT_RE,
    blank,
    cast_numbers,
    matches,
    show,
    to_arrow,
    trimmed,
)
from spatec.events.zoneoffsets import utc_offsets

US = 1_000_000
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
# Times spatec can write back as ISO text: years 0001 to 9999.
MIN_US = -62_135_596_800 * US
MAX_US = 253_402_300_799 * US + (US - 1)
#: Why an epoch number at or below 0 is no time.
NO_EPOCH = "is no time: epoch seconds must be positive (0 and -1 stand for a missing time)"
# ISO text that carries its own offset: a time part, then Z or ±hh[[:]mm].
_OFFSET_PATTERN = r"[T ][0-9].*(?:Z|z|[+-][0-9]{2}(?::?[0-9]{2})?)$"


# --------------------------------------------------------------------------- formatting

def format_times(us: Any, tz: str | None = None) -> np.ndarray:
    """ISO 8601 UTC text for each time (µs); None where a time is missing. With ``tz``
    (an IANA name other than ``UTC``) the wall-clock time there, with its offset
    (:func:`format_times_in`).

    >>> format_times([0, 1_500_000, None]).tolist()
    ['1970-01-01T00:00:00Z', '1970-01-01T00:00:01.500000Z', None]
    >>> format_times([1569916778_000000], "Europe/London").tolist()
    ['2019-10-01T08:59:38+01:00']
    """
    if tz is not None and tz != "UTC":
        return format_times_in(us, tz)
    if isinstance(us, np.ndarray) and us.dtype == np.int64:
        if len(us) <= _SMALL and (not len(us) or (us.min() >= MIN_US and us.max() <= MAX_US)):
            return _format_numpy(us)
        if len(us) >= _REPEATED:
            codes, uniques = pd.factorize(us)
            if len(uniques) * 4 <= len(us):
                return format_times(uniques)[codes]
    return _format_arrow(us).to_numpy(zero_copy_only=False)


def time_texts(us: Any, tz: str | None = None, distinct: bool = False) -> pa.Array:
    """:func:`format_times` as an Arrow string array (null where a time is missing), the
    same texts: for a writer that joins text in Arrow (no Python string per time).
    ``distinct``: the times are known to differ (a column's distinct times): not looked
    for repeated ones."""
    if isinstance(us, pd.Series) and us.dtype == np.int64:
        us = us.to_numpy()      # (the texts are the same; int64 gets the shortcut for repeated times)
        if tz is None or tz == "UTC":
            return _format_arrow(us, repeated=not distinct)
    if tz is not None and tz != "UTC":
        return _format_in_arrow(us, tz)
    if isinstance(us, np.ndarray) and us.dtype == np.int64 and len(us) <= _SMALL \
            and (not len(us) or (us.min() >= MIN_US and us.max() <= MAX_US)):
        return pa.array(_format_numpy(us), pa.string())
    return _format_arrow(us)


def _format_arrow(us: Any, repeated: bool = True) -> pa.Array:
    """:func:`format_times` as an Arrow string array (what :func:`event_id` joins). Many
    records share a time (a feed's vehicles report on the same seconds): a long array
    of int64 with few distinct times has those formatted, then taken (unless not
    ``repeated``: the times are known to differ)."""
    if isinstance(us, np.ndarray) and us.dtype == np.int64:
        if repeated and len(us) >= _REPEATED:
            codes, uniques = pd.factorize(us)
            if len(uniques) * 4 <= len(us):
                return _format_arrow(uniques).take(pa.array(codes))
        arr = pa.array(us)
    else:
        arr = pa.array(pd.array(us if not isinstance(us, pa.Array) else us.to_pandas(), dtype="Int64"), pa.int64())
    valid = ~pc.is_null(arr).to_numpy(zero_copy_only=False)
    ints = arr.fill_null(0).to_numpy()
    secs = np.floor_divide(ints, US)
    frac = ints - secs * US
    # "YYYY-MM-DD hh:mm:ss" from Arrow's cast, then the T, then Z or .ffffffZ
    text = pc.utf8_replace_slice(pc.cast(pa.array(secs, mask=~valid).cast(pa.timestamp("s")), pa.string()),
                                 10, 11, "T")
    fractional = (frac != 0) & valid
    if fractional.any():
        digits = pc.utf8_lpad(pc.cast(pa.array(frac[fractional]), pa.string()), 6, "0")
        suffix = np.empty(len(ints), dtype=object)
        suffix[:] = "Z"
        suffix[fractional] = pc.binary_join_element_wise(".", digits, "Z", "").to_numpy(zero_copy_only=False)
        text = pc.binary_join_element_wise(text, pa.array(suffix, pa.string()), "")
    else:
        text = pc.binary_join_element_wise(text, "Z", "")
    return text


_SMALL = 512     # up to this many times are formatted by _format_numpy rather than through Arrow
_REPEATED = 4096  # from this many on, the distinct times are formatted once each (when a quarter or fewer)


def _format_numpy(us: np.ndarray) -> np.ndarray:
    """:func:`format_times` of int64 µs within [MIN_US, MAX_US], by numpy: its ISO text (the
    same digits as Arrow's, with the T) to the second or, where there is a fraction, to the
    microsecond; then ``Z``. Fewer calls than the Arrow path: cheaper for a live batch."""
    t = us.astype("datetime64[us]")
    text = np.datetime_as_string(t, unit="us")
    whole = us % US == 0
    if whole.any():
        text = np.where(whole, np.datetime_as_string(t, unit="s"), text)
    return np.strings.add(text, "Z").astype(object)


def format_times_in(us: Any, tz: str) -> np.ndarray:
    """:func:`format_times` as wall-clock time in the zone ``tz`` with its offset:
    ``2019-10-01T08:59:38+01:00`` (the same instant as ``2019-10-01T07:59:38Z``). Each
    time is shifted by its zone's offset then, formatted as UTC text is, and the ``Z``
    replaced by the offset: no per-row ``strftime``."""
    return _format_in_arrow(us, tz).to_numpy(zero_copy_only=False)


def _format_in_arrow(us: Any, tz: str) -> pa.Array:
    """:func:`format_times_in` as an Arrow string array (null where a time is missing)."""
    arr = pa.array(pd.array(us if not isinstance(us, pa.Array) else us.to_pandas(), dtype="Int64"), pa.int64()) \
        if not (isinstance(us, np.ndarray) and us.dtype == np.int64) else pa.array(us)
    valid = ~pc.is_null(arr).to_numpy(zero_copy_only=False)
    ints = arr.fill_null(0).to_numpy()
    if not valid.all():
        if not valid.any():
            return pa.nulls(len(ints), pa.string())
        ints = ints[valid]
    offset = zone_offsets(ints, tz)
    text = time_texts(ints + offset)
    codes, offsets = pd.factorize(offset // US)      # a zone has few offsets
    texts = pa.array([f"{'-' if o < 0 else '+'}{abs(o) // 3600:02d}:{abs(o) % 3600 // 60:02d}" for o in offsets],
                     pa.string())
    # the UTC text without its Z, then the offset
    out = pc.binary_join_element_wise(pc.utf8_slice_codeunits(text, 0, -1), texts.take(pa.array(codes)), "")
    if len(ints) < len(valid):
        at = np.zeros(len(valid), np.int64)
        at[valid] = np.arange(len(ints))
        out = out.take(pa.array(at, mask=~valid))
    return out


def zone_offsets(us: np.ndarray, tz: str) -> np.ndarray:
    """The UTC offsets (µs) of the zone ``tz`` at the instants ``us`` (int64 µs):
    from the zone's offsets per hour (:func:`~spatec.events.zoneoffsets.utc_offsets`),
    or, for instants outside its range, by pandas' conversion (:func:`zone_offsets_pandas`)."""
    if _zone(tz) is _dt.timezone.utc:
        return np.zeros(len(us), np.int64)
    got = utc_offsets(us, tz)
    return got if got is not None else zone_offsets_pandas(us, tz)


def zone_offsets_pandas(us: np.ndarray, tz: str) -> np.ndarray:
    """:func:`zone_offsets` by pandas' time zone conversion (one :mod:`zoneinfo` call per instant)."""
    utc = pd.DatetimeIndex(us.astype("datetime64[us]")).tz_localize("UTC")
    return (utc.tz_convert(_zone(tz)).tz_localize(None) - utc.tz_localize(None)).to_numpy().astype(np.int64)


def format_time(us: int) -> str:
    """One time (µs since the epoch, UTC) as ISO 8601 UTC text."""
    if us is None:
        raise ValueError("format_time: no time")
    return format_times(np.array([int(us)], dtype=np.int64))[0]    # (numpy's path for one: 35x Arrow's)


# --------------------------------------------------------------------------- parsing

@dataclass
class Parsed:
    """A column converted to one type: values, missing rows, and rows that failed.

    ``errors`` maps a row to the problem, without the attribute name
    (``cannot parse "x" as a time``). Values at missing or failed rows are
    placeholders. ``arrow`` may hold the values as an Arrow array too (text),
    for vectorised work that wants them there.
    """

    values: Any
    missing: np.ndarray
    errors: dict[int, str]
    arrow: Any = None


@lru_cache(maxsize=64)
def _zone(tz: str) -> _dt.tzinfo:
    return _dt.timezone.utc if tz in ("UTC", "Z", "Etc/UTC") else ZoneInfo(tz)


def _wall_to_us(dt: _dt.datetime, tz: str) -> int:
    """A datetime to µs UTC; a naive one is wall-clock time in ``tz`` with fold=0."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_zone(tz), fold=0)
    return (dt - EPOCH) // _dt.timedelta(microseconds=1)


def _epoch_to_us(x: float) -> int:
    if isinstance(x, (int, np.integer)):
        return int(x) * US
    return int(round(float(x) * US))


def _positive(us: int, v: Any) -> int:
    """An epoch number's µs, if it is a time (:data:`NO_EPOCH`)."""
    if us <= 0:
        # the number as written, whether it came as text or as a number
        raise ValueError(f"{v.strip() if isinstance(v, str) else v} {NO_EPOCH}")
    return us


def _scalar_time(v: Any, tz: str) -> int:
    """One raw value to µs UTC; ValueError with the problem when it is not a time.

    This is the definition; the vectorised paths in :func:`parse_times` are
    shortcuts for the common cases and agree with it.
    """
    bad = ValueError(f"cannot parse {show(v)} as a time")
    if isinstance(v, (bool, np.bool_)):
        raise bad
    if isinstance(v, (int, np.integer)):
        us = _positive(int(v) * US, v)
    elif isinstance(v, (float, np.floating)):
        if not math.isfinite(v):
            raise bad
        us = _positive(_epoch_to_us(v), v)
    elif isinstance(v, pd.Timestamp):
        us = _wall_to_us(v.to_pydatetime(warn=False), tz)
    elif isinstance(v, _dt.datetime):
        us = _wall_to_us(v, tz)
    elif isinstance(v, _dt.date):
        us = _wall_to_us(_dt.datetime(v.year, v.month, v.day), tz)
    elif isinstance(v, str):
        s = v.strip()
        if INT_RE.match(s):
            us = _positive(int(s) * US, v)
        elif FLOAT_RE.match(s):
            us = _positive(_epoch_to_us(float(s)), v)
        else:
            try:
                us = _wall_to_us(_dt.datetime.fromisoformat(s), tz)
            except ValueError:
                raise bad from None
    else:
        raise bad
    if not MIN_US <= us <= MAX_US:
        raise bad
    return us


def _localize(wall: pd.Series, tz: str) -> tuple[np.ndarray, np.ndarray]:
    """Naive wall-clock datetimes in ``tz`` to µs UTC; second array: rows left undone
    (ambiguous or non-existent at a transition, for the fold=0 rule per row)."""
    if _zone(tz) is _dt.timezone.utc:
        local = wall.dt.tz_localize("UTC")
    else:
        local = wall.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
    undone = (local.isna() & wall.notna()).to_numpy()
    return _micros(local), undone


def _micros(stamps: pd.Series) -> np.ndarray:
    """µs since the epoch of zone-aware datetimes (truncated toward the past); NaT rows are junk."""
    if not len(stamps):
        return np.zeros(0, np.int64)
    return stamps.dt.tz_convert("UTC").dt.as_unit("ns").array.asi8 // 1000


def parse_times(values: Any, tz: str = "UTC") -> Parsed:
    """Times in any accepted form to µs UTC (int64), vectorised.

    Rows that the fast paths (numbers; ISO text through pandas; timestamps)
    leave undone go through the per-row parser, so each failing row gets its
    own reason.

    >>> p = parse_times(["1569916778", "2019-10-01T08:59:38+01:00", "2019-13-45", ""])
    >>> p.values[:2].tolist(), p.missing.tolist(), p.errors
    ([1569916778000000, 1569916778000000], [False, False, False, True], {2: 'cannot parse "2019-13-45" as a time'})
    """
    arr = to_arrow(values)
    if pa.types.is_null(arr.type):
        arr = arr.cast(pa.string())
    n = len(arr)
    us = np.zeros(n, np.int64)
    done = np.zeros(n, bool)
    t = arr.type
    if pa.types.is_string(t) and _all_epoch_ints(arr, us, done):
        missing = pc.is_null(arr).to_numpy(zero_copy_only=False)
    elif pa.types.is_string(t):
        missing = blank(arr)
        done |= missing
        s = trimmed(arr)
        ints = matches(s, INT_PATTERN) & ~missing
        if ints.any():
            try:
                secs = pc.cast(pc.replace_substring_regex(s.filter(ints), r"^\+", ""), pa.int64()).to_numpy()
                ok = (secs > 0) & (secs <= MAX_US // US)
                idx = np.flatnonzero(ints)[ok]
                us[idx] = secs[ok] * US
                done[idx] = True
            except (pa.ArrowInvalid, OverflowError):
                pass  # out of int64: per row
        floats = matches(s, FLOAT_PATTERN) & ~done & ~missing
        if floats.any():
            secs = pc.cast(s.filter(floats), pa.float64()).to_numpy()
            ok = np.isfinite(secs) & (secs > 0) & (secs <= MAX_US / US)
            idx = np.flatnonzero(floats)[ok]
            us[idx] = np.round(secs[ok] * US).astype(np.int64)
            done[idx] = True
        rest = ~done
        if rest.any():
            _iso_fast(s, rest, tz, us, done)
    else:
        missing = pc.is_null(arr).to_numpy(zero_copy_only=False)
        if pa.types.is_floating(t):
            missing |= np.isnan(arr.fill_null(0.0).to_numpy(zero_copy_only=False))
        done |= missing
        if pa.types.is_integer(t):
            secs = arr.cast(pa.int64()).fill_null(0).to_numpy()
            ok = ~missing & (secs > 0) & (secs <= MAX_US // US)
            us[ok] = secs[ok] * US
            done |= ok
        elif pa.types.is_floating(t) or pa.types.is_decimal(t):
            secs = arr.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
            ok = ~missing & np.isfinite(secs) & (secs > 0) & (secs <= MAX_US / US)
            us[ok] = np.round(secs[ok] * US).astype(np.int64)
            done |= ok
        elif pa.types.is_timestamp(t):
            _timestamps_fast(arr, tz, us, done)
    errors: dict[int, str] = {}
    for i in np.flatnonzero(~done):
        value = arr[int(i)].as_py()
        try:
            us[i] = _scalar_time(value, tz)
        except ValueError as e:
            errors[int(i)] = str(e)
        except (OverflowError, TypeError):
            errors[int(i)] = f"cannot parse {show(value)} as a time"
    return Parsed(us, missing, errors)


def _all_epoch_ints(arr: pa.Array, us: np.ndarray, done: np.ndarray) -> bool:
    """Fast path for the common feed: every value is whole epoch seconds as text."""
    secs = cast_numbers(arr, pa.int64())
    if secs is None:
        return False
    valid = ~pc.is_null(secs).to_numpy(zero_copy_only=False)
    s = secs.fill_null(0).to_numpy()
    ok = valid & (s > 0) & (s <= MAX_US // US)
    us[ok] = s[ok] * US
    done |= ok | ~valid
    return True


def _iso_fast(s: pa.Array, rest: np.ndarray, tz: str, us: np.ndarray, done: np.ndarray) -> None:
    """ISO text through pandas: rows with an offset at once, naive rows localised."""
    has_offset = matches(s, _OFFSET_PATTERN)
    for group, aware in ((rest & has_offset, True), (rest & ~has_offset, False)):
        if not group.any():
            continue
        idx = np.flatnonzero(group)
        text = s.filter(group).to_pandas()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                parsed = pd.to_datetime(text, format="ISO8601", utc=aware, errors="coerce")
            except (ValueError, TypeError, OverflowError):
                continue  # left to the per-row parser
        if not pd.api.types.is_datetime64_any_dtype(parsed.dtype):
            continue  # mixed offsets among "naive" rows: per row
        if aware:
            ok = parsed.notna().to_numpy()
            got = _micros(parsed)
        else:
            got, undone = _localize(parsed, tz)
            ok = parsed.notna().to_numpy() & ~undone
            # ambiguous or missing wall-clock times: fold=0, per row
            for j in np.flatnonzero(undone):
                us[idx[j]] = _wall_to_us(parsed.iloc[j].to_pydatetime(warn=False), tz)
                done[idx[j]] = True
        us[idx[ok]] = got[ok]
        done[idx[ok]] = True


def _timestamps_fast(arr: pa.Array, tz: str, us: np.ndarray, done: np.ndarray) -> None:
    valid = ~pc.is_null(arr).to_numpy(zero_copy_only=False)
    if arr.type.tz is not None:
        got = arr.cast(pa.timestamp("us", tz="UTC"), safe=False).cast(pa.int64()).fill_null(0).to_numpy()
        us[valid] = got[valid]
        done |= valid
        return
    try:
        wall = pd.Series(arr.cast(pa.timestamp("ns"), safe=True).to_pandas())
    except (pa.ArrowInvalid, OverflowError):
        return  # outside pandas' range: per row
    got, undone = _localize(wall, tz)
    ok = valid & ~undone
    us[ok] = got[ok]
    done |= ok


def parse_time(value: Any, tz: str = "UTC") -> int:
    """One time to µs UTC; ValueError saying why when it is missing or not a time.

    >>> parse_time("2019-10-01T08:59:38", tz="Europe/London")
    1569916778000000
    """
    p = parse_times(to_arrow([value]), tz)
    if p.missing[0]:
        raise ValueError("missing time")
    if p.errors:
        raise ValueError(p.errors[0])
    return int(p.values[0])


# --------------------------------------------------------------------------- event ids

def plain_value(v: Any) -> Any:
    """A typed attribute value as a JSON value (numpy and pandas scalars unwrapped)."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def canonical_json(record: Mapping[str, Any]) -> str:
    """The record hashed for the id of an event without a source: keys sorted, compact,
    UTF-8; floats as Python's repr writes them. Times must already be ISO text."""
    return json.dumps({k: plain_value(v) for k, v in record.items()}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)


def event_id(type_name: str, source: Any = None, t: Any = None,
             record: Mapping[str, Any] | None = None) -> Any:
    """The id of an event (SPEC §4): ``TYPE:source:t`` or ``TYPE:#hash``.

    With a source, ``t`` is its local time in µs; ``source`` and ``t`` may be
    arrays (then an array of ids comes back). Without a source the id is
    ``TYPE:#`` and the first 16 hex digits of the SHA-256 of
    :func:`canonical_json` of the declared attributes (times as ISO text).

    >>> event_id("Rain", record={"gauge": "CUBG", "reading": "2019-10-01T07:00:00Z", "mm_h": 1.5})
    'Rain:#0f8989971b6f4384'
    """
    if source is None:
        if record is None:
            raise ValueError("event_id: an event without a source is identified by its record")
        digest = hashlib.sha256(canonical_json(record).encode("utf-8")).hexdigest()
        return f"{type_name}:#{digest[:16]}"
    if isinstance(source, (str, int, np.integer)) and np.ndim(t) == 0:
        return f"{type_name}:{source}:{format_time(t)}"
    return event_ids_arrow(type_name, source, t).to_numpy(zero_copy_only=False)


def event_ids_arrow(type_name: str, source: Any, t: Any) -> pa.Array:
    """:func:`event_id` of arrays of sources and local times (µs), as an Arrow string array."""
    times = _format_arrow(t)
    src = to_arrow(source)
    if not pa.types.is_string(src.type):
        src = src.cast(pa.string())
    return pc.binary_join_element_wise(type_name, src, times, ":")


# ------------------------------------------------------------------------------ durations typed by people

_UNITS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "m": 60.0, "min": 60.0,
          "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hour": 3600.0, "hours": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """``"10 min"``, ``"30s"``, ``"1.5h"``, ``"500ms"``, ``"20"`` (seconds) → seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", str(text).lower())
    if not m or (m.group(2) and m.group(2) not in _UNITS):
        raise DataError(f"{text!r} is not a duration; write e.g. 30s, 10 min, 1h")
    return float(m.group(1)) * _UNITS.get(m.group(2) or "s")

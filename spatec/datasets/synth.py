"""Synthetic bus traces, shaped like the Cambridge SIRI-VM CSV.

Two tools:

- :func:`replicate` makes a bigger trace out of a real one: time-shifted
  copies (the Cambridge hour becomes a bus-day as 24 copies an hour apart) or,
  with ``id_suffix``, copies under new vehicle ids (a wider fleet).
- :func:`synthetic_trace` makes a trace from nothing: buses on out-and-back
  lines between named places, so that phrases such as hospital -> station
  fire, with the awkward parts of a real feed (jittered fix times, silences,
  congestion, bad rows on request). Deterministic given ``seed``.

Both return the columns of ``cambridge-sirivm-hour`` (:data:`COLUMNS`).

>>> df = synthetic_trace(4, 1800, seed=1)
>>> list(df.columns) == COLUMNS
True
>>> big = replicate(df, 3, shift_s=1800)
>>> len(big) == 3 * len(df)
True
"""
from __future__ import annotations

import json
import math
import os
from datetime import datetime
from typing import Mapping, Sequence, Union

import numpy as np
import pandas as pd

COLUMNS = ["vehicle", "operator", "line", "direction", "origin_ref", "origin_name",
           "destination_ref", "destination_name", "recorded_at", "ts", "lon", "lat",
           "bearing", "delay", "journey_ref", "received"]

# Centres of the project's named places (geo/cambridge.geojson; hospital,
# station and centre as in examples/bus.spatec). Their order makes the
# default lines: centre<->hospital, hospital<->station, station<->north, ...
DEFAULT_PLACES: dict[str, tuple[float, float]] = {
    "centre": (0.12415, 52.20520),
    "hospital": (0.14491, 52.17590),
    "station": (0.13610, 52.19300),
    "cambridge_north": (0.157346, 52.224167),
    "park_and_ride_madingley": (0.08501, 52.214766),
    "park_and_ride_trumpington": (0.107589, 52.167698),
}

# 2019-10-01 08:00 BST, a Tuesday: the morning of the Cambridge hour.
DEFAULT_START = 1569913200

Places = Union[Mapping[str, Sequence[float]], str, os.PathLike, None]


# --------------------------------------------------------------------------- replicate

def replicate(df: pd.DataFrame, copies: int, shift_s: int = 3600, id_suffix: bool = False,
              *, clip: bool | None = None, tz: str = "Europe/London") -> pd.DataFrame:
    """``copies`` copies of a trace, copy ``k`` shifted by ``k * shift_s`` seconds.

    ``ts`` (epoch seconds, or datetime64) and ``received`` move by the shift;
    ``recorded_at`` is rewritten from the new ``ts`` as ISO 8601 local time in
    ``tz`` with its offset, so the two stay consistent across DST changes.
    With ``id_suffix`` copy ``k >= 1`` renames vehicle ``V`` to ``V~k``: with
    ``shift_s=0`` this widens the fleet instead of lengthening the trace.

    ``clip`` (default: when copies share vehicle ids and ``shift_s > 0``)
    first drops the rows at or after ``min(ts) + shift_s``, so that copies
    tile time without overlapping; otherwise a vehicle's fixes from two copies
    would interleave (and could repeat a ``(vehicle, ts)`` identity). The
    Cambridge hour spans 65.5 min, so clipping to 1 h drops its last 5.5 min.

    Vectorised: 2 million rows take about a second.

    >>> df = pd.DataFrame({"vehicle": ["a", "b"], "ts": [0, 10],
    ...                    "recorded_at": ["", ""]})
    >>> replicate(df, 2, shift_s=3600, tz="UTC")[["vehicle", "ts", "recorded_at"]].values.tolist()
    [['a', 0, '1970-01-01T00:00:00+00:00'], ['b', 10, '1970-01-01T00:00:10+00:00'], ['a', 3600, '1970-01-01T01:00:00+00:00'], ['b', 3610, '1970-01-01T01:00:10+00:00']]
    """
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    if "ts" not in df.columns:
        raise ValueError("replicate needs a 'ts' column")
    ts = df["ts"]
    is_dt = pd.api.types.is_datetime64_any_dtype(ts)
    if not (is_dt or pd.api.types.is_numeric_dtype(ts)):
        raise TypeError(f"'ts' must be numeric epoch seconds or datetime64, not {ts.dtype}")

    if clip is None:
        clip = not id_suffix and shift_s > 0
    src = df
    if clip and copies > 1 and len(df):
        secs = _epoch_seconds(ts)
        src = df[secs < np.nanmin(secs) + shift_s]
    n = len(src)
    rows = np.tile(np.arange(n), copies)
    copy_no = np.repeat(np.arange(copies, dtype=np.int64), n)
    out = src.take(rows)
    out.index = pd.RangeIndex(len(out))  # not reset_index: that copies every column again
    shift = copy_no * int(shift_s)

    if is_dt:
        out["ts"] = out["ts"] + pd.to_timedelta(shift, unit="s")
    else:
        out["ts"] = (out["ts"].to_numpy() + shift).astype(ts.dtype, copy=False)
    if "received" in out.columns and pd.api.types.is_numeric_dtype(out["received"]):
        out["received"] = out["received"].to_numpy() + shift
    if "recorded_at" in out.columns:
        out["recorded_at"] = iso_local(_epoch_seconds(out["ts"]), tz)
    if id_suffix and copies > 1 and "vehicle" in out.columns:
        out["vehicle"] = _suffixed(src["vehicle"], copies)
    return out


def _epoch_seconds(ts: pd.Series) -> np.ndarray:
    if pd.api.types.is_datetime64_any_dtype(ts):
        if getattr(ts.dt, "tz", None) is None:
            ts = ts.dt.tz_localize("UTC")
        return ts.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy().astype("datetime64[s]").astype(np.int64)
    return ts.to_numpy(dtype=np.float64)


def _suffixed(vehicle: pd.Series, copies: int) -> np.ndarray:
    """Vehicle ids for ``copies`` stacked copies: copy 0 unchanged, copy k gets ``~k``."""
    codes, uniques = pd.factorize(vehicle, use_na_sentinel=True)
    uniques = np.asarray(uniques, dtype=object)
    names = np.concatenate([uniques] + [uniques + f"~{k}" for k in range(1, copies)]) if len(uniques) \
        else np.array([], dtype=object)
    n, u = len(codes), len(uniques)
    all_codes = np.tile(codes, copies) + np.repeat(np.arange(copies), n) * u
    out = np.empty(n * copies, dtype=object)
    valid = np.tile(codes >= 0, copies)
    out[valid] = names[all_codes[valid]]
    out[~valid] = np.tile(vehicle.to_numpy(dtype=object), copies)[~valid]
    return out


def iso_local(seconds: np.ndarray, tz: str = "Europe/London") -> np.ndarray:
    """Epoch seconds as ``YYYY-MM-DDTHH:MM:SS+HH:MM`` local time in ``tz`` (vectorised).

    Each distinct second is formatted once: a replicated trace has few of
    them (the Cambridge hour has ~4,000), so 2 million rows cost a hash pass.

    >>> iso_local(np.array([1569916778, 1572137999, 1572138000]), "Europe/London").tolist()
    ['2019-10-01T08:59:38+01:00', '2019-10-27T01:59:59+01:00', '2019-10-27T01:00:00+00:00']
    """
    secs = np.asarray(seconds, dtype=np.float64)
    bad = ~np.isfinite(secs)
    whole = np.where(bad, 0, np.floor(np.where(bad, 0, secs))).astype(np.int64)
    codes, uniq = pd.factorize(whole)
    utc = pd.to_datetime(np.asarray(uniq, dtype=np.int64), unit="s", utc=True)
    local = utc.tz_convert(tz).tz_localize(None)
    offset = ((local - utc.tz_localize(None)) // pd.Timedelta(seconds=1)).to_numpy()
    body = np.datetime_as_string(local.to_numpy().astype("datetime64[s]"), unit="s")
    offsets, which = np.unique(offset, return_inverse=True)
    suffix = [_fmt_offset(int(o)) for o in offsets]
    text = np.array([b + suffix[i] for b, i in zip(body.tolist(), which.reshape(-1).tolist())],
                    dtype=object)
    out = text[codes] if len(text) else np.empty(len(codes), dtype=object)
    out[bad] = None
    return out


def _fmt_offset(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    h, m = divmod(abs(seconds) // 60, 60)
    return f"{sign}{h:02d}:{m:02d}"


# --------------------------------------------------------------------------- synthetic_trace

def synthetic_trace(n_vehicles: int, duration_s: float, period_s: float = 20, seed: int = 0,
                    places: Places = None, *, start: Union[int, float, str, datetime] = DEFAULT_START,
                    tz: str = "Europe/London", speed_kmh: float = 22.0,
                    dwell_s: tuple[float, float] = (40.0, 240.0), silence_per_h: float = 0.3,
                    congestion_per_h: float = 0.6, gps_noise_m: float = 4.0,
                    bad_fraction: float = 0.0) -> pd.DataFrame:
    """A trace of ``n_vehicles`` buses over ``duration_s`` seconds from ``start``.

    Buses run out-and-back lines between pairs of ``places`` (a mapping
    ``name -> (lon, lat)``, a GeoJSON file of named features, or by default
    :data:`DEFAULT_PLACES`): line ``k`` joins places ``k`` and ``k+1`` of the
    list (cyclically), along a road of its own that wanders off the straight
    line as a random walk bridged to both ends. Buses of a line share its
    road and start at random points of the cycle, so they sometimes bunch.
    Every visit to a terminus is a dwell at the place's centre, so each
    journey leaves the last fix at one place and arrives at the first fix at
    the other: with the default places, ``hospital -> station`` and
    ``centre -> hospital`` both occur.

    Fixes come every ``period_s`` seconds +-15 % (integer ``ts``) with
    ``gps_noise_m`` of position noise. ``silence_per_h`` silences per bus-hour
    drop 5.5-20 min of fixes; ``congestion_per_h`` stops per bus-hour hold a
    bus still for 2-7 min mid-road. ``bad_fraction`` of the rows are then
    spoiled, a third each: unparsable times (``ts`` becomes an object column
    holding strings there, as a broken CSV would read), out-of-range
    coordinates, empty vehicle ids; their positions are in
    ``df.attrs["bad_rows"]`` by kind.

    Rows are sorted by ``(ts, vehicle)``. Same arguments, same frame.
    """
    if n_vehicles < 1:
        raise ValueError("n_vehicles must be >= 1")
    if duration_s <= 0 or period_s <= 0:
        raise ValueError("duration_s and period_s must be > 0")
    if not 0.0 <= bad_fraction <= 1.0:
        raise ValueError("bad_fraction must be within [0, 1]")
    rng = np.random.default_rng(seed)
    named = _load_places(places)
    if len(named) < 2:
        raise ValueError("synthetic_trace needs at least two places")
    names = list(named)
    proj = _LocalMetric(np.mean([p[0] for p in named.values()]), np.mean([p[1] for p in named.values()]))
    xy = {k: proj.forward(*v) for k, v in named.items()}
    t_start = _epoch(start)

    pairs = [(names[i], names[(i + 1) % len(names)]) for i in range(len(names) if len(names) > 2 else 1)]
    n_lines = max(min(len(pairs), n_vehicles), math.ceil(n_vehicles / 4))
    lines = [_make_line(k, pairs[k % len(pairs)], xy, rng) for k in range(n_lines)]

    width = max(4, len(str(n_vehicles - 1)))
    frames = []
    for v in range(n_vehicles):
        line = lines[v % n_lines]
        frames.append(_vehicle_fixes(f"SYN-{v:0{width}d}", line, duration_s, period_s, rng,
                                     speed_kmh, dwell_s, silence_per_h, congestion_per_h, gps_noise_m))
    df = pd.concat(frames, ignore_index=True)
    df.sort_values(["t", "vehicle"], kind="stable", inplace=True, ignore_index=True)

    ts = (t_start + df["t"].to_numpy()).astype(np.int64)
    lon, lat = proj.inverse(df["x"].to_numpy(), df["y"].to_numpy())
    out = pd.DataFrame({
        "vehicle": df["vehicle"].to_numpy(dtype=object),
        "operator": "SYN",
        "line": df["line"].to_numpy(dtype=object),
        "direction": np.where(df["inbound"].to_numpy(), "INBOUND", "OUTBOUND").astype(object),
        "origin_ref": df["origin"].map(lambda s: f"SYN-{s}").to_numpy(dtype=object),
        "origin_name": df["origin"].to_numpy(dtype=object),
        "destination_ref": df["destination"].map(lambda s: f"SYN-{s}").to_numpy(dtype=object),
        "destination_name": df["destination"].to_numpy(dtype=object),
        "recorded_at": iso_local(ts, tz),
        "ts": ts,
        "lon": np.round(lon, 7),
        "lat": np.round(lat, 7),
        "bearing": df["bearing"].to_numpy(dtype=np.int64),
        "delay": _iso_durations(df["delay"].to_numpy()),
        "journey_ref": df["journey"].to_numpy(dtype=np.int64),
        "received": np.round(ts + rng.uniform(1.0, 25.0, len(ts)), 3),
    }, columns=COLUMNS)
    out.attrs["bad_rows"] = {"time": [], "coords": [], "vehicle": []}
    if bad_fraction > 0 and len(out):
        _spoil(out, bad_fraction, rng)
    return out


class _LocalMetric:
    """Equirectangular metres about a centre: good to centimetres over a city."""

    def __init__(self, lon0: float, lat0: float):
        phi = math.radians(lat0)
        self.lon0, self.lat0 = lon0, lat0
        self.my = 111132.954 - 559.822 * math.cos(2 * phi) + 1.175 * math.cos(4 * phi)
        self.mx = 111412.84 * math.cos(phi) - 93.5 * math.cos(3 * phi)

    def forward(self, lon, lat):
        return (np.asarray(lon) - self.lon0) * self.mx, (np.asarray(lat) - self.lat0) * self.my

    def inverse(self, x, y):
        return np.asarray(x) / self.mx + self.lon0, np.asarray(y) / self.my + self.lat0


def _load_places(places: Places) -> dict[str, tuple[float, float]]:
    if places is None:
        return dict(DEFAULT_PLACES)
    if isinstance(places, (str, os.PathLike)):
        with open(places, encoding="utf-8") as f:
            doc = json.load(f)
        out = {}
        for feat in doc.get("features", []):
            props = feat.get("properties") or {}
            name = props.get("name")
            if not name:
                continue
            if "center" in props:
                out[name] = tuple(props["center"][:2])
            else:
                ring = np.asarray(feat["geometry"]["coordinates"][0], dtype=float)
                out[name] = tuple(ring[:-1].mean(axis=0)) if len(ring) > 1 else tuple(ring[0])
        return out
    return {k: (float(v[0]), float(v[1])) for k, v in places.items()}


def _make_line(k: int, pair: tuple[str, str], xy, rng) -> dict:
    """An out-and-back line: terminus a, waypoints, terminus b, waypoints back."""
    a, b = pair
    pa, pb = np.array(xy[a], dtype=float), np.array(xy[b], dtype=float)
    d = pb - pa
    length = float(np.hypot(*d)) or 1.0
    normal = np.array([-d[1], d[0]]) / length
    m = 5
    frac = np.arange(1, m + 1) / (m + 1)
    walk = np.cumsum(rng.normal(0.0, min(250.0, 0.08 * length), m + 1))
    lateral = walk[:-1] - frac * walk[-1]          # a random walk pinned to 0 at both ends
    mids = pa + frac[:, None] * d + lateral[:, None] * normal
    out_leg = np.vstack([pa, mids, pb])
    ring = np.vstack([out_leg, out_leg[-2:0:-1]])  # a, w1..wm, b, wm..w1 (then back to a)
    return {"name": str(k + 1), "a": a, "b": b, "ring": ring, "b_index": m + 1}


def _vehicle_fixes(vehicle, line, duration_s, period_s, rng, speed_kmh, dwell_s,
                   silence_per_h, congestion_per_h, noise_m) -> pd.DataFrame:
    ring, bi = line["ring"], line["b_index"]
    k = len(ring)
    nxt = np.roll(ring, -1, axis=0)
    seg_len = np.hypot(*(nxt - ring).T)
    speed = speed_kmh / 3.6 * rng.uniform(0.8, 1.2)
    travel = seg_len / speed
    cycle_guess = travel.sum() + 2 * np.mean(dwell_s)
    n_cycles = int(math.ceil((duration_s + cycle_guess) / cycle_guess)) + 2

    # Knots of one cycle: at each terminus an arrival and a departure knot
    # (the dwell), elsewhere one knot; `step` is the time to the next knot.
    is_term = np.zeros(k, bool)
    is_term[[0, bi]] = True
    reps = np.where(is_term, 2, 1)
    vert = np.repeat(np.arange(k), reps)
    first_of = np.r_[True, vert[1:] != vert[:-1]]
    dwell_knot = is_term[vert] & first_of
    pos = np.tile(ring[vert], (n_cycles, 1))
    dwell = rng.uniform(*dwell_s, size=(n_cycles, int(dwell_knot.sum())))
    step = np.tile(np.where(dwell_knot, 0.0, travel[vert]), (n_cycles, 1))
    step[:, dwell_knot] = dwell
    step = step.ravel()
    # Outbound from the departure at a up to the arrival at b, inbound after.
    inbound_one = np.zeros(len(vert), bool)
    inbound_one[np.searchsorted(vert, bi) + 1:] = True
    inbound = np.tile(inbound_one, n_cycles)
    journey = np.repeat(np.arange(n_cycles) * 2, len(vert)) + inbound
    knot_t = np.r_[0.0, np.cumsum(step)[:-1]] - rng.uniform(0, cycle_guess)

    # Congestion: hold the bus still for a while at random moments.
    n_jam = rng.poisson(congestion_per_h * duration_s / 3600)
    if n_jam:
        tc = np.sort(rng.uniform(0, duration_s, n_jam))
        hold = rng.uniform(120, 420, n_jam)
        px, py = np.interp(tc, knot_t, pos[:, 0]), np.interp(tc, knot_t, pos[:, 1])
        seg = np.searchsorted(knot_t, tc, side="right") - 1
        before = np.r_[0.0, np.cumsum(hold)[:-1]]
        knot_t = knot_t + np.r_[0.0, np.cumsum(hold)][np.searchsorted(tc, knot_t, side="left")]
        jam_t = np.column_stack([tc + before, tc + before + hold]).ravel()
        knot_t = np.r_[knot_t, jam_t]
        pos = np.vstack([pos, np.repeat(np.column_stack([px, py]), 2, axis=0)])
        inbound = np.r_[inbound, np.repeat(inbound[seg], 2)]
        journey = np.r_[journey, np.repeat(journey[seg], 2)]
        order = np.argsort(knot_t, kind="stable")
        knot_t, pos, inbound, journey = knot_t[order], pos[order], inbound[order], journey[order]

    # Fix times: every period +-15 %, whole seconds.
    n_fix = int(duration_s / period_s * 1.25) + 4
    gaps = rng.uniform(0.85, 1.15, n_fix) * period_s
    t = rng.uniform(0, period_s) + np.r_[0.0, np.cumsum(gaps[:-1])]
    t = np.unique(np.round(t[t < duration_s]))

    # Silences: drop every fix in a 5.5-20 min window.
    for _ in range(rng.poisson(silence_per_h * duration_s / 3600)):
        g0 = rng.uniform(0, duration_s)
        t = t[(t < g0) | (t >= g0 + rng.uniform(330, 1200))]

    j = np.clip(np.searchsorted(knot_t, t, side="right") - 1, 0, len(knot_t) - 1)
    x = np.interp(t, knot_t, pos[:, 0]) + rng.normal(0, noise_m, len(t))
    y = np.interp(t, knot_t, pos[:, 1]) + rng.normal(0, noise_m, len(t))
    # Heading of the knot segment a fix lies on; a held bus keeps its last heading.
    dx, dy = np.diff(pos[:, 0], append=pos[-1, 0]), np.diff(pos[:, 1], append=pos[-1, 1])
    heading = pd.Series(np.where(np.hypot(dx, dy) > 0.5, np.degrees(np.arctan2(dx, dy)) % 360, np.nan))
    heading = heading.ffill().bfill().fillna(0).to_numpy()
    ib = inbound[j]
    origin = np.where(ib, line["b"], line["a"])
    destination = np.where(ib, line["a"], line["b"])
    # Lateness: a base offset plus the jams since the start of the trace.
    late = np.full(len(t), rng.uniform(-60, 120))
    if n_jam:
        late = late + np.cumsum(np.r_[0.0, hold])[np.searchsorted(tc + before + hold, t, side="right")]
    return pd.DataFrame({
        "t": t, "vehicle": vehicle, "line": line["name"], "x": x, "y": y,
        "bearing": np.round(heading[j]).astype(np.int64) % 360, "inbound": ib,
        "origin": origin, "destination": destination, "journey": journey[j],
        "delay": np.round(late).astype(np.int64),
    })


def _iso_durations(seconds: np.ndarray) -> np.ndarray:
    """Whole seconds as ISO 8601 durations like the feed's ``PT2M21S`` / ``-PT44S``."""
    uniq, inv = np.unique(np.asarray(seconds, dtype=np.int64), return_inverse=True)

    def fmt(s: int) -> str:
        sign, s = ("-" if s < 0 else ""), abs(s)
        h, rem = divmod(s, 3600)
        m, sec = divmod(rem, 60)
        body = (f"{h}H" if h else "") + (f"{m}M" if m else "") + (f"{sec}S" if sec or not (h or m) else "")
        return f"{sign}PT{body}"

    return np.array([fmt(int(s)) for s in uniq], dtype=object)[inv.reshape(-1)]


_BAD_TIMES = np.array(["", "not-a-time", "2019-13-45T99:61:00", "NaN", "09:61"], dtype=object)


def _spoil(df: pd.DataFrame, fraction: float, rng) -> None:
    n = len(df)
    k = min(n, max(1, int(round(fraction * n))))
    rows = rng.choice(n, size=k, replace=False)
    kinds = rng.permutation(np.arange(k) % 3)
    bad_time, bad_xy, bad_vehicle = np.sort(rows[kinds == 0]), np.sort(rows[kinds == 1]), np.sort(rows[kinds == 2])

    ts = df["ts"].to_numpy().astype(object)
    garbage = _BAD_TIMES[rng.integers(0, len(_BAD_TIMES), len(bad_time))]
    ts[bad_time] = garbage
    df["ts"] = ts
    rec = df["recorded_at"].to_numpy(dtype=object)
    rec[bad_time] = garbage
    df["recorded_at"] = rec

    # Half the bad positions get a latitude past the pole, half a longitude past 180.
    half = len(bad_xy) // 2
    lat, lon = df["lat"].to_numpy().copy(), df["lon"].to_numpy().copy()
    lat[bad_xy[:half]] = rng.uniform(90.5, 999.0, half) * rng.choice([-1, 1], half)
    lon[bad_xy[half:]] = rng.uniform(180.5, 999.0, len(bad_xy) - half) * rng.choice([-1, 1], len(bad_xy) - half)
    df["lat"], df["lon"] = lat, lon

    veh = df["vehicle"].to_numpy(dtype=object)
    veh[bad_vehicle] = ""
    df["vehicle"] = veh
    df.attrs["bad_rows"] = {"time": bad_time.tolist(), "coords": bad_xy.tolist(),
                            "vehicle": bad_vehicle.tolist()}


def _epoch(start) -> float:
    if isinstance(start, (int, float, np.integer, np.floating)):
        return float(start)
    ts = pd.Timestamp(start)
    if ts.tzinfo is None:
        raise ValueError(f"start {start!r} needs a UTC offset or time zone")
    return ts.timestamp()

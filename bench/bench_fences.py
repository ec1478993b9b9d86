"""Fences that do not flap: spurious enter/exit alerts and detection delay of
``examples/fences`` (possibly/certainly, the fix's own uncertainty as hysteresis) against
naive point-in-polygon, on the Cambridge hour with synthetic noise added to the fixes.

    .venv/bin/python bench/bench_fences.py [--noise 0-10 0-20 0-30 10-30] [--seed 1] [--radius 15]

Truth is point-in-polygon of the recorded positions: a crossing is a fix on the other side
of the zone's edge from the bus's fix before it. Each fix is then moved by a distance drawn
uniformly from [A, B] metres in a random direction (each ``--noise`` level ``A-B``), and both
detectors run on the noisy fixes, in this process:

- naive: point-in-polygon of each noisy fix, an alert whenever it differs from the bus's
  fix before;
- spatec: ``EntersCore``/``LeavesCore`` of ``examples/fences`` (replayed with the local
  runner), each fix a disc of the declared radius: B (the noise bound, so "certainly
  inside" is certainly so) and ``--radius`` (bus.spatec's 15 m, as a user who declared less
  than the noise would).

An alert matches a true crossing of the same bus and kind (enter, exit) from 60 s before it
to 10 min after it, each used once; the rest are spurious. Delay is the alert's time less
the crossing's (the first fix on the new side). Printed per level and detector: alerts,
matched, spurious, missed crossings, median and 90th-percentile delay, seconds, and the
ratio of spurious alerts and of seconds to the naive baseline's.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
HOUR = ROOT.parent / "shared" / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
PROGRAM = ROOT / "examples" / "fences" / "fences.spatec"
BEFORE, AFTER = 60, 600     # an alert may match a crossing from 60 s before it to 10 min after


def zone_polygon():
    """The ``core`` polygon of examples/fences, read from the program (one source of truth)."""
    import shapely

    text = PROGRAM.read_text(encoding="utf-8")
    body = re.search(r"place core = polygon\((.*?)\)\n", text, re.S).group(1)
    pairs = [tuple(map(float, p)) for p in re.findall(r"\(([-\d.]+),\s*([-\d.]+)\)", body)]
    return shapely.Polygon(pairs)


def load() -> pd.DataFrame:
    df = pd.read_csv(HOUR, dtype={"vehicle": str, "line": str, "operator": str})
    df = df[(df["lon"] != 0) & (df["lat"] != 0)]
    return df.drop_duplicates(["vehicle", "ts"]).sort_values(["vehicle", "ts"], kind="stable").reset_index(drop=True)


def add_noise(df: pd.DataFrame, low: float, high: float, seed: int) -> pd.DataFrame:
    """Each fix moved by U(low, high) metres in a U(0, 2π) direction (metres → degrees locally)."""
    rng = np.random.default_rng(seed)
    d = rng.uniform(low, high, len(df))
    a = rng.uniform(0, 2 * np.pi, len(df))
    lat = df["lat"].to_numpy()
    out = df.copy()
    out["lat"] = lat + d * np.sin(a) / 110_540.0
    out["lon"] = df["lon"].to_numpy() + d * np.cos(a) / (111_320.0 * np.cos(np.radians(lat)))
    return out


def naive_alerts(df: pd.DataFrame, zone) -> pd.DataFrame:
    """Point-in-polygon per fix; an alert where a bus's fix is on the other side from its last."""
    import shapely

    inside = shapely.contains_xy(zone, df["lon"].to_numpy(), df["lat"].to_numpy())
    same = df["vehicle"].to_numpy()[1:] == df["vehicle"].to_numpy()[:-1]
    flip = np.flatnonzero(same & (inside[1:] != inside[:-1])) + 1
    return pd.DataFrame({"vehicle": df["vehicle"].to_numpy()[flip], "t": df["ts"].to_numpy()[flip],
                         "kind": np.where(inside[flip], "enter", "exit")})


def spatec_alerts(df: pd.DataFrame, radius: float, workdir: Path) -> pd.DataFrame:
    import spatec

    text = PROGRAM.read_text(encoding="utf-8").replace('include "../bus.spatec"', 'include "bus.spatec"')
    bus = (ROOT / "examples" / "bus.spatec").read_text(encoding="utf-8")
    bus = bus.replace("place  point(lon, lat) ± 15 m", f"place  point(lon, lat) ± {radius:g} m")
    assert f"± {radius:g} m" in bus
    (workdir / "bus.spatec").write_text(bus, encoding="utf-8")
    (workdir / "fences.spatec").write_text(text, encoding="utf-8")
    out = spatec.compile(workdir / "fences.spatec").replay_local({"BusGPS": df})
    parts = []
    for phrase, kind, col in (("EntersCore", "enter", "entered"), ("LeavesCore", "exit", "left")):
        f = out[phrase]
        parts.append(pd.DataFrame({"vehicle": f["vehicle"].astype(str).to_numpy(),
                                   "t": ((f[col] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta("1s")).to_numpy()
                                   if len(f) else [],
                                   "kind": kind}))
    return pd.concat(parts, ignore_index=True)


def score(alerts: pd.DataFrame, truth: pd.DataFrame) -> dict:
    matched, delays = 0, []
    for (vehicle, kind), tr in truth.groupby(["vehicle", "kind"]):
        al = np.sort(alerts.loc[(alerts["vehicle"] == vehicle) & (alerts["kind"] == kind), "t"].to_numpy())
        used = np.zeros(len(al), bool)
        for t in np.sort(tr["t"].to_numpy()):
            ok = np.flatnonzero(~used & (al >= t - BEFORE) & (al <= t + AFTER))
            if len(ok):
                used[ok[0]] = True
                matched += 1
                delays.append(al[ok[0]] - t)
    d = np.array(delays, float)
    return {"alerts": len(alerts), "matched": matched, "spurious": len(alerts) - matched,
            "missed": len(truth) - matched,
            "delay_median": float(np.median(d)) if len(d) else float("nan"),
            "delay_p90": float(np.percentile(d, 90)) if len(d) else float("nan")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--noise", nargs="+", default=["0-10", "0-20", "0-30", "10-30"],
                    help="levels A-B: each fix moved by U(A, B) metres")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--radius", type=float, default=15.0, help="a second, fixed declared radius (m)")
    args = ap.parse_args(argv)
    if not HOUR.is_file():
        print(f"bench_fences: {HOUR} is not available", file=sys.stderr)
        return 1
    zone = zone_polygon()
    clean = load()
    truth = naive_alerts(clean, zone)
    print(f"Cambridge hour: {len(clean):,} fixes of {clean['vehicle'].nunique()} buses; "
          f"{len(truth)} true crossings of the core ({(truth['kind'] == 'enter').sum()} in, "
          f"{(truth['kind'] == 'exit').sum()} out) by {truth['vehicle'].nunique()} buses")
    head = (f"{'noise':>7} {'detector':<22} {'alerts':>6} {'matched':>7} {'spurious':>8} {'missed':>6} "
            f"{'delay med':>9} {'p90':>6} {'seconds':>8} {'spurious/naive':>14} {'time/naive':>10}")
    print(head)
    with tempfile.TemporaryDirectory() as tmp:
        for level in args.noise:
            low, high = (float(x) for x in level.split("-"))
            noisy = add_noise(clean, low, high, args.seed)
            t0 = time.perf_counter()
            naive = naive_alerts(noisy, zone)
            t_naive = time.perf_counter() - t0
            base = score(naive, truth)
            rows = [("naive point-in-polygon", base, t_naive)]
            for radius in dict.fromkeys([high, args.radius]):
                t0 = time.perf_counter()
                got = spatec_alerts(noisy, radius, Path(tmp))
                rows.append((f"spatec ± {radius:g} m", score(got, truth), time.perf_counter() - t0))
            for name, s, secs in rows:
                ratio = s["spurious"] / base["spurious"] if base["spurious"] else float("nan")
                print(f"{level + ' m':>7} {name:<22} {s['alerts']:>6} {s['matched']:>7} {s['spurious']:>8} "
                      f"{s['missed']:>6} {s['delay_median']:>8.0f}s {s['delay_p90']:>5.0f}s {secs:>8.2f} "
                      f"{ratio:>14.3f} {secs / t_naive:>10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

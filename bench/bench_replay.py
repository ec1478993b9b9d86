"""Replay throughput: the Spark and local runners against hand-written baselines.

The Cambridge hour is replicated to ``24 * fraction`` hours (``--hours``) and
``--scale`` further time-shifted copies; for each program the runners' wall
time and fixes/s are printed next to a DuckDB SQL and a PySpark baseline of
``Silent`` run in the same process (counts asserted equal), with ratios.

    python bench/bench_replay.py --hours 2 --scale 1,4
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared"
HOUR = SHARED / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
PROGRAMS = ["silent_and_bunching", "hospital_to_station", "tuesday_to_hospital", "stuck"]

#: Silent: a fix whose vehicle's next fix (local order) has its event time
#: (hi) more than 5 min after this fix's hi — SPEC: no X with before(A, X) and
#: X.hi <= A.hi + D; decided when the window ends at or before the last event time
SILENT_SQL = """
WITH f AS (
  SELECT vehicle, lo, hi,
         LEAD(hi) OVER (PARTITION BY vehicle ORDER BY hi, lo) AS next_hi,
         MAX(hi) OVER () AS w
  FROM ev)
SELECT count(*) FROM f
WHERE (next_hi IS NULL OR next_hi > hi + 300000000) AND hi + 300000000 <= w
"""


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def events(compiled, csv: Path, tmp: Path):
    from spatec.runners.replay import ingest

    frames, _ = ingest(compiled, [("BusGPS", str(csv))], tmp)
    return frames


def duckdb_silent(frames) -> int:
    import duckdb

    ev = frames["BusGPS"][["vehicle", "_lo", "_hi"]].rename(columns={"_lo": "lo", "_hi": "hi"})
    con = duckdb.connect()
    con.register("ev", ev)
    return con.execute(SILENT_SQL).fetchone()[0]


def pyspark_silent(spark, frames) -> int:
    from pyspark.sql import Window, functions as F

    ev = spark.createDataFrame(frames["BusGPS"][["vehicle", "_lo", "_hi"]].rename(columns={"_lo": "lo", "_hi": "hi"}))
    w = ev.agg(F.max("hi")).first()[0]
    nxt = F.lead("hi").over(Window.partitionBy("vehicle").orderBy("hi", "lo"))
    f = ev.withColumn("next_hi", nxt)
    return f.where((F.col("next_hi").isNull() | (F.col("next_hi") > F.col("hi") + 300_000_000))
                   & (F.col("hi") + 300_000_000 <= w)).count()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=24, help="hours of trace (the hour replicated; default a bus-day)")
    ap.add_argument("--scale", default="1", help="comma-separated copy counts, e.g. 1,4,16")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--no-local", action="store_true", help="skip the local runner (slow on big inputs)")
    args = ap.parse_args(argv)

    from spatec.io.synth import replicate
    from spatec.runners.common import compile_program
    from spatec.runners.local import replay_frames
    from spatec.runners.spark_batch import replay_frames_spark
    from spatec.runners.spark_session import get_or_create

    spark = get_or_create(args.master, {"spark.ui.enabled": "false"})
    hour = pd.read_csv(HOUR)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for scale in [int(s) for s in args.scale.split(",")]:
            copies = max(1, round(args.hours * scale))
            if args.hours < 1:
                t = pd.to_datetime(hour["ts"], unit="s") if hour["ts"].dtype != object else pd.to_datetime(hour["ts"])
                base = hour[t <= t.min() + pd.Timedelta(hours=args.hours * scale)]
            else:
                base = replicate(hour, copies)
            csv = tmp / f"bus_{scale}.csv"
            base.to_csv(csv, index=False)
            for name in args.programs.split(","):
                c = compile_program(SHARED / "spec" / "examples" / f"{name}.spatec")
                frames = events(c, csv, tmp)
                n = len(frames["BusGPS"])
                sp, t_spark = timed(lambda: replay_frames_spark(spark, c, frames))
                row = {"scale": scale, "program": name, "fixes": n, "spark_s": t_spark,
                       "spark_fix_s": n / t_spark, "composites": sum(sp.counts.values())}
                if not args.no_local:
                    lo, t_local = timed(lambda: replay_frames(c, frames))
                    assert lo.counts == sp.counts, (lo.counts, sp.counts)
                    row.update(local_s=t_local, local_fix_s=n / t_local, spark_vs_local=t_spark / t_local)
                if name == "silent_and_bunching":
                    k, t_duck = timed(lambda: duckdb_silent(frames))
                    k2, t_ps = timed(lambda: pyspark_silent(spark, frames))
                    assert k == k2 == sp.counts["Silent"], (k, k2, sp.counts["Silent"])
                    row.update(duckdb_silent_s=t_duck, pyspark_silent_s=t_ps, baseline_silent=k,
                               spatec_silent=sp.counts["Silent"])
                row["peak_rss_mb"] = peak_rss_mb()
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.float_format", "{:.2f}".format):
        print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

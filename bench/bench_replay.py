"""Batch replay throughput and scaling: spatec on Spark against hand-written baselines.

The Cambridge hour is replicated to a bus-day (24 time-shifted copies, as
``spatec datasets replicate`` does: about 1.3 million fixes) and to ``S`` times
that (``--scales``, e.g. ``1,4,16``), written once as Parquet under
``~/.cache/spatec/bench``. For every (scale, program) a child process:

1. starts a SparkSession (local[*], untimed) and warms it as ``spatec replay``
   does while it ingests (``spark_batch.warm_workers``: the Python workers
   started, spatec and the PROJ database loaded in them);
2. runs ``spatec replay`` on Spark end to end (``replay_spark``, what the CLI
   runs): ingest — on the staged exchange, the driver cuts the Parquet into
   chunks and Spark tasks type them (rejects, duplicates) and stage them per
   phrase —, matching, writing the output file; ``fixes/s`` is input rows
   over the whole, ``ingest_s`` and ``match_s`` its two stages;
3. for ``silent``, ``stuck`` and ``hospital_to_station``, runs the
   hand-written DuckDB SQL and PySpark baselines of :mod:`baselines` on the
   same canonical events, in the same process, and asserts they produce
   exactly spatec's composites. Their timings start from canonical events
   already in memory (typed by spatec's reader, untimed): ``spatec_vs_pyspark``
   puts spatec's whole run (reading and typing the input included) against
   that, ``match_vs_pyspark`` only its matching stage;
4. with ``--local`` (scale 1 only), the local runner's matching on the same events;
5. the whole replay ``--again`` more times in the same session (``again_s``,
   ``fixes_per_s_again``: the median, and ``again_min_s``/``again_max_s``): a
   long-lived session's steady state, without the first replay's one-off costs
   in the workers. On a virtual machine two runs of one build can differ by a
   fifth (memory the kernel hands back to the host within a second costs
   ~1 s of kernel time per GiB when touched again): ``--again 5`` shows
   the spread.

Peak memory is the largest resident set of the child's whole process tree
(driver, JVM, Python workers), sampled every 0.1 s from /proc during step 2.

    .venv/bin/python bench/bench_replay.py                      # bus-day, every program
    .venv/bin/python bench/bench_replay.py --scales 1,4,16 --programs hospital_to_station,stuck
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

SHARED = ROOT.parent / "shared"
HOUR = SHARED / "datasets" / "cambridge" / "sirivm_2019-10-01_0854-1000.csv.gz"
EXAMPLES = SHARED / "spec" / "examples"
PROGRAMS = {  # program → (file, phrase with a baseline or None)
    "hospital_to_station": (EXAMPLES / "hospital_to_station.spatec", "HospitalToStation"),
    "stuck": (EXAMPLES / "stuck.spatec", "Stuck"),
    "silent": (ROOT / "examples" / "silent" / "silent.spatec", "Silent"),
    "tuesday_to_hospital": (EXAMPLES / "tuesday_to_hospital.spatec", None),
    "bunching": (ROOT / "examples" / "bunching" / "bunching.spatec", None),
    # runs (SPEC §7) and a place set of 1,388 stops (§9): compare with `stuck` (windows of 4 fixes)
    "stuck_episodes": (EXAMPLES / "stuck_episodes.spatec", None),
    "dwell_at_stops": (EXAMPLES / "dwell_at_stops.spatec", None),
}
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spatec" / "bench"


# ------------------------------------------------------------------------------- memory

def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants (from /proc), MiB."""
    children: dict = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, ()))
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


class PeakMemory:
    """Samples the process tree's RSS in a thread between ``start`` and ``stop``."""

    def __init__(self, every: float = 0.1):
        self.every, self.peak, self._stop = every, 0.0, threading.Event()

    def __enter__(self):
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_mb(os.getpid()))
            self._stop.wait(self.every)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


# ------------------------------------------------------------------------------- input

def bus_day(scale: int) -> Path:
    """The hour replicated to ``24 * scale`` hours, as Parquet (made once, cached)."""
    import pandas as pd

    from spatec.datasets.synth import replicate

    path = CACHE / f"cambridge_busday_x{scale}.parquet"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        replicate(pd.read_csv(HOUR), 24 * scale).to_parquet(tmp, index=False)
        tmp.rename(path)
    return path


# ------------------------------------------------------------------------------- child

def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def child(scale: int, program: str, local: bool, baselines: bool, again: int = 1) -> dict:
    import baselines as B

    from spatec.plan.program import compile_program
    from spatec.runners.local import replay_frames
    from spatec.runners.replay import ingest
    from spatec.runners.spark.batch import replay_spark, warm_workers
    from spatec.runners.spark.session import get_or_create
    from spatec.spatial.crs import choose_crs

    path, phrase = PROGRAMS[program]
    data = bus_day(scale)
    spark = get_or_create(None, {"spark.ui.enabled": "false", "spark.driver.memory": "8g"})
    warm_workers(spark)
    c = compile_program(path)
    inputs = [("BusGPS", str(data))]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        with PeakMemory() as mem:
            # what `spatec replay` runs: ingest (in Spark tasks on the staged exchange), match, write
            result, t_total = timed(lambda: replay_spark(c, inputs, out / "a", spark=spark))
        t_ingest, t_match = result.seconds["ingest"], result.seconds["match"]
        t_write = t_total - t_ingest - t_match
        # the same again in this session: the steady state of a long-lived session (a notebook)
        agains = [timed(lambda: replay_spark(c, inputs, out / f"b{i}", spark=spark))[1] for i in range(max(1, again))]
        t_again = statistics.median(agains)
        n = result.ingest.read
        row = {"scale": scale, "program": program, "fixes": n, "composites": sum(result.counts.values()),
               "spark_s": t_total, "fixes_per_s": n / t_total, "ingest_s": t_ingest, "match_s": t_match,
               "write_s": t_write, "peak_rss_mb": mem.peak, "again_s": t_again, "fixes_per_s_again": n / t_again}
        if again > 1:
            row.update(again_min_s=min(agains), again_max_s=max(agains))
        if local or (baselines and phrase):
            frames, _summary = ingest(c, inputs, out / "c")     # canonical events, for the others (untimed)
        if local and scale == 1:
            lo, t_local = timed(lambda: replay_frames(c, frames))
            assert lo.counts == result.counts, (lo.counts, result.counts)
            row.update(local_match_s=t_local)
        if baselines and phrase:
            crs = choose_crs(c.program, frames)
            mine = {tuple(e[v] for v in sorted(e)) for e in result.frames[phrase]["events"]}
            df = frames["BusGPS"]
            name = {"HospitalToStation": "hospital_to_station", "Stuck": "stuck", "Silent": "silent"}[phrase]
            args = (df, crs, B.places_of(c.program)) if phrase == "HospitalToStation" else (df, crs)
            duck, t_duck = timed(lambda: getattr(B, f"duckdb_{name}")(*args))
            ps, t_ps = timed(lambda: getattr(B, f"pyspark_{name}")(spark, *args))
            assert duck == mine, (len(duck), len(mine))
            assert ps == mine, (len(ps), len(mine))
            # spatec end to end (reading and typing the input included) against the
            # baselines from canonical events already in memory
            row.update(duckdb_s=t_duck, pyspark_s=t_ps, spatec_vs_pyspark=t_total / t_ps,
                       match_vs_pyspark=t_match / t_ps, spatec_vs_duckdb=t_total / t_duck)
    return row


# ------------------------------------------------------------------------------- parent

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", default="1", help="bus-days, comma-separated (default 1)")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--local", action="store_true", help="also time the local runner (scale 1)")
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--again", type=int, default=1, help="replays after the first, in the same session (median)")
    ap.add_argument("--child", nargs=2, metavar=("SCALE", "PROGRAM"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        row = child(int(args.child[0]), args.child[1], args.local, not args.no_baselines, args.again)
        print("RESULT " + json.dumps(row), flush=True)
        return 0

    import pandas as pd

    rows = []
    for scale in [int(s) for s in args.scales.split(",")]:
        bus_day(scale)
        for program in args.programs.split(","):
            cmd = [sys.executable, __file__, "--child", str(scale), program]
            cmd += ["--local"] if args.local else []
            cmd += ["--no-baselines"] if args.no_baselines else []
            cmd += ["--again", str(args.again)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            got = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
            if r.returncode or not got:
                print(f"{scale}x {program} failed:\n{r.stderr[-3000:]}", file=sys.stderr)
                continue
            rows.append(json.loads(got[-1][7:]))
            print(rows[-1], file=sys.stderr, flush=True)
    if not rows:
        return 1
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.float_format", "{:.2f}".format):
        print(table.to_string(index=False))
    try:
        load = os.getloadavg()[0]
        print(f"\nload average (1 min) at the end: {load:.1f} on {os.cpu_count()} cores")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

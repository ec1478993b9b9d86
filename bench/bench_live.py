"""Alert latency of live detection: position lands at the source → alert at the sink.

Synthetic buses report every 2 s (a third of them standing still) as CSV
files written, every 0.01 s (``--file-every``), into a directory that the live runner reads
(``dir://`` source; each file written aside and renamed in). The phrase
fires as soon as its second event arrives, so what is timed is the runner,
not a decision waiting for the watermark::

    phrase Standing per vehicle = BusGPS -> A ;= BusGPS -> B within 33 s

A fix is stamped ``[ts - 30 s, ts]``, so ``within 33 s`` pairs each fix of a
standing bus with the one before it (2 s earlier): one alert per standing
fix, a third of an alert per position, the same all along the run
(``--workload pairs`` is the earlier ``within 1 min``: every pair of a
standing bus's fixes up to 30 s apart, so alerts per position grow from 0
to 5 over the first 30 s of a run and the work per position with them).

For each rate (positions per second) the bench runs for ``--seconds`` and
reports the latency percentiles over every alert (landing time of the newer
of its two positions to the moment the sink received it). Then it looks for
the highest sustained rate: a rate is sustained when the input is drained
within 2 s of the end and latency at the end is not far above latency at the
start (median of the last third ≤ 2 × the first third + 0.5 s). Checkpoints
are on, as in production (saved every ``--checkpoint-every`` s, by default the
runner's, 10 s, by a forked child).

The baseline printed first is the same pipeline with the runner's work left
out: files written, listed and read, no phrase; its latency is the landing
of a file to its being read (what the directory source adds).

    .venv/bin/python bench/bench_live.py [--seconds 12] [--rates 100,1000,10000] [--file-every 0.01]
                                         [--bursts-every 0.1]
                                         [--spark] [--profile]

``--file-every`` is the file cadence, a parameter of the workload: at 10,000
positions/s a file every 0.01 s holds 100 positions, every 0.1 s 1,000. An
alert's latency is always from the moment its file landed, so a position
waits for the rest of its file to be processed; the tables name the cadence.
The default, 0.01 s, is the nearest this source comes to positions arriving
one by one (a stream); ``--bursts-every`` (default 0.1 s) then runs the
highest rate again in bursts, where the last position of a burst waits for
the work on all before it (about 35 µs each on one core).

Bounded: under 3 minutes with the defaults (local runner only); ``--spark``
adds the Spark runner at 100 and 1,000 positions/s (about 2 more minutes).
"""
from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spatec.plan.program import compile_program  # noqa: E402
from spatec.sinks.alerts import AlertSink, DeliveredLog, SinkSet  # noqa: E402

PROGRAM = f'''include "{ROOT / "examples" / "bus.spatec"}"

phrase Standing per vehicle =
    BusGPS -> A ;= BusGPS -> B
  within WITHIN
  emit vehicle = A.vehicle, since = A.t
'''
WORKLOADS = {"consecutive": "33 s", "pairs": "1 min"}
WORKLOAD = "consecutive"


def program_text() -> str:
    return PROGRAM.replace("WITHIN", WORKLOADS[WORKLOAD])

PERIOD = 2.0           # s between two fixes of one bus
TICK = 0.01            # s between two files (--file-every)
CRS = "EPSG:32631"
CHECKPOINT_EVERY = None  # s between two checkpoint saves of the local runner (None: its default)


class Feed:
    """Writes ``rate`` positions/s as CSV files into ``folder``, in a process of its own (so the
    runner under test does not slow the input down); ``landed`` maps each event id to the wall
    time its file was renamed into the folder."""

    def __init__(self, folder: Path, rate: int, seconds: float):
        import multiprocessing

        self.folder, self.rate, self.seconds = folder, rate, seconds
        self.landed: dict[str, float] = {}
        self.file_landed: dict[str, float] = {}
        self.proc = multiprocessing.get_context("fork").Process(target=_write_files,
                                                                args=(folder, rate, seconds), daemon=True)

    def start(self):
        self.proc.start()

    def join(self):
        self.proc.join()

    @property
    def files(self) -> int:
        return sum(1 for p in self.folder.glob("*.csv") if "warm" not in p.name)

    def load(self) -> None:
        """After the run: landing times per event id."""
        times = dict(line.split("\t") for line in (self.folder.parent / "landed.txt").read_text().splitlines())
        self.file_landed = {n: float(t) for n, t in times.items()}
        for p in self.folder.glob("*.csv"):
            if p.name not in times:
                continue
            t = float(times[p.name])
            for row in p.read_text().splitlines()[1:]:
                v, _, _, _, _, ts = row.split(",")
                self.landed[_event_id(v, float(ts))] = t

    @property
    def produced(self) -> int:
        return sum(len(p.read_text().splitlines()) - 1 for p in self.folder.glob("*.csv") if "warm" not in p.name)


def _write_files(folder: Path, rate: int, seconds: float) -> None:
    import random

    rng = random.Random(0)
    n_vehicles = max(1, int(rate * PERIOD))
    start = time.time()
    next_v, k, files = 0, 0, 0
    pos = {}
    with open(folder.parent / "landed.txt", "w") as log:
        while True:
            now = time.time()
            if now - start >= seconds:
                break
            due = int((now - start) * rate) - k
            rows = []
            for _ in range(due):
                v = next_v
                next_v = (next_v + 1) % n_vehicles
                x, y = pos.get(v, (0.05 + (v % 300) * 0.0005, 52.15 + (v // 300 % 300) * 0.0005))
                if v % 3:   # two buses in three move ~100 m per fix
                    x += 0.0015
                pos[v] = (x, y)
                ts = now + rng.random() * 1e-3
                rows.append(f"V{v},1,OP,{x:.6f},{y:.6f},{ts:.6f}\n")
            k += due
            if rows:
                name = f"{files:08d}.csv"
                tmp = folder / f".{name}"
                tmp.write_text("vehicle,line,operator,lon,lat,ts\n" + "".join(rows))
                tmp.rename(folder / name)
                log.write(f"{name}\t{time.time()}\n")
                files += 1
            time.sleep(max(0.0, TICK - (time.time() - now)))


def _event_id(vehicle: str, ts: float) -> str:
    from spatec.events.timefmt import format_time

    return f"BusGPS:{vehicle}:{format_time(int(round(ts * 1e6)))}"


class Clock(AlertSink):
    """A sink that only notes when each alert reached it."""

    name = "bench:"

    def __init__(self):
        self.at: dict[str, tuple[float, list]] = {}

    def deliver(self, alerts):
        now = time.time()
        for a in alerts:
            self.at[a["id"]] = (now, list(a["events"].values()))
        return list(alerts)


def latencies(feed: Feed, clock: Clock) -> list[tuple[float, float]]:
    """(landing time, latency) of each alert, by landing time."""
    out = []
    for at, ids in clock.at.values():
        landed = [feed.landed[i] for i in ids if i in feed.landed]
        if landed:
            out.append((max(landed), at - max(landed)))
    return sorted(out)


def _pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def run_local(rate: int, seconds: float, work: Path, detect: bool = True) -> dict:
    from spatec.feeds.sources import open_source, parse_source
    from spatec.runners.live_local import LocalLive

    shutil.rmtree(work, ignore_errors=True)
    (work / "in").mkdir(parents=True)
    prog = work / "bench.spatec"
    prog.write_text(program_text())
    compiled = compile_program(prog)
    src = open_source(parse_source(f"BusGPS=dir://{work / 'in'}"), work / "ck" / "spool",
                      [a.name for a in compiled.program.events["BusGPS"].attrs], settle=0.0)
    clock = Clock()
    read_at: dict[str, float] = {}

    def on_batch(items, delivered, trig, t_start):
        for it in items:
            read_at[it.offset] = it.arrived

    runner = LocalLive(compiled, [src], SinkSet([clock], DeliveredLog(work / "ck" / "delivered.jsonl")),
                       work / "ck", work / "ck", lateness=10_000_000, crs=CRS,
                       phrases=None if detect else ["__none__"], on_batch=None if detect else on_batch,
                       checkpoint_every=CHECKPOINT_EVERY)
    feed = Feed(work / "in", rate, seconds)
    stop = threading.Event()
    done_at = {}

    def drain():
        feed.join()
        t_end = time.time()
        n = feed.files
        while time.time() - t_end < 10:
            if len(src.done) >= n:
                done_at["t"] = time.time() - t_end
                break
            time.sleep(0.02)
        stop.set()

    feed.start()
    threading.Thread(target=drain, daemon=True).start()
    runner.run(trigger=0.0, stop=stop)
    feed.load()
    lat = latencies(feed, clock) if detect else sorted(
        (t, read_at[n] - t) for n, t in feed.file_landed.items() if n in read_at)
    return _summary(rate, lat, done_at.get("t"), len(src.done) >= feed.files, runner.state.batches,
                    feed.produced / seconds)


def run_spark(spark, rate: int, seconds: float, work: Path) -> dict:
    from spatec.runners.spark.live import SparkLive

    shutil.rmtree(work, ignore_errors=True)
    (work / "in").mkdir(parents=True)
    prog = work / "bench.spatec"
    prog.write_text(program_text())
    compiled = compile_program(prog)
    clock = Clock()
    sinks = SinkSet([clock], DeliveredLog(work / "ck" / "delivered.jsonl"))
    live = SparkLive(spark, compiled, [f"BusGPS=dir://{work / 'in'}"], sinks, work / "ck", work / "ck",
                     lateness=10_000_000, trigger=0.0, crs=CRS, max_polls=100000, settle=0.0)
    # warm up (the first micro-batch starts the Python workers): one file, wait for its batch
    (work / "warm.csv").write_text(f"vehicle,line,operator,lon,lat,ts\nW,1,OP,0.1,52.1,{time.time() - 60:.6f}\n")
    (work / "warm.csv").rename(work / "in" / "00000000-warm.csv")
    while not (live.query.lastProgress or {}).get("numInputRows"):
        time.sleep(0.2)
    feed = Feed(work / "in", rate, seconds)
    feed.start()
    feed.join()
    t_end = time.time()
    drained = None
    want = rate * seconds * 0.9
    while time.time() - t_end < 20:
        if live.input_counts()["read"] >= want:
            drained = time.time() - t_end
            break
        time.sleep(0.2)
    time.sleep(1.0)
    live.query.processAllAvailable()
    batches = (live.query.lastProgress or {}).get("batchId", 0)
    progress = [p for p in (live.query.recentProgress or []) if p.get("numInputRows")]
    live.stop()
    if progress:
        _print_progress(rate, progress)
    feed.load()
    return _summary(rate, latencies(feed, clock), drained, drained is not None, batches, feed.produced / seconds)


def _print_progress(rate, progress) -> None:
    """Where a micro-batch's time goes (Spark's query progress, medians over the batches with input)."""
    keys = sorted({k for p in progress for k in p.get("durationMs", {})})
    med = {k: statistics.median(p["durationMs"].get(k, 0) for p in progress) for k in keys}
    ops = [op for p in progress for op in p.get("stateOperators", [])]
    line = ", ".join(f"{k} {v:.0f}" for k, v in sorted(med.items(), key=lambda kv: -kv[1]) if v)
    rows = statistics.median(p["numInputRows"] for p in progress)

    print(f"  spark {rate:,}/s: {len(progress)} batches with input, median {rows:.0f} rows; durationMs medians: {line}")
    if ops:
        for k in ("allUpdatesTimeMs", "commitTimeMs", "numRowsTotal", "numRowsUpdated", "memoryUsedBytes"):
            vals = [op.get(k) for op in ops if op.get(k) is not None]
            if vals:
                print(f"    state operator {k}: median {statistics.median(vals):,.0f}, max {max(vals):,.0f}")


def _summary(rate, lat, drained, complete, batches, actual) -> dict:
    ls = [x for _, x in lat]
    third = max(1, len(ls) // 3)
    first, last = statistics.median(ls[:third]) if ls else 0, statistics.median(ls[-third:]) if ls else 0
    sustained = complete and drained is not None and drained <= 2.0 and last <= 2 * first + 0.5
    return {"rate": rate, "alerts": len(ls), "p50": _pct(ls, 50), "p99": _pct(ls, 99), "p999": _pct(ls, 99.9),
            "first": first,
            "last": last, "drained": drained, "sustained": sustained, "batches": batches, "actual": actual}


def table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(f"{'positions/s':>12} {'written/s':>10} {'alerts':>8} {'p50 ms':>9} {'p99 ms':>9} {'p99.9 ms':>9} "
          f"{'start→end p50 ms':>18} "
          f"{'drained s':>10} {'batches':>8}  sustained")
    for r in rows:
        d = "-" if r["drained"] is None else f"{r['drained']:.2f}"
        print(f"{r['rate']:>12,} {r['actual']:>10,.0f} {r['alerts']:>8,} {r['p50'] * 1e3:>9.0f} {r['p99'] * 1e3:>9.0f} "
              f"{r['p999'] * 1e3:>9.0f} "
              f"{r['first'] * 1e3:>8.0f}→{r['last'] * 1e3:<8.0f} {d:>10} {r['batches']:>8,}  "
              f"{'yes' if r['sustained'] else 'NO'}")


class _SkipLocal(Exception):
    pass


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in __import__("os").getloadavg())
    except OSError:
        return "?"


@contextlib.contextmanager
def cadence(seconds: float):
    """The feed's file cadence (:data:`TICK`) set to ``seconds`` for a run, then back."""
    global TICK
    before, TICK = TICK, seconds
    try:
        yield
    finally:
        TICK = before


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=12.0, help="seconds of input per rate (default 12)")
    ap.add_argument("--spark", action="store_true", help="also the Spark runner (100 and 1,000 positions/s)")
    ap.add_argument("--profile", action="store_true", help="cProfile the 10,000 positions/s run")
    ap.add_argument("--spark-only", action="store_true", help="only the Spark runner")
    ap.add_argument("--rates", default="100,1000,10000", help="local runner rates, positions/s (default "
                    "100,1000,10000)")
    ap.add_argument("--spark-rates", default="100,1000", help="Spark runner rates (default 100,1000)")
    ap.add_argument("--no-search", action="store_true", help="skip the search for the highest sustained rate")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the Spark runner's session (repeatable)")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="consecutive",
                    help="consecutive: one alert per standing fix (default); pairs: every pair of a "
                         "standing bus's fixes up to 30 s apart (the work grows over the run)")
    ap.add_argument("--file-every", type=float, default=0.01, metavar="SECONDS",
                    help="seconds between two input files (default 0.01: 100 positions a file at 10,000/s)")
    ap.add_argument("--spark-file-every", type=float, default=0.1, metavar="SECONDS",
                    help="the Spark runner's file cadence (default 0.1: its file source lists and opens "
                         "every file, so at 0.01 s a micro-batch handles ten times the files)")
    ap.add_argument("--bursts-every", type=float, default=0.1, metavar="SECONDS",
                    help="then the local runner at the highest rate again with a file every SECONDS "
                         "(default 0.1: bursts of 1,000 positions at 10,000/s; 0: not)")
    ap.add_argument("--checkpoint-every", type=float, default=None,
                    help="local runner: seconds between checkpoint saves (default: the runner's, 10; "
                         "0: every batch)")
    args = ap.parse_args(argv)
    global WORKLOAD, CHECKPOINT_EVERY, TICK
    WORKLOAD, CHECKPOINT_EVERY, TICK = args.workload, args.checkpoint_every, args.file_every
    rates = [int(x) for x in args.rates.split(",") if x]
    spark_rates = [int(x) for x in args.spark_rates.split(",") if x]
    print(f"workload {WORKLOAD} (within {WORKLOADS[WORKLOAD]}), a file every {TICK:g} s, load average {_load()}")
    t0 = time.time()
    work = Path(tempfile.mkdtemp(prefix="spatec-bench-live-"))
    try:
        if args.spark_only:
            args.spark = True
            raise _SkipLocal
        base = run_local(1000, args.seconds / 2, work / "base", detect=False)
        print(f"baseline (files written, listed and read; no phrase) at 1,000 positions/s: landing → read "
              f"p50 {base['p50'] * 1e3:.1f} ms, p99 {base['p99'] * 1e3:.1f} ms; "
              f"drained in {base['drained'] or float('nan'):.2f} s after the input stopped")
        rows = []
        for rate in rates:
            if args.profile and rate == max(rates):
                import cProfile
                import pstats

                pr = cProfile.Profile()
                pr.enable()
                rows.append(run_local(rate, args.seconds, work / f"r{rate}"))
                pr.disable()
                pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
            else:
                rows.append(run_local(rate, args.seconds, work / f"r{rate}"))
        from spatec.runners.live_local import CHECKPOINT_EVERY as default_every

        every = default_every if CHECKPOINT_EVERY is None else CHECKPOINT_EVERY
        table(f"local runner (a file every {TICK:g} s, checkpoint saved every {every:g} s)  "
              f"load average {_load()}", rows)
        if args.bursts_every and rates:
            # the same rate in bursts: a position waits for those of its file before it
            top = max(rates)
            with cadence(args.bursts_every):
                burst = [run_local(top, args.seconds, work / f"b{top}")]
            table(f"local runner in bursts (a file every {args.bursts_every:g} s: "
                  f"{int(top * args.bursts_every):,} positions a file)  load average {_load()}", burst)
        if args.no_search:
            raise _SkipLocal
        # the highest sustained rate: bisect between the rates tried
        ok = [r["rate"] for r in rows if r["sustained"]]
        bad = [r["rate"] for r in rows if not r["sustained"]]
        lo, hi = (max(ok) if ok else 0), (min(bad) if bad else None)
        probes = []
        if hi is None:
            probe = lo * 2
            while time.time() - t0 < 120 and len(probes) < 3:
                r = run_local(probe, args.seconds * 0.75, work / f"p{probe}")
                probes.append(r)
                if not r["sustained"]:
                    hi = probe
                    break
                lo, probe = probe, probe * 2
        while hi is not None and hi - lo > max(250, lo // 5) and time.time() - t0 < 150 and len(probes) < 4:
            mid = (lo + hi) // 2
            r = run_local(mid, args.seconds * 0.75, work / f"p{mid}")
            probes.append(r)
            lo, hi = (mid, hi) if r["sustained"] else (lo, mid)
        if probes:
            table(f"search for the highest sustained rate (a file every {TICK:g} s)", probes)
        print(f"\nhighest sustained rate (local): about {lo:,} positions/s"
              + (f" (not sustained at {hi:,})" if hi else " (the highest tried)"))
    except _SkipLocal:
        pass
    try:
        if args.spark:
            from spatec.runners.spark.session import get_or_create

            conf = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.locality.wait": "0s"}
            conf.update(kv.split("=", 1) for kv in args.spark_conf)
            spark = get_or_create("local[2]", conf)
            with cadence(args.spark_file_every):
                srows = [run_spark(spark, rate, args.seconds, work / f"s{rate}") for rate in spark_rates]
            table(f"spark runner (a file every {args.spark_file_every:g} s; trigger 0: a micro-batch as soon as "
                  f"the last ends)  load average {_load()}", srows)
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\ntotal {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

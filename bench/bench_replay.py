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
   hand-written baselines of :mod:`baselines` — DuckDB projecting with
   pyproj, DuckDB projecting in SQL, PySpark — on the same canonical events,
   in the same process (PySpark's in a SparkSession of its own, with Spark's
   own JVM settings, each query run once untimed first: :func:`pyspark_baseline`),
   and asserts they produce exactly spatec's
   composites: the same number of rows and the same order-free digest of
   their event ids (:func:`baselines.digest`), which DuckDB computes from
   spatec's output file and from each baseline's rows. Nothing holds every
   event or every composite in Python, so both baselines run at 16x too:
   spatec's canonical events are written once to a Parquet file, slice by
   slice (:func:`baselines.write_canonical`, untimed), and each baseline's
   time is reading that file, projecting the positions, and the query with
   its rows materialised: ``duckdb_pyproj_s`` projects with pyproj batch by
   batch in Python into a DuckDB table (:func:`baselines.duckdb_file`);
   ``duckdb_sql_s`` projects in DuckDB's SQL, no Python per batch, over a
   view of the file (:func:`baselines.duckdb_sql_file`; PROJ's transverse
   Mercator written out in SQL, pyproj's positions to the bit on valid
   input); ``pyspark_s`` projects with pyproj in ``mapInArrow`` tasks and
   Spark writes the rows to a Parquet folder (:func:`baselines.pyspark_write`).
   ``spatec_vs_duckdb_pyproj``, ``spatec_vs_duckdb_sql``, ``spatec_vs_pyspark``
   put spatec's whole run (reading and typing the input included) against
   each baseline's time, ``spatec_vs_fastest`` against the fastest of them
   (``fastest``: which), ``match_vs_pyspark`` only its matching stage;
   ``duckdb_pyproj_mb``, ``duckdb_sql_mb``, ``pyspark_driver_mb`` and
   ``pyspark_workers_mb`` are the baselines' peak memory (as below);
4. with ``--local`` (scale 1 only), the local runner's matching on the same events;
   with ``--automaton`` (scale 1 only), the local runner's matching with the fast paths and
   with the general automaton (``fastpath=False``) on the same events in the same process:
   ``fast_s``, ``automaton_s``, their fixes/s and ``automaton_vs_fast`` (the output frames
   asserted equal);
5. the whole replay ``--again`` more times in the same session (``again_s``,
   ``fixes_per_s_again``: the median, and ``again_min_s``/``again_max_s``): a
   long-lived session's steady state, without the first replay's one-off costs
   in the workers. On a virtual machine two runs of one build can differ by a
   fifth (memory the kernel hands back to the host within a second costs
   ~1 s of kernel time per GiB when touched again): ``--again 5`` shows
   the spread.

Peak memory is the largest resident set of the child's process tree, sampled
every 0.1 s from /proc during step 2: ``driver_mb`` (the Python driver and its
JVM, whose executor threads run in it in local mode), ``workers_mb`` (Spark's
Python workers) and ``peak_rss_mb`` (their largest sum).

``--formats jsonl,parquet`` replays each program to each output format (the
baselines run with the first; the other formats' ``spatec_vs_*`` ratios are
against those same times); ``--local-runner 1,4`` also replays with the local
runner, alone in its own process (its time and peak memory), at those scales.
``--programs three`` is the scaling benchmark's program
(``bench/three_phrases.spatec``: HospitalToStation, Stuck and Silent over one
ingest); its baseline times are the three baselines' added up.

Every finished row is appended to a JSON lines file (``--out``; by default
under ``~/.cache/spatec/bench/results/``) and the markdown table so far
rewritten beside it (``FILE.md``), so a long run keeps its finished rows if a
later one fails; a child whose baselines fail still leaves spatec's part of
its row, with ``error``. ``load`` / ``load_end``: the 1-minute load average when
the row started and ended. The table is printed as markdown at the end.

    .venv/bin/python bench/bench_replay.py --scaling            # issue 19's table: 1x/4x/16x, JSON lines
                                                                # and GeoParquet, DuckDB and PySpark
    .venv/bin/python bench/bench_replay.py --scaling --scales 1  # the same at 1x only
    .venv/bin/python bench/bench_replay.py                      # bus-day, every program, JSON lines
    .venv/bin/python bench/bench_replay.py --scales 1,4 --programs hospital_to_station,stuck
    .venv/bin/python bench/bench_replay.py --scales 1,4 --programs three --formats jsonl,parquet \
        --local-runner 1,4 --again 2
"""
from __future__ import annotations

import argparse
import math
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
PROGRAMS = {  # program → (file, phrases with a baseline)
    "three": (ROOT / "bench" / "three_phrases.spatec", ("HospitalToStation", "Stuck", "Silent")),
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

#: Command-line words of a Spark Python worker (pyspark's daemon and the workers it forks).
WORKER_MARKS = ("spatec.runners.spark.daemon", "pyspark.daemon", "pyspark.worker")


def tree_rss_mb(pid: int) -> tuple[float, float]:
    """Resident memory (MiB) of ``pid`` and all its descendants (from /proc): the driver's
    (the Python driver and its JVM, with Spark's executor threads in local mode) and the
    Python workers' (pyspark's daemon and the workers it forks)."""
    children: dict = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    driver = workers = 0
    todo = [(pid, False)]
    while todo:
        p, worker = todo.pop()
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            # a Python worker's command line (the JVM's names the daemon module in a setting)
            worker = worker or (b"java" not in argv[0] and any(m.encode() in argv for m in WORKER_MARKS))
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        kb = int(line.split()[1])
                        if worker:
                            workers += kb
                        else:
                            driver += kb
        except OSError:
            pass
        todo.extend((c, worker) for c in children.get(p, ()))
    return driver / 1024, workers / 1024


class PeakMemory:
    """Samples the process tree's RSS in a thread between ``start`` and ``stop``: the
    peaks of the driver's, the workers' and their sum."""

    def __init__(self, every: float = 0.1):
        self.every, self._stop = every, threading.Event()
        self.peak = self.driver = self.workers = 0.0

    def __enter__(self):            # again: the peaks over every entry
        self._stop.clear()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            d, w = tree_rss_mb(os.getpid())
            self.driver, self.workers, self.peak = max(self.driver, d), max(self.workers, w), max(self.peak, d + w)
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

def emit(row: dict) -> None:
    """The child's row so far, on one line of its standard output (the parent keeps the last)."""
    print("RESULT " + json.dumps(row), flush=True)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def child(scale: int, program: str, local: bool, baselines: bool, again: int = 1, fmt: str = "jsonl",
          runner: str = "spark", automaton: bool = False, pyspark: bool = True) -> dict:
    from spatec.plan.program import compile_program
    from spatec.runners.local import replay_frames
    from spatec.runners.replay import ingest
    from spatec.runners.local import local_replay
    from spatec.runners.spark.batch import replay_spark, warm_workers
    from spatec.runners.spark.session import get_or_create

    path, phrases = PROGRAMS[program]
    phrases = (phrases,) if isinstance(phrases, str) else tuple(p for p in (phrases or ()) if p)
    data = bus_day(scale)
    c = compile_program(path)
    inputs = [("BusGPS", str(data))]
    load = os.getloadavg()[0]
    if runner == "local":       # the local runner alone in this process: its time and peak memory
        with tempfile.TemporaryDirectory() as d:
            with PeakMemory() as mem:
                result, t = timed(lambda: local_replay(c, inputs, Path(d), fmt))
        return {"scale": scale, "program": program, "format": fmt, "runner": "local",
                "fixes": result.ingest.read, "composites": sum(result.counts.values()), "total_s": t,
                "fixes_per_s": result.ingest.read / t, "driver_mb": mem.driver, "workers_mb": 0.0,
                "peak_rss_mb": mem.peak, "load": load}
    spark = get_or_create(None, {"spark.driver.memory": "8g"})
    warm_workers(spark)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        with PeakMemory() as mem:
            # what `spatec replay` runs: ingest (in Spark tasks on the staged exchange), match, write
            result, t_total = timed(lambda: replay_spark(c, inputs, out / "a", fmt=fmt, spark=spark))
        t_ingest, t_match = result.seconds["ingest"], result.seconds["match"]
        t_write = t_total - t_ingest - t_match
        # the same again in this session: the steady state of a long-lived session (a notebook)
        agains = [timed(lambda: replay_spark(c, inputs, out / f"b{i}", fmt=fmt, spark=spark))[1]
                  for i in range(again)]
        t_again = statistics.median(agains) if agains else math.nan
        n = result.ingest.read
        row = {"scale": scale, "program": program, "format": fmt, "runner": "spark", "fixes": n,
               "composites": sum(result.counts.values()), "total_s": t_total, "fixes_per_s": n / t_total,
               "ingest_s": t_ingest, "match_s": t_match, "write_s": t_write, "driver_mb": mem.driver,
               "workers_mb": mem.workers, "peak_rss_mb": mem.peak, "again_s": t_again,
               "fixes_per_s_again": n / t_again if agains else math.nan, "load": load}
        if again > 1:
            row.update(again_min_s=min(agains), again_max_s=max(agains))
        row["load_end"] = os.getloadavg()[0]
        if local or automaton:
            frames, _summary = ingest(c, inputs, out / "c")     # canonical events, for the others (untimed)
        if local and scale == 1:
            lo, t_local = timed(lambda: replay_frames(c, frames))
            assert lo.counts == result.counts, (lo.counts, result.counts)
            row.update(local_match_s=t_local)
        if automaton and scale == 1:
            import pandas as pd

            fast, t_fast = timed(lambda: replay_frames(c, frames, fastpath=True))
            general, t_gen = timed(lambda: replay_frames(c, frames, fastpath=False))
            for name, df in general.frames.items():
                pd.testing.assert_frame_equal(fast.frames[name], df, check_exact=True)
            row.update(fast_s=t_fast, automaton_s=t_gen, fast_fixes_per_s=n / t_fast,
                       automaton_fixes_per_s=n / t_gen, automaton_vs_fast=t_gen / t_fast)
        if local or automaton:
            del frames
        if baselines and phrases:
            emit(row)       # spatec's part of the row, kept by the parent should the baselines fail
            got = compare_baselines(c, result, data, out, phrases, pyspark, program)
            # spatec end to end (reading and typing the input included) against the baselines
            # from canonical events already typed (DuckDB: from their Parquet file)
            row.update(got)
            row.update(ratios(t_total, got))
            row["again_vs_fastest"] = t_again / got[row["fastest"] + "_s"]
            if "pyspark_s" in got:
                row["match_vs_pyspark"] = t_match / got["pyspark_s"]
            row["load_end"] = os.getloadavg()[0]
    return row


def compare_baselines(c, result, data: Path, out: Path, phrases, spark: bool = False, program: str = "") -> dict:
    """The hand-written baselines of ``phrases`` on the same canonical events as spatec's
    run ``result``, timed; each asserted to give exactly spatec's composites (the row
    count and an order-free digest of the event ids, :func:`baselines.digest`, read by
    DuckDB from spatec's output file and from the baseline's rows). Streaming: the
    canonical events are written once to Parquet slice by slice (untimed); DuckDB
    projecting with pyproj (:func:`baselines.duckdb_file`), DuckDB projecting in SQL
    (:func:`baselines.duckdb_sql_file`) and, with ``spark``, PySpark
    (:func:`baselines.pyspark_write`, in a session of its own: :func:`pyspark_baseline`) each read that file
    themselves, so no step holds all events or all composites in Python. Each baseline's
    time (``duckdb_pyproj_s``, ``duckdb_sql_s``, ``pyspark_s``) is reading the file,
    projecting the positions, the query and its rows materialised (DuckDB: a table;
    PySpark: a Parquet folder written by Spark); its peak memory (``duckdb_pyproj_mb``,
    ``duckdb_sql_mb``: the driver process tree; ``pyspark_driver_mb`` /
    ``pyspark_workers_mb``) is sampled over its three queries."""
    import baselines as B

    canon = str(out / "events.parquet")
    used = B.write_canonical(c.program, "BusGPS", str(data), canon)            # untimed
    assert used == result.ingest.used, (used, result.ingest.used)
    crs = result.crs
    names = {"HospitalToStation": "hospital_to_station", "Stuck": "stuck", "Silent": "silent"}
    duckdb = {"duckdb_pyproj": B.duckdb_file, "duckdb_sql": B.duckdb_sql_file}
    seconds = dict.fromkeys(duckdb, 0.0)
    mem = {k: PeakMemory() for k in duckdb}
    places = B.places_of(c.program)
    ps_got = {}
    if spark:        # (first: its own session, while this one's memory is idle)
        r = subprocess.run([sys.executable, __file__, "--pyspark-baseline", program, canon, crs, str(out)],
                           capture_output=True, text=True)
        lines = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
        if r.returncode or not lines:
            raise RuntimeError(f"the PySpark baseline failed: {r.stderr[-2000:]}")
        ps_got = json.loads(lines[-1][7:])
    for phrase in phrases:
        name = names[phrase]
        variables = B.VARIABLES[name]
        mine = B.output_digest(result.paths[phrase], variables)
        assert mine[0] == result.counts[phrase], (phrase, mine, result.counts[phrase])
        for key, run in duckdb.items():
            with mem[key]:
                con, t = timed(lambda: run(name, canon, crs, places=places, tmp=str(out)))
            try:
                duck = B.digest(con, "res", B.RESULT_COLUMNS[name])
            finally:
                con.close()
            seconds[key] += t
            assert duck == mine, (phrase, key, duck, mine)
        if spark:
            ps = B.files_digest(out / f"pyspark_{name}", variables)
            assert ps == mine, (phrase, ps, mine)
    got = {f"{k}_s": seconds[k] for k in duckdb} | {f"{k}_mb": mem[k].driver for k in duckdb}
    if spark:
        got.update(ps_got)
    return got


def pyspark_baseline(program: str, canon: str, crs: str, out: str) -> dict:
    """The PySpark baseline of ``program``'s phrases in a session of its own, with Spark's
    own JVM settings (spatec's sessions on a local master run the JIT's first tier only,
    which suits its Python tasks and not a DataFrame query's Java): each query run once to
    warm the JVM and the workers (untimed), then timed, its rows written to
    ``out/pyspark_<name>``; its time and its process tree's peak memory."""
    import baselines as B

    from spatec.plan.program import compile_program
    from spatec.runners.spark.batch import warm_workers
    from spatec.runners.spark.session import get_or_create

    path, phrases = PROGRAMS[program]
    phrases = (phrases,) if isinstance(phrases, str) else tuple(phrases)
    spark = get_or_create(None, {"spark.driver.memory": "8g", "spark.driver.extraJavaOptions": ""})
    warm_workers(spark)
    places = B.places_of(compile_program(path).program)
    names = {"HospitalToStation": "hospital_to_station", "Stuck": "stuck", "Silent": "silent"}
    mem, total = PeakMemory(), 0.0
    for again in (False, True):
        for phrase in phrases:
            name = names[phrase]
            folder = str(Path(out) / f"pyspark_{name}")
            if not again:
                B.pyspark_write(spark, name, canon, crs, folder, places=places)
                continue
            with mem:
                _, t = timed(lambda: B.pyspark_write(spark, name, canon, crs, folder, places=places))
            total += t
    return {"pyspark_s": total, "pyspark_driver_mb": mem.driver, "pyspark_workers_mb": mem.workers}


# ------------------------------------------------------------------------------- parent

#: The table's columns, in this order (others a row has follow): what the scaling table reports.
COLUMNS = ("scale", "program", "format", "runner", "tree", "fixes", "composites", "fixes_per_s", "total_s", "ingest_s",
           "match_s", "write_s", "driver_mb", "workers_mb", "peak_rss_mb", "duckdb_pyproj_s", "duckdb_sql_s",
           "pyspark_s", "spatec_vs_duckdb_pyproj", "spatec_vs_duckdb_sql", "spatec_vs_pyspark", "spatec_vs_fastest",
           "fastest", "match_vs_pyspark", "duckdb_pyproj_mb", "duckdb_sql_mb", "pyspark_driver_mb",
           "pyspark_workers_mb", "again_s", "tree_vs_this", "load", "load_end", "error")
#: The baselines' names (their times are ``NAME_s``): a row's ``spatec_vs_NAME`` for each it has, and
#: ``spatec_vs_fastest`` against the fastest. The baselines run once per scale and program, with the first
#: format; the scale's other rows get the ratios against those times (:func:`with_ratios`).
BASELINES = ("duckdb_pyproj", "duckdb_sql", "pyspark")


def ratios(total_s: float, baselines: dict) -> dict:
    """spatec's time ``total_s`` against each baseline time of ``baselines`` (``NAME_s``
    of :data:`BASELINES`): ``spatec_vs_NAME``, ``fastest`` (the name of the fastest
    baseline) and ``spatec_vs_fastest``; nothing when no baseline ran."""
    times = {k: baselines[f"{k}_s"] for k in BASELINES if baselines.get(f"{k}_s")}
    if not times or not total_s:
        return {}
    fastest = min(times, key=times.get)
    return {f"spatec_vs_{k}": total_s / t for k, t in times.items()} | {
        "fastest": fastest, "spatec_vs_fastest": total_s / times[fastest]}


def with_ratios(rows: list) -> list:
    """``rows`` with :func:`ratios`: against a row's own baseline times, and on the rows
    that ran no baseline (the other formats, ``--runner local``) against the same scale's
    and program's."""
    ran = lambda r: any(f"{k}_s" in r for k in BASELINES)       # noqa: E731
    base = {(r["scale"], r["program"]): r for r in rows if ran(r)}
    mine = {(r["scale"], r["program"], r.get("format"), r.get("runner")): r for r in rows if not r.get("tree")}
    out = []
    for r in rows:
        r = dict(r)
        b = r if ran(r) else base.get((r["scale"], r["program"]))
        if b is not None:
            r.update(ratios(r.get("total_s"), b))
        m = mine.get((r["scale"], r["program"], r.get("format"), r.get("runner"))) if r.get("tree") else None
        if m is not None and m.get("total_s") and r.get("total_s"):
            r["tree_vs_this"] = r["total_s"] / m["total_s"]      # (< 1: the other tree is faster)
        out.append(r)
    return out


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown(rows: list) -> str:
    """The rows as a markdown table: the :data:`COLUMNS` any row has a value of, then the rest."""
    rows = with_ratios(rows)
    have = {k for r in rows for k, v in r.items() if _cell(v)}
    cols = [c for c in COLUMNS if c in have] + sorted(have - set(COLUMNS))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scaling", action="store_true",
                    help="the scaling table of issue 19: --scales 1,4,16 --programs three --formats "
                         "jsonl,parquet --again 0 (options given as well override these)")
    ap.add_argument("--scales", default=None, help="bus-days, comma-separated (default 1)")
    ap.add_argument("--programs", default=None, help="default: every program")
    ap.add_argument("--local", action="store_true", help="also time the local runner (scale 1)")
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--automaton", action="store_true",
                    help="also match locally with the fast paths and with the automaton, same process (scale 1)")
    ap.add_argument("--again", type=int, default=None,
                    help="replays after the first, in the same session (median; 0: none; default 1)")
    ap.add_argument("--pyspark-scales", default="", metavar="SCALES",
                    help="run the hand-written PySpark baseline only at these scales (default: every scale; "
                         "DuckDB's runs at every scale)")
    ap.add_argument("--formats", default=None, help="output formats, comma-separated: jsonl,parquet (default jsonl)")
    ap.add_argument("--local-runner", default="", metavar="SCALES",
                    help="also replay with --runner local, alone in its process, at these scales (e.g. 1,4)")
    ap.add_argument("--out", default=None, metavar="FILE",
                    help="JSON lines file the rows are appended to as each finishes, beside it FILE.md with "
                         "the table so far (default: ~/.cache/spatec/bench/results/replay-<UTC time>.jsonl)")
    ap.add_argument("--tree", default="", metavar="DIR[,DIR]",
                    help="also replay with spatec as another checkout has it (a git worktree of an earlier "
                         "commit, e.g. the staged exchange's): its own bench_replay.py's child, its code first "
                         "on the path, interleaved with this tree's runs; rows say which (tree)")
    ap.add_argument("--no-pyspark", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=4, metavar=("SCALE", "PROGRAM", "FORMAT", "RUNNER"), help=argparse.SUPPRESS)
    ap.add_argument("--pyspark-baseline", nargs=4, metavar=("PROGRAM", "CANON", "CRS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.pyspark_baseline:
        emit(pyspark_baseline(*args.pyspark_baseline))
        return 0
    preset = {"scales": "1,4,16", "programs": "three", "formats": "jsonl,parquet", "again": 0} if args.scaling \
        else {"scales": "1", "programs": ",".join(PROGRAMS), "formats": "jsonl", "again": 1}
    for k, v in preset.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.child:
        row = child(int(args.child[0]), args.child[1], args.local, not args.no_baselines, args.again,
                    args.child[2], args.child[3], args.automaton, not args.no_pyspark)
        emit(row)
        return 0

    out = Path(args.out) if args.out else \
        CACHE / "results" / time.strftime("replay-%Y%m%d-%H%M%S.jsonl", time.gmtime())
    out.parent.mkdir(parents=True, exist_ok=True)
    table = out.with_name(out.name + ".md")
    print(f"rows: {out} (table so far: {table})", file=sys.stderr, flush=True)
    formats = args.formats.split(",")
    pyspark_scales = {int(x) for x in args.pyspark_scales.split(",") if x}
    local_scales = {int(x) for x in args.local_runner.split(",") if x}
    rows = []
    for scale in [int(s) for s in args.scales.split(",")]:
        bus_day(scale)
        runs = [(p, f, "spark") for p in args.programs.split(",") for f in formats]
        if scale in local_scales:
            runs += [(p, f, "local") for p in args.programs.split(",") for f in formats]
        trees = [("", Path(__file__))] + [(t, Path(t).resolve() / "bench" / "bench_replay.py")
                                           for t in args.tree.split(",") if t]
        runs = [(p, f, r, tree) for p, f, r in runs for tree in trees]
        for program, fmt, runner, (tree, script) in runs:
            cmd = [sys.executable, str(script), "--child", str(scale), program, fmt, runner]
            cmd += ["--local"] if args.local else []
            cmd += ["--automaton"] if args.automaton else []
            cmd += ["--no-baselines"] if args.no_baselines or fmt != formats[0] or tree else []
            cmd += ["--again", str(args.again)]
            cmd += ["--no-pyspark"] if pyspark_scales and scale not in pyspark_scales else []
            print(f"{time.strftime('%H:%M:%S')} {scale}x {program} {fmt} {runner} "
                  f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
            env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve())) if tree else None
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            got = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
            if r.returncode or not got:
                print(f"{scale}x {program} {fmt} {runner} failed:\n{r.stderr[-3000:]}", file=sys.stderr)
                if not got:
                    continue
            row = json.loads(got[-1][7:])
            if tree:
                row["tree"] = tree
            if r.returncode:        # spatec's part finished, the baselines did not: keep it, say why
                tail = [l for l in r.stderr.splitlines() if l.strip()]
                row["error"] = tail[-1][:200] if tail else f"exit {r.returncode}"
            rows.append(row)
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")
            table.write_text(markdown(rows) + "\n")
            print(row, file=sys.stderr, flush=True)
    if not rows:
        return 1
    print(markdown(rows))
    try:
        load = os.getloadavg()[0]
        print(f"\nload average (1 min) at the end: {load:.1f} on {os.cpu_count()} cores")
    except OSError:
        pass
    print(f"rows: {out}; table: {table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

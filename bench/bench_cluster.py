"""The three-phrase program on a Spark standalone cluster with no folder shared for spatec.

A master and two workers on 127.0.0.1 (``scripts/local_cluster.sh``), each worker with
its own work directory and its own local directories (``SPARK_LOCAL_DIRS``: shuffle
files and spills), the exchange through Spark's shuffle (``spark.spatec.exchange=shuffle``)
and the outputs as folders of parts (``spark.spatec.output=dataset``): what a real cluster
gets. For each scale (``--scales``, bus-days: the Cambridge hour as ``24 * S`` time-shifted
copies, :func:`bench_replay.bus_day`), ``spatec replay`` runs in a child process whose
process tree (the Python driver and its JVM: the executors are the workers' children, not
the driver's) is sampled every 0.1 s for its peak resident memory (``driver_mb``).

Its composites are checked, per phrase, against two independent answers:

- the hand-written DuckDB query that projects in SQL (:func:`baselines.duckdb_sql_file`)
  on the same canonical events: the count and an order-free digest of the event ids;
- with ``--local-runner S`` (scales at most 4 by default: the local runner holds a
  bus-day in about 1 GB), ``spatec replay --runner local``: the count and an order-free
  digest of (id, lo, hi) of every composite.

``--programs`` may add the phrases over phrases (``headway``, ``stuck_together``), checked
against the local runner. Prints a markdown table; the rows are also appended as JSON lines
to ``--out``.

    .venv/bin/python bench/bench_cluster.py --scales 1,4,16
    .venv/bin/python bench/bench_cluster.py --scales 1 --programs headway,stuck_together
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import baselines as B  # noqa: E402
from bench_replay import CACHE, bus_day, tree_rss_mb  # noqa: E402

PROGRAMS = {
    "three": (ROOT / "bench" / "three_phrases.spatec", ("HospitalToStation", "Stuck", "Silent")),
    "headway": (ROOT / "examples" / "headway" / "headway.spatec", None),
    "stuck_together": (ROOT / "examples" / "stuck_together" / "stuck_together.spatec", None),
}
NAMES = {"HospitalToStation": "hospital_to_station", "Stuck": "stuck", "Silent": "silent"}


def run(argv: list, env=None) -> tuple[float, float, str]:
    """``spatec`` with ``argv`` in a child process: its seconds, its tree's peak RSS (MiB)
    and its standard error."""
    peak = [0.0]
    proc = subprocess.Popen([sys.executable, "-m", "spatec.cli.main", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    done = threading.Event()

    def sample():
        while not done.is_set():
            d, w = tree_rss_mb(proc.pid)
            peak[0] = max(peak[0], d + w)
            done.wait(0.1)

    t = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    t.start()
    _, err = proc.communicate()
    seconds = time.perf_counter() - t0
    done.set()
    t.join()
    if proc.returncode != 0:
        raise SystemExit(f"spatec {' '.join(argv)} failed ({proc.returncode}):\n{err[-3000:]}")
    return seconds, peak[0], err


def files_of(out: Path, phrase: str) -> str:
    """The glob of a phrase's output: its file, or its folder's parts."""
    p = out / phrase
    return str(p / "*.jsonl") if p.is_dir() else str(out / f"{phrase}.jsonl")


def stamp_digest(glob: str) -> tuple[int, int]:
    """Count and order-free digest of every composite's (id, lo, hi)."""
    con = B._duck()
    try:
        rel = (f"read_json({B._quote(glob)}, format = 'newline_delimited', "
               "columns = {'id': 'VARCHAR', 'lo': 'VARCHAR', 'hi': 'VARCHAR'})")
        return B.digest(con, rel, ["id", "lo", "hi"])
    finally:
        con.close()


def phrases_of(out: Path) -> list:
    return sorted(o["phrase"] for o in json.loads((out / "_manifest.json").read_text())["outputs"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", default="1,4,16")
    ap.add_argument("--programs", default="three")
    ap.add_argument("--local-runner", default="1,4", help="scales also replayed by --runner local")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(CACHE / "results" / "cluster.jsonl"))
    args = ap.parse_args()
    scales = [int(s) for s in args.scales.split(",") if s]
    local_scales = {int(s) for s in args.local_runner.split(",") if s}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="spatec-cluster-") as d:
        d = Path(d)
        url = subprocess.run(["bash", str(ROOT / "scripts" / "local_cluster.sh"), "start", str(d / "cluster"),
                              str(args.workers)], check=True, capture_output=True, text=True).stdout.strip()
        try:
            for scale in scales:
                data = bus_day(scale)
                for program in args.programs.split(","):
                    path, checked = PROGRAMS[program]
                    out = d / f"out-{program}-{scale}"
                    conf = ["--conf", "spark.spatec.exchange=shuffle", "--conf", "spark.spatec.output=dataset",
                            "--conf", "spark.spatec.staging=off", "--conf", "spark.executor.memory=2g"]
                    secs, peak, _ = run(["replay", str(path), "--events", f"BusGPS={data}", "--out", str(out),
                                         "--master", url, "--quiet", *conf])
                    manifest = json.loads((out / "_manifest.json").read_text())
                    row = {"scale": scale, "program": program, "fixes": manifest["read"], "cluster_s": round(secs, 1), "driver_mb": round(peak), "equal": {}}
                    got = {p: stamp_digest(files_of(out, p)) for p in phrases_of(out)}
                    row["composites"] = {p: g[0] for p, g in got.items()}
                    if checked:
                        canon = str(d / "events.parquet")
                        from spatec.plan.program import compile_program

                        c = compile_program(path)
                        B.write_canonical(c.program, "BusGPS", str(data), canon)
                        crs = manifest["crs"]
                        for phrase in checked:
                            name = NAMES[phrase]
                            mine = B.output_digest(files_of(out, phrase), B.VARIABLES[name])
                            con = B.duckdb_sql_file(name, canon, crs, places=B.places_of(c.program), tmp=str(d))
                            try:
                                duck = B.digest(con, "res", B.RESULT_COLUMNS[name])
                            finally:
                                con.close()
                            row["equal"][f"{phrase}=duckdb_sql"] = duck == mine
                        os.unlink(canon)
                    if scale in local_scales:
                        lout = d / f"local-{program}-{scale}"
                        lsecs, lpeak, _ = run(["replay", str(path), "--events", f"BusGPS={data}", "--out",
                                               str(lout), "--runner", "local", "--quiet"])
                        row.update(local_s=round(lsecs, 1), local_mb=round(lpeak))
                        for p in phrases_of(out):
                            row["equal"][f"{p}=local"] = stamp_digest(files_of(lout, p)) == got[p]
                    rows.append(row)
                    with open(args.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
        finally:
            subprocess.run(["bash", str(ROOT / "scripts" / "local_cluster.sh"), "stop", str(d / "cluster")],
                           capture_output=True)
    print("\n| scale | program | cluster s | driver MB | local s | local MB | composites | all equal |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['scale']} | {r['program']} | {r['cluster_s']} | {r['driver_mb']} | {r.get('local_s', '')} | "
              f"{r.get('local_mb', '')} | {sum(r['composites'].values())} | {all(r['equal'].values())} |")


if __name__ == "__main__":
    main()

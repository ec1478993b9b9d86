"""`spatec replay`: run a program over recorded events, in batch."""
from __future__ import annotations

import time
from pathlib import Path

from spatec.errors import SpatecError

NAME = "replay"
HELP = "Replay recorded events through a program's phrases (batch; Spark by default)."


def add_arguments(p) -> None:
    p.add_argument("program", help="the .spatec program")
    p.add_argument("--events", action="append", default=[], metavar="TYPE=PATH",
                   help="input events of a declared type: CSV, CSV.gz, Parquet, JSONL or SIRI-VM polls "
                        "(file, directory, glob or .tar.gz); repeatable")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--runner", choices=("spark", "local"), default="spark")
    p.add_argument("--master", default=None, help="Spark master URL (default: local[*])")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, e.g. spark.spatec.exchange=shuffle (repeatable)")
    p.add_argument("--format", choices=("jsonl", "parquet", "geojson"), default="jsonl")
    p.add_argument("--map", default=None, metavar="FILE.html", help="also draw the composites on a map")
    p.add_argument("--phrase", action="append", default=None, help="only these phrases (repeatable)")
    p.add_argument("--crs", default=None, help="metric CRS for distances (default: UTM zone of the data)")
    p.add_argument("--quiet", action="store_true", help="no progress display")


def parse_events(specs: list[str], program) -> list[tuple[str, str]]:
    out = []
    for s in specs:
        if "=" not in s:
            raise SpatecError(f"--events {s!r}: expected TYPE=PATH, e.g. BusGPS=positions.csv.gz")
        t, path = s.split("=", 1)
        if t not in program.events:
            known = ", ".join(sorted(program.events)) or "none"
            raise SpatecError(f"--events {s!r}: the program declares no event type {t} (declared: {known})")
        out.append((t, path))
    if not out:
        raise SpatecError("no input: give at least one --events TYPE=PATH")
    return out


def parse_conf(specs: list[str]) -> dict:
    out = {}
    for s in specs:
        key, sep, value = s.partition("=")
        if not sep or not key.strip():
            raise SpatecError(f"--conf {s!r}: expected KEY=VALUE, e.g. spark.spatec.exchange=shuffle")
        out[key.strip()] = value.strip()
    return out


def run(args) -> int:
    import logging
    import sys

    from spatec.cli.preflight import check_crs, check_phrases, locked, writable_dir, writable_file
    from spatec.cli.progress import Progress
    from spatec.plan.program import compile_program

    # warnings of the library (a CRS that cannot measure some positions) on stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="spatec: warning: %(message)s")
    compiled = compile_program(args.program)
    inputs = parse_events(args.events, compiled.program)
    # everything that can be found wrong before reading the input is found now
    check_phrases(compiled, args.phrase)
    check_crs(args.crs)
    out = writable_dir(args.out, "--out")
    if args.map:
        writable_file(args.map, "--map")
    lock = locked(out, "--out")
    try:
        # this run's rejects replace an earlier run's, even where it has none
        for t in {t for t, _ in inputs}:
            (out / "_rejects" / f"{t}.jsonl").unlink(missing_ok=True)
        return _replay(args, compiled, inputs, out, Progress(quiet=args.quiet))
    finally:
        lock.release()


def _replay(args, compiled, inputs, out: Path, ui) -> int:
    t0 = time.perf_counter()
    if args.runner == "local":
        from spatec.runners.replay import replay_local

        result = replay_local(compiled, inputs, out, fmt=args.format, crs=args.crs, phrases=args.phrase, ui=ui)
    else:
        from spatec.runners.spark.batch import replay_spark

        result = replay_spark(compiled, inputs, out, fmt=args.format, crs=args.crs, phrases=args.phrase,
                              master=args.master, ui=ui, conf=parse_conf(args.conf))
    elapsed = time.perf_counter() - t0
    ui.summary(result, elapsed)
    if args.map:
        from spatec.sinks.maps import write_map

        write_map(result.frames, args.map)
        ui.note(f"map written to {args.map}")
    return 0

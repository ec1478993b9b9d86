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
    p.add_argument("--map", default=None, metavar="FILE.html",
                   help="also draw the composites on a map (one page that works offline)")
    p.add_argument("--map-colour", default=None, metavar="FIELD",
                   help="the emit field the map colours composites by at first (default: by phrase)")
    p.add_argument("--map-tiles", default=None, metavar="URL",
                   help="a tile server URL template for the map's background, e.g. "
                        "https://tile.openstreetmap.org/{z}/{x}/{y}.png (off: the page makes no request)")
    p.add_argument("--phrase", action="append", default=None, help="only these phrases (repeatable)")
    p.add_argument("--crs", default=None, help="metric CRS for distances (default: UTM zone of the data)")
    p.add_argument("--tz", default=None, metavar="ZONE",
                   help="time zone of the text outputs' times (JSON lines, GeoJSON): 'program' (the "
                        "program's timezone), 'UTC' or an IANA name; ISO 8601 with the offset. Default: "
                        "UTC in files; the map shows the program's zone")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--tides", default=None, metavar="DIR",
                   help="also write a TIDES data package to DIR: vehicle_locations.csv from the input's "
                        "positions, stop_visits.csv from the --tides-visits phrases, datapackage.json")
    p.add_argument("--tides-visits", action="append", default=None, metavar="PHRASE",
                   help="a phrase whose composites are stop visits (it emits the stop, the vehicle, the "
                        "arrival and departure times: see `spatec.sinks.tides`); repeatable")

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


def resolve_tz(name: str | None, program) -> str | None:
    """``--tz``: None (not given), ``program`` (its timezone), ``UTC`` or an IANA name."""
    if name is None:
        return None
    if name.lower() == "program":
        return program.timezone
    if name.upper() == "UTC":
        return "UTC"
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise SpatecError(f"--tz {name!r}: not a time zone; give 'program', 'UTC' or an IANA name "
                          "such as Europe/London") from None
    return name


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
    tz = resolve_tz(args.tz, compiled.program)
    out = writable_dir(args.out, "--out")
    if args.map:
        writable_file(args.map, "--map")
    _check_tides(args, compiled)
    lock = locked(out, "--out")
    try:
        # this run's rejects replace an earlier run's, even where it has none
        for t in {t for t, _ in inputs}:
            (out / "_rejects" / f"{t}.jsonl").unlink(missing_ok=True)
        return _replay(args, compiled, inputs, out, Progress(quiet=args.quiet), tz)
    finally:
        lock.release()


def _replay(args, compiled, inputs, out: Path, ui, tz) -> int:
    from spatec.cli.progress import TaskLogTail
    from spatec.sinks import manifest

    program = compiled.program
    previous = manifest.read_manifest(out)
    started = time.time()
    t0 = time.perf_counter()
    logs = []
    if args.runner == "local":
        from spatec.runners.local import local_replay

        result = local_replay(compiled, inputs, out, fmt=args.format, crs=args.crs, phrases=args.phrase, ui=ui,
                              tz=tz, conf=parse_conf(args.conf))
    else:
        from spatec.runners.spark.batch import replay_spark
        from spatec.exec.context import TASK_LOG_KEY

        conf = parse_conf(args.conf)
        log_dir = out / "_logs"
        log_dir.mkdir(exist_ok=True)
        logs.append(log_dir / "spark.log")
        if TASK_LOG_KEY not in conf and (args.master is None or args.master.startswith("local")):
            # every task appends a line per group it matched: the progress display follows it
            task_log = log_dir / "tasks.jsonl"
            task_log.write_bytes(b"")
            conf[TASK_LOG_KEY] = str(task_log.resolve())
            logs.append(task_log)
        tail = TaskLogTail(conf[TASK_LOG_KEY], ui) if conf.get(TASK_LOG_KEY, "off") != "off" else None
        if tail is not None:
            with tail:
                result = replay_spark(compiled, inputs, out, fmt=args.format, crs=args.crs, phrases=args.phrase,
                                      master=args.master, ui=ui, conf=conf, tz=tz, log_dir=log_dir)
        else:
            result = replay_spark(compiled, inputs, out, fmt=args.format, crs=args.crs, phrases=args.phrase,
                                  master=args.master, ui=ui, conf=conf, tz=tz, log_dir=log_dir)
    elapsed = time.perf_counter() - t0
    ui.summary(result, elapsed)
    positions = _positions(compiled, inputs) if (args.map or args.tides) else None
    if args.map:
        from spatec.sinks.maps import write_map

        # (the input's own positions draw the roads under the composites)
        write_map(result.frames, args.map, program=program, plans={p.name: p for p in compiled.plans},
                  tz=tz, colour=args.map_colour, tiles=args.map_tiles, background=positions)
        ui.note(f"map written to {args.map}")
    if args.tides:
        _write_tides(args, compiled, result, positions, ui)
    written = manifest.write_manifest(out, compiled=compiled, result=result, runner=args.runner, fmt=args.format,
                                      tz=tz or "UTC", phrases=args.phrase, started=started, finished=time.time(),
                                      map_path=args.map, logs=logs, previous=previous)
    for rel in written["removed"]:
        ui.note(f"removed {out / rel}: an earlier run wrote it, this one did not")
    if written["unclaimed"]:
        ui.warn(f"{len(written['unclaimed'])} file(s) in {out} look like outputs but no run's manifest names "
                f"them (left as they are): {', '.join(written['unclaimed'][:5])}"
                + (" ..." if len(written["unclaimed"]) > 5 else ""))
    return 0


def _check_tides(args, compiled) -> None:
    """``--tides`` and ``--tides-visits``: a folder that can be written, phrases that are stop visits."""
    from spatec.cli.preflight import writable_dir
    from spatec.sinks.tides import visit_fields

    if args.tides_visits and not args.tides:
        raise SpatecError("--tides-visits needs --tides DIR: the folder the TIDES tables go to")
    if not args.tides:
        return
    writable_dir(args.tides, "--tides")
    plans = {p.name: p for p in compiled.plans}
    for name in args.tides_visits or ():
        if name not in plans:
            raise SpatecError(f"--tides-visits {name}: the program has no phrase {name} "
                              f"(phrases: {', '.join(plans)})")
        if args.phrase and name not in args.phrase:
            raise SpatecError(f"--tides-visits {name}: the phrase is not run (--phrase {' '.join(args.phrase)})")
        visit_fields(plans[name])


def _positions(compiled, inputs) -> dict:
    """The inputs' events of the types with a source and a point place (type → canonical
    events), read again: every runner writes its composites without keeping its events;
    the map's background and TIDES' vehicle_locations are these positions."""
    from spatec.runners.replay import ingest
    from spatec.sinks.tides import location_types

    kinds = set(location_types(compiled.program))
    frames, _ = ingest(compiled, [(t, path) for t, path in inputs if t in kinds])
    return frames


def _write_tides(args, compiled, result, positions, ui) -> None:
    """The TIDES package of this run: the positions as vehicle_locations, the --tides-visits
    phrases' rows as stop_visits."""
    from spatec.sinks.tides import write_tides

    program = compiled.program
    visits = {name: result.frames[name] for name in args.tides_visits or ()}
    written = write_tides(args.tides, program, program.timezone, positions, visits,
                          {p.name: p for p in compiled.plans}, source=f"spatec replay {Path(args.program).name}")
    for table, (n, left) in written.items():
        ui.note(f"TIDES {table}: {n:,} rows -> {Path(args.tides) / (table + '.csv')}"
                + (f" ({left:,} composites without a vehicle, stop or arrival left out)" if left else ""))

"""`spatec live`: detect composite events on positions as they arrive, and send alerts."""
from __future__ import annotations

import logging
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from spatec.cli.preflight import check_crs, check_phrases, locked, writable_dir
from spatec.errors import SpatecError
from spatec.events.timefmt import parse_duration  # noqa: F401 - the CLI's durations

NAME = "live"
HELP = "Run a program's phrases on live positions (HTTP feeds, a directory) and send alerts to sinks."

SOURCE_HELP = ("TYPE=URL, repeatable: dir:///path (new complete CSV/JSONL/SIRI-VM files, in name order), "
               "sirivm+http://host:port/path (a SIRI-VM JSON feed), gtfsrt+http://host:port/path "
               "(a GTFS-realtime VehiclePositions feed); HTTP feeds are polled every --trigger")
SINK_HELP = ("repeatable: console:, jsonl:///dir (DIR/PHRASE.jsonl, appended), http://host:port/path "
             "(webhook: one POST per alert, retried; dead letters in CHECKPOINT/dead_letter.jsonl)")

def add_arguments(p) -> None:
    p.add_argument("program", help="the .spatec program")
    p.add_argument("--source", action="append", default=[], metavar="TYPE=URL", help=SOURCE_HELP)
    p.add_argument("--sink", action="append", default=[], metavar="URL", help=SINK_HELP)
    p.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="state, offsets, delivered ids, spooled polls, late events and rejects; "
                        "a restart on the same DIR resumes without loss or repeated alerts")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="late events and rejects (default: the checkpoint directory)")
    p.add_argument("--runner", choices=("local", "spark"), default="local",
                   help="local: in-process, lowest latency (default); spark: Structured Streaming")
    p.add_argument("--master", default=None, help="Spark master URL (--runner spark; default local[*])")
    p.add_argument("--lateness", default="2 min", metavar="DURATION|auto",
                   help="allowed lateness: the watermark trails the latest event time by this (default 2 min); "
                        "auto: grown to the feed's largest delay so far (local runner; see README, live vs replay)")
    p.add_argument("--max-ahead", default="5 min", metavar="DURATION|off",
                   help="an event more than this ahead of its feed's clock (or the wall clock) is a reject, never "
                        "the watermark (default 5 min)")
    p.add_argument("--trigger", default="1s", metavar="DURATION",
                   help="micro-batch interval; HTTP feeds are polled once per batch (default 1s; 0: no pause)")
    p.add_argument("--until-idle", default=None, metavar="SECONDS", type=float,
                   help="stop after SECONDS without input, taking the input as over: decide everything "
                        "the end of input decides (as a replay does), then exit")
    p.add_argument("--max-polls", type=int, default=None, metavar="N",
                   help="polls taken from each HTTP feed per micro-batch when several are waiting "
                        "(default: 20 local, each batch takes what is waiting up to that; 200 spark)")
    p.add_argument("--checkpoint-every", default="10s", metavar="DURATION",
                   help="local runner: time between two checkpoint saves (default 10s; 0: after every batch). "
                        "Saves are written by a forked process; input after the last save is read again "
                        "after a crash (alerts are still delivered once)")
    p.add_argument("--phrase", action="append", default=None, help="only these phrases (repeatable)")
    p.add_argument("--crs", default=None, help="metric CRS (default: the program's, else the UTM zone of the "
                                                "first data (local) or of the program's places (spark); "
                                                "kept in the checkpoint)")
    p.add_argument("--retries", type=int, default=5, help="webhook: retries after the first try (default 5)")
    p.add_argument("--backoff", default="0.5s", metavar="DURATION",
                   help="webhook: first retry delay, doubled each retry (default 0.5s)")
    p.add_argument("--quiet", action="store_true", help="no status lines")
    p.add_argument("--tz", default="program", metavar="ZONE",
                   help="time zone of the console's alert times: 'program' (default: the program's "
                        "timezone), 'UTC' or an IANA name (JSON lines and webhook alerts stay UTC)")


def run(args) -> int:
    from spatec.plan.program import compile_program

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="spatec: %(name)s: %(message)s")
    compiled = compile_program(args.program, mode="live")
    from spatec.feeds.ingest import parse_max_ahead
    from spatec.feeds.lateness import parse_lateness

    lateness, args.auto_lateness = parse_lateness(args.lateness)
    args.max_ahead_us = parse_max_ahead(args.max_ahead)
    if args.runner == "spark" and args.max_ahead.strip() != "5 min":
        raise SpatecError("--max-ahead: Spark live checks events against the default, 5 min; other values are "
                          "for the local runner")
    if args.auto_lateness and args.runner == "spark":
        raise SpatecError("--lateness auto: the local runner only (Spark's watermark delay is fixed); "
                          "give a duration with --runner spark")
    trigger = parse_duration(args.trigger)
    from spatec.cli.replay_cmd import resolve_tz

    tz = resolve_tz(args.tz, compiled.program)
    # the console shows times in the zone asked for, unless its URL names one
    sinks_urls = [f"console:?tz={tz}" if u in ("console:", "console://") else u for u in (args.sink or ["console:"])]
    # everything that can be found wrong before the first poll is found now
    _preflight(compiled, args, sinks_urls)
    if args.checkpoint is None and args.out is None:
        args.out = tempfile.mkdtemp(prefix="spatec-live-")
        print(f"spatec: no --checkpoint: state is not kept; late events and rejects go to {args.out}",
              file=sys.stderr)
    ck = Path(args.checkpoint) if args.checkpoint else None
    out = Path(args.out) if args.out else ck
    lock = locked(ck if ck is not None else out, "--checkpoint" if ck is not None else "--out")
    try:
        return _run(compiled, args, ck, out, lateness, trigger, sinks_urls)
    finally:
        lock.release()


def _preflight(compiled, args, sinks_urls) -> None:
    """Options, sources and outputs checked before anything runs (see :mod:`spatec.cli.preflight`)."""
    from urllib.parse import urlparse

    from spatec.feeds.sources import check_source, parse_source

    check_phrases(compiled, args.phrase)
    check_crs(args.crs)
    for s in args.source:
        spec = parse_source(s)
        if spec.type not in compiled.program.events:
            known = ", ".join(sorted(compiled.program.events)) or "none"
            raise SpatecError(f"--source {s!r}: the program declares no event type {spec.type} (declared: {known})")
        check_source(spec)
    if args.checkpoint is not None:
        writable_dir(args.checkpoint, "--checkpoint")
    if args.out is not None:
        writable_dir(args.out, "--out")
    for url in sinks_urls:
        u = urlparse(url)
        if u.scheme == "jsonl" and (u.path or u.netloc):
            writable_dir(u.path if not u.netloc else f"/{u.netloc}{u.path}", f"--sink {url}:")


def _run(compiled, args, ck, out, lateness, trigger, sinks_urls) -> int:
    stop = threading.Event()
    webhooks: list = []       # queued sinks: a signal stops them after the request in flight

    def on_signal(*_):
        stop.set()
        for w in webhooks:
            w.stop_now()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    webhook = {"retries": args.retries, "backoff": parse_duration(args.backoff)}
    if args.runner == "spark":
        from spatec.runners.spark.live import run_live_spark

        counts = run_live_spark(compiled, args.source, sinks_urls, ck, out, lateness=lateness, trigger=trigger,
                                until_idle=args.until_idle, crs=args.crs, phrases=args.phrase,
                                master=args.master, stop=stop, webhook=webhook, quiet=args.quiet,
                                max_polls=args.max_polls or 200)
    else:
        counts = _run_local(compiled, args, ck, out, lateness, trigger, sinks_urls, stop, webhook, webhooks)
    if not args.quiet:
        print("spatec live: " + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())), file=sys.stderr)
    return 0


def _run_local(compiled, args, ck, out, lateness, trigger, sinks_urls, stop, webhook, webhooks):
    from spatec.runners.live_local import open_local

    status = _Status(args.quiet)
    runner = open_local(compiled, args.source, sinks_urls, ck, out, lateness=lateness, crs=args.crs,
                        phrases=args.phrase, webhook=webhook, on_batch=status, max_polls=args.max_polls or 20,
                        checkpoint_every=parse_duration(args.checkpoint_every), max_ahead=args.max_ahead_us,
                        auto_lateness=args.auto_lateness)
    status.runner = runner
    webhooks.extend(s for s in runner.sinks.sinks if hasattr(s, "stop_now"))
    runner.run(trigger=trigger, until_idle=args.until_idle, stop=stop)
    return runner.state.counts


class _Status:
    """A status line on stderr every few seconds: input, late, rejects, alerts, watermark."""

    def __init__(self, quiet: bool, every: float = 5.0):
        self.quiet, self.every, self.last, self.runner = quiet, every, 0.0, None

    def __call__(self, items, delivered, trig, t_start) -> None:
        now = time.monotonic()
        if self.quiet or self.runner is None or now - self.last < self.every:
            return
        self.last = now
        from spatec.events.timefmt import format_time

        st = self.runner.state
        c = st.counts
        wm = format_time(st.watermark) if st.watermark > -(1 << 61) else "-"
        print(f"spatec live: batch {st.batches:,}  events {c['used']:,}  late {c['late']:,}  "
              f"rejected {c['rejected']:,} (duplicates {c['duplicates']:,})  alerts {c['alerts']:,}  "
              f"watermark {wm}", file=sys.stderr, flush=True)

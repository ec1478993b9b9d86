"""`spatec serve`: the live runner inside a long-running notification service."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

NAME = "serve"
HELP = ("Run a program live as a notification service: subscriptions over HTTP (filters, areas, leases), "
        "alerts by Server-Sent Events, webhooks, NATS or MQTT, an operations page at /.")


def add_arguments(p) -> None:
    from spatec.cli.live_cmd import SOURCE_HELP

    p.add_argument("program", help="the .spatec program")
    p.add_argument("--source", action="append", default=[], metavar="TYPE=URL",
                   help=SOURCE_HELP.replace("dir:///path (new complete CSV/JSONL/SIRI-VM files, in name order), ", ""))
    p.add_argument("--port", type=int, default=8080, help="HTTP port on --host (default 8080; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--state", default="spatec-state", metavar="DIR",
                   help="runners' checkpoints, dead letters and (without --broker) the embedded NATS store "
                        "(default ./spatec-state)")
    p.add_argument("--broker", default=None, metavar="nats://HOST:PORT",
                   help="a NATS server with JetStream shared by several `spatec serve` processes "
                        "(default: start a private nats-server with its store in --state)")
    p.add_argument("--lateness", default="2 min", metavar="DURATION", help="allowed lateness (default 2 min)")
    p.add_argument("--trigger", default="0.5s", metavar="DURATION",
                   help="micro-batch interval; HTTP feeds are polled as often (default 0.5s)")
    p.add_argument("--checkpoint-every", default="10s", metavar="DURATION",
                   help="time between two checkpoint saves of a runner (default 10s)")
    p.add_argument("--outage", default="auto", metavar="DURATION|off",
                   help="a feed silent this long in event time is in outage: absences over it are held back "
                        "(default auto: 3 x the feed's usual gap, at least 60 s; see lang/REFERENCE.md)")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))


def run(args) -> int:
    import uvicorn

    from spatec.events.timefmt import parse_duration
    from spatec.plan.program import compile_program
    from spatec.service.app import make_app

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="spatec: %(name)s: %(message)s")
    compiled = compile_program(args.program)
    outage = None if args.outage == "off" else ("auto" if args.outage == "auto" else parse_duration(args.outage))
    app, service = make_app(compiled, args.source, Path(args.state), broker=args.broker,
                            lateness=int(parse_duration(args.lateness) * 1e6), trigger=parse_duration(args.trigger),
                            checkpoint_every=parse_duration(args.checkpoint_every), outage=outage)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, lifespan="on",
                            timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    server.run()
    return 0

"""`spatec serve`: the live runner inside a long-running notification service."""
from __future__ import annotations

import logging
import socket
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
    p.add_argument("--port", type=int, default=8080,
                   help="HTTP port on --host (default 8080; 0: any free port, printed and written to <state>/port)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; any other needs API tokens: SPATEC_TOKENS or "
                        "<state>/tokens)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a Host name the service answers to besides its address and localhost (repeatable)")
    p.add_argument("--allowed-origin", action="append", default=[], metavar="ORIGIN",
                   help="a browser origin (https://ops.example.org) that may change subscriptions (repeatable)")
    p.add_argument("--push-host", action="append", default=[], metavar="HOST[:PORT]",
                   help="a host webhooks and MQTT deliveries may go to (repeatable; none by default)")
    p.add_argument("--nats-prefix", default="spatec.deliver.", metavar="PREFIX",
                   help="NATS deliveries go to subjects under this prefix only (default spatec.deliver.)")
    p.add_argument("--state", default="spatec-state", metavar="DIR",
                   help="runners' checkpoints, tokens, dead letters and (without --broker) the embedded NATS store "
                        "(default ./spatec-state)")
    p.add_argument("--broker", default=None, metavar="nats://HOST:PORT",
                   help="a NATS server with JetStream shared by several `spatec serve` processes "
                        "(default: start a private nats-server with its store in --state)")
    p.add_argument("--crs", default=None, help="metric CRS (default: the program's, else replay's rule over the "
                                               "first 2 minutes of input: see lang/REFERENCE.md decision 50)")
    p.add_argument("--lateness", default="2 min", metavar="DURATION|auto",
                   help="allowed lateness (default 2 min; auto: grown to the feed's largest delay so far)")
    p.add_argument("--max-ahead", default="5 min", metavar="DURATION|off",
                   help="a fix more than this ahead of its feed's clock (or the wall clock) is a reject, never the "
                        "watermark (default 5 min)")
    p.add_argument("--trigger", default="0.5s", metavar="DURATION",
                   help="micro-batch interval; HTTP feeds are polled as often (default 0.5s)")
    p.add_argument("--checkpoint-every", default="10s", metavar="DURATION",
                   help="time between two checkpoint saves of a runner (default 10s)")
    p.add_argument("--outage", default="auto", metavar="DURATION|off",
                   help="a feed silent this long in event time is in outage: absences over it are held back "
                        "(default auto: 3 x the feed's usual gap, at least 60 s; see lang/REFERENCE.md)")
    p.add_argument("--detector-nice", default=10, type=int, metavar="N",
                   help="CPU priority of the detectors below the processes that match and deliver (a nice "
                        "increment, 0-19; default 10): on a busy machine delivering what is decided goes first, "
                        "and a detector still has every cycle they leave (0: the same priority)")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))


def run(args) -> int:
    import uvicorn

    from spatec.cli.preflight import check_crs
    from spatec.errors import SpatecError
    from spatec.events.timefmt import parse_duration
    from spatec.feeds.ingest import parse_max_ahead
    from spatec.feeds.lateness import parse_lateness
    from spatec.plan.program import compile_program
    from spatec.service.app import make_app
    from spatec.service.owners import Tokens, is_loopback
    from spatec.service.subscriptions import PushPolicy

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="spatec: %(name)s: %(message)s")
    if not 0 <= args.detector_nice <= 19:
        raise SpatecError(f"--detector-nice {args.detector_nice}: a nice increment from 0 to 19")
    compiled = compile_program(args.program)
    check_crs(args.crs)
    state = Path(args.state)
    loopback = is_loopback(args.host)
    tokens = Tokens.load(state, create=loopback)
    if not tokens:
        raise SpatecError(f"--host {args.host}: listening beyond this machine needs API tokens: set SPATEC_TOKENS="
                          f"NAME:SECRET or write NAME SECRET lines to {state / 'tokens'}")
    if not args.nats_prefix.endswith(".") or args.nats_prefix.startswith(("$", "spatec.input", "spatec.alerts")):
        raise SpatecError("--nats-prefix: a subject prefix ending in `.`, not `$...` nor the service's own streams")
    outage = None if args.outage == "off" else ("auto" if args.outage == "auto" else parse_duration(args.outage))
    lateness, auto = parse_lateness(args.lateness)
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as e:
        raise SpatecError(f"--host {args.host} --port {args.port}: cannot listen there ({e.strerror})") from None
    port = sock.getsockname()[1]
    state.mkdir(parents=True, exist_ok=True)
    (state / "port").write_text(f"{port}\n")
    shown = f"[{args.host}]" if ":" in args.host else args.host
    policy = PushPolicy(frozenset(h.lower().rstrip(".") for h in args.push_host), args.nats_prefix)
    app, service = make_app(compiled, args.source, state, broker=args.broker, lateness=lateness,
                            trigger=parse_duration(args.trigger), checkpoint_every=parse_duration(args.checkpoint_every),
                            outage=outage, tokens=tokens, policy=policy, bind=args.host, hosts=args.allowed_host,
                            origins=args.allowed_origin, crs=args.crs,
                            live={"max_ahead": parse_max_ahead(args.max_ahead), "auto_lateness": auto,
                                  "nice": args.detector_nice},
                            url=f"http://{shown}:{port}/")
    config = uvicorn.Config(app, log_level=args.log_level, lifespan="on", timeout_graceful_shutdown=5,
                            proxy_headers=False, server_header=False)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            service.signalled = True    # (a child dying of the same signal meanwhile is no failure)
            super().handle_exit(sig, frame)

    server = Server(config)
    server.run(sockets=[sock])
    return 0

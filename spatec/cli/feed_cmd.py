"""`spatec feed serve`: serve a recorded feed on 127.0.0.1, poll by poll."""
from __future__ import annotations

import signal
import sys
import threading

NAME = "feed"
HELP = "Serve a recorded SIRI-VM feed over HTTP (as SIRI-VM JSON or GTFS-realtime), for live runs and tests."


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="feed_command", metavar="ACTION", required=True)
    s = sub.add_parser("serve", help="serve a recording: each GET returns the next or current poll")
    s.add_argument("recording", help="SIRI-VM polls: a .tar.gz of them, a directory of them, or one poll")
    s.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (0: any free port; default 8080)")
    s.add_argument("--speed", type=float, default=1.0,
                   help="recording seconds per real second (default 1: real time); 0: one poll per request")
    s.add_argument("--format", choices=("sirivm", "gtfs-rt"), default="sirivm",
                   help="serve the polls as recorded (sirivm) or as GTFS-realtime VehiclePositions")
    s.add_argument("--loop", action="store_true", help="start again after the last poll")
    s.add_argument("--minutes", type=float, default=None, help="only the first MINUTES of the recording")


def run(args) -> int:
    from spatec.feeds.recording import load_recording
    from spatec.feeds.server import FeedServer

    polls = load_recording(args.recording)
    if args.minutes is not None:
        end = polls[0].received + args.minutes * 60
        polls = [q for q in polls if q.received <= end]
    srv = FeedServer(polls, fmt=args.format, speed=args.speed, loop=args.loop, port=args.port).start()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    pace = "one poll per request" if args.speed == 0 else f"{args.speed:g}x real time"
    print(f"serving {len(polls):,} polls ({args.format}, {pace}) on {srv.url}  "
          f"[spatec live --source TYPE={srv.source_url()}]", file=sys.stderr, flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        srv.stop()
        print(f"feed stopped after {srv.served:,} polls served", file=sys.stderr, flush=True)
    return 0

"""Alert latency through `spatec serve` at about 1,000 positions/s.

The Cambridge polls are served by a :class:`~spatec.feeds.server.FeedServer` sped up so
that positions arrive at ``--rate`` per second (the recording has about 23 a second), to
a `spatec serve` process (embedded NATS, one source) that runs a phrase deciding at once
(a bus standing still: each fix paired with the ones up to 30 s before it at the same place)::

    phrase Standing per vehicle = BusGPS -> A ;= BusGPS -> B within 1 min

An SSE client subscribed to it timestamps each alert as it arrives. An alert's latency is
from the moment the poll holding its newer fix was first served to the moment its SSE frame
was read: the poller, the input log, the runner, the alert log, the hub and the SSE
connection. The baseline, measured in the same run, is the poll interval of the sped-up
feed (how often positions arrive): the latency a subscriber sees over what polling alone
costs.

    .venv/bin/python bench/bench_serve.py [--rate 1000] [--minutes 6]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROGRAM = '''include "{bus}"
phrase Standing per vehicle = BusGPS -> A ;= BusGPS -> B within 1 min
  emit vehicle = A.vehicle
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=1000.0, help="positions per second")
    ap.add_argument("--minutes", type=float, default=6.0, help="minutes of the recording")
    args = ap.parse_args()

    from spatec.events.canonical import to_events
    from spatec.feeds.recording import load_recording
    from spatec.feeds.server import FeedServer
    from spatec.feeds.sources import feed_batch
    from spatec.plan.program import compile_program
    from tests.live.conftest import POLLS
    from tests.service.conftest import Serve, call, free_port, sse

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    prog = work / "standing.spatec"
    prog.write_text(PROGRAM.format(bus=ROOT / "examples" / "bus.spatec"))
    compiled = compile_program(prog)
    polls = load_recording(POLLS)
    t0 = polls[0].received
    polls = [p for p in polls if p.received <= t0 + args.minutes * 60]
    decl = compiled.program.events["BusGPS"]
    poll_of, seen, n_pos = {}, set(), 0
    for i, p in enumerate(polls):
        ev = to_events([feed_batch("sirivm", p.name, p.data, p.received)], decl, compiled.program.timezone, seen).events
        n_pos += len(ev)
        for eid in ev["_id"].tolist():
            poll_of.setdefault(eid, i)
    span = polls[-1].received - polls[0].received
    speed = args.rate / (n_pos / span)
    print(f"{len(polls)} polls, {n_pos:,} positions over {span / 60:.1f} min of the recording; speed x{speed:.0f} "
          f"= {args.rate:,.0f} positions/s, a poll every {span / len(polls) / speed * 1e3:.0f} ms")

    served: dict[int, float] = {}

    class Timed(FeedServer):
        def current(self, after=None):
            got = super().current(after)
            if got is not None and got[0] not in served:
                served[got[0]] = time.time()
            return got

    port = free_port()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], work / "state",
                extra=["--lateness", "0s", "--trigger", "0.02s", "--outage", "off"]).start()
    got: list[tuple[float, dict]] = []
    try:
        code, body = call(srv, "POST", "/subscriptions", {"phrase": "Standing"})
        sid = body["id"]

        def read():
            import http.client

            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            c.request("GET", f"/subscriptions/{sid}/events", headers={"Accept": "text/event-stream"})
            r = c.getresponse()
            try:
                while True:
                    line = r.fp.readline()
                    if not line:
                        return
                    if line.startswith(b"data:"):
                        got.append((time.time(), json.loads(line[5:])))
            except OSError:
                return

        th = threading.Thread(target=read, daemon=True)
        th.start()
        time.sleep(1.0)
        feed = Timed(polls, speed=speed, port=port).start()
        time.sleep(span / speed + 10)
        feed.stop()
    finally:
        srv.stop()
    lat = []
    for recv, a in got:
        i = max(poll_of.get(e, -1) for e in a["events"].values())     # the poll of its newer fix
        if i in served:
            lat.append((recv - served[i]) * 1e3)
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]  # noqa: E731
    interval = span / len(polls) / speed * 1e3
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{len(lat):,} alerts timed; load average {load} (2 cores, shared)")
    print(f"{'':<28} {'p50 ms':>9} {'p99 ms':>9}")
    print(f"{'baseline: poll interval':<28} {interval:>9.0f} {interval:>9.0f}")
    print(f"{'poll served -> SSE frame':<28} {q(0.5):>9.0f} {q(0.99):>9.0f}")
    print(f"\nratio to the poll interval: p50 {q(0.5) / interval:.1f}x, p99 {q(0.99) / interval:.1f}x")


if __name__ == "__main__":
    main()

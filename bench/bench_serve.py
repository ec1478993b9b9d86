"""`spatec serve` end to end at city scale: composites per second and decision-to-delivery
latency with 10, 10,000 and 100,000 subscriptions.

For each number of subscriptions a fresh `spatec serve` (embedded NATS, one source) runs a
phrase that decides at once, a bus standing still (each fix paired with the bus's fixes of
the minute before at the same place: about one composite for every three fixes)::

    phrase Standing per vehicle = BusGPS -> A ;= BusGPS -> B within 1 min
      emit vehicle = A.vehicle, line = A.line

The recorded Cambridge polls are served sped up so that the service decides about
``--rate`` composites a second (3 positions per composite). The subscriptions are made with
the bulk endpoint before the feed starts, a mix of what people watching a city's buses ask
for (seeded):

- 45 %: one bus (``vehicle == "..."``: a passenger's app, a depot's screen);
- 30 %: a line near a stop (``line == "N"`` and a circle of 200-600 m around one of the 1,388
  Cambridge stops);
- 15 %: a stop's surroundings (a circle of 150-400 m around a stop);
- 9 %: a zone (a 1-3 km box somewhere in the fleet's area), possibly or certainly;
- 1 %: a line (``line == "N"``), and 5 dashboards that take every composite.

``--sse`` of them (the dashboards among them) are read over SSE by a client process (one
event loop, so that measuring takes the machine's two cores as little as it can). Latency
is from the moment the composite was decided (the ``Spatec-Decided`` header its detector
put on it in the alert log, read by a NATS subscriber in the client) to the moment its SSE
frame is read; from the moment the feed first served the composite's last fix (the first
poll received at or after its ``hi``): ``detect_p50_ms``/``detect_p99_ms`` to its decision (the
poller, the input log, the detector), ``served_p50_ms``/``served_p99_ms`` to its frames read.
Where the milliseconds go: ``log_p50_ms``/``log_p99_ms``, decided to read
from the log by a plain NATS subscriber in the client; ``js_p50_ms``/``js_p99_ms``, by an
ordered JetStream consumer there (what the matcher process reads); ``hub_lag_ms``, decided
to the hub's buffers (``/status``'s ``decided_to_hub_ms``); and per frame read, from the
service's trace (``SPATEC_SERVE_TRACE``), ``log`` (decided to read by the matcher), ``match``
(in the matcher, its batch included), ``pipe`` (to the HTTP process), ``hub`` (to the
buffers) and ``sse`` (from the buffers to the frame read by the client), each p50 and p99. The feed's first second decides
about 2.4 times the rate (the recording's first polls); ``p50_after_3s_ms``/``p99_after_3s_ms``
leave its first 3 s out. Composites per second: the alert log's, while the feed runs, and the rate at which
the dashboard received them. The baseline, in the same run, is the same service with 10
subscriptions: the ratios say what the subscriptions cost. Where the CPU goes: each
process's share of a core from the feed's start to the last second the log grew (the
detector, the matcher, nats-server, the HTTP process ``serve``, the SSE client, and this
process, which serves the feed). Also measured: making the
subscriptions (bulk), starting again with them (kill -9, then until ``/status`` has them
all and the matcher has taken every one in: ``restart_bucket_s`` reading them from the
bucket, the snapshot removed; ``restart_s`` from the snapshot the service wrote once they
stopped changing, and the bucket's messages since), and ending them (bulk).

    .venv/bin/python bench/bench_serve.py [--subs 10,10000,100000] [--rate 1000] [--sse 40] [--detector-nice N]
                                          [--crs EPSG:32630]

Without ``--crs`` the service decides its CRS from the feed's first 2 minutes (0.7 s into the
feed here) and the matcher then projects every subscription's area again: at 100,000 that
is most of the p99 with the first 3 s. ``--crs`` gives it, as a service started again has it
once decided.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROGRAM = '''include "{bus}"
phrase Standing per vehicle = BusGPS -> A ;= BusGPS -> B within 1 min
  emit vehicle = A.vehicle, line = A.line
'''
STOPS = ROOT.parent / "shared" / "datasets" / "cambridge" / "stops.csv"
PER_COMPOSITE = 3.0          # positions per Standing composite in the recording


def mix(n: int, vehicles: list, lines: list, stops: list, box: tuple, rng: random.Random) -> list[dict]:
    """``n`` subscriptions as people ask for them (see the module docstring)."""
    out = []
    for i in range(n):
        if i < 5:
            out.append({"phrase": "Standing"})                       # dashboards
            continue
        k = rng.random()
        if k < 0.45:
            out.append({"phrase": "Standing", "where": f'vehicle == "{rng.choice(vehicles)}"'})
        elif k < 0.75:
            lon, lat = rng.choice(stops)
            out.append({"phrase": "Standing", "where": f'line == "{rng.choice(lines)}"',
                        "area": {"circle": [lon, lat, rng.randrange(200, 600)]}})
        elif k < 0.90:
            lon, lat = rng.choice(stops)
            out.append({"phrase": "Standing", "area": {"circle": [lon, lat, rng.randrange(150, 400)]}})
        elif k < 0.99:
            w, h = rng.uniform(0.015, 0.045), rng.uniform(0.01, 0.03)
            x, y = rng.uniform(box[0], box[2] - w), rng.uniform(box[1], box[3] - h)
            out.append({"phrase": "Standing", "certainly": rng.random() < 0.3,
                        "area": {"type": "Polygon", "coordinates": [[[x, y], [x + w, y], [x + w, y + h],
                                                                     [x, y + h], [x, y]]]}})
        else:
            out.append({"phrase": "Standing", "where": f'line == "{rng.choice(lines)}"'})
    return out


def client(port: int, token: str, sids: list, broker: str, out_path: str, stop_path: str) -> None:
    """The subscribers, in a process of their own on one event loop (so that measuring costs
    the machine as little as it can): every SSE stream read as it comes, ``(time read,
    composite id)`` of each frame, and the decision time of every composite from the alert
    log's headers (a NATS subscriber). Written to ``out_path`` when ``stop_path`` appears."""
    import re

    ident = re.compile(rb"(?:^|\n)id: ([^\r\n]*)\r?\n")
    got: dict = {sid: [] for sid in sids}
    decided: dict = {}
    jsd: dict = {}

    async def stream(sid):
        r, w = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
        w.write(f"GET /subscriptions/{sid}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n".encode())
        await w.drain()
        rest = b""
        while True:
            chunk = await r.read(1 << 16)
            if not chunk:
                return
            now = time.time()
            buf = rest + chunk
            cut = buf.rfind(b"\r\n\r\n")
            if cut < 0:
                rest = buf
                continue
            rest = buf[cut + 4:]
            got[sid].extend((now, m.decode()) for m in ident.findall(b"\n" + buf[:cut + 2]))

    async def main():
        import nats

        nc = await nats.connect(broker)

        hi_of = re.compile(rb'"hi": ?"([^"]+)"')

        async def on(m):
            h = m.headers or {}
            if "Spatec-Decided" in h:
                hi = hi_of.search(m.data)
                decided[h.get("Nats-Msg-Id")] = (float(h["Spatec-Decided"]), time.time(),
                                                 hi.group(1).decode() if hi else None)
        await nc.subscribe("spatec.alerts.>", cb=on)

        async def on_js(m):
            h = m.headers or {}
            if "Spatec-Decided" in h:
                jsd[h.get("Nats-Msg-Id")] = (float(h["Spatec-Decided"]), time.time())
        from nats.js.api import DeliverPolicy
        await nc.jetstream().subscribe("spatec.alerts.>", cb=on_js, ordered_consumer=True, deliver_policy=DeliverPolicy.NEW,
                                       pending_msgs_limit=-1, pending_bytes_limit=-1)
        tasks = [asyncio.create_task(stream(sid)) for sid in sids]
        while not os.path.exists(stop_path):
            await asyncio.sleep(0.2)
        for t in tasks:
            t.cancel()
        await nc.close()

    asyncio.run(main())
    Path(out_path).write_text(json.dumps({"got": got, "decided": decided, "js": jsd}))


def run_scale(n: int, args, polls, world, work: Path) -> dict:
    from spatec.feeds.server import FeedServer
    from tests.service.conftest import Serve, call, free_port

    prog = work / "standing.spatec"
    state = work / f"state-{n}"
    port = free_port()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], state,
                extra=["--lateness", "0s", "--trigger", "0.02s", "--outage", "off", "--checkpoint-every", "10s",
                       *(["--detector-nice", str(args.detector_nice)] if args.detector_nice is not None else []),
                       *(["--crs", args.crs] if args.crs else [])]
                ).start()
    out = {"subs": n}
    try:
        rng = random.Random(7)
        reqs = mix(n, *world, rng)
        t0 = time.perf_counter()
        ids = []
        for i in range(0, len(reqs), 10_000):
            code, body = call(srv, "POST", "/subscriptions/bulk", {"subscriptions": reqs[i:i + 10_000]}, timeout=900)
            assert code == 200, body
            ids += [r["id"] for r in body["results"] if "id" in r]
        out["made_s"] = time.perf_counter() - t0
        assert len(ids) == n, (len(ids), n)
        # restart with them: kill -9, then until /status has every one and the matcher has taken
        # every one in; first from the bucket alone (the snapshot removed), then from the
        # snapshot the service writes once they stop changing
        trace = work / f"trace-{n}.jsonl"
        for how in ("bucket", "snapshot"):
            if how == "snapshot":
                t0 = time.perf_counter()
                while not srv.status()["snapshot"]["current"]:
                    time.sleep(0.1)
                out["snapshot_written_s"] = time.perf_counter() - t0
            srv.kill()
            if how == "bucket":
                (state / "subscriptions.snapshot").unlink(missing_ok=True)
            t0 = time.perf_counter()
            srv = Serve(prog, srv.sources, state, port=srv.port, extra=srv.extra,
                        env={"SPATEC_SERVE_TRACE": str(trace)}).start(timeout=600)
            while (lambda st: st["subscriptions"] < n or st["matcher"]["pending"] or not st["matcher"]["pid"])(
                    srv.status()):
                time.sleep(0.05)
            out["restart_bucket_s" if how == "bucket" else "restart_s"] = time.perf_counter() - t0
            assert (srv.status()["snapshot"]["read"] is not None) == (how == "snapshot")
        picked = ids[:5] + rng.sample(ids[5:], min(max(0, args.sse - 5), max(0, len(ids) - 5)))
        import multiprocessing

        res_path, stop_path = work / f"client-{n}.json", work / f"client-{n}.stop"
        cli = multiprocessing.get_context("spawn").Process(
            target=client, args=(srv.port, srv.token, picked, srv.status()["broker"]["url"], str(res_path),
                                 str(stop_path)), daemon=True)
        cli.start()
        time.sleep(3.0)
        speed = args.rate * PER_COMPOSITE / world_rate(polls)
        feed = FeedServer(polls, speed=speed, port=port).start()
        print(f"  {n:,} subscriptions: feed started at {time.strftime('%H:%M:%S')}", flush=True)
        span = (polls[-1].received - polls[0].received) / speed
        t_feed = time.time()
        cpu0 = cpu_seconds(srv.proc.pid, {"client": cli.pid, "bench+feed": os.getpid()})
        time.sleep(span + 2)
        last, still = -1, 0
        while still < 3:                       # until the log is still
            time.sleep(1.0)
            cur = srv.status()["log"]
            still = still + 1 if cur == last else 0
            if cur != last:                    # (the CPU up to the last second the log grew)
                cpu1 = cpu_seconds(srv.proc.pid, {"client": cli.pid, "bench+feed": os.getpid()})
                wall = time.time() - t_feed
            last = cur
        out["cpu_cores"] = {k: round((v - cpu0.get(k, 0.0)) / wall, 3) for k, v in sorted(cpu1.items())
                            if v - cpu0.get(k, 0.0) > 0.01 * wall}   # share of a core, feed start to a still log
        time.sleep(2.0)
        feed.stop()
        stop_path.write_text("")
        cli.join(120)
        res = json.loads(res_path.read_text())
        seen = res["decided"]
        decided = {c: d for c, (d, _, _) in seen.items()}
        via = sorted((a - d) * 1e3 for d, a, _ in seen.values())     # decided -> read from the log by a client
        served = served_at(feed, polls, speed, {c: hi for c, (_, _, hi) in seen.items()})
        readers = {sid: [tuple(x) for x in v] for sid, v in res["got"].items()}
        st = srv.status()
        out["composites"] = st["log"]
        when = sorted(decided.values())
        # the log's rate while the feed ran: composites decided over the span they were decided in
        window = [t for t in when if t >= t_feed]
        out["decided_per_s"] = (len(window) - 1) / (window[-1] - window[0]) if len(window) > 1 else 0.0
        dash = readers[ids[0]]
        out["dashboard_per_s"] = (len(dash) - 1) / (dash[-1][0] - dash[0][0]) if len(dash) > 1 else 0.0
        lat = sorted((t - decided[c]) * 1e3 for got in readers.values() for t, c in got if c in decided)
        out["frames"] = len(lat)
        q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")  # noqa: E731
        out["p50_ms"], out["p99_ms"], out["max_ms"] = q(0.5), q(0.99), (lat[-1] if lat else float("nan"))
        t_first = min(decided.values()) if decided else 0.0      # without the feed's first 3 s (a burst:
        out["first_decided_s"] = t_first - t_feed                # (the CRS decided, the detector started)
        lat = sorted((t - decided[c]) * 1e3 for got in readers.values() for t, c in got   # ~2.4x the rate)
                     if c in decided and decided[c] >= t_first + 3.0)
        out["p50_after_3s_ms"], out["p99_after_3s_ms"] = q(0.5), q(0.99)
        lat = sorted((decided[c] - t) * 1e3 for c, t in served.items() if c in decided)
        out["detect_p50_ms"], out["detect_p99_ms"] = q(0.5), q(0.99)
        lat = sorted((t - served[c]) * 1e3 for got in readers.values() for t, c in got if c in served)
        out["served_p50_ms"], out["served_p99_ms"] = q(0.5), q(0.99)
        lat = sorted((t - served[c]) * 1e3 for got in readers.values() for t, c in got
                     if c in served and decided[c] >= t_first + 3.0)
        out["served_p50_after_3s_ms"], out["served_p99_after_3s_ms"] = q(0.5), q(0.99)
        lat = via
        out["log_p50_ms"], out["log_p99_ms"] = q(0.5), q(0.99)
        lat = sorted((a - d) * 1e3 for d, a in res["js"].values())
        out["js_p50_ms"], out["js_p99_ms"] = q(0.5), q(0.99)
        # where the time goes, per alert: the service's trace (decided, read by the matcher, sent,
        # received by the HTTP process, in the buffers) joined with the frames the client read
        steps = {}
        for line in trace.read_text().splitlines() if trace.exists() else []:
            for cid, d, t_in, t_out, t_recv, t_done in json.loads(line):
                steps[cid] = (t_in, t_out, t_recv, t_done)
        legs = {"log": [], "match": [], "pipe": [], "hub": [], "sse": []}
        for got in readers.values():
            for t, c in got:
                if c in decided and c in steps:
                    for k, ms in leg_ms(decided[c], steps[c], t):
                        legs[k].append(ms)
        for k, xs in legs.items():
            lat = sorted(xs)
            out[f"{k}_p50_ms"], out[f"{k}_p99_ms"] = q(0.5), q(0.99)
        out["start"] = start_windows(readers, decided, steps, t_first)
        out["groups"] = st["groups"]
        out["hub_lag_ms"] = st.get("decided_to_hub_ms")         # decided -> in the buffers, the last alerts
        t0 = time.perf_counter()
        for i in range(0, len(ids), 10_000):
            code, body = call(srv, "POST", "/subscriptions/bulk-delete", {"ids": ids[i:i + 10_000]}, timeout=900)
            assert code == 200, body
        out["deleted_s"] = time.perf_counter() - t0
        out["healthy"] = srv.status()["healthy"]
    finally:
        srv.stop()
    return out


def leg_ms(decided: float, step: tuple, read: float) -> tuple:
    """A frame's legs in ms (log, match, pipe, hub, sse), from its composite's decision, its
    trace (read by the matcher, sent, received by the HTTP process, in the buffers) and the
    moment the client read it."""
    t_in, t_out, t_recv, t_done = step
    return tuple((k, (b - a) * 1e3) for k, a, b in (("log", decided, t_in), ("match", t_in, t_out),
                                                    ("pipe", t_out, t_recv), ("hub", t_recv, t_done),
                                                    ("sse", t_done, read)))


def start_windows(readers: dict, decided: dict, steps: dict, t_first: float, width: float = 0.5,
                  upto: float = 4.0) -> list:
    """The first seconds, where the p99 with the first 3 s comes from: per ``width`` seconds of
    decision time from the first composite decided, the frames read, their p99 decided-to-read
    (ms) and each leg's p99 (log, match, pipe, hub, sse: as the whole run's)."""
    rows = []
    for a in np.arange(0.0, upto, width):
        lat, legs = [], {"log": [], "match": [], "pipe": [], "hub": [], "sse": []}
        for got in readers.values():
            for t, c in got:
                d = decided.get(c)
                if d is None or not (t_first + a <= d < t_first + a + width):
                    continue
                lat.append((t - d) * 1e3)
                if c in steps:
                    for k, ms in leg_ms(d, steps[c], t):
                        legs[k].append(ms)
        p99 = lambda xs: float(np.percentile(xs, 99)) if xs else float("nan")  # noqa: E731
        rows.append({"from_s": float(a), "frames": len(lat), "p99_ms": p99(lat),
                     **{f"{k}_p99_ms": p99(v) for k, v in legs.items()}})
    return rows


def cpu_seconds(root: int, others: dict) -> dict:
    """CPU seconds (user + system, all threads) so far of the service's process ``root`` and its
    descendants, by name (``spatec-detect``, ``spatec-match``, ``nats-server``; ``serve``, the
    HTTP process itself), and of ``others`` (name -> pid: the client, this process with the
    feed server)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {}                                          # pid -> (name, parent, seconds)
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                raw = (d / "stat").read_text()
            except OSError:
                continue
            f = raw[raw.rindex(")") + 2:].split()
            procs[int(d.name)] = (raw[raw.index("(") + 1:raw.rindex(")")], int(f[1]),
                                  (int(f[11]) + int(f[12])) / tick)
    tops = {root: "serve", **{pid: name for name, pid in others.items()}}

    def top(pid):                                       # the first of ``tops`` it descends from
        for _ in range(64):
            if pid in tops or pid not in procs:
                return pid if pid in tops else None
            pid = procs[pid][1]
        return None
    out: dict = {}
    for pid, (comm, _, secs) in procs.items():
        t = top(pid)
        if t is not None:
            name = comm if t == root and pid != root else tops[t]
            out[name] = out.get(name, 0.0) + secs
    return out


def served_at(feed, polls, speed: float, his: dict) -> dict:
    """When each composite's last fix was first served (wall clock): the first poll received
    at or after the composite's ``hi``, at the time the feed served it (``his``: composite id
    -> its ``hi``). A poll that carries a fix later than that makes this earlier: the detection
    leg it gives is an upper bound of the detector's own."""
    import bisect
    from datetime import datetime

    if feed.started_at is None:
        return {}
    received = [p.received for p in polls]
    out = {}
    for cid, hi in his.items():
        if hi is None:
            continue
        t = datetime.fromisoformat(hi.replace("Z", "+00:00")).timestamp()
        i = bisect.bisect_left(received, t)
        if i < len(received):
            out[cid] = feed.started_at + (received[i] - received[0]) / speed
    return out


def world_rate(polls) -> float:
    """Positions per second of the recording."""
    n = sum(len(json.loads(p.data).get("request_data", [])) for p in polls)
    return n / (polls[-1].received - polls[0].received)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subs", default="10,10000,100000", help="numbers of subscriptions, comma-separated")
    ap.add_argument("--rate", type=float, default=1000.0, help="composites per second to decide")
    ap.add_argument("--sse", type=int, default=40, help="subscriptions read over SSE (5 dashboards among them)")
    ap.add_argument("--minutes", type=float, default=66.0, help="minutes of the recording")
    ap.add_argument("--detector-nice", type=int, default=None,
                    help="serve's --detector-nice (default: serve's own; 0: the detector at the service's priority)")
    ap.add_argument("--crs", default=None,
                    help="serve's --crs (default none: the service decides it from the feed's first 2 minutes "
                         "and then projects every area again)")
    ap.add_argument("--keep", action="store_true", help="keep the services' state (a temporary folder) afterwards")
    args = ap.parse_args()

    from spatec.feeds.recording import load_recording, poll_records
    from tests.live.conftest import POLLS

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    (work / "standing.spatec").write_text(PROGRAM.format(bus=ROOT / "examples" / "bus.spatec"))
    polls = load_recording(POLLS)
    t0 = polls[0].received
    polls = [p for p in polls if p.received <= t0 + args.minutes * 60]
    vehicles, lines, lons, lats = set(), set(), [], []
    for p in polls:
        for r in poll_records(p.data):
            vehicles.add(r["VehicleRef"])
            if r.get("LineRef"):
                lines.add(r["LineRef"])
            lons.append(float(r["Longitude"]))
            lats.append(float(r["Latitude"]))
    with open(STOPS) as f:
        stops = [(float(r["lon"]), float(r["lat"])) for r in csv.DictReader(f)]
    lons.sort()
    lats.sort()
    box = (lons[len(lons) // 20], lats[len(lats) // 20], lons[-len(lons) // 20], lats[-len(lats) // 20])
    world = (sorted(vehicles), sorted(lines), stops, box)
    print(f"{len(polls)} polls ({args.minutes:g} min of Cambridge, {world_rate(polls):.0f} positions/s), served at "
          f"{args.rate * PER_COMPOSITE:,.0f} positions/s for about {args.rate:,.0f} composites/s; "
          f"{len(vehicles)} vehicles, {len(lines)} lines, {len(stops)} stops; {args.sse} SSE readers")
    rows = []
    try:
        for n in (int(x) for x in args.subs.split(",")):
            r = run_scale(n, args, polls, world, work)
            rows.append(r)
            print(json.dumps(r), flush=True)
    finally:
        if args.keep:
            print(f"the services' state: {work}")
        else:                                   # (hundreds of MB a run: the broker's stores)
            shutil.rmtree(work, ignore_errors=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload average {load} (2 cores, shared)")
    print(f"{'subscriptions':>13} {'made s':>7} {'restart s':>9} {'bucket s':>8} {'decided/s':>9} {'dashboard/s':>11} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'p99 3s+':>7} {'hub p99':>7} {'log p99':>7} {'frames':>8} {'groups':>7} "
          f"{'ended s':>7}")
    legs = ("log", "match", "pipe", "hub", "sse")
    for r in rows:
        print(f"{r['subs']:>13,} {r['made_s']:>7.1f} {r['restart_s']:>9.1f} {r['restart_bucket_s']:>8.1f} "
              f"{r['decided_per_s']:>9.0f} "
              f"{r['dashboard_per_s']:>11.0f} {r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f} {r['p99_after_3s_ms']:>7.1f} "
              f"{(r['hub_lag_ms'] or {}).get('p99', float('nan')):>7.1f} {r['log_p99_ms']:>7.1f} {r['frames']:>8,} "
              f"{r['groups']:>7,} {r['deleted_s']:>7.1f}")
    print("from the fix served by the feed (p50/p99 ms): to its composite decided (the poller, the input log, "
          "the detector); to its frames read; those after the first 3 s")
    for r in rows:
        print(f"{r['subs']:>13,} detect {r['detect_p50_ms']:.0f}/{r['detect_p99_ms']:.0f}  "
              f"delivered {r['served_p50_ms']:.0f}/{r['served_p99_ms']:.0f}  "
              f"after 3 s {r['served_p50_after_3s_ms']:.0f}/{r['served_p99_after_3s_ms']:.0f}  "
              f"(the first decided {r['first_decided_s']:.2f} s after the feed started)")
    print("where the time goes (p50/p99 ms per frame read): " + ", ".join(legs))
    for r in rows:
        print(f"{r['subs']:>13,} " + "  ".join(f"{k} {r[k + '_p50_ms']:.0f}/{r[k + '_p99_ms']:.0f}" for k in legs))
    print("the first seconds (from the first decided, by 0.5 s of decision time): frames, p99 ms, and each leg's p99")
    for r in rows:
        print(f"{r['subs']:>13,} " + " | ".join(
            f"{w['from_s']:.1f}s {w['frames']} {w['p99_ms']:.0f} ("
            + "/".join(f"{w[k + '_p99_ms']:.0f}" for k in legs) + ")" for w in r["start"] if w["frames"]))
    print("where the CPU goes (cores, from the feed's start until the log is still)")
    for r in rows:
        print(f"{r['subs']:>13,} " + "  ".join(f"{k} {v:.2f}" for k, v in r["cpu_cores"].items())
              + f"  (all {sum(r['cpu_cores'].values()):.2f} of 2)")
    base = rows[0]
    for r in rows[1:]:
        print(f"{r['subs']:,} against {base['subs']:,}: decided/s {r['decided_per_s'] / base['decided_per_s']:.2f}x, "
              f"p50 {r['p50_ms'] / base['p50_ms']:.2f}x, p99 {r['p99_ms'] / base['p99_ms']:.2f}x")


if __name__ == "__main__":
    main()

"""Covering index vs naive evaluation: 10,000 subscriptions, 1,000 composites/s.

Composites are real: a local replay of the Cambridge polls (``--minutes`` of them)
through the Bunching and Stuck examples. Subscriptions are what many people watching a
bus network ask for, drawn at random (seeded): a line (``line == "N"``), a line and a
distance (``line == "N" and metres < 40``), a distance or a time range, a circle around a
place where composites happen, a place of the program (possibly or certainly), a line in
a circle, one in a hundred everything of a phrase, and the same questions asked by
several people (a fifth are copies of another's).

Each composite is "decided" on a 1,000/s clock and handed to the service's own
:class:`~spatec.service.hub.Hub` (the index path) or to a hub whose matching evaluates
every subscription (the naive path); every subscription it matches then has the alert's SSE frame (encoded once, as
``sse-starlette`` encodes it, and sent as those bytes to every subscriber, as the service
does) written into its connection's buffer. Latency = frames written − decided (a composite that arrives while the previous one
is still being matched waits: at 1,000/s a path slower than 1 ms per composite falls
behind, and its latency grows with the run). Both paths run in the same process, on the
same composites and subscriptions; their matches are checked equal.

    .venv/bin/python bench/bench_covering.py [--subs 10000] [--rate 1000] [--seconds 3] [--naive-seconds 0.5]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

POLLS = ROOT.parent / "shared" / "datasets" / "cambridge" / "sirivm_polls_2019-10-01.tar.gz"


def composites(minutes: float) -> list[dict]:
    import tempfile

    from spatec.plan.program import compile_program
    from tests.live.conftest import batch_alerts, feed_events, program_of
    from spatec.feeds.recording import load_recording

    polls = load_recording(POLLS)
    t0 = polls[0].received
    polls = [p for p in polls if p.received <= t0 + minutes * 60]
    prog = program_of(Path(tempfile.mkdtemp(prefix="bench-cov-")), "bunching", "stuck")
    compiled = compile_program(prog)
    want = batch_alerts(compiled, feed_events(compiled, polls))
    out = want["Bunching"] + want["Stuck"]
    random.Random(1).shuffle(out)
    return compiled, out


def subscriptions(program, areas, alerts, n: int, rng: random.Random):
    from spatec.service.filters import Filters

    filters = Filters(program)

    lines = sorted({a["line"] for a in alerts if a.get("line")})
    centres = []
    for a in alerts[:2000]:
        c = areas.hull(a["hull"]).geom.centroid
        lon, lat = areas.proj.inverse([c.x], [c.y])
        centres.append((float(lon[0]), float(lat[0])))
    places = sorted(program.places)
    made = []
    for i in range(n):
        if made and rng.random() < 0.2:
            made.append(rng.choice(made))                  # the same question as someone else
            continue
        k = rng.randrange(6) if rng.random() > 0.01 else 6      # 1 in 100 asks for all of a phrase
        phrase = rng.choice(["Bunching", "Stuck"])
        where = area = None
        certainly = False
        if k == 0:
            where = f'line == "{rng.choice(lines)}"'
        elif k == 1:
            where = f'line == "{rng.choice(lines)}"' + (f" and metres < {rng.randrange(20, 100)}"
                                                         if phrase == "Bunching" else "")
        elif k == 2:
            where = (f"metres < {rng.randrange(5, 100)}" if phrase == "Bunching"
                     else f"since >= 2019-10-01T09:{rng.randrange(0, 10):02d}")
        elif k == 3:
            lon, lat = rng.choice(centres)
            area = {"circle": [round(lon, 4), round(lat, 4), rng.randrange(100, 1500)]}
        elif k == 4:
            area, certainly = rng.choice(places), rng.random() < 0.5
        elif k == 5:
            lon, lat = rng.choice(centres)
            where = f'line == "{rng.choice(lines)}"'
            area = {"circle": [round(lon, 4), round(lat, 4), rng.randrange(300, 3000)]}
        else:
            where = None                                      # everything of a phrase
        made.append((phrase, where, area, certainly))
    out = {}
    for i, (phrase, where, area, certainly) in enumerate(made):
        flt = filters.compile(phrase, where) if where else None
        ar = areas.area(area, certainly) if area is not None else None
        out[f"s{i}"] = (phrase, flt, ar)
    return out


class Conn:
    """A subscriber's connection: frames encoded as sse-starlette writes them, into a buffer."""

    __slots__ = ("buf", "n")

    def __init__(self):
        self.buf = bytearray()
        self.n = 0


def run(path: str, hub, conns, alerts, rate: float, seconds: float):
    lat, matched = [], []
    n = min(len(alerts), int(rate * seconds))
    datas = [json.dumps(a) for a in alerts[:n]]
    start = time.perf_counter() + 0.05
    for i in range(n):
        decided = start + i / rate
        now = time.perf_counter()
        if now < decided:
            time.sleep(decided - now)
        e = hub.handle(i + 1, datas[i])
        n_subs = 0
        for sid in (s for g in hub.last_matched for s in g.members):
            c = conns[sid]
            c.buf += e.frame
            c.n += 1
            n_subs += 1
            if len(c.buf) > 1 << 20:
                del c.buf[:]                                  # the socket took it
        lat.append(time.perf_counter() - decided)
        matched.append(n_subs)
    return lat, matched, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subs", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--naive-seconds", type=float, default=0.5,
                    help="the naive path runs this long (it falls behind: its latency only grows)")
    ap.add_argument("--minutes", type=float, default=10.0, help="minutes of the recording replayed")
    args = ap.parse_args()

    from spatec.service.areas import Areas
    from spatec.service.hub import Hub
    from spatec.service.index import members, naive_match
    from spatec.spatial.crs import Projector

    t = time.perf_counter()
    compiled, alerts = composites(args.minutes)
    program = compiled.program
    areas = Areas(program, Projector("EPSG:32630"))     # the CRS a replay of the Cambridge feed chooses
    subs = subscriptions(program, areas, alerts, args.subs, random.Random(7))
    print(f"{len(alerts):,} composites (Bunching, Stuck; {args.minutes:g} min of Cambridge), "
          f"{len(subs):,} subscriptions; set up in {time.perf_counter() - t:.1f} s")

    class Sub:
        def __init__(self, sid, phrase):
            self.id, self.phrase, self.start_seq = sid, phrase, 1

    def hub_of(naive: bool):
        hub = Hub(areas, program)
        for sid, (ph, flt, ar) in subs.items():
            hub.put(Sub(sid, ph), flt, ar)
        hub.last_matched = ()
        if naive:
            class Everyone:              # the naive path's answer as one group of its subscriptions
                def __init__(self, members):
                    self.members = members

                def add_entry(self, e):
                    pass

            def match(alert, env, hull, lonlat=False):
                return [Everyone(naive_match(subs, alert, env, hull))], []
            hub.index.match = match
        inner = hub.index.match

        def recording(alert, env, hull, lonlat=False):
            got = inner(alert, env, hull, lonlat)
            hub.last_matched = got[0]
            return got
        hub.index.match = recording
        return hub

    t = time.perf_counter()
    idx_hub = hub_of(False)
    print(f"index built in {time.perf_counter() - t:.2f} s: {len(idx_hub.index.groups):,} groups "
          f"({sum(1 for g in idx_hub.index.groups.values() if g.parent is not None):,} covered by another)")
    # the same matches on a sample
    naive_hub = hub_of(True)
    from spatec.service.filters import field_types, values

    for a in alerts[:100]:
        h = (lambda a=a: areas.hull(a["hull"]))
        env = values(a, field_types(program, a["phrase"]))
        assert members(idx_hub.index.match(a, env, h)[0]) == naive_match(subs, a, env, h)

    rows = []
    for name, hub, secs in (("naive: every filter", naive_hub, args.naive_seconds),
                            ("covering index", idx_hub, args.seconds)):
        conns = {sid: Conn() for sid in subs}
        t0 = time.perf_counter()
        lat, matched, n = run(name, hub, conns, alerts, args.rate, secs)
        wall = time.perf_counter() - t0
        lat_ms = sorted(x * 1e3 for x in lat)
        q = lambda p: lat_ms[min(len(lat_ms) - 1, int(p * len(lat_ms)))]  # noqa: E731
        busy = wall / n * 1e3
        rows.append((name, n, statistics.mean(matched), q(0.5), q(0.99), busy))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nrate {args.rate:,.0f} composites/s; latency = composite decided -> its SSE frames written; "
          f"load average {load} (2 cores, shared)")
    print(f"{'path':<22} {'composites':>10} {'subs matched':>13} {'p50 ms':>9} {'p99 ms':>9} {'ms/composite':>13}")
    for name, n, m, p50, p99, busy in rows:
        print(f"{name:<22} {n:>10,} {m:>13.1f} {p50:>9.2f} {p99:>9.2f} {busy:>13.3f}")
    base, fast = rows[0], rows[1]
    print(f"\nindex vs naive: p99 {base[4] / fast[4]:.0f}x lower; matching + writing {base[5] / fast[5]:.1f}x faster "
          "per composite")


if __name__ == "__main__":
    main()

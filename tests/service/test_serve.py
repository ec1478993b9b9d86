"""`spatec serve` end to end: a recorded feed through the service to subscribers (SPEC §4:
the composites a live run reports are the replay's; a subscriber gets those its filter and
area match, each once, across disconnects and restarts)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import shapely

from spatec.feeds.server import FeedServer
from spatec.plan.program import compile_program
from tests.live.conftest import feed_events, minutes, program_of
from tests.service.conftest import Serve, call, free_port, sse, wait_for

pytestmark = pytest.mark.slow

CIRCLE = [0.1218, 52.2053, 1500.0]                        # lon, lat, metres: central Cambridge
BOX = {"type": "Polygon", "coordinates": [[[0.05, 52.15], [0.25, 52.15], [0.25, 52.25], [0.05, 52.25],
                                           [0.05, 52.15]]]}


def late_ids(state: Path) -> set:
    out = set()
    for f in Path(state).glob("runners/*/late/BusGPS.jsonl"):
        out |= {json.loads(x)["_id"] for x in f.read_text().splitlines() if x.strip()}
    return out


def batch_alerts(compiled, events, exclude=(), crs: str = "EPSG:32630") -> dict:
    """phrase → the alerts of a batch replay of ``events`` (less ``exclude``), in the CRS the
    service measured in (serve and replay choose it by the same rule)."""
    from spatec.runners.local import replay_frames
    from spatec.runtime.rows import time_fields
    from spatec.sinks.alerts import alert_json

    if exclude:
        events = events[~events["_id"].isin(set(exclude))].reset_index(drop=True)
    res = replay_frames(compiled, {"BusGPS": events}, crs=crs)
    return {p.name: alert_json(res.frames[p.name].to_dict("records"), time_fields(p)) for p in compiled.plans}


def metric(wkt: str, crs: str = "EPSG:32630"):
    import pyproj

    t = pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    g = shapely.from_wkt(wkt)
    return shapely.transform(g, lambda c: np.column_stack(t.transform(c[:, 0], c[:, 1])))


def circle_metric():
    return metric(f"POINT ({CIRCLE[0]} {CIRCLE[1]})").buffer(CIRCLE[2], 256)


def settled(serve, feeds, timeout: float = 300):
    """Wait until every feed has served its last poll, each runner has read the log to its
    end, and the alert log is still."""
    last = [None, time.monotonic()]

    def done():
        st = call(serve, "GET", "/status")[1]
        eng = st["engine"] or {}
        runners = (eng.get("runners") or {}).values()
        caught_up = runners and all(r["offset"] >= r["logged"] > 0 for r in runners)
        key = (st["log"], tuple(r["offset"] for r in runners))
        if key != last[0]:
            last[:] = [key, time.monotonic()]
            return False
        fed = all(f.served >= len(f.polls) for f in feeds)
        return fed and caught_up and time.monotonic() - last[1] > 2
    try:
        wait_for(done, timeout, what="the service to take the whole feed")
    except AssertionError:
        raise AssertionError(f"the service did not take the whole feed: {call(serve, 'GET', '/status')[1]}") from None


def decided(serve, want: dict) -> dict:
    """The replay's composites a live run has decided by now: Stuck's (successive) once the
    watermark has passed them (the feed does not end: nothing is decided by an end of input)."""
    from spatec.events.timefmt import parse_time

    runners = call(serve, "GET", "/status")[1]["engine"]["runners"].values()
    wm = min(r["watermark"] for r in runners)
    return {k: [a for a in v if k not in ("Stuck", "StuckOnRoad") or parse_time(a["hi"]) <= wm]
            for k, v in want.items()}


def ids(events):
    return [e[1] for e in events if e[0] == "alert"]


def test_three_subscriptions_resume_and_lease(tmp_path, recording):
    polls = minutes(recording, 8)
    prog = program_of(tmp_path, "bunching", "stuck")
    compiled = compile_program(prog)
    port = free_port()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], tmp_path / "state").start()
    feed = None
    try:
        # a bad filter: 400 with the message and the column in the filter text
        code, body = call(srv, "POST", "/subscriptions", {"phrase": "Bunching", "where": 'line == "1" and metre < 50'})
        assert code == 400 and body["column"] == 17 and "metre" in body["error"] and "metres" in body["error"]
        code, body = call(srv, "POST", "/subscriptions", {"phrase": "Bunching", "where": "metres < 50 m"})
        assert code == 400 and body["column"] == 1 and "unit mismatch" in body["error"]
        code, body = call(srv, "POST", "/subscriptions",
                          {"phrase": "Bunching", "where": "metres < 10 and metres > 20"})
        assert code == 400 and body["column"] == 17 and "never match" in body["error"]
        code, body = call(srv, "POST", "/subscriptions", {"phrase": "Bunching", "area": "nowhere"})
        assert code == 400 and body["field"] == "area"
        code, doc = call(srv, "GET", "/openapi.json")
        assert code == 200 and "/subscriptions/{id}/events" in doc["paths"]

        subs = {}
        for name, req in {
            "near": {"phrase": "Bunching", "where": "metres < 60"},
            "centre": {"phrase": "Stuck", "area": {"circle": CIRCLE}},
            "box": {"phrase": "Stuck", "where": "since >= 2019-10-01T09:02", "area": BOX, "certainly": True},
            "short": {"phrase": "Stuck", "lease": "2 s"},
        }.items():
            code, body = call(srv, "POST", "/subscriptions", req)
            assert code == 201, body
            subs[name] = body["id"]
        # the short lease lapses: its stream ends, it is gone, and stops costing (not listed)
        code, got = sse(srv, f"/subscriptions/{subs['short']}/events", timeout=20)
        assert code == 200 and got and got[-1][0] == "end"
        assert call(srv, "GET", f"/subscriptions/{subs['short']}")[0] == 404
        assert subs["short"] not in {s["id"] for s in call(srv, "GET", "/subscriptions")[1]}
        # renewing keeps one alive
        code, body = call(srv, "PUT", f"/subscriptions/{subs['near']}", {"lease": "10 min"})
        assert code == 200

        feed = FeedServer(polls, speed=0, port=port).start()
        # a subscriber that reads a few alerts, goes away mid-feed and comes back
        code, first = sse(srv, f"/subscriptions/{subs['near']}/events", max_events=3, timeout=120, idle=60)
        assert code == 200 and len(first) == 3
        settled(srv, [feed])

        # serve measures in the CRS a replay of the same input chooses (REFERENCE decision 50)
        from spatec.spatial.crs import choose_crs

        events = feed_events(compiled, polls)
        crs = call(srv, "GET", "/status")[1]["crs"]
        assert crs == choose_crs(compiled.program, {"BusGPS": events}) == "EPSG:32630"
        want = decided(srv, batch_alerts(compiled, events, exclude=late_ids(tmp_path / "state")))
        circle = circle_metric()
        box = metric(shapely.to_wkt(shapely.from_geojson(json.dumps(BOX))))
        expect = {
            "near": {a["id"] for a in want["Bunching"] if a["metres"] < 60},
            "centre": {a["id"] for a in want["Stuck"] if metric(a["hull"]).intersects(circle)},
            "box": {a["id"] for a in want["Stuck"] if a["since"] >= "2019-10-01T08:02:00Z"
                    and box.contains(metric(a["hull"]))},
        }
        assert all(len(v) >= 3 for v in expect.values()), {k: len(v) for k, v in expect.items()}
        assert expect["centre"] != {a["id"] for a in want["Stuck"]} != expect["box"]

        rest_code, rest = sse(srv, f"/subscriptions/{subs['near']}/events", last_id=first[-1][1], timeout=60)
        got_near = ids(first) + ids(rest)
        assert len(got_near) == len(set(got_near))
        assert set(got_near) == expect["near"], (len(set(got_near) - expect["near"]),
                                                 sorted((a["lo"], a["hi"]) for a in want["Bunching"]
                                                        if a["id"] in expect["near"] - set(got_near))[:5],
                                                 max(a["hi"] for a in want["Bunching"]))
        for name in ("centre", "box"):
            code, got = sse(srv, f"/subscriptions/{subs[name]}/events", timeout=60)
            got = ids(got)
            assert len(got) == len(set(got))
            stuck = {a["id"]: a for a in want["Stuck"]}
            assert set(got) == expect[name], (name, {k: len(v) for k, v in expect.items()},
                                              {k: len(set(got) & v) for k, v in expect.items()}, [
                (stuck[i]["lo"], stuck[i]["hull"][:80]) for i in list(expect[name] - set(got))[:3]])
        # ?mode=latest: one alert per key (Stuck's `per vehicle`), the last of each
        by_vehicle = {}
        for a in sorted((a for a in want["Stuck"] if a["id"] in expect["centre"]), key=lambda a: a["id"]):
            by_vehicle.setdefault(a["vehicle"], []).append(a["id"])
        code, latest = sse(srv, f"/subscriptions/{subs['centre']}/events?mode=latest", timeout=20)
        vehicles = [json.loads(d)["vehicle"] for _, _, d in latest]
        assert sorted(vehicles) == sorted(by_vehicle)
    finally:
        srv.stop()
        if feed is not None:
            feed.stop()


def split_polls(polls, part: int):
    """The polls with only the vehicles of one half (by a hash of the vehicle id): two feeds."""
    import zlib

    from spatec.feeds.recording import Poll, poll_records

    out = []
    for p in polls:
        recs = [r for r in poll_records(p.data)
                if zlib.crc32(str(r.get("VehicleRef", "")).encode()) % 2 == part]
        out.append(Poll(p.received, p.name, json.dumps({"request_data": recs}).encode()))
    return out


def check_once(got_ids, compiled, polls_by_feed, states, serve):
    """Each alert once; every composite the replay finds (without any event a runner found late)
    delivered; nothing delivered the replay cannot find (with every event)."""
    assert len(got_ids) == len(set(got_ids)), "an alert delivered twice"
    late = set().union(*(late_ids(s) for s in states))
    strict, loose = set(), set()
    for polls in polls_by_feed:
        ev = feed_events(compiled, polls)
        strict |= {a["id"] for a in decided(serve, batch_alerts(compiled, ev, exclude=late))["Stuck"]}
        loose |= {a["id"] for a in batch_alerts(compiled, ev)["Stuck"]}
    assert len(strict) > 50
    assert strict <= set(got_ids), f"{len(strict - set(got_ids))} composite(s) lost"
    assert set(got_ids) <= loose


def test_kill_9_mid_feed_and_restart(tmp_path, recording):
    polls = minutes(recording, 6)
    prog = program_of(tmp_path, "stuck")
    compiled = compile_program(prog)
    port = free_port()
    state = tmp_path / "state"
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], state).start()
    feed = None
    try:
        code, body = call(srv, "POST", "/subscriptions", {"phrase": "Stuck"})
        sid = body["id"]
        feed = FeedServer(polls, speed=20, port=port).start()    # 6 minutes in 18 s
        code, first = sse(srv, f"/subscriptions/{sid}/events", max_events=20, timeout=120, idle=60)
        assert len(first) == 20
        srv.kill()                                     # kill -9 mid-feed
        assert feed.served < len(polls), "the feed was over before the kill"
        srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], state, port=srv.port).start()
        assert call(srv, "GET", f"/subscriptions/{sid}")[0] == 200     # kept across the restart
        settled(srv, [feed])
        code, rest = sse(srv, f"/subscriptions/{sid}/events", last_id=first[-1][1], timeout=60)
        check_once(ids(first) + ids(rest), compiled, [polls], [state], srv)
    finally:
        srv.stop()
        if feed is not None:
            feed.stop()


def test_two_processes_one_killed(tmp_path, recording):
    from spatec.service.broker import EmbeddedNats

    polls = minutes(recording, 6)
    feeds_polls = [split_polls(polls, 0), split_polls(polls, 1)]
    prog = program_of(tmp_path, "stuck")
    compiled = compile_program(prog)
    ports = [free_port(), free_port()]
    sources = [f"BusGPS=sirivm+http://127.0.0.1:{p}/" for p in ports]
    nats = EmbeddedNats(tmp_path / "nats").start()
    a = Serve(prog, sources, tmp_path / "a", broker=nats.url).start()
    b = Serve(prog, sources, tmp_path / "b", broker=nats.url).start()
    feeds = []
    try:
        owned = lambda s: call(s, "GET", "/status")[1]["engine"]["owned"]  # noqa: E731
        wait_for(lambda: len(owned(a)) == 1 and len(owned(b)) == 1, 60, what="the sources split")
        code, body = call(srv := a, "POST", "/subscriptions", {"phrase": "Stuck"})
        sid = body["id"]
        wait_for(lambda: call(b, "GET", f"/subscriptions/{sid}")[0] == 200, 10, what="b to know it")
        feeds = [FeedServer(p, speed=20, port=port).start() for p, port in zip(feeds_polls, ports)]
        code, first = sse(b, f"/subscriptions/{sid}/events", max_events=20, timeout=120, idle=60)
        assert len(first) == 20
        srv.kill()                                      # a dies; b takes its source from the log
        assert all(f.served < len(polls) for f in feeds), "the feeds were over before the kill"
        wait_for(lambda: len(owned(b)) == 2, 60, what="b to take a's source")
        settled(b, feeds)
        code, rest = sse(b, f"/subscriptions/{sid}/events", last_id=first[-1][1], timeout=60)
        check_once(ids(first) + ids(rest), compiled, feeds_polls, [tmp_path / "a", tmp_path / "b"], b)
    finally:
        for s in (a, b):
            s.stop()
        for f in feeds:
            f.stop()
        nats.stop()


def test_push_deliveries_webhook_nats_mqtt(tmp_path, recording):
    """Push subscriptions get what an SSE subscription with the same filter gets, each once,
    with the composite id (webhook: Idempotency-Key; NATS: Nats-Msg-Id; MQTT: the alert)."""
    import asyncio
    import shutil
    import subprocess
    import threading

    import paho.mqtt.client as mqtt

    from tests.live.test_webhook_kill import SlowHook

    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not Path(mosquitto).exists():
        pytest.skip("mosquitto is not installed (scripts/setup_system.sh installs Debian's mosquitto)")
    mport = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {mport} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    broker_proc = subprocess.Popen([mosquitto, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got_mqtt, lock = [], threading.Lock()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    client.on_message = lambda c, u, m: (lock.acquire(), got_mqtt.append(json.loads(m.payload)["id"]),
                                         lock.release())
    wait_for(lambda: _connects(client, mport), 10, 0.2, "mosquitto")
    client.subscribe("alerts/stuck", qos=1)
    client.loop_start()
    hook = SlowHook(0.0)
    polls = minutes(recording, 4)
    prog = program_of(tmp_path, "stuck")
    port = free_port()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], tmp_path / "state",
                extra=["--push-host", "127.0.0.1"]).start()
    feed = None
    got_nats = []
    stop = threading.Event()

    def nats_listener(url):
        import nats

        async def run():
            nc = await nats.connect(url)
            sub = await nc.subscribe("spatec.deliver.ops.stuck")
            while not stop.is_set():
                try:
                    m = await sub.next_msg(timeout=0.5)
                except Exception:  # noqa: BLE001 - none yet
                    continue
                got_nats.append((m.headers or {}).get("Nats-Msg-Id"))
            await nc.close()
        asyncio.run(run())

    try:
        where = 'line == "1" or line == "4"'
        subs = {}
        for name, deliver in {"sse": {"sse": True}, "webhook": {"webhook": hook.url},
                              "nats": {"nats": "spatec.deliver.ops.stuck"},
                              "mqtt": {"mqtt": {"url": f"mqtt://127.0.0.1:{mport}", "topic": "alerts/stuck"}}}.items():
            code, body = call(srv, "POST", "/subscriptions", {"phrase": "Stuck", "where": where, "deliver": deliver})
            assert code == 201, body
            subs[name] = body["id"]
        t = threading.Thread(target=nats_listener, args=(call(srv, "GET", "/status")[1]["broker"]["url"],), daemon=True)
        t.start()
        time.sleep(1.0)
        feed = FeedServer(polls, speed=0, port=port).start()
        settled(srv, [feed])
        code, events = sse(srv, f"/subscriptions/{subs['sse']}/events", timeout=60)
        want = ids(events)
        assert len(want) > 10 and len(want) == len(set(want))
        wait_for(lambda: len(hook.posts) >= len(want) and len(got_nats) >= len(want) and len(got_mqtt) >= len(want),
                 60, what="the pushes")
        time.sleep(1.0)
        assert [k for k, _ in hook.posts] == [i for _, i in hook.posts]
        for got in ([i for _, i in hook.posts], got_nats, got_mqtt):
            assert sorted(got) == sorted(want)
    finally:
        stop.set()
        srv.stop()
        if feed is not None:
            feed.stop()
        client.loop_stop()
        broker_proc.terminate()
        broker_proc.wait()
        hook.srv.shutdown()


def _connects(client, port) -> bool:
    try:
        client.connect("127.0.0.1", port)
        return True
    except OSError:
        return False

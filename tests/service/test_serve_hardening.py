"""`spatec serve` tried as a careless client, an attacker and an operator would (issue 31):
every failure the issue lists, each against a real `spatec serve` process."""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spatec.feeds.recording import Poll, poll_records
from spatec.feeds.server import FeedServer
from spatec.plan.program import compile_program
from tests.live.conftest import feed_events, minutes, program_of
from tests.service.conftest import REPO, SPATEC, Serve, call, free_port, sse, wait_for
from tests.service.test_serve import batch_alerts, decided, ids, late_ids, settled

pytestmark = pytest.mark.slow

TOKENS = "ops AAAAAAAAAAAAAAAAAAAAAAAA\nother BBBBBBBBBBBBBBBBBBBBBBBB\n"
OPS, OTHER = "AAAAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBBBB"
SELF_CROSSING = {"type": "Polygon", "coordinates": [[[0.05, 52.15], [0.25, 52.25], [0.25, 52.15], [0.05, 52.25],
                                                     [0.05, 52.15]]]}


def with_tokens(state: Path) -> Path:
    state.mkdir(parents=True, exist_ok=True)
    (state / "tokens").write_text(TOKENS)
    os.chmod(state / "tokens", 0o600)
    return state


def test_owners_requests_and_races(tmp_path, recording):
    """Tokens and owners, Host and Origin, strict bodies and limits, push targets, bulk
    requests, the 480-term filter beside a steady /status, and concurrent PUTs and DELETEs."""
    prog = program_of(tmp_path, "bunching", "stuck")
    port = free_port()
    feed = FeedServer(minutes(recording, 2), speed=0, loop=True, port=port).start()
    feed_started = time.monotonic()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], with_tokens(tmp_path / "state"),
                extra=["--push-host", "hooks.example.org"]).start()
    ops = lambda *a, **k: call(srv, *a, token=OPS, **k)  # noqa: E731
    try:
        # -- no token, a wrong one, and another owner's
        assert call(srv, "POST", "/subscriptions", {"phrase": "Stuck"}, token=None)[0] == 401
        assert call(srv, "GET", "/subscriptions", token="not-a-token-at-all")[0] == 401
        code, mine = ops("POST", "/subscriptions", {"phrase": "Stuck", "deliver": {"webhook": "https://hooks.example.org/x"}})
        assert code == 201, mine
        sid = mine["id"]
        assert call(srv, "DELETE", f"/subscriptions/{sid}", token=None)[0] == 401            # token-less DELETE
        assert call(srv, "DELETE", f"/subscriptions/{sid}", token=OTHER)[0] == 404            # not its owner
        assert call(srv, "PUT", f"/subscriptions/{sid}", {"lease": "1 h"}, token=OTHER)[0] == 404
        assert call(srv, "GET", f"/subscriptions/{sid}", token=OTHER)[0] == 404
        assert call(srv, "GET", "/subscriptions", token=OTHER)[1] == []                       # lists its own only
        listed = ops("GET", "/subscriptions")[1]
        assert [s["id"] for s in listed] == [sid] and listed[0]["owner"] == "ops"
        assert ops("GET", f"/subscriptions/{sid}")[0] == 200
        # -- Host, Origin, content type, size, JSON
        assert ops("GET", "/subscriptions", headers={"Host": "evil.example:80"})[0] == 421
        assert call(srv, "GET", "/status", token=None, headers={"Host": "attacker.example"})[0] == 421
        assert ops("POST", "/subscriptions", {"phrase": "Stuck"}, headers={"Origin": "https://evil.example"})[0] == 403
        code, body = ops("POST", "/subscriptions", data=b'{"phrase": "Stuck"}', headers={"Content-Type": "text/plain"})
        assert code == 415, body                                                              # a cross-site form post
        assert ops("POST", "/subscriptions", data=b"{" + b" " * (5 << 20) + b"}")[0] == 413
        assert ops("POST", "/subscriptions", data=b'{"phrase": ')[0] == 400
        assert ops("POST", "/subscriptions", data=b"[" * 100_000)[0] == 400                   # no RecursionError
        # -- strict values, and never a 500
        for bad in [{"phrase": "Stuck", "certainly": "no"}, {"phrase": "Stuck", "area": {"circle": [True, 52.2, 10]}},
                    {"phrase": "Stuck", "area": SELF_CROSSING, "certainly": True}, {"phrase": "Stuck", "lease": "soon"},
                    {"phrase": "Stuck", "area": {"type": "Polygon", "coordinates": [[[0.1, 52.2]] * 100_001]}},
                    {"phrase": "Stuck", "deliver": {"webhook": "https://hooks.example.org/x\r\nX-Evil: 1"}},
                    {"phrase": "Nope"}, {"phrase": "Stuck", "where": "vehicle = 1"}, [], "x", 5]:
            code, body = ops("POST", "/subscriptions", bad)
            assert code == 400, (bad, code, body)
            assert "error" in body
        # -- push targets: the allow-list, the NATS prefix; nothing overwritten
        for target in ({"nats": f"$KV.spatec_subs.{sid}"}, {"nats": "spatec.input.x"}, {"nats": "spatec.alerts.Stuck"},
                       {"webhook": "http://0x7f000001:9/"}, {"webhook": "http://127.0.0.1:9/"},
                       {"mqtt": {"url": "mqtt://127.0.0.1:1883", "topic": "t"}}):
            code, body = ops("POST", "/subscriptions", {"phrase": "Stuck", "deliver": target})
            assert code == 403, (target, code, body)
        assert ops("GET", f"/subscriptions/{sid}")[1]["deliver"] == {"webhook": "https://hooks.example.org/x"}
        # -- the page's key: a cookie, SSE only
        page = (srv.state / "page-token").read_text().strip()
        import http.client

        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        c.request("GET", f"/?key={page}")
        r = c.getresponse()
        r.read()
        cookie = r.getheader("Set-Cookie")
        assert r.status == 303 and r.getheader("Location") == "/" and "HttpOnly" in cookie and "SameSite=strict" in cookie
        jar = {"Cookie": cookie.split(";")[0], "Origin": srv.url}
        code, body = call(srv, "POST", "/subscriptions", {"deliver": {"webhook": "https://hooks.example.org/p"}},
                          token=None, headers=jar)
        assert code == 403, body
        code, body = call(srv, "POST", "/subscriptions", {"phrase": "Stuck"}, token=None, headers=jar)
        assert code == 201 and call(srv, "GET", f"/subscriptions/{body['id']}", token=None, headers=jar)[0] == 200
        assert call(srv, "POST", "/subscriptions", {"phrase": "Stuck"}, token=None,
                    headers={"Cookie": jar["Cookie"]})[0] == 403                  # a page's change without Origin
        # -- the interface says what it does
        doc = call(srv, "GET", "/openapi.json", token=None)[1]
        text = json.dumps(doc)
        for word in ("start_seq", "`alert`", "`error`", "`end`", "window_first", "disk full", "time zone", "recent",
                     "--port 0"):
            assert word in text, word
        assert set(doc["components"]["schemas"]["Status"]["properties"]) == set(srv.status())   # every field
        code, prog_doc = ops("GET", "/program")
        assert code == 200 and prog_doc["timezone"] == "Europe/London"
        # -- a 480-term and a 10,000-term filter beside a /status that keeps answering
        answered, stop = [], threading.Event()

        def poll_status():
            while not stop.is_set():
                t0 = time.monotonic()
                code = call(srv, "GET", "/status", token=None, timeout=60)[0]
                answered.append((code, t0, time.monotonic()))
                time.sleep(0.05)
        th = threading.Thread(target=poll_status, daemon=True)
        th.start()
        posted = {}
        for n in (480, 10_000):
            where = " or ".join(f'vehicle == "V{i}"' for i in range(n))
            t0 = time.monotonic()
            code, body = ops("POST", "/subscriptions", {"phrase": "Stuck", "where": where}, timeout=120)
            posted[n] = (t0, time.monotonic())
            assert code == 201, body
        stop.set()
        th.join()
        assert answered and all(c == 200 for c, _, _ in answered)
        # while the 10,000-term filter was checked (seconds, on a thread), /status kept answering:
        # none of its answers waited for the check (on the loop, one would wait as long as it)
        t0, t1 = posted[10_000]
        during = [(a, b) for _, a, b in answered if t0 <= a and b <= t1]
        assert len(during) >= 2, (t1 - t0, len(answered))
        assert max(b - a for a, b in during) < (t1 - t0) / 2, (t1 - t0, sorted(b - a for a, b in during)[-3:])
        st = srv.status()
        assert st["engine"]["owned"] and st["healthy"], st                        # the source's lease held
        # -- bulk: 2,000 made in one request, then ended in one
        reqs = [{"phrase": "Bunching", "where": f'line == "{i % 40}" and metres < {10 + i % 90}',
                 "area": {"circle": [0.1 + (i % 50) / 500, 52.18 + (i % 37) / 900, 300 + i % 700]}}
                for i in range(2000)] + [{"phrase": "Bunching", "certainly": "yes"}]
        code, body = ops("POST", "/subscriptions/bulk", {"subscriptions": reqs}, timeout=120)
        assert code == 200 and body["made"] == 2000 and body["results"][-1]["status"] == 400
        made = [r["id"] for r in body["results"][:-1]]
        assert len(ops("GET", "/subscriptions?limit=10000")[1]) == 2000 + 3
        code, body = ops("POST", "/subscriptions/bulk-delete", {"ids": made + ["nope"]}, timeout=120)
        assert code == 200 and body["deleted"] == 2000 and body["missing"] == ["nope"]
        code, body = call(srv, "POST", "/subscriptions/bulk-delete", {"ids": [sid]}, token=OTHER)
        assert body == {"deleted": 0, "missing": [sid]}                           # another's is not deleted
        # -- races: 40 concurrent PUTs all succeed; a PUT racing a DELETE never revives it
        with cf.ThreadPoolExecutor(40) as ex:
            codes = list(ex.map(lambda i: ops("PUT", f"/subscriptions/{sid}", {"lease": f"{600 + i} s"})[0],
                                range(40)))
        assert codes == [200] * 40, codes
        for _ in range(5):
            code, b = ops("POST", "/subscriptions", {"phrase": "Stuck"})
            victim = b["id"]
            with cf.ThreadPoolExecutor(8) as ex:
                futs = [ex.submit(ops, "PUT", f"/subscriptions/{victim}", {"lease": "20 min"}) for _ in range(6)]
                futs.insert(3, ex.submit(ops, "DELETE", f"/subscriptions/{victim}"))
                got = [f.result()[0] for f in futs]
            assert got[3] == 204 and set(got) <= {200, 204, 404}, got
            time.sleep(0.3)
            assert ops("GET", f"/subscriptions/{victim}")[0] == 404
            assert victim not in {s["id"] for s in ops("GET", "/subscriptions?limit=10000")[1]}
            code, events = sse(srv, f"/subscriptions/{victim}/events", token=OPS, timeout=5)
            assert code == 404
        # -- the looping feed was asked at the trigger's pace, not in a busy loop
        polls = srv.status()["engine"]["polls"]
        assert polls <= len(feed.polls), polls
        assert feed.requests < 30 * (time.monotonic() - feed_started) + 50, feed.requests
    finally:
        srv.stop()
        feed.stop()



def _bad_record(sid: str, owner: str = "local") -> dict:
    """A subscription as an older version (or anyone with the broker) could have stored it:
    a self-crossing polygon that must be certainly contained."""
    return {"id": sid, "phrase": "Stuck", "where": None, "area": SELF_CROSSING, "certainly": True, "lease": 3600,
            "expires": time.time() + 3600, "created": time.time(), "start_seq": 1, "deliver": {"sse": True},
            "key": None, "owner": owner}


def _put_record(url: str, rec: dict) -> None:
    import asyncio

    import nats

    async def run():
        nc = await nats.connect(url)
        kv = await nc.jetstream().key_value("spatec_subs")
        await kv.put(rec["id"], json.dumps(rec).encode())
        await nc.close()
    asyncio.run(run())


def test_poison_filter_and_area_leave_the_others_served_before_and_after_a_restart(tmp_path, recording):
    polls = minutes(recording, 6)
    prog = program_of(tmp_path, "bunching", "stuck")
    compiled = compile_program(prog)
    port = free_port()
    state = tmp_path / "state"
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], state).start()
    feed = None
    try:
        code, poison = call(srv, "POST", "/subscriptions", {"phrase": "Bunching", "where": "metres / (metres - metres) > 1"})
        assert code == 201, poison                                  # the language's rule: missing, no match
        code, near = call(srv, "POST", "/subscriptions", {"phrase": "Bunching", "where": "metres < 60"})
        code, stuck = call(srv, "POST", "/subscriptions", {"phrase": "Stuck"})
        _put_record(srv.status()["broker"]["url"], _bad_record("badarea0000000001"))
        wait_for(lambda: (call(srv, "GET", "/subscriptions/badarea0000000001")[1] or {}).get("suspended"), 20,
                 what="the stored bad area to be suspended")
        code, err = sse(srv, "/subscriptions/badarea0000000001/events", timeout=10)
        assert err and err[0][0] == "error" and "Self-intersection" in json.loads(err[0][2])["reason"]
        feed = FeedServer(polls, speed=20, port=port).start()       # 6 minutes in 18 s
        code, first = sse(srv, f"/subscriptions/{stuck['id']}/events", max_events=10, timeout=120, idle=60)
        assert len(first) == 10
        st = srv.status()
        assert st["suspended"] == 1 and st["alerts_skipped"] == 0 and st["tasks"]["hub"]["restarts"] == 0
        srv.kill()                                                  # kill -9: the poison is stored, suspended
        assert feed.served < len(polls), "the feed was over before the kill"
        srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], state, port=srv.port).start()
        got = call(srv, "GET", "/subscriptions/badarea0000000001")[1]
        assert got["suspended"] and "Self-intersection" in got["suspended"]
        settled(srv, [feed])
        st = srv.status()
        assert st["healthy"] and st["tasks"]["hub"]["restarts"] == 0 and st["alerts_skipped"] == 0, st
        events = feed_events(compiled, polls)
        want = decided(srv, batch_alerts(compiled, events, exclude=late_ids(state), crs=st["crs"]))
        loose = {a["id"] for a in batch_alerts(compiled, events, crs=st["crs"])["Stuck"]}
        code, rest = sse(srv, f"/subscriptions/{stuck['id']}/events", last_id=first[-1][1], timeout=60)
        got_stuck = ids(first) + ids(rest)
        assert len(got_stuck) == len(set(got_stuck))
        assert {a["id"] for a in want["Stuck"]} <= set(got_stuck) <= loose
        code, near_got = sse(srv, f"/subscriptions/{near['id']}/events", timeout=60)
        assert set(ids(near_got)) >= {a["id"] for a in want["Bunching"] if a["metres"] < 60} != set()
        code, none = sse(srv, f"/subscriptions/{poison['id']}/events", timeout=10)
        assert ids(none) == [] and call(srv, "GET", f"/subscriptions/{poison['id']}")[1]["suspended"] is None
    finally:
        srv.stop()
        if feed is not None:
            feed.stop()


def _with_future_fix(polls, at: int):
    """The polls with one fix of poll ``at`` a year ahead (a real vehicle, its clock wrong)."""
    out = list(polls)
    recs = poll_records(out[at].data)
    bad = dict(recs[0])
    bad["RecordedAtTime"] = bad["RecordedAtTime"].replace("2019-", "2020-", 1)
    doc = json.loads(out[at].data)
    doc["request_data"] = recs + [bad]
    out[at] = Poll(out[at].received, out[at].name, json.dumps(doc).encode())
    return out, bad["VehicleRef"]


def test_a_fix_from_next_year_is_a_reject_not_the_watermark(tmp_path, recording):
    polls, vehicle = _with_future_fix(minutes(recording, 5), 30)
    prog = program_of(tmp_path, "stuck")
    compiled = compile_program(prog)
    port = free_port()
    state = tmp_path / "state"
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], state).start()
    feed = FeedServer(polls, speed=0, port=port).start()
    try:
        code, sub = call(srv, "POST", "/subscriptions", {"phrase": "Stuck"})
        settled(srv, [feed])
        run = next(iter(srv.status()["engine"]["runners"].values()))
        rejects = [json.loads(x) for f in state.glob("runners/*/_rejects/BusGPS.jsonl")
                   for x in f.read_text().splitlines()]
        ahead = [r for r in rejects if "ahead of" in r["reason"]]
        assert len(ahead) == 1 and vehicle in json.dumps(ahead[0]["record"]) and "2020-" in ahead[0]["reason"], ahead
        assert run["watermark"] < 1_600_000_000_000_000                     # still 2019
        late = late_ids(state)
        assert len(late) < 20, len(late)                                    # not every fix after it
        events = feed_events(compiled, polls)
        events = events[events["_hi"] < 1_600_000_000_000_000]
        want = decided(srv, batch_alerts(compiled, events, exclude=late, crs=srv.status()["crs"]))
        code, got = sse(srv, f"/subscriptions/{sub['id']}/events", timeout=60)
        assert set(ids(got)) == {a["id"] for a in want["Stuck"]} and len(ids(got)) > 20
    finally:
        srv.stop()
        feed.stop()


def _stuck_served(tmp_path, recording, mins: float, speed: float):
    """``(program, feed port, feed, serve, a Stuck subscription)`` once alerts come."""
    prog = program_of(tmp_path, "stuck")
    port = free_port()
    feed = FeedServer(minutes(recording, mins), speed=speed, port=port).start()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], tmp_path / "state").start()
    code, sub = call(srv, "POST", "/subscriptions", {"phrase": "Stuck"})
    wait_for(lambda: srv.status()["log"] > 0, 60, what="alerts")
    return prog, port, feed, srv, sub


def test_the_broker_killed_is_started_again(tmp_path, recording):
    prog, port, feed, srv, sub = _stuck_served(tmp_path, recording, 3, 5)
    try:
        pid = int((srv.state / "nats" / "pid").read_text())
        size0 = srv.log_path.stat().st_size
        os.kill(pid, signal.SIGKILL)
        seen, posted = set(), []

        def look():
            st = srv.status()
            seen.add((st["broker"]["state"], st["healthy"]))
            if st["broker"]["state"] != "ok" and len(posted) < 3:     # what needs it: refused, never a 500
                posted.append(call(srv, "POST", "/subscriptions", {"phrase": "Stuck"}, timeout=20)[0])
            return st["broker"]["state"] == "ok" and st["broker"]["restarts"] >= 1
        wait_for(look, 60, every=0.1, what="the broker to be started again")
        assert ("down", False) in seen, seen                                 # /status told the truth meanwhile
        assert posted and set(posted) <= {503, 201}, posted
        wait_for(lambda: srv.status()["healthy"], 60, what="healthy again")
        st = srv.status()
        assert st["broker"]["state"] == "ok" and st["broker"]["restarts"] == 1
        assert int((srv.state / "nats" / "pid").read_text()) != pid
        code, again = call(srv, "POST", "/subscriptions", {"phrase": "Stuck"})
        assert code == 201
        before = st["log"]
        wait_for(lambda: srv.status()["log"] > before, 60, what="alerts after the restart")
        assert call(srv, "GET", f"/subscriptions/{sub['id']}")[0] == 200
        grown = srv.log_path.stat().st_size - size0
        assert grown < 30_000, srv.log_path.read_text()[-3000:]           # a few lines, not tracebacks a second
    finally:
        srv.stop()
        feed.stop()


def _gone(pid: int, timeout: float = 15) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:                                   # a zombie of ours is gone too
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_the_matcher_killed_is_started_again_and_dies_with_the_service(tmp_path, recording):
    prog, port, feed, srv, sub = _stuck_served(tmp_path, recording, 6, 10)
    try:
        pid = srv.status()["matcher"]["pid"]
        os.kill(pid, signal.SIGKILL)
        seen = set()

        def look():
            st = srv.status()
            seen.add(st["healthy"])
            return st["tasks"]["hub"]["restarts"] >= 1 and st["matcher"]["pid"] not in (None, pid)
        wait_for(look, 60, every=0.1, what="the matcher to be started again")
        st = srv.status()
        assert False in seen and st["tasks"]["hub"]["error"], st          # /status told
        before = st["log"]
        wait_for(lambda: srv.status()["log"] > before, 60, what="alerts after the matcher's restart")
        code, got = sse(srv, f"/subscriptions/{sub['id']}/events", idle=3, timeout=30)
        got = ids(got)
        assert len(got) == len(set(got)) and len(got) >= before        # every alert (Stuck only), each once
        # Ctrl-C (SIGINT to the service alone): it stops, and so does its matcher
        matcher = srv.status()["matcher"]["pid"]
        srv.proc.send_signal(signal.SIGINT)
        srv.proc.wait(60)
        assert _gone(matcher), "the matcher outlived the service"
        # kill -9 of the service alone: the matcher dies with it
        srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], tmp_path / "state", port=srv.port).start()
        wait_for(lambda: srv.status()["matcher"]["pid"], 60, what="the matcher")
        matcher = srv.status()["matcher"]["pid"]
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait(30)
        assert _gone(matcher), "the matcher outlived a killed service"
    finally:
        srv.stop()
        feed.stop()


DISK = Path(__file__).with_name("disk_full_run.py")


def test_a_full_disk_is_reported_and_recovered(tmp_path):
    """In a mount namespace of its own (``unshare``), the service's state on a 64 MiB tmpfs:
    filled, the broker says "disk full" and the service refuses what needs it (503); freed,
    the embedded nats-server is started again and everything goes on."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed")
    flags = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    probe = subprocess.run([unshare, *flags, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace for this user here ({probe.stderr.decode().strip()})")
    r = subprocess.run([unshare, *flags, "--propagation", "private", sys.executable, str(DISK), str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["full_state"] == "disk full" and not got["full_healthy"], got
    assert got["full_post"] == 503, got
    assert got["after_state"] == "ok" and got["after_restarts"] >= 1 and got["after_post"] == 201, got
    assert got["alerts_after"] > got["alerts_full"], got


def test_beyond_loopback_needs_tokens(tmp_path):
    prog = program_of(tmp_path, "stuck")
    env = {k: v for k, v in os.environ.items() if k != "SPATEC_TOKENS"}
    r = subprocess.run(SPATEC + ["serve", str(prog), "--host", "0.0.0.0", "--port", "0", "--state",
                                 str(tmp_path / "state")], cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and "needs API tokens" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "state" / "tokens").exists()
    srv = Serve(prog, [], tmp_path / "state2", extra=["--host", "0.0.0.0"],
                env={"SPATEC_TOKENS": f"ops:{OPS}"}).start()
    try:
        assert call(srv, "GET", "/subscriptions", token=OPS)[0] == 200
        assert call(srv, "GET", "/subscriptions", token=None)[0] == 401
    finally:
        srv.stop()


def _nice_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[16])          # (field 19: nice)


def test_the_detector_runs_below_the_processes_that_deliver(tmp_path, recording):
    """On a busy machine what is decided is delivered first: the detector's process (and each of
    its threads) at --detector-nice below the service and its matcher; an increment beyond
    nice's range is refused before anything starts. Ctrl-C in a terminal (SIGINT to the whole
    process group) and ``systemctl stop`` (SIGTERM to all of it) stop the service at once, its
    children with it, with nothing reported as a failure (SIGTERM killed the detector while it
    waited to be told to stop, and the stop then waited for ever)."""
    prog = program_of(tmp_path, "stuck")
    r = subprocess.run(SPATEC + ["serve", str(prog), "--port", "0", "--state", str(tmp_path / "bad"),
                                 "--detector-nice", "25"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "--detector-nice 25: a nice increment from 0 to 19" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and not (tmp_path / "bad").exists()      # nothing made
    port = free_port()
    feed = FeedServer(minutes(recording, 3), speed=5, port=port).start()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], tmp_path / "state",
                extra=["--detector-nice", "7", "--crs", "EPSG:32631"]).start()
    try:
        def running():
            runs = list((srv.status()["engine"] or {}).get("runners", {}).values())
            return runs and "pid" in runs[0] and runs[0]["logged"] > 0 and srv.status()["matcher"]["pid"]
        wait_for(running, 60, what="the detector at work")
        run = next(iter(srv.status()["engine"]["runners"].values()))
        matcher = srv.status()["matcher"]["pid"]
        base = _nice_of(srv.proc.pid)
        assert run["nice"] == base + 7
        assert {_nice_of(int(t.name)) for t in Path(f"/proc/{run['pid']}/task").iterdir()} == {base + 7}
        assert _nice_of(matcher) == base
        for sig in (signal.SIGINT, signal.SIGTERM):
            if sig == signal.SIGTERM:
                srv = Serve(prog, srv.sources, srv.state, port=srv.port, extra=srv.extra).start()
                wait_for(running, 60, what="the detector at work again")
                run = next(iter(srv.status()["engine"]["runners"].values()))
                matcher = srv.status()["matcher"]["pid"]
            size = srv.log_path.stat().st_size
            os.killpg(srv.proc.pid, sig)
            srv.proc.wait(15)
            assert _gone(run["pid"]) and _gone(matcher)
            with open(srv.log_path, "rb") as f:
                f.seek(size)
                said = f.read().decode()
            assert "Traceback" not in said and "failed" not in said, (sig, said)
    finally:
        srv.kill()
        feed.stop()

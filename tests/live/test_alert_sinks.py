"""Alert sinks: JSON lines, webhooks (retries, dead letters), and delivering each id once."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spatec.sinks.alerts import DeliveredLog, JsonlSink, SinkSet, WebhookSink, open_sink

ALERT = {"phrase": "Silent", "id": "c0ffee", "lo": "2019-10-01T07:59:08Z", "hi": "2019-10-01T07:59:38Z",
         "hull": "POINT (0 52)", "events": {"A": "BusGPS:WP-101:2019-10-01T07:59:38Z"}, "vehicle": "WP-101"}


class Hook:
    """A webhook receiver on 127.0.0.1 that answers ``codes`` in turn, then 200."""

    def __init__(self, codes=()):
        self.codes, self.got, self.keys = list(codes), [], []
        hook = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                code = hook.codes.pop(0) if hook.codes else 200
                if code == 200:
                    hook.got.append(json.loads(body))
                    hook.keys.append(self.headers.get("Idempotency-Key"))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/alerts"

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def hook(request):
    h = Hook(getattr(request, "param", ()))
    yield h
    h.close()


@pytest.mark.parametrize("hook", [[503, 500, 429]], indirect=True)
def test_webhook_retries_then_delivers(hook, tmp_path):
    sink = WebhookSink(hook.url, tmp_path / "dead_letter.jsonl", retries=5, backoff=0.01)
    assert sink.deliver([ALERT]) == []          # queued: the worker posts it
    assert sink.drain(10)
    sink.close()
    assert hook.got == [ALERT] and hook.keys == ["c0ffee"] and sink.attempts == 4
    assert not (tmp_path / "dead_letter.jsonl").exists()


@pytest.mark.parametrize("hook", [[500] * 10], indirect=True)
def test_webhook_always_failing_goes_to_dead_letter(hook, tmp_path):
    sink = WebhookSink(hook.url, tmp_path / "dead_letter.jsonl", retries=3, backoff=0.01)
    sink.deliver([ALERT])
    assert sink.drain(10)
    assert sink.attempts == 4 and hook.got == []
    dead = [json.loads(x) for x in (tmp_path / "dead_letter.jsonl").read_text().splitlines()]
    assert dead[0]["alert"] == ALERT and dead[0]["attempts"] == 4 and "500" in dead[0]["error"]


@pytest.mark.parametrize("hook", [[400]], indirect=True)
def test_webhook_client_error_is_not_retried(hook, tmp_path):
    sink = WebhookSink(hook.url, tmp_path / "dl.jsonl", retries=3, backoff=0.01)
    sink.deliver([ALERT])
    assert sink.drain(10)
    assert sink.attempts == 1 and (tmp_path / "dl.jsonl").exists()


def test_webhook_unreachable_goes_to_dead_letter(tmp_path):
    sink = WebhookSink("http://127.0.0.1:9/x", tmp_path / "dl.jsonl", retries=1, backoff=0.01, timeout=1)
    sink.deliver([ALERT])
    assert sink.drain(10)
    assert sink.dead == 1


def test_each_id_once_per_sink_across_restarts(hook, tmp_path):
    out = tmp_path / "alerts"
    log = tmp_path / "delivered.jsonl"
    b = dict(ALERT, id="beef")
    s = SinkSet([JsonlSink(out), open_sink(hook.url, tmp_path)], DeliveredLog(log))
    assert s.deliver([ALERT], {"c0ffee": 5}) == 1          # the webhook's is queued
    assert s.sinks[1].drain(10)
    s.close()
    assert s.delivered == 2
    s = SinkSet([JsonlSink(out), open_sink(hook.url, tmp_path)], DeliveredLog(log))   # a restart
    assert s.deliver([ALERT, b], {"c0ffee": 5, "beef": 6}) == 1
    assert s.sinks[1].drain(10)
    s.close()
    lines = (out / "Silent.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["c0ffee", "beef"]
    assert [a["id"] for a in hook.got] == ["c0ffee", "beef"]


def test_outbox_left_by_a_crash_is_posted_on_start_without_new_alerts(hook, tmp_path):
    """A process killed while its webhook queue still held alerts: the next start posts them
    even when it has nothing new to deliver (end of input already decided before the crash)."""
    log = tmp_path / "delivered.jsonl"
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    b = dict(ALERT, id="beef")
    sink = open_sink(hook.url, tmp_path)
    sink.outbox.write_text("".join(json.dumps(a) + "\n" for a in (ALERT, b)))
    d = DeliveredLog(log)
    d.add(hook.url, "c0ffee", 5)      # the first was delivered and logged before the crash
    d.close()
    s = SinkSet([sink], DeliveredLog(log))
    s.close()                          # end of input: the queue is posted before closing
    assert [a["id"] for a in hook.got] == ["beef"] and hook.keys == ["beef"]
    assert s.delivered == 1
    assert DeliveredLog(log).hi.get((hook.url, "beef")) is not None
    assert sink.outbox.read_text() == ""      # all posted: the outbox starts again empty


def test_jsonl_written_but_not_logged_is_not_written_again(tmp_path):
    """A crash after the sink wrote and before the log recorded it (and one mid-line)."""
    out = tmp_path / "alerts"
    JsonlSink(out).deliver([ALERT])
    with open(out / "Silent.jsonl", "a") as f:
        f.write('{"phrase": "Silent", "id": "half')
    s = SinkSet([JsonlSink(out)], DeliveredLog(tmp_path / "delivered.jsonl"))
    s.deliver([ALERT], {"c0ffee": 1})
    assert [json.loads(x)["id"] for x in (out / "Silent.jsonl").read_text().splitlines()] == ["c0ffee"]


def test_delivered_log_prunes_by_watermark(tmp_path):
    log = DeliveredLog(tmp_path / "d.jsonl")
    log.add("s", "old", 10)
    log.add("s", "new", 100)
    log.flush()
    assert log.prune(50) == 1
    again = DeliveredLog(tmp_path / "d.jsonl")
    assert ("s", "new") in again and ("s", "old") not in again


def test_alert_json_without_pandas_is_the_frame_path():
    """alert_json's frame-free path gives exactly what the pandas frame gives, and leaves
    columns pandas would change (ints with None become floats) to the frame."""
    import pandas as pd

    from spatec.sinks.alerts import _plain_alerts, alert_json
    from spatec.sinks.files import json_rows as _rows

    def row(i, **extra):
        return {"phrase": "P", "id": f"id{i}", "lo": 1569916778_000000 + i, "hi": 1569916800_500000 + i,
                "hull": None if i % 2 else "POINT (0 52)", "events": {"B": f"e{i}b", "A": f"e{i}a"}, **extra}

    cases = [
        ([row(i, vehicle=f"V{i}", since=1569916778_000000 + i * 7, n=i, x=i / 3, ok=bool(i % 2)) for i in range(5)],
         ("since",)),
        ([row(i, vehicle=None if i == 2 else "V", x=float("nan") if i == 1 else 2.5) for i in range(4)], ()),
        ([row(i, n=None if i == 1 else i) for i in range(3)], ()),            # pandas: 1.0, NaN, 2.0 → frame
        ([row(i, since=None if i == 0 else 5) for i in range(3)], ("since",)),  # a missing time → frame
        ([row(0, a=1), {**row(1), "b": 2}], ()),                              # different keys → frame
    ]
    fast_taken = []
    for rows, tf in cases:
        want = list(_rows(pd.DataFrame(rows), tf))
        assert alert_json(rows, tf) == want
        assert [list(a) for a in alert_json(rows, tf)] == [list(a) for a in want]   # key order too
        fast_taken.append(_plain_alerts(rows, tf) is not None)
    assert fast_taken == [True, True, False, False, False]
    first = alert_json(cases[0][0], ("since",))[1]
    assert first["n"] == 1 and type(first["n"]) is int and first["since"] == "2019-10-01T07:59:38.000007Z"
    assert first["events"] == {"A": "e1a", "B": "e1b"} and list(first["events"]) == ["A", "B"]


def test_delivered_log_lines_are_json_dumps(tmp_path):
    """The log's lines, spelt out for speed, are json.dumps's text (and read back)."""
    from spatec.sinks.alerts import _log_line

    cases = [("bench:", "c0ffee", 0), ('jsonl:///tmp/"a b"\\é', "id\u2028x", -5), ("http://h/p?q=1", "", 1 << 62)]
    for sink, cid, hi in cases:
        assert _log_line(sink, cid, hi) == json.dumps({"sink": sink, "id": cid, "hi": hi}) + "\n"
    log = DeliveredLog(tmp_path / "delivered.jsonl")
    for sink, cid, hi in cases:
        log.add(sink, cid, hi)
    log.flush()
    again = DeliveredLog(tmp_path / "delivered.jsonl")
    assert again.hi == {(s, c): h for s, c, h in cases}


def test_delivered_log_is_written_at_once_and_synced_off_the_batch(tmp_path, monkeypatch):
    """A flush puts the lines in the file before it returns (a killed process loses none);
    the sync to the disk runs on the log's own thread, and close() waits for the last one."""
    import os
    import threading

    synced = []
    real = getattr(os, "fdatasync", os.fsync)

    def spy(fd):
        synced.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", spy, raising=False)
    monkeypatch.setattr(os, "fsync", spy)
    log = DeliveredLog(tmp_path / "d.jsonl")
    log.add("jsonl", "P:1", 5)
    log.flush()
    assert (tmp_path / "d.jsonl").read_text().count("\n") == 1      # no close needed to see it
    log.add("jsonl", "P:2", 6)
    log.flush()
    assert (tmp_path / "d.jsonl").read_text().count("\n") == 2
    log.close()
    assert "spatec-fsync" in synced                 # synced by the log's thread ...
    assert synced[-1] == threading.current_thread().name   # ... and once more at close
    assert DeliveredLog(tmp_path / "d.jsonl").hi == {("jsonl", "P:1"): 5, ("jsonl", "P:2"): 6}
    log.add("jsonl", "P:3", 7)     # usable after close: the file is opened again
    log.flush()
    log.close()
    assert ("jsonl", "P:3") in DeliveredLog(tmp_path / "d.jsonl")


class Redirecting:
    """A webhook that answers 307 to another receiver (which must never get the alert)."""

    def __init__(self, to: str):
        self.hits = 0
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                outer.hits += 1
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(307)
                self.send_header("Location", to)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/hook"

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def test_a_webhook_redirect_is_not_followed(hook, tmp_path):
    """A redirect would send the alert, and its headers, to a host nobody chose: it is an
    answer (not retried), and the alert goes to the dead letter."""
    r = Redirecting(hook.url)
    try:
        sink = WebhookSink(r.url, tmp_path / "dl.jsonl", retries=3, backoff=0.01)
        sink.deliver([ALERT])
        assert sink.drain(10)
        sink.close()
        assert r.hits == 1 and hook.got == []
        dl = [json.loads(x) for x in (tmp_path / "dl.jsonl").read_text().splitlines()]
        assert len(dl) == 1 and "redirect" in dl[0]["error"] and "not followed" in dl[0]["error"]
    finally:
        r.close()


def test_one_retry_loop_for_threads_and_event_loops():
    """live's webhook sinks (threads) and the service's pushers (asyncio) run the same loop:
    the same tries, waits and outcome for the same answers."""
    import asyncio

    from spatec.sinks.alerts import Outcome, Retry, deliver_async, deliver_sync

    retry = Retry(retries=3, backoff=0.5, max_backoff=1.5)
    for answers, want in [([Outcome(True)], (True, 1, [])),
                          ([Outcome(False, True, "503")] * 2 + [Outcome(True)], (True, 3, [0.5, 1.0])),
                          ([Outcome(False, True, "timeout")] * 9, (False, 4, [0.5, 1.0, 1.5])),
                          ([Outcome(False, False, "HTTP 404")], (False, 1, []))]:
        for kind in ("sync", "async"):
            todo, waits = list(answers), []
            if kind == "sync":
                result, out, tries = deliver_sync(lambda: todo.pop(0), retry, lambda s: waits.append(s) or False)
            else:
                async def send():
                    return todo.pop(0)

                async def wait(s):
                    waits.append(s)
                    return False
                result, out, tries = asyncio.run(deliver_async(send, retry, wait))
            assert (result, tries, waits) == want, (kind, answers)
    # stopped while waiting: neither delivered nor dead-lettered
    result, _, _ = deliver_sync(lambda: Outcome(False, True, "503"), retry, lambda s: True)
    assert result is None

"""`spatec feed serve`: recorded polls served over HTTP on 127.0.0.1.

Each GET returns the poll current at the recording's clock (``speed`` × real
time since start), or with ``speed == 0`` the next poll on each request. A client
that says which poll it had last (``?after=N``, N from the ``X-Poll-Seq`` header)
gets the next one: at ``speed > 0`` the one after N if the clock has passed it
(``204`` without ``X-Feed-End`` if not yet), so a client slower than the feed
catches up instead of skipping polls.
``GET /health`` answers ``ok``. Past the end it answers ``204 No Content`` (or
starts again with ``loop``).
"""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Sequence
from urllib.parse import parse_qs, urlparse

from spatec.feeds.gtfsrt import encode_gtfsrt
from spatec.feeds.recording import Poll, poll_records
from spatec.feeds.sources import FEED_FORMATS


class FeedServer:
    """Serve recorded polls on 127.0.0.1 (``port=0``: an ephemeral port), on a thread.

    >>> srv = FeedServer(polls, speed=0).start()      # doctest: +SKIP
    >>> srv.url                                        # doctest: +SKIP
    'http://127.0.0.1:40123/'
    """

    def __init__(self, polls: Sequence[Poll], fmt: str = "sirivm", speed: float = 0.0, loop: bool = False,
                 host: str = "127.0.0.1", port: int = 0):
        if fmt not in FEED_FORMATS:
            raise ValueError(f"unknown feed format {fmt!r}; expected one of {', '.join(FEED_FORMATS)}")
        if not polls:
            raise ValueError("no polls to serve")
        self.polls, self.fmt, self.speed, self.loop = list(polls), fmt, float(speed), loop
        self.host, self.port = host, port
        self._lock = threading.Lock()
        self._next = 0           # speed 0: the next poll to hand out
        self._t0 = None          # speed > 0: monotonic time of the start
        #: speed > 0: when the first GET came (``time.time()``): the recording's first poll is
        #: served from then on, a poll received ``s`` seconds after it ``s / speed`` later
        self.started_at: float | None = None
        self._encoded: dict[int, bytes] = {}
        self.requests = 0
        self.served = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what a GET returns
    def current(self, after: int | None = None) -> tuple[int, Poll] | None:
        """The poll a GET gets now (and its index), None past the end. With ``speed == 0``,
        ``after`` asks for the poll after number ``after`` (a client resuming)."""
        with self._lock:
            n = len(self.polls)
            if self.speed == 0:
                if after is not None:
                    self._next = after + 1
                i = self._next
                if i >= n:
                    if not self.loop:
                        return None
                    i = self._next = 0
                self._next = i + 1
                return i, self.polls[i]
            if self._t0 is None:
                self._t0, self.started_at = time.monotonic(), time.time()
            span = self.polls[-1].received - self.polls[0].received
            at = (time.monotonic() - self._t0) * self.speed
            if at > span:
                if not self.loop:
                    if after is not None and -1 <= after < n - 1:
                        return after + 1, self.polls[after + 1]   # a slow client catching up
                    return None
                at = at % (span + 1e-9) if span > 0 else 0.0
            clock = self.polls[0].received + at
            # the last poll received at or before the recording's clock
            lo, hi = 0, n - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self.polls[mid].received <= clock:
                    lo = mid
                else:
                    hi = mid - 1
            if after is not None and -1 <= after < lo:
                # a client that numbers its polls gets the next one it has not had (none is
                # skipped however slowly it polls); ``after`` at or past the clock: nothing new
                lo = after + 1
            elif after is not None and after >= lo:
                return None if not self.loop else (lo, self.polls[lo])
            return lo, self.polls[lo]

    def past_end(self) -> bool:
        """Whether the recording's clock has passed its last poll (speed > 0, no loop)."""
        if self.speed == 0 or self._t0 is None or self.loop:
            return False
        return (time.monotonic() - self._t0) * self.speed > self.polls[-1].received - self.polls[0].received

    def body(self, i: int, poll: Poll) -> bytes:
        if self.fmt == "sirivm":
            return poll.data
        with self._lock:
            b = self._encoded.get(i)
        if b is None:
            b = encode_gtfsrt(poll_records(poll.data), poll.received)
            with self._lock:
                self._encoded[i] = b
        return b

    # -- lifecycle
    def start(self) -> "FeedServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet: the runner logs what matters
                pass

            def _send(self, code: int, body: bytes = b"", ctype: str = "text/plain", headers=None):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(body)

            def do_GET(self):
                if urlparse(self.path).path.rstrip("/") == "/health":
                    self._send(200, b"ok\n")
                    return
                server.requests += 1
                q = parse_qs(urlparse(self.path).query)
                after = q.get("after", [None])[0]
                after = int(after) if after is not None and after.lstrip("-").isdigit() else None
                got = server.current(after)
                if got is None:
                    end = server.speed == 0 or server.past_end() or after is None
                    self._send(204, headers={"X-Feed-End": "1"} if end else None)
                    return
                i, poll = got
                body = server.body(i, poll)
                server.served += 1
                ctype = "application/json" if server.fmt == "sirivm" else "application/x-protobuf"
                self._send(200, body, ctype, {"X-Poll-Seq": str(i), "X-Poll-Name": poll.name})

        self._httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="feed-server", daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def source_url(self) -> str:
        """The ``spatec live --source`` URL of this feed."""
        return ("sirivm+" if self.fmt == "sirivm" else "gtfsrt+") + self.url

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

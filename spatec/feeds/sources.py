"""Live feeds: recorded polls served over HTTP, and the live sources that read them.

Three kinds of live source, each named by a URL (``spatec live --source TYPE=URL``):

==========================  ====================================================
``dir:///path/to/dir``      a directory that files land in (CSV, JSON lines,
                            SIRI-VM JSON polls); each new *complete* file is
                            read once, in name order
``sirivm+http://host:p/x``  a SIRI-VM feed (JSON poll per GET), polled every trigger
``gtfsrt+http://host:p/x``  a GTFS-realtime VehiclePositions feed (protobuf)
==========================  ====================================================

(``+https`` works too.) A file is complete once its size and modification time
stayed the same over two scans, or it is older than ``settle`` seconds;
names starting with ``.`` or ``_`` or ending in ``.tmp``/``.part`` are never
read (write there, then rename).

Offsets. An HTTP feed cannot be asked for an old poll, so every poll fetched
is first written to the source's *spool* (``<checkpoint>/spool/<source>/``,
one file per poll, named by its sequence number) and only then handed on; a
poll is deleted from the spool once the run that used it has committed. The
offset of an HTTP source is the last committed sequence number: a restart
reads the spooled polls after it before fetching new ones, so nothing fetched
is lost. A feed that numbers its polls (``X-Poll-Seq``) is asked for the one
after the last spooled (``?after=N``): then not even a poll received but not
yet spooled when the process died is lost. A directory source's offset is the set of file names done.

GTFS-realtime. :func:`encode_gtfsrt` builds a VehiclePositions FeedMessage
from SIRI-VM records (for the feed server) and :func:`gtfsrt_batch` reads one
back as a raw batch. Like the SIRI-VM adapter it only renames
(:data:`GTFSRT_FIELDS`); two fields are derived: GTFS-realtime has no operator
field, so a ``route_id`` of the form ``AGENCY:ROUTE`` (the convention of
several national feeds, and what :func:`encode_gtfsrt` writes) gives
``operator`` = AGENCY and ``line`` = ROUTE; a plain ``route_id`` is the line
and leaves ``operator`` null. Latitude and longitude are 32-bit floats in
GTFS-realtime, so a fix read from it differs from the SIRI-VM text by up to
about half a metre.

:class:`FeedServer` serves a recording (`spatec feed serve`): each GET returns
the poll current at the recording's clock (``speed`` × real time since
start), or with ``speed == 0`` the next poll on each request. ``GET /health``
answers ``ok``. Past the end it answers ``204 No Content`` (or starts again
with ``loop``).
"""
from __future__ import annotations

import datetime as _dt
import gzip
import json
import logging
import os
import struct
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Collection, Iterable, Sequence
from urllib.parse import parse_qs, urlparse

from spatec.errors import DataError
from spatec.events.formats import detect_format, poll_order
from spatec.events.raw import RawBatch, json_record
from spatec.events.sirivm import POLL_SUFFIXES, POLL_TIME, poll_batch

log = logging.getLogger("spatec.feeds")

FEED_FORMATS = ("sirivm", "gtfs-rt")
SCHEMES = {"dir": "dir", "sirivm+http": "sirivm", "sirivm+https": "sirivm",
           "gtfsrt+http": "gtfs-rt", "gtfsrt+https": "gtfs-rt"}

GTFSRT_FIELDS: dict[str, str] = {
    # GTFS-realtime field          attribute
    "vehicle.id":                  "vehicle",
    "vehicle.label":               "label",
    "trip.trip_id":                "journey_ref",
    "trip.route_id":               "route_id",
    "trip.direction_id":           "direction",
    "trip.start_date":             "start_date",
    "position.longitude":          "lon",
    "position.latitude":           "lat",
    "position.bearing":            "bearing",
    "position.speed":              "speed",
    "timestamp":                   "ts",
    # derived from route_id "AGENCY:ROUTE" (see the module docstring)
    "operator":                    "operator",
    "line":                        "line",
}


# ------------------------------------------------------------------------------ recordings

@dataclass(frozen=True)
class Poll:
    """One recorded poll: when it was received (epoch s), its name and its bytes (SIRI-VM JSON)."""

    received: float
    name: str
    data: bytes


def load_recording(path, start: float | None = None, end: float | None = None) -> list[Poll]:
    """The SIRI-VM polls of a recording (a ``.tar.gz`` of polls, a directory of them or one
    poll), in time order; ``start``/``end`` (epoch s, inclusive) keep a slice of it."""
    path = os.fspath(path)
    items: list[tuple[str, bytes]] = []
    if os.path.isdir(path):
        for n in os.listdir(path):
            if n.lower().endswith(POLL_SUFFIXES) and not n.startswith((".", "_")):
                with open(os.path.join(path, n), "rb") as f:
                    items.append((n, f.read()))
    elif os.path.isfile(path) and tarfile.is_tarfile(path):
        with tarfile.open(path, "r:*") as tar:
            items = [(m.name, tar.extractfile(m).read()) for m in tar
                     if m.isfile() and m.name.lower().endswith(POLL_SUFFIXES)]
    elif os.path.isfile(path):
        with open(path, "rb") as f:
            items = [(os.path.basename(path), f.read())]
    else:
        raise DataError(f"{path}: no such recording (a .tar.gz of SIRI-VM polls, a directory or a poll)")
    polls = [Poll(poll_order(n)[0], n, d) for n, d in items]
    polls.sort(key=lambda p: (p.received, p.name))
    if start is not None:
        polls = [p for p in polls if p.received >= start]
    if end is not None:
        polls = [p for p in polls if p.received <= end]
    if not polls:
        raise DataError(f"{path}: no SIRI-VM polls in it")
    return polls


def poll_records(data: bytes) -> list:
    """The records of a SIRI-VM poll (``request_data``, or a bare list); [] if it is not one."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return []
    if isinstance(doc, dict) and isinstance(doc.get("request_data"), list):
        return doc["request_data"]
    return doc if isinstance(doc, list) else []


# ------------------------------------------------------------------------------ GTFS-realtime

def _gtfs():
    try:
        from google.transit import gtfs_realtime_pb2
    except ImportError as e:  # pragma: no cover - an optional dependency
        raise DataError("GTFS-realtime needs the gtfs-realtime-bindings package "
                        "(pip install 'spatec[gtfs]')") from e
    return gtfs_realtime_pb2


def _epoch(text: Any) -> int | None:
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return int(text)
    try:
        return int(_dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def _float(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if x == x else None


def encode_gtfsrt(records: Iterable[dict], timestamp: float) -> bytes:
    """A GTFS-realtime VehiclePositions FeedMessage (serialised) from SIRI-VM records.

    ``route_id`` is ``OperatorRef:LineRef``; a record without a usable position
    or time is still encoded, without that field (a reader rejects it).
    """
    g = _gtfs()
    msg = g.FeedMessage()
    msg.header.gtfs_realtime_version = "2.0"
    msg.header.incrementality = g.FeedHeader.FULL_DATASET
    msg.header.timestamp = int(timestamp)
    for n, r in enumerate(records):
        if not isinstance(r, dict):
            continue
        e = msg.entity.add()
        vid = r.get("VehicleRef")
        e.id = f"{vid}#{n}" if vid else f"#{n}"
        vp = e.vehicle
        if vid:
            vp.vehicle.id = str(vid)
            vp.vehicle.label = str(vid)
        if r.get("LineRef") is not None:
            op = r.get("OperatorRef")
            vp.trip.route_id = f"{op}:{r['LineRef']}" if op else str(r["LineRef"])
        if r.get("DatedVehicleJourneyRef") is not None:
            vp.trip.trip_id = str(r["DatedVehicleJourneyRef"])
        if r.get("DirectionRef") in ("OUTBOUND", "INBOUND"):
            vp.trip.direction_id = 0 if r["DirectionRef"] == "OUTBOUND" else 1
        lon, lat = _float(r.get("Longitude")), _float(r.get("Latitude"))
        if lon is not None and lat is not None:
            vp.position.longitude, vp.position.latitude = lon, lat
            b = _float(r.get("Bearing"))
            if b is not None:
                vp.position.bearing = b
        ts = _epoch(r.get("RecordedAtTime"))
        if ts is not None and ts >= 0:
            vp.timestamp = ts
    return msg.SerializeToString()


def _gtfs_record(entity) -> dict:
    vp = entity.vehicle
    out: dict[str, Any] = {"entity_id": entity.id}
    if vp.HasField("vehicle"):
        for f in ("id", "label"):
            if vp.vehicle.HasField(f):
                out[f"vehicle.{f}"] = getattr(vp.vehicle, f)
    if vp.HasField("trip"):
        for f in ("trip_id", "route_id", "direction_id", "start_date"):
            if vp.trip.HasField(f):
                out[f"trip.{f}"] = getattr(vp.trip, f)
        rid = out.get("trip.route_id")
        if rid is not None:
            agency, sep, line = rid.partition(":")
            out["operator"], out["line"] = (agency, line) if sep else (None, rid)
    if vp.HasField("position"):
        for f in ("longitude", "latitude", "bearing", "speed"):
            if vp.position.HasField(f):
                out[f"position.{f}"] = getattr(vp.position, f)
    if vp.HasField("timestamp"):
        out["timestamp"] = vp.timestamp
    return out


def gtfsrt_batch(name: str, data: bytes, received: float | None = None,
                 columns: Collection[str] | None = None) -> RawBatch:
    """One GTFS-realtime FeedMessage as a raw batch under attribute names
    (:data:`GTFSRT_FIELDS`); entities without a vehicle position are skipped.
    A message that does not parse is one reject with row 0."""
    g = _gtfs()
    msg = g.FeedMessage()
    try:
        msg.ParseFromString(data)
    except Exception as e:  # protobuf raises DecodeError, or others on garbage
        rec = json.dumps(data[:200].decode("utf-8", errors="replace"))
        return _gtfs_raw(name, [], [], [(0, f"not a GTFS-realtime FeedMessage ({e})", rec)], columns)
    when = received if received is not None else (msg.header.timestamp or None)
    records, rows = [], []
    for n, ent in enumerate(msg.entity, 1):
        if not ent.HasField("vehicle"):
            continue
        r = _gtfs_record(ent)
        if when is not None:
            r[POLL_TIME] = when
        records.append(r)
        rows.append(n)
    return _gtfs_raw(name, records, rows, [], columns)


def _gtfs_raw(name, records, rows, unreadable, columns) -> RawBatch:
    return RawBatch.from_records(name, records, rows, unreadable, columns,
                                 renames={attr: f for f, attr in GTFSRT_FIELDS.items()},
                                 provides=[*GTFSRT_FIELDS.values(), POLL_TIME])


def feed_batch(fmt: str, name: str, data: bytes, received: float | None = None,
               columns: Collection[str] | None = None) -> RawBatch:
    """One poll of a feed of format ``fmt`` (``sirivm`` or ``gtfs-rt``) as a raw batch."""
    if fmt == "gtfs-rt":
        return gtfsrt_batch(name, data, received, columns)
    return poll_batch(name, data, received, columns)


# ------------------------------------------------------------------------------ the server

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
        self._t0 = None          # speed > 0: wall time of the start
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
                self._t0 = time.monotonic()
            span = self.polls[-1].received - self.polls[0].received
            at = (time.monotonic() - self._t0) * self.speed
            if at > span:
                if not self.loop:
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
            return lo, self.polls[lo]

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
                got = server.current(int(after) if after is not None and after.lstrip("-").isdigit() else None)
                if got is None:
                    self._send(204, headers={"X-Feed-End": "1"})
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


# ------------------------------------------------------------------------------ live sources

@dataclass
class Item:
    """One unit of live input: a poll or a file, decoded to raw batches."""

    source: str           # the source's id (checkpoint key)
    offset: Any           # HTTP: poll sequence number; directory: file name
    name: str             # where the records came from (reject records name it)
    arrived: float        # wall time (epoch s) the input reached spatec
    batches: list
    server: Any = None    # HTTP: the feed's own number of the poll, when it gives one


@dataclass
class SourceSpec:
    """``TYPE=URL`` from the command line."""

    type: str
    kind: str             # dir | sirivm | gtfs-rt
    location: str         # a path, or the http(s) URL
    url: str


def parse_source(spec: str) -> SourceSpec:
    """``TYPE=URL`` → a :class:`SourceSpec` (see the module docstring for the URL schemes)."""
    if "=" not in spec:
        raise DataError(f"--source {spec!r}: expected TYPE=URL, e.g. BusGPS=sirivm+http://127.0.0.1:8080/")
    type_name, url = spec.split("=", 1)
    u = urlparse(url)
    kind = SCHEMES.get(u.scheme)
    if kind is None:
        raise DataError(f"--source {spec!r}: unknown scheme {u.scheme!r}; expected dir:///path, "
                        "sirivm+http://host:port/path or gtfsrt+http://host:port/path")
    if kind == "dir":
        location = u.path if not u.netloc else f"/{u.netloc}{u.path}"
        if not location:
            raise DataError(f"--source {spec!r}: dir: needs a path, e.g. dir:///data/incoming")
    else:
        location = url.split("+", 1)[1]
    return SourceSpec(type_name, kind, location, url)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:120]


class DirWatch:
    """Wakes a waiting runner as soon as a name is created, renamed or written into one of
    some directories (Linux inotify, through libc; :meth:`of` is None elsewhere). A waiter
    that would otherwise sleep between two looks at the directories returns at once."""

    _IN_CLOSE_WRITE, _IN_MOVED_TO, _IN_CREATE, _IN_Q_OVERFLOW = 0x8, 0x80, 0x100, 0x4000
    _libc: Any = None

    def __init__(self, fd: int):
        self.fd = fd

    @classmethod
    def of(cls, paths: Sequence[Path]) -> "DirWatch | None":
        """A watch on ``paths`` (existing directories), or None where inotify is not to be had."""
        if not paths or not sys.platform.startswith("linux"):
            return None
        try:
            if cls._libc is None:
                import ctypes

                cls._libc = ctypes.CDLL(None, use_errno=True)
            fd = cls._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        mask = cls._IN_CLOSE_WRITE | cls._IN_MOVED_TO | cls._IN_CREATE
        for p in paths:
            if cls._libc.inotify_add_watch(fd, os.fsencode(p), mask) < 0:
                os.close(fd)
                return None
        return cls(fd)

    def wait(self, timeout: float) -> bool:
        """Up to ``timeout`` seconds, less if something happens in a directory (True then)."""
        import select

        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            while os.read(self.fd, 1 << 16):   # drain: only the wake-up matters
                pass
        except BlockingIOError:
            pass
        return True

    def names(self) -> tuple[set, set, bool]:
        """The names that have landed since the last call (without waiting); those of them
        known complete (renamed in, or closed by a writer); and whether some may be
        missing (the kernel's queue overflowed: list the directory)."""
        out: set = set()
        closed: set = set()
        overflow = False
        buf = b""
        try:
            while True:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    break
                buf += chunk
        except BlockingIOError:
            pass
        i = 0
        while i + 16 <= len(buf):   # struct inotify_event: wd, mask, cookie, len, name[len]
            _, mask, _, n = struct.unpack_from("iIII", buf, i)
            if mask & self._IN_Q_OVERFLOW:
                overflow = True
            elif n:
                name = os.fsdecode(buf[i + 16:i + 16 + n].split(b"\0", 1)[0])
                out.add(name)
                if mask & (self._IN_CLOSE_WRITE | self._IN_MOVED_TO):
                    closed.add(name)
                else:
                    closed.discard(name)   # created (again) after a close
            i += 16 + n
        return out, closed, overflow

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class DirSource:
    """New complete files in a directory, each read once, in name order.

    Where there is inotify, a poll looks only at the names that landed since the
    last one (a directory that keeps every file grows by hundreds of names a second
    at a high rate, and listing it each time would cost more and more). The
    directory is still listed in full every :attr:`LIST_EVERY` seconds: names the
    kernel did not report (a full event queue; a network file system, whose
    remote writes inotify does not see) are then found, and if a listing finds a
    name the events missed, the source lists at every poll from then on. A
    listing also forgets the done names no longer in the directory (what
    :meth:`offset` keeps stays as large as the directory).
    """

    IGNORE_SUFFIXES = (".tmp", ".part", ".partial", ".crdownload")
    LIST_EVERY = 30.0    # s between two full listings of a watched directory

    def __init__(self, spec: SourceSpec, columns: Collection[str] | None = None, settle: float = 2.0):
        self.spec, self.columns, self.settle = spec, columns, settle
        self.id = f"{spec.type}@dir:{spec.location}"
        self.path = Path(spec.location)
        self.done: set[str] = set()
        self._sizes: dict[str, tuple] = {}
        self._watch: DirWatch | None = None
        self._watching = sys.platform.startswith("linux")   # False: list at every poll
        self._listed = -float("inf")                          # when the last full listing was
        self._waiting: set[str] = set()   # names reported or listed, not yet read
        self._passed: set[str] = set()    # names seen that are not files (directories)
        self._closed: set[str] = set()    # names inotify reported complete (renamed in, closed)
        self._open: set[str] = set()      # names inotify reported created, not yet closed

    def restore(self, offset) -> None:
        self.done = set(offset or ())

    def offset(self):
        """The names done (the set itself: a save pickles it at once, or in its forked child)."""
        return self.done

    def pending(self) -> list[Item]:
        return []   # files stay in the directory: nothing to replay beyond `poll`

    def _complete(self, p: Path) -> bool:
        """Whether a file is written: renamed in or closed by its writer (inotify), or, for a
        file inotify reported created but not closed, untouched for ``settle`` seconds (a
        writer that died); otherwise (not watched) the same size and time as at the last
        look, or untouched for ``settle`` seconds."""
        name = p.name
        if name in self._closed:
            return True
        st = p.stat()
        old = (time.time() - st.st_mtime) >= self.settle
        if name in self._open:
            return old
        sig = (st.st_size, st.st_mtime_ns)
        before = self._sizes.get(name)
        self._sizes[name] = sig
        return before == sig or old

    def _candidates(self) -> set[str] | None:
        """The names to look at (None: no directory)."""
        if self._watching and self._watch is None and self.path.is_dir():
            self._watch = DirWatch.of([self.path])   # before the listing below: nothing missed
            self._watching = self._watch is not None
        now = time.monotonic()
        if self._watch is not None:
            new, closed, overflow = self._watch.names()
            new = self._eligible(new)
            self._waiting |= new
            self._closed |= closed & new
            self._open = (self._open | new) - self._closed
            if not overflow and now - self._listed < self.LIST_EVERY:
                return self._waiting
        try:
            names = self._eligible(os.listdir(self.path))
        except (FileNotFoundError, NotADirectoryError):
            self.close()
            return None
        if self._watch is not None:
            first, self._listed = self._listed == -float("inf"), now
            self._passed &= names
            self._closed &= names
            self._open &= names
            missed = () if first or overflow else names - self._waiting - self.done - self._passed
            if missed and self._settled(missed):
                log.warning("%s: inotify did not report %d file(s) (a network file system?); "
                            "listing the directory at every poll from now on", self.path, len(missed))
                self.close()
                self._watching = False
            self.done &= names          # deleted files cannot come back as they were
            self._waiting &= names
        # (passed-over names stay out while watched: a file that takes one's name is reported)
        self._waiting |= names - self.done - (self._passed if self._watch is not None else set())
        return self._waiting

    def _eligible(self, names) -> set[str]:
        """The names a poll reads: not hidden (``.``, ``_``), not partial (``.tmp``, ...)."""
        ignore = self.IGNORE_SUFFIXES
        return {n for n in names if not n.startswith((".", "_")) and not n.lower().endswith(ignore)}

    def _settled(self, names) -> bool:
        """Whether some of ``names`` were last written before the watch's events were read
        (a name written since is still in the kernel's queue, not missed)."""
        cut = time.time() - 1.0
        for n in names:
            try:
                if os.stat(self.path / n).st_mtime < cut:
                    return True
            except OSError:
                pass
        return False

    def close(self) -> None:
        """Stop watching (a later poll lists the directory and watches it again)."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self._listed = -float("inf")

    def __getstate__(self):
        # a copy in another process (a Spark reader sent to a task) watches afresh: the
        # descriptor is this process's
        d = dict(self.__dict__)
        d["_watch"], d["_listed"] = None, -float("inf")
        return d

    def poll(self) -> list[Item]:
        from spatec.events.read import READERS

        out = []
        cand = self._candidates()
        if not cand:
            return []
        done = self.done
        for n in sorted(cand):
            if n in done:
                cand.discard(n)
                continue
            p = self.path / n
            try:
                if not p.is_file():
                    cand.discard(n)
                    self._passed.add(n)
                    continue
                if not self._complete(p):
                    continue
            except FileNotFoundError:   # gone again
                cand.discard(n)
                self._sizes.pop(n, None)
                continue
            self._sizes.pop(n, None)   # (the name stays a candidate until it is committed)
            fmt = detect_format(str(p))
            if fmt is None:
                log.warning("%s: cannot tell the format from the name; skipped", p)
                self.done.add(n)
                continue
            try:
                batches = list(READERS[fmt](str(p), self.columns))
            except (DataError, OSError, ValueError) as e:
                # a broken file is logged and passed, never fatal
                log.warning("%s: unreadable (%s); skipped", p, e)
                batches = [RawBatch.from_records(str(p), [], [], [(0, f"unreadable file: {e}",
                                                                   json_record({"file": str(p)}))])]
            out.append(Item(self.id, n, str(p), time.time(), batches))
        return out

    def commit(self, items: Sequence[Item]) -> None:
        """Mark ``items`` used (the offset the next checkpoint saves)."""
        names = [it.offset for it in items if it.source == self.id]
        self.done.update(names)
        self._waiting.difference_update(names)
        self._closed.difference_update(names)
        self._open.difference_update(names)

    def release(self, upto=None) -> None:
        """After a checkpoint is saved: nothing to delete (the files are the user's)."""


class HttpFeedSource:
    """A SIRI-VM or GTFS-realtime feed polled over HTTP, every poll spooled before use.

    A feed that numbers its polls (an ``X-Poll-Seq`` header, as :class:`FeedServer`
    sends) is asked for the poll after the last one spooled (``?after=N``), so a
    crash between receiving a poll and spooling it loses nothing either.
    """

    def __init__(self, spec: SourceSpec, spool: Path, columns: Collection[str] | None = None,
                 timeout: float = 10.0):
        self.spec, self.columns, self.timeout = spec, columns, timeout
        self.id = f"{spec.type}@{spec.url}"
        self.fmt = spec.kind
        self.spool = Path(spool) / _safe(self.id)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.committed = -1      # last sequence number whose poll was used and committed
        self.server_committed = None
        self.seq = -1            # last sequence number fetched (spooled)
        self.server_seq = None   # the feed's number of the last poll spooled, if it numbers them
        self.errors = 0
        self.ended = False       # the feed said it has nothing more (204 with X-Feed-End)
        self._last_body: bytes | None = None

    def restore(self, offset) -> None:
        offset = offset or {}
        self.committed = int(offset.get("seq", -1))
        self.server_committed = self.server_seq = offset.get("server")
        self.seq = self.committed
        for seq, server in self._spooled():
            if seq > self.seq:
                self.seq, self.server_seq = seq, server

    def offset(self) -> dict:
        return {"seq": self.committed, "server": self.server_committed}

    def _spooled(self) -> list[tuple[int, int | None]]:
        out = []
        for p in self.spool.glob("*.poll"):
            a, _, b = p.stem.partition("_")
            try:
                out.append((int(a), int(b) if b not in ("", "x") else None))
            except ValueError:
                pass
        return sorted(out)

    def _path(self, seq: int, server: int | None) -> Path:
        return self.spool / f"{seq}_{'x' if server is None else server}.poll"

    def _item(self, seq: int, server, data: bytes, arrived: float) -> Item:
        name = f"{self.spec.url}#{seq}"
        return Item(self.id, seq, name, arrived, [feed_batch(self.fmt, name, data, arrived, self.columns)], server)

    def pending(self) -> list[Item]:
        """Polls fetched before a restart and not yet committed, in order."""
        out = []
        for seq, server in self._spooled():
            p = self._path(seq, server)
            if seq <= self.committed:
                p.unlink(missing_ok=True)
                continue
            out.append(self._item(seq, server, p.read_bytes(), p.stat().st_mtime))
        return out

    def fetch(self) -> tuple[bytes, int | None] | None:
        """One GET: (body, the feed's poll number), or None when the feed has nothing
        (or failed: logged and counted, never fatal)."""
        url = self.spec.location
        if self.server_seq is not None:
            url += ("&" if "?" in url else "?") + f"after={self.server_seq}"
        req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                if r.status == 204:
                    self.ended = r.headers.get("X-Feed-End") == "1"
                    return None
                body = r.read()
                if r.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                self.ended = False
                seq = r.headers.get("X-Poll-Seq")
                return body, (int(seq) if seq is not None and seq.isdigit() else None)
        except (urllib.error.URLError, OSError, ValueError) as e:
            self.errors += 1
            log.warning("%s: poll failed (%s)", self.spec.url, e)
            return None

    def poll(self) -> list[Item]:
        got = self.fetch()
        if got is None or not got[0]:
            return []
        body, server = got
        if body == self._last_body and server is None:
            return []   # the feed has not changed since the last poll
        self._last_body = body
        self.seq += 1
        self.server_seq = server
        arrived = time.time()
        tmp = self.spool / f".{self.seq}.tmp"
        with open(tmp, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path(self.seq, server))
        return [self._item(self.seq, server, body, arrived)]

    def commit(self, items: Sequence[Item]) -> None:
        """Mark ``items`` used (the offset the next checkpoint saves)."""
        for it in items:
            if it.source == self.id and it.offset > self.committed:
                self.committed, self.server_committed = it.offset, it.server

    def release(self, upto: dict | None = None) -> None:
        """After a checkpoint is saved: delete the spooled polls it covers (``upto``: the
        offset it saved, default the last committed)."""
        last = self.committed if upto is None else int(upto.get("seq", -1))
        for seq, server in self._spooled():
            if seq <= last:
                self._path(seq, server).unlink(missing_ok=True)


def open_source(spec: SourceSpec, spool: Path, columns: Collection[str] | None = None, settle: float = 2.0):
    """The live source a :class:`SourceSpec` names."""
    if spec.kind == "dir":
        return DirSource(spec, columns, settle)
    return HttpFeedSource(spec, spool, columns)

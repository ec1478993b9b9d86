"""Live sources: what a live run polls or watches (recordings and the feed server:
:mod:`spatec.feeds.recording`, :mod:`spatec.feeds.server`; GTFS-realtime: :mod:`spatec.feeds.gtfsrt`).

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
"""
from __future__ import annotations

import gzip
import logging
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Sequence
from urllib.parse import urlparse

from spatec.errors import DataError
from spatec.events.formats import detect_format
from spatec.events.raw import RawBatch, json_record
from spatec.events.sirivm import poll_batch
from spatec.feeds.gtfsrt import gtfsrt_batch
from spatec.storage.atomic import safe_name
from spatec.storage.watch import DirWatch

log = logging.getLogger("spatec.feeds")

FEED_FORMATS = ("sirivm", "gtfs-rt")
SCHEMES = {"dir": "dir", "sirivm+http": "sirivm", "sirivm+https": "sirivm",
           "gtfsrt+http": "gtfs-rt", "gtfsrt+https": "gtfs-rt"}


# ------------------------------------------------------------------------------ recordings


# ------------------------------------------------------------------------------ GTFS-realtime


def feed_batch(fmt: str, name: str, data: bytes, received: float | None = None,
               columns: Collection[str] | None = None) -> RawBatch:
    """One poll of a feed of format ``fmt`` (``sirivm`` or ``gtfs-rt``) as a raw batch; an
    empty body is a poll of no records."""
    if not data.strip():
        return RawBatch.from_records(name, [], [], [], columns)
    if fmt == "gtfs-rt":
        return gtfsrt_batch(name, data, received, columns)
    return poll_batch(name, data, received, columns)


# ------------------------------------------------------------------------------ the server


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


def check_source(spec: SourceSpec) -> None:
    """What can be known wrong about a source before the run: a ``dir:`` source whose
    directory does not exist, or is a file (a :class:`~spatec.errors.DataError`)."""
    if spec.kind != "dir":
        return
    path = Path(spec.location)
    if not path.exists():
        raise DataError(f"--source {spec.type}={spec.url}: no such directory {path}")
    if not path.is_dir():
        raise DataError(f"--source {spec.type}={spec.url}: {path} is a file, not a directory "
                        "(a dir: source reads the files that land in a directory)")


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
        self._missing = False             # the directory is gone (warned once)

    def restore(self, offset) -> None:
        self.done = set(offset or ())

    def offset(self):
        """The names done (the set itself: a save pickles it at once, or in its forked child)."""
        return self.done

    def pending(self) -> list[Item]:
        return []   # files stay in the directory: nothing to replay beyond `poll`

    def logged(self, offsets) -> list[Item]:
        """After a restart, the files of the batches the batch log names (``offsets``): still
        in the directory and not done, so :meth:`poll` finds them (with any new ones)."""
        return self.poll() if offsets else []

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
            if not overflow and now - self._listed < self.LIST_EVERY and self.path.is_dir():
                return self._waiting    # (a directory that went away is listed: to say so)
        try:
            names = self._eligible(os.listdir(self.path))
        except (FileNotFoundError, NotADirectoryError):
            self.close()
            if not self._missing:
                log.warning("%s: no such directory (any more); waiting for it to come back", self.path)
            self._missing = True
            return None
        self._missing = False
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
        self.spool = Path(spool) / safe_name(self.id)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.committed = -1      # last sequence number whose poll was used and committed
        self.server_committed = None
        self.seq = -1            # last sequence number fetched (spooled)
        self.server_seq = None   # the feed's number of the last poll spooled, if it numbers them
        self.errors = 0
        self.skipped = 0         # polls the feed numbered that were never received
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

    def logged(self, offsets) -> list[Item]:
        """After a restart: the polls of logged batches are spooled, :meth:`pending` has them."""
        return []

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

    def note_seq(self, server: int | None) -> None:
        """Count and report polls the feed numbered but this client never got (it polled
        slower than the feed changed, and the feed does not serve ``?after=N``)."""
        if server is not None and self.server_seq is not None and server > self.server_seq + 1:
            missed = server - self.server_seq - 1
            self.skipped += missed
            log.warning("%s: %d poll(s) of the feed were skipped (numbers %d..%d never received): "
                        "positions in them are missing; poll more often (--trigger)", self.spec.url, missed,
                        self.server_seq + 1, server - 1)

    def poll(self) -> list[Item]:
        got = self.fetch()
        if got is None:
            return []
        body, server = got
        if server is None and (not body or body == self._last_body):
            return []   # nothing, or the feed has not changed since the last poll
        # A numbered poll is taken even when its body is empty (a poll of no records):
        # left out, the next GET would ask for the one after the last spooled, the same
        # empty poll, forever, and `--until-idle` would take that for the end of input.
        self._last_body = body
        self.note_seq(server)
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

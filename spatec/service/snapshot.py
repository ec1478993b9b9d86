"""A snapshot of the stored subscriptions, so that a start does not read every one from the bucket.

Reading 100,000 subscriptions from the ``spatec_subs`` bucket at a start costs seconds (its
messages through the client, their JSON, the records). The service therefore keeps, in
its state folder, the records as they were when the bucket's stream was at sequence ``seq``
(``subscriptions.snapshot``: one pickle of field tuples, written whole to a temporary file
and renamed). A start reads it and then only the bucket's messages after ``seq``
(:class:`~spatec.service.broker.BucketWatch` with ``after``): every write, delete, purge or
suspension since — while the service was down, or by another process on the same broker —
is applied in order over the snapshot's records, so the result is the bucket's content.

A lease that lapsed meanwhile needs no message (the server's own TTL markers last a second):
a record whose ``expires`` has passed is not installed, as on a full read. The snapshot is
used only for the stream it was made from (its creation time, and ``seq`` not beyond the
stream's last sequence); otherwise, or when it cannot be read, the bucket is read whole. A
stream whose messages an operator removed by hand (a stream purge) is not told apart: remove
the snapshot then.
"""
from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

from spatec.service.subscriptions import Subscription

log = logging.getLogger("spatec.service")

NAME = "subscriptions.snapshot"
FORMAT = 1
FIELDS = tuple(Subscription.__dataclass_fields__)


class Snapshot:
    """The snapshot file of one state folder."""

    def __init__(self, state: Path):
        self.path = Path(state) / NAME

    def write(self, subs, seq: int, stream: str) -> int:
        """Write the records ``subs`` (:class:`Subscription` s) as of the bucket's stream at
        ``seq`` (the stream made at ``stream``); returns the bytes written."""
        rows = [tuple(getattr(s, f) for f in FIELDS) for s in subs]
        blob = pickle.dumps({"format": FORMAT, "fields": FIELDS, "seq": int(seq), "stream": stream, "records": rows},
                            protocol=pickle.HIGHEST_PROTOCOL)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        return len(blob)

    def read(self, stream: str, last_seq: int) -> tuple[int, dict] | None:
        """``(seq, {id: Subscription})`` if the snapshot is of this stream (made at ``stream``,
        ``seq`` not beyond ``last_seq``), else None (the bucket is to be read whole)."""
        try:
            with open(self.path, "rb") as f:
                doc = pickle.load(f)
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001 - a damaged file: read the bucket
            log.warning("the subscriptions' snapshot could not be read (%s: %s); reading the bucket",
                        type(e).__name__, e)
            return None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or tuple(doc.get("fields", ())) != FIELDS:
            log.info("the subscriptions' snapshot is of another version; reading the bucket")
            return None
        if doc.get("stream") != stream or not 0 <= doc.get("seq", -1) <= last_seq:
            log.info("the subscriptions' snapshot is of another bucket (stream %s, sequence %s; now %s, %s); "
                     "reading the bucket", doc.get("stream"), doc.get("seq"), stream, last_seq)
            return None
        return doc["seq"], {r[0]: Subscription(*r) for r in doc["records"]}

    def remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

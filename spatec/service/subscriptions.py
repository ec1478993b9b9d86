"""Subscriptions: what a request asks for, checked, with its lease.

A subscription is stored as JSON in the ``spatec_subs`` bucket under its id, with the
bucket entry's TTL set to its lease: renewing rewrites it with a new TTL; a lease not
renewed lapses in the server itself (every process watching the bucket sees it go), and
each process also drops it at its ``expires`` time (whichever comes first).
"""
from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, field

from spatec.errors import SpatecError
from spatec.service.areas import AreaError
from spatec.service.filters import FilterError, compile_filter

#: the lease when a request gives none, and the longest one granted (s)
DEFAULT_LEASE = 600.0
MAX_LEASE = 24 * 3600.0
MIN_LEASE = 1.0
DELIVERY_KINDS = ("sse", "webhook", "nats", "mqtt")


class RequestError(SpatecError):
    """A request the service refuses (400): ``message``, and for a filter its ``column``."""

    def __init__(self, message: str, column: int | None = None, field_name: str | None = None):
        self.message, self.column, self.field = message, column, field_name
        super().__init__(message)

    def body(self) -> dict:
        out = {"error": self.message}
        if self.field:
            out["field"] = self.field
        if self.column is not None:
            out["column"] = self.column
        return out


@dataclass
class Subscription:
    """One subscription as stored (JSON)."""

    id: str
    phrase: str | None
    where: str | None = None
    area: object = None
    certainly: bool = False
    lease: float = DEFAULT_LEASE
    expires: float = 0.0
    created: float = 0.0
    start_seq: int = 1              # the first alert (log sequence) it may receive
    deliver: dict = field(default_factory=lambda: {"sse": True})
    key: str | None = None          # the field of ?mode=latest (default: the phrase's `per` key)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Subscription":
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in names})

    def public(self) -> dict:
        d = self.to_json()
        d["expires_iso"] = _iso(self.expires)
        return d


def _iso(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_lease(value) -> float:
    from spatec.events.timefmt import parse_duration

    if value is None:
        return DEFAULT_LEASE
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        s = float(value)
    elif isinstance(value, str):
        try:
            s = parse_duration(value)
        except SpatecError as e:
            raise RequestError(f"lease: {e}", field_name="lease") from None
    else:
        raise RequestError('lease: a duration such as "10 min" or a number of seconds', field_name="lease")
    if not (MIN_LEASE <= s <= MAX_LEASE):
        raise RequestError(f"lease: between {MIN_LEASE:.0f} s and {MAX_LEASE / 3600:.0f} h", field_name="lease")
    return s


class Checker:
    """Checks a request against the program: the phrase, its filter, the area, delivery."""

    def __init__(self, program, areas):
        self.program, self.areas = program, areas
        self.phrases = [p.name for p in program.phrases]

    def compiled(self, sub: Subscription):
        """``(filter, area)`` of a stored subscription (checked when it was made)."""
        flt = compile_filter(self.program, sub.phrase, sub.where) if sub.where else None
        area = self.areas.area(sub.area, sub.certainly) if sub.area is not None else None
        return flt, area

    def new(self, body: dict, start_seq: int, now: float | None = None) -> Subscription:
        if not isinstance(body, dict):
            raise RequestError("the body is a JSON object: {\"phrase\": ..., \"where\": ..., \"area\": ...}")
        unknown = set(body) - {"phrase", "where", "area", "certainly", "lease", "deliver", "key"}
        if unknown:
            raise RequestError(f"unknown field(s): {', '.join(sorted(unknown))}", field_name=sorted(unknown)[0])
        phrase = body.get("phrase")
        if phrase is not None and phrase not in self.phrases:
            raise RequestError(f"phrase: the program has no phrase {phrase!r} (phrases: {', '.join(self.phrases)})",
                               field_name="phrase")
        where = body.get("where")
        if where is not None:
            if phrase is None:
                raise RequestError("where: a filter needs a phrase (its output fields)", field_name="where")
            try:
                compile_filter(self.program, phrase, where)
            except FilterError as e:
                raise RequestError(f"where: {e.message}" + (f"; {e.hint}" if e.hint else ""), e.column,
                                   "where") from None
        area = body.get("area")
        if area is not None:
            try:
                self.areas.area(area, bool(body.get("certainly")))
            except AreaError as e:
                raise RequestError(str(e), field_name="area") from None
        key = body.get("key")
        if key is not None:
            if phrase is None:
                raise RequestError("key: needs a phrase", field_name="key")
            fields = [n for n, _ in self.program.phrase(phrase).schema]
            if key not in fields:
                raise RequestError(f"key: {phrase} has no output field {key!r} (fields: {', '.join(fields)})",
                                   field_name="key")
        deliver = self.delivery(body.get("deliver"))
        lease = parse_lease(body.get("lease"))
        now = time.time() if now is None else now
        return Subscription(id=secrets.token_hex(8), phrase=phrase, where=where, area=area,
                            certainly=bool(body.get("certainly")), lease=lease, expires=now + lease,
                            created=now, start_seq=start_seq, deliver=deliver, key=key)

    def delivery(self, d) -> dict:
        if d is None:
            return {"sse": True}
        if not isinstance(d, dict) or len(d) != 1 or next(iter(d)) not in DELIVERY_KINDS:
            raise RequestError('deliver: one of {"sse": true}, {"webhook": "http://..."}, {"nats": "subject"}, '
                               '{"mqtt": {"url": "mqtt://host:port", "topic": "..."}}', field_name="deliver")
        kind, v = next(iter(d.items()))
        if kind == "webhook" and not (isinstance(v, str) and v.startswith(("http://", "https://"))):
            raise RequestError("deliver.webhook: an http(s) URL", field_name="deliver")
        if kind == "nats" and not (isinstance(v, str) and v and " " not in v):
            raise RequestError("deliver.nats: a subject", field_name="deliver")
        if kind == "mqtt" and not (isinstance(v, dict) and isinstance(v.get("url"), str)
                                   and v["url"].startswith("mqtt://") and isinstance(v.get("topic"), str)):
            raise RequestError('deliver.mqtt: {"url": "mqtt://host:port", "topic": "..."}', field_name="deliver")
        return {kind: v}

    def latest_key(self, sub: Subscription, asked: str | None) -> str:
        """The field ``?mode=latest`` keeps one alert per value of."""
        key = asked or sub.key
        if key is None and sub.phrase is not None:
            per = self.program.phrase(sub.phrase).phrase.per
            fields = [n for n, _ in self.program.phrase(sub.phrase).schema]
            if per and per in fields:
                key = per
        if key is None:
            raise RequestError("mode=latest needs a key: the phrase has no `per` key among its output fields; "
                               "add &key=FIELD", field_name="key")
        return key

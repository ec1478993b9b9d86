"""Subscriptions: what a request asks for, checked, with its owner and lease.

Every request body has a schema (:class:`SubscriptionIn`, :class:`RenewalIn`,
:class:`BulkIn`, :class:`BulkDeleteIn`, :class:`AckIn`: pydantic, strict: ``"no"`` is not
a boolean, ``true`` is not a number, an unknown field is an error); what the schema cannot
say (the phrase exists, the filter checks, the area is a valid region, the delivery target
is allowed) the :class:`Checker` says, each refusal a :class:`RequestError` (400) naming
the field and, for a filter, the column.

A subscription is stored as JSON in the ``spatec_subs`` bucket under its id, with the
bucket entry's TTL set to its lease: renewing rewrites it with a new TTL; a lease not
renewed lapses in the server itself (every process watching the bucket sees it go), and
each process also drops it at its ``expires`` time (whichever comes first).

Push targets (``deliver``) are the service's own requests to other machines, so they are
limited: a webhook or MQTT broker only on a host the operator allowed
(``--push-host HOST[:PORT]``; none by default), its URL one line without credentials,
redirects never followed (:func:`spatec.sinks.alerts.post_alert`); a NATS subject only
under the delivery prefix (``--nats-prefix``, default ``spatec.deliver.``), never a
wildcard, never ``$...`` (the server's own subjects, the key-value buckets) nor the
service's ``spatec.input``/``spatec.alerts`` streams.
"""
from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Optional, Union
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from spatec.errors import SpatecError
from spatec.service.areas import AreaError
from spatec.service.filters import FilterError, Filters

#: the lease when a request gives none, and the longest one granted (s)
DEFAULT_LEASE = 600.0
MAX_LEASE = 24 * 3600.0
MIN_LEASE = 1.0
DELIVERY_KINDS = ("sse", "webhook", "nats", "mqtt")
#: characters of a filter at most
MAX_WHERE = 262_144
#: subscriptions one bulk request makes or ends at most
MAX_BULK = 10_000
NATS_PREFIX = "spatec.deliver."
_SUBJECT_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


class RequestError(SpatecError):
    """A request the service refuses (400): ``message``, and for a filter its ``column``."""

    def __init__(self, message: str, column: int | None = None, field_name: str | None = None, status: int = 400):
        self.message, self.column, self.field, self.status = message, column, field_name, status
        super().__init__(message)

    def body(self) -> dict:
        out = {"error": self.message}
        if self.field:
            out["field"] = self.field
        if self.column is not None:
            out["column"] = self.column
        return out


# ------------------------------------------------------------------------------ request bodies

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubscriptionIn(_Strict):
    """``POST /subscriptions``."""

    phrase: Optional[StrictStr] = Field(None, max_length=200, description="a phrase of the program")
    where: Optional[StrictStr] = Field(
        None, max_length=MAX_WHERE,
        description="the language's predicate over the phrase's output fields (`spatec check --schema` lists them), "
                    "e.g. `line == \"1\" and metres < 50`; time literals are in the program's time zone "
                    "(`GET /program`'s `timezone`) unless they carry an offset")
    area: Union[StrictStr, dict, None] = Field(
        None, description="a place of the program, a GeoJSON Polygon/MultiPolygon (lon/lat), or "
                          "{\"circle\": [lon, lat, metres]}")
    certainly: StrictBool = Field(False, description="the hull lies inside the area (default: possibly meets it)")
    lease: Union[StrictStr, StrictInt, StrictFloat, None] = Field(
        None, description=f"e.g. \"10 min\" or seconds ({MIN_LEASE:.0f} s to {MAX_LEASE / 3600:.0f} h; "
                          f"default {DEFAULT_LEASE / 60:.0f} min); renew with PUT before it lapses")
    deliver: Optional[dict] = Field(
        None, description="{\"sse\": true} (default), {\"webhook\": URL}, {\"nats\": SUBJECT}, "
                          "{\"mqtt\": {\"url\": \"mqtt://host:port\", \"topic\": ...}}")
    key: Optional[StrictStr] = Field(None, max_length=200,
                                     description="the field of ?mode=latest (default: the phrase's per key)")


class RenewalIn(_Strict):
    """``PUT /subscriptions/{id}``: a new lease, area or ``certainly``."""

    lease: Union[StrictStr, StrictInt, StrictFloat, None] = None
    area: Union[StrictStr, dict, None] = None
    certainly: Optional[StrictBool] = None


class BulkIn(_Strict):
    """``POST /subscriptions/bulk``: each item a :class:`SubscriptionIn`, checked on its own
    (one bad item is that item's error, the others are made)."""

    subscriptions: list[dict] = Field(..., max_length=MAX_BULK, description="each a SubscriptionIn")


class BulkDeleteIn(_Strict):
    """``POST /subscriptions/bulk-delete``."""

    ids: list[StrictStr] = Field(..., max_length=MAX_BULK)


class AckIn(_Strict):
    """``POST /alerts/{id}/ack``."""

    note: Optional[StrictStr] = Field(None, max_length=500)


_TYPE_TAGS = {"str", "int", "float", "bool", "dict", "list", "none"}


def parse_body(model, raw):
    """``raw`` (parsed JSON) as ``model``, or a :class:`RequestError` naming the field."""
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as e:
        errs = e.errors()

        def where(err) -> str:
            loc = [str(x) for x in err.get("loc", ())]
            while loc and (loc[-1] in _TYPE_TAGS or "[" in loc[-1]):    # a union's member, not a field
                loc.pop()
            return ".".join(loc)

        at = where(errs[0])
        msgs = list(dict.fromkeys("unknown field" if x.get("type") == "extra_forbidden" else x.get("msg", "invalid")
                                  for x in errs if where(x) == at))
        msg = msgs[0] if len(msgs) == 1 else "; or ".join(m[0].lower() + m[1:] for m in msgs)
        raise RequestError(f"{at}: {msg}" if at else msg, field_name=at or None) from None


# ------------------------------------------------------------------------------ the record

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
    owner: str | None = None        # the identity (token name) that made it
    suspended: str | None = None    # why its filter or area failed (then it is not evaluated)

    def to_json(self) -> dict:
        """Its fields (the area and delivery shared, not copied: a record is replaced, never
        changed in place; ``asdict``'s deep copies were a fifth of a bulk create)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

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


@dataclass(frozen=True)
class PushPolicy:
    """Where push deliveries may go."""

    hosts: frozenset = frozenset()       # "host" or "host:port", lower case
    nats_prefix: str = NATS_PREFIX

    def allows(self, host: str, port: int | None) -> bool:
        h = host.lower().rstrip(".")
        return h in self.hosts or (port is not None and f"{h}:{port}" in self.hosts)


class Checker:
    """Checks a request against the program: the phrase, its filter, the area, delivery."""

    def __init__(self, program, areas, policy: PushPolicy | None = None):
        self.program, self.areas = program, areas
        self.phrases = [p.name for p in program.phrases]
        self.filters = Filters(program)
        self.policy = policy or PushPolicy()

    def compiled(self, sub: Subscription):
        """``(filter, area)`` of a stored subscription (raises if it no longer fits; an area is
        projected when first tested, or by :meth:`Areas.prepare` with many others)."""
        flt = self.filters.compile(sub.phrase, sub.where) if sub.where else None
        area = self.areas.area(sub.area, sub.certainly) if sub.area is not None else None
        return flt, area

    def new(self, req: SubscriptionIn, start_seq: int, owner: str | None = None, page: bool = False,
            now: float | None = None) -> Subscription:
        phrase = req.phrase
        if phrase is not None and phrase not in self.phrases:
            raise RequestError(f"phrase: the program has no phrase {phrase!r} (phrases: {', '.join(self.phrases)})",
                               field_name="phrase")
        if req.where is not None:
            if phrase is None:
                raise RequestError("where: a filter needs a phrase (its output fields)", field_name="where")
            try:
                self.filters.compile(phrase, req.where)
            except FilterError as e:
                raise RequestError(f"where: {e.message}" + (f"; {e.hint}" if e.hint else ""), e.column,
                                   "where") from None
        if req.area is not None:
            self.area(req.area, req.certainly)
        if req.key is not None:
            if phrase is None:
                raise RequestError("key: needs a phrase", field_name="key")
            fields = [n for n, _ in self.program.phrase(phrase).schema]
            if req.key not in fields:
                raise RequestError(f"key: {phrase} has no output field {req.key!r} (fields: {', '.join(fields)})",
                                   field_name="key")
        deliver = self.delivery(req.deliver)
        if page and "sse" not in deliver:
            raise RequestError("deliver: the operations page subscribes by SSE only", field_name="deliver",
                               status=403)
        lease = parse_lease(req.lease)
        now = time.time() if now is None else now
        return Subscription(id=secrets.token_hex(8), phrase=phrase, where=req.where, area=req.area,
                            certainly=req.certainly, lease=lease, expires=now + lease, created=now,
                            start_seq=start_seq, deliver=deliver, key=req.key, owner=owner)

    def area(self, spec, certainly: bool):
        try:
            a = self.areas.area(spec, bool(certainly))
            if not a.is_disc:
                a.loc                  # noqa: B018 - a polygon projected now, so that a failure is a 400
            return a
        except AreaError as e:
            raise RequestError(str(e), field_name="area") from None

    def renewal(self, sub: Subscription, req: RenewalIn, now: float | None = None) -> Subscription:
        """The record after a ``PUT``: a new lease, area or mode; a suspended subscription whose
        new area is good is evaluated again."""
        new = Subscription.from_json(sub.to_json())
        if req.lease is not None:
            new.lease = parse_lease(req.lease)
        if req.area is not None or req.certainly is not None:
            area = req.area if req.area is not None else sub.area
            certainly = req.certainly if req.certainly is not None else sub.certainly
            if area is not None:
                self.area(area, certainly)
            new.area, new.certainly = area, certainly
            new.suspended = None
        new.expires = (time.time() if now is None else now) + new.lease
        return new

    def delivery(self, d) -> dict:
        if d is None:
            return {"sse": True}
        if not isinstance(d, dict) or len(d) != 1 or next(iter(d)) not in DELIVERY_KINDS:
            raise RequestError('deliver: one of {"sse": true}, {"webhook": "http://..."}, {"nats": "subject"}, '
                               '{"mqtt": {"url": "mqtt://host:port", "topic": "..."}}', field_name="deliver")
        kind, v = next(iter(d.items()))
        if kind == "sse":
            if v is not True:
                raise RequestError('deliver: {"sse": true}', field_name="deliver")
        elif kind == "webhook":
            self._url(v, ("http", "https"), "deliver.webhook")
        elif kind == "nats":
            self._subject(v)
        else:
            if not (isinstance(v, dict) and set(v) == {"url", "topic"}):
                raise RequestError('deliver.mqtt: {"url": "mqtt://host:port", "topic": "..."}', field_name="deliver")
            self._url(v["url"], ("mqtt",), "deliver.mqtt.url")
            t = v["topic"]
            if not (isinstance(t, str) and 0 < len(t) <= 256 and not _CONTROL.search(t)
                    and not set(t) & {"+", "#"} and not t.startswith("$")):
                raise RequestError("deliver.mqtt.topic: a topic name of at most 256 characters, without wildcards "
                                   "(+ #), spaces or a leading $", field_name="deliver")
        return {kind: v}

    def _url(self, url, schemes, what: str) -> None:
        if not isinstance(url, str) or len(url) > 2048 or _CONTROL.search(url):
            raise RequestError(f"{what}: one URL of at most 2048 characters, without spaces or line breaks",
                               field_name="deliver")
        u = urlsplit(url)
        try:
            port = u.port
        except ValueError:
            raise RequestError(f"{what}: the port is not a number from 1 to 65535", field_name="deliver") from None
        if u.scheme not in schemes or not u.hostname:
            raise RequestError(f"{what}: a {' or '.join(schemes)} URL with a host", field_name="deliver")
        if u.username is not None or u.password is not None:
            raise RequestError(f"{what}: no credentials in the URL", field_name="deliver")
        if not self.policy.allows(u.hostname, port):
            allowed = ", ".join(sorted(self.policy.hosts)) or "none (start serve with --push-host HOST[:PORT])"
            raise RequestError(f"{what}: host {u.hostname!r} is not one the service may push to "
                               f"(allowed: {allowed})", field_name="deliver", status=403)

    def _subject(self, s) -> None:
        prefix = self.policy.nats_prefix
        if not isinstance(s, str) or len(s) > 255:
            raise RequestError("deliver.nats: a subject of at most 255 characters", field_name="deliver")
        tokens = s.split(".")
        if not s.startswith(prefix) or len(s) <= len(prefix) or not all(_SUBJECT_TOKEN.match(t) for t in tokens):
            raise RequestError(f"deliver.nats: a subject under {prefix!r} (tokens of letters, digits, _ and -: "
                               f"no wildcards, no $), e.g. {prefix}ops", field_name="deliver", status=403)

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

"""The HTTP interface (Starlette; Server-Sent Events by sse-starlette; served by uvicorn).

=====================================  ==================================================
``POST /subscriptions``                :class:`~.subscriptions.SubscriptionIn` →
                                       ``201 {"id", "expires", "start_seq"}``
``POST /subscriptions/bulk``           ``{"subscriptions": [...]}`` → one result each
``POST /subscriptions/bulk-delete``    ``{"ids": [...]}`` → ``{"deleted", "missing"}``
``GET /subscriptions``                 the caller's (``?limit=&after=``)
``GET /subscriptions/{id}``            one (with ``suspended``: why it is, or null)
``PUT /subscriptions/{id}``            renew the lease, move the area
``DELETE /subscriptions/{id}``         end it
``GET /subscriptions/{id}/events``     SSE: ``alert`` (``id:`` = composite id), ``error``
                                       (suspended), ``end`` (ended or lapsed);
                                       ``Last-Event-ID`` resumes after it;
                                       ``?mode=latest[&key=FIELD]``: one per key
``GET /subscriptions/{id}/alerts``     the same alerts as one JSON list (no stream)
``GET /program``                       time zone, CRS, phrases and their output schema, places
``GET /positions``, ``/positions/events``  latest positions (JSON; SSE)
``POST /alerts/{id}/ack``              acknowledge an alert; ``GET /alerts/acks``
``GET /status``, ``GET /health``       what this process runs; 200/503
``GET /openapi.json``, ``GET /``       this interface; the operations page
=====================================  ==================================================

Every request but ``/``, ``/assets``, ``/openapi.json``, ``/status`` and ``/health``
needs a token (:mod:`~spatec.service.owners`); ``Host`` and ``Origin`` are checked, a body
is JSON of at most :data:`MAX_BODY` bytes (413 beyond, 415 if it is not JSON), and nothing
a client sends gives a 500.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from spatec.service.hub import latest
from spatec.service.owners import COOKIE, Identity
from spatec.service.service import Unavailable
from spatec.service.subscriptions import (
    AckIn,
    BulkDeleteIn,
    BulkIn,
    RenewalIn,
    RequestError,
    SubscriptionIn,
    parse_body,
)

log = logging.getLogger("spatec.service")

PAGE = Path(__file__).with_name("page")
KEEPALIVE = 15
#: bytes of a request body at most (a 10,000-vertex area is about 400 kB)
MAX_BODY = 4 << 20
MAX_LIST = 10_000
RECENT = 10_000       # alerts of the log a new subscription may ask to begin with


def leaflet_dir() -> Path | None:
    """Leaflet's ``dist`` from the project's npm install (``web/node_modules``), never a CDN."""
    import os

    env = os.environ.get("SPATEC_WEB")
    for base in ([Path(env)] if env else []) + [Path(__file__).resolve().parents[2] / "web", Path.cwd() / "web"]:
        d = base / "node_modules" / "leaflet" / "dist"
        if (d / "leaflet.js").exists():
            return d
    return None


def error(status: int, body: dict, headers=None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


class Guard:
    """ASGI middleware: the ``Host`` the service answers to; for a request that changes
    something, a browser's ``Origin`` (its own, or one allowed) and a JSON body of at most
    :data:`MAX_BODY` bytes."""

    def __init__(self, app, hosts, origins=()):
        self.app = app
        self.hosts = {h.lower() for h in hosts}
        self.origins = set(origins)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        name = host.split("]")[0] + "]" if host.startswith("[") else host.rsplit(":", 1)[0]
        if name.lower() not in self.hosts:
            return await _reply(send, 421, {"error": f"this service does not answer to Host {host!r}",
                                            "hint": "start serve with --allowed-host NAME"})
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            origin = headers.get("origin")
            own = f"{scope.get('scheme', 'http')}://{host}"
            if origin is not None and origin != own and origin not in self.origins:
                return await _reply(send, 403, {"error": f"requests from {origin} are not allowed",
                                                "hint": "start serve with --allowed-origin ORIGIN"})
            if origin is None and _cookie(headers.get("cookie", ""), COOKIE) and "authorization" not in headers:
                return await _reply(send, 403, {"error": "a page's request without Origin"})
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
                return await _reply(send, 413, {"error": f"the body is larger than {MAX_BODY:,} bytes"})
            has_body = (length not in (None, "0")) or "transfer-encoding" in headers
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if has_body and ctype != "application/json":
                return await _reply(send, 415, {"error": "the body must be JSON (Content-Type: application/json)"})
        return await self.app(scope, receive, send)


async def _reply(send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        k, _, v = part.strip().partition("=")
        if k == name:
            return v
    return None


def build_app(service, lifespan=None, hosts=("127.0.0.1", "localhost"), origins=()) -> Starlette:
    svc = service

    def who(request: Request) -> Identity:
        auth = request.headers.get("authorization", "")
        secret = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        ident = svc.tokens.identify(secret) if secret else None
        if ident is None and not secret:
            ident = svc.tokens.identify(request.cookies.get(COOKIE))
            if ident is not None and not ident.page:
                ident = None
        if ident is None:
            raise _Refused(401, {"error": "a token is needed: Authorization: Bearer TOKEN (see <state>/tokens)"},
                           {"WWW-Authenticate": 'Bearer realm="spatec"'})
        return ident

    async def body_of(request: Request):
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY:
                raise _Refused(413, {"error": f"the body is larger than {MAX_BODY:,} bytes"})
        if not raw:
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise RequestError(f"the body is not JSON: {e}") from None

    def endpoint(fn):
        """Refusals as their status, a missing broker as 503, and never a 500 for a request."""
        async def wrapped(request: Request):
            try:
                return await fn(request)
            except _Refused as e:
                return error(e.status, e.body, e.headers)
            except RequestError as e:
                return error(e.status, e.body())
            except KeyError:
                return error(404, {"error": "no such subscription (ended, its lease lapsed, or not yours)"})
            except Unavailable as e:
                return error(503, {"error": str(e)}, {"Retry-After": "5"})
            except Exception:  # noqa: BLE001 - our fault, not the client's: logged, answered
                log.exception("%s %s failed", request.method, request.url.path)
                return error(503, {"error": "the service could not answer this request now; try again"},
                             {"Retry-After": "5"})
        return wrapped

    @endpoint
    async def create(request: Request):
        ident = who(request)
        raw = await body_of(request)
        recent = raw.pop("recent", 0) if isinstance(raw, dict) else 0
        if not (isinstance(recent, int) and not isinstance(recent, bool) and 0 <= recent <= RECENT):
            raise RequestError(f"recent: a number of alerts from 0 to {RECENT:,}", field_name="recent")
        req = parse_body(SubscriptionIn, raw)
        sub = await svc.subscribe(ident, req, recent)
        return JSONResponse({"id": sub.id, "expires": _iso(sub.expires), "start_seq": sub.start_seq},
                            status_code=201, headers={"Location": f"/subscriptions/{sub.id}"})

    @endpoint
    async def bulk(request: Request):
        ident = who(request)
        req = parse_body(BulkIn, await body_of(request))
        items = []
        for i, raw in enumerate(req.subscriptions):
            try:
                items.append(parse_body(SubscriptionIn, raw))
            except RequestError as e:
                items.append(e)
        got = await svc.subscribe_many(ident, items)
        out = [{"id": s.id, "expires": _iso(s.expires), "start_seq": s.start_seq} if not isinstance(s, RequestError)
               else {**s.body(), "status": s.status} for s in got]
        return JSONResponse({"results": out, "made": sum(1 for s in got if not isinstance(s, RequestError))})

    @endpoint
    async def bulk_delete(request: Request):
        ident = who(request)
        req = parse_body(BulkDeleteIn, await body_of(request))
        n, missing = await svc.unsubscribe_many(ident, req.ids)
        return JSONResponse({"deleted": n, "missing": missing})

    @endpoint
    async def listing(request: Request):
        ident = who(request)
        try:
            limit = int(request.query_params.get("limit", "1000"))
        except ValueError:
            raise RequestError("limit: a number", field_name="limit") from None
        if not 1 <= limit <= MAX_LIST:
            raise RequestError(f"limit: from 1 to {MAX_LIST:,}", field_name="limit")
        return JSONResponse(svc.listing(ident, limit, request.query_params.get("after")))

    @endpoint
    async def one(request: Request):
        return JSONResponse(svc.public(svc.owned(who(request), request.path_params["id"])))

    @endpoint
    async def renew(request: Request):
        ident = who(request)
        req = parse_body(RenewalIn, await body_of(request))
        sub = await svc.renew(ident, request.path_params["id"], req)
        return JSONResponse({"id": sub.id, "expires": _iso(sub.expires)})

    @endpoint
    async def delete(request: Request):
        if not await svc.unsubscribe(who(request), request.path_params["id"]):
            raise KeyError(request.path_params["id"])
        return Response(status_code=204)

    def reading(request: Request):
        """What a reader of a subscription asked for: ``(sid, cursor, key, annotate)``."""
        ident = who(request)
        sid = request.path_params["id"]
        st = svc.owned(ident, sid)
        if not st.sub.deliver.get("sse"):
            raise _Refused(409, {"error": "this subscription is delivered by push, not SSE"})
        last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        cursor = st.sub.start_seq - 1
        if last:
            got = svc.hub.seq_of.get(last)
            if got is None:
                raise _Refused(409, {"error": f"Last-Event-ID {last!r} is not among the last alerts this service "
                                              "holds (older than its window, or never sent): subscribe again"})
            cursor = got
        mode = request.query_params.get("mode", "all")
        key = None
        if mode == "latest":
            key = svc.checker.latest_key(st.sub, request.query_params.get("key"))
        elif mode != "all":
            raise RequestError("mode: all (default) or latest", field_name="mode")
        return sid, cursor, key, request.query_params.get("annotate") == "places"

    @endpoint
    async def events(request: Request):
        sid, cursor, key, annotate = reading(request)
        await svc.hub.caught_up.wait()
        return EventSourceResponse(_frames(svc, sid, cursor, key, annotate, request), ping=KEEPALIVE,
                                   send_timeout=30)

    @endpoint
    async def alerts(request: Request):
        sid, cursor, key, annotate = reading(request)
        out = []
        async for e in _entries(svc, sid, cursor, key, until=svc.hub.processed):
            out.append({"alert": e.alert, "places": svc.places_of(e)} if annotate else e.alert)
        return JSONResponse(out)

    @endpoint
    async def program(request: Request):
        who(request)
        body, etag = svc.program_doc()
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers={"ETag": etag})
        return Response(body, media_type="application/json", headers={"ETag": etag, "Cache-Control": "no-cache"})

    @endpoint
    async def positions(request: Request):
        who(request)
        idle = not svc.positions_wanted()
        svc.positions_asked = time.monotonic()
        if idle:             # nobody looked for a while: wait for the next poll's positions
            svc.positions_changed.clear()
            try:
                await asyncio.wait_for(svc.positions_changed.wait(), 3)
            except asyncio.TimeoutError:
                pass
        return JSONResponse(svc.positions)

    @endpoint
    async def positions_events(request: Request):
        who(request)

        async def gen():
            sent = {}
            svc.position_readers += 1
            try:
                while not svc.stop_event.is_set():
                    changed = {k: v for k, v in svc.positions.items() if sent.get(k) != v}
                    if changed:
                        sent.update(changed)
                        yield ServerSentEvent(data=json.dumps(changed), event="positions")
                    svc.positions_changed.clear()
                    try:
                        await asyncio.wait_for(svc.positions_changed.wait(), 5)
                    except asyncio.TimeoutError:
                        pass
            finally:
                svc.position_readers -= 1
        return EventSourceResponse(gen(), ping=KEEPALIVE)

    @endpoint
    async def ack(request: Request):
        ident = who(request)
        svc.need_broker()
        cid = request.path_params["id"]
        if len(cid) > 200:
            raise RequestError("an alert id is at most 200 characters", field_name="id")
        req = parse_body(AckIn, await body_of(request))
        rec = {"id": cid, "at": time.time(), "by": ident.name, "note": req.note}
        await svc.broker.acks.put(_key(cid), json.dumps(rec).encode())
        return JSONResponse(rec)

    @endpoint
    async def acks(request: Request):
        who(request)
        svc.need_broker()
        try:
            keys = await svc.broker.acks.keys()
        except Exception:  # noqa: BLE001 - an empty bucket
            keys = []
        out = []
        for k in keys:
            try:
                out.append(json.loads((await svc.broker.acks.get(k)).value))
            except Exception:  # noqa: BLE001 - gone meanwhile
                pass
        return JSONResponse(out)

    @endpoint
    async def status(request: Request):
        return JSONResponse(svc.status())

    @endpoint
    async def health(request: Request):
        st = svc.status()
        return JSONResponse({"healthy": st["healthy"], "problems": st["problems"]},
                            status_code=200 if st["healthy"] else 503)

    @endpoint
    async def openapi(request: Request):
        return JSONResponse(openapi_doc())

    @endpoint
    async def page(request: Request):
        key = request.query_params.get("key")
        if key is not None:
            ident = svc.tokens.identify(key)
            if ident is None or not ident.page:
                return error(401, {"error": "not the page's key (see <state>/page-token)"})
            r = RedirectResponse("/" + ("?snapshot=1" if request.query_params.get("snapshot") else ""),
                                 status_code=303)
            r.set_cookie(COOKIE, key, httponly=True, samesite="strict", path="/")
            return r
        return FileResponse(PAGE / "index.html", headers={"Cache-Control": "no-store"})

    routes = [
        Route("/", page),
        Route("/openapi.json", openapi),
        Route("/subscriptions", create, methods=["POST"]),
        Route("/subscriptions", listing, methods=["GET"]),
        Route("/subscriptions/bulk", bulk, methods=["POST"]),
        Route("/subscriptions/bulk-delete", bulk_delete, methods=["POST"]),
        Route("/subscriptions/{id}", one, methods=["GET"]),
        Route("/subscriptions/{id}", renew, methods=["PUT"]),
        Route("/subscriptions/{id}", delete, methods=["DELETE"]),
        Route("/subscriptions/{id}/events", events),
        Route("/subscriptions/{id}/alerts", alerts),
        Route("/program", program),
        Route("/positions", positions),
        Route("/positions/events", positions_events),
        Route("/alerts/acks", acks),
        Route("/alerts/{id}/ack", ack, methods=["POST"]),
        Route("/status", status),
        Route("/health", health),
        Mount("/assets", StaticFiles(directory=str(PAGE)), name="assets"),
    ]
    lf = leaflet_dir()
    if lf is not None:
        routes.append(Mount("/vendor/leaflet", StaticFiles(directory=str(lf)), name="leaflet"))
    app = Starlette(routes=routes, lifespan=lifespan)
    return Guard(app, hosts, origins)


class _Refused(Exception):
    def __init__(self, status: int, body: dict, headers=None):
        self.status, self.body, self.headers = status, body, headers


def _key(cid: str) -> str:
    from spatec.service.broker import token

    return token(cid)


def _iso(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


async def _entries(svc, sid: str, cursor: int, key: str | None, until: int | None = None):
    """A subscription's entries after ``cursor`` (up to ``until``, or until it ends):
    first what is older than the hub holds for it, from the log, then its buffer.
    ``key``: only the last entry of each key, from what is there when asked."""
    hub = svc.hub
    st = hub.subs.get(sid)
    if st is None:
        return
    complete = max(hub.first, st.since)
    todo = []
    if cursor + 1 < complete:
        todo = [e async for e in hub.from_log(svc.broker, st, cursor, complete)]
        cursor = complete - 1
    todo += st.after(cursor)
    if until is not None:
        todo = [e for e in todo if e.seq <= until]
    if key is not None:
        todo = latest(todo, key)
    for e in todo:
        yield e


async def _frames(svc, sid: str, cursor: int, key: str | None, annotate: bool, request: Request):
    """The SSE frames of a subscription from ``cursor`` on (``key``: latest per key first)."""
    hub = svc.hub
    hub.read(sid, 1)
    try:
        async for frame in _frames_of(svc, sid, cursor, key, annotate, request):
            yield frame
    finally:
        hub.read(sid, -1)


async def _frames_of(svc, sid: str, cursor: int, key: str | None, annotate: bool, request: Request):
    hub = svc.hub
    first = True
    while True:
        st = hub.subs.get(sid)
        if st is None:
            yield ServerSentEvent(data=json.dumps({"id": sid, "reason": "ended or lapsed"}), event="end")
            return
        if st.suspended is not None:
            yield ServerSentEvent(data=json.dumps({"id": sid, "reason": st.suspended}), event="error")
            return
        st.changed.clear()
        if first or cursor + 1 < max(hub.first, st.since):    # (the matcher took it in after it was made)
            todo = [e async for e in _entries(svc, sid, cursor, key if first else None)]
            first = False
        else:
            todo = st.after(cursor)
        for i in range(0, len(todo), 256):
            part = todo[i:i + 256]
            if annotate:
                for e in part:
                    yield ServerSentEvent(data=json.dumps({"alert": e.alert, "places": svc.places_of(e)}), id=e.id,
                                          event="alert")
            else:
                yield b"".join(e.frame for e in part)    # frames encoded once for every subscriber; one write
            cursor = part[-1].seq
            if len(todo) > 256 and await request.is_disconnected():   # (a long catch-up)
                return
        if todo:
            continue
        # (sse-starlette ends the stream when the client goes: asked here only when nothing came
        # for a second, not after every write — at 1,000 alerts/s a dashboard's stream would ask
        # a thousand times a second)
        try:
            await asyncio.wait_for(st.changed.wait(), 1.0)
        except asyncio.TimeoutError:
            if await request.is_disconnected():
                return


def openapi_doc() -> dict:
    """The interface as OpenAPI 3.1, the bodies' schemas from their pydantic models."""
    from spatec.service.subscriptions import MAX_BULK

    def schema(model) -> dict:
        s = model.model_json_schema(ref_template="#/components/schemas/{model}")
        defs = s.pop("$defs", {})
        comps.update(defs)
        return s

    comps: dict = {}
    sub_in = schema(SubscriptionIn)
    sub_in["properties"]["recent"] = {
        "type": "integer", "minimum": 0, "maximum": RECENT,
        "description": "also the last N alerts of the log that match (default 0: only alerts decided after it is made)"}
    bulk_in = schema(BulkIn)
    bulk_in["properties"]["subscriptions"]["items"] = {"$ref": "#/components/schemas/SubscriptionIn"}
    comps.update(SubscriptionIn=sub_in, RenewalIn=schema(RenewalIn), BulkIn=bulk_in,
                 BulkDeleteIn=schema(BulkDeleteIn), AckIn=schema(AckIn))
    comps["Error"] = {"type": "object", "properties": {
        "error": {"type": "string"}, "field": {"type": "string", "description": "the field of the body at fault"},
        "column": {"type": "integer", "description": "where in a filter (1-based)"}}}
    comps["Made"] = {"type": "object", "properties": {
        "id": {"type": "string"}, "expires": {"type": "string", "format": "date-time"},
        "start_seq": {"type": "integer", "description": "the first alert (log sequence) it receives: alerts decided "
                                                        "after it was made, or `recent` before"}}}
    comps["Subscription"] = {"type": "object", "description": "as stored", "properties": {
        "id": {"type": "string"}, "phrase": {"type": ["string", "null"]}, "where": {"type": ["string", "null"]},
        "area": {}, "certainly": {"type": "boolean"}, "lease": {"type": "number", "description": "s"},
        "expires": {"type": "number", "description": "epoch s"}, "expires_iso": {"type": "string"},
        "start_seq": {"type": "integer"}, "deliver": {"type": "object"}, "key": {"type": ["string", "null"]},
        "owner": {"type": "string", "description": "the token's name that made it"},
        "suspended": {"type": ["string", "null"], "description": "why its filter or area failed: it receives "
                                                                 "nothing until a PUT gives it a good area"}}}
    comps["Status"] = {"type": "object", "properties": {
        "healthy": {"type": "boolean"}, "problems": {"type": "array", "items": {"type": "string"}},
        "member": {"type": "string", "description": "this process"},
        "broker": {"type": "object", "description": "url, embedded, state (ok | down | unreachable | disk full), "
                                                    "error, restarts, free_bytes"},
        "crs": {"type": ["string", "null"], "description": "the metric CRS (null until chosen from the input)"},
        "subscriptions": {"type": "integer"}, "suspended": {"type": "integer"}, "groups": {"type": "integer"},
        "log": {"type": "integer", "description": "the last alert (log sequence) handled"},
        "window_first": {"type": "integer", "description": "the oldest alert the buffers hold"},
        "alerts_handled": {"type": "integer"}, "alerts_skipped": {"type": "integer"},
        "decided_to_hub_ms": {"type": ["object", "null"], "description": "p50, p99, max of the last alerts' time "
                                                                         "from decision to the subscribers' buffers"},
        "stages_ms": {"type": "object", "description": "where that time goes: log (decided to read by the matcher), "
                                                      "match (in the matcher), pipe (to the HTTP process), hub (to "
                                                      "the buffers); each p50, p99, max"},
        "snapshot": {"type": "object", "description": "the subscriptions' snapshot: read (at the start: seq, the "
                                                     "bucket's sequence it is of, subscriptions, since: the bucket's "
                                                     "messages read after it; null: the bucket was read whole), written "
                                                     "(the last one: seq, subscriptions), current (it holds every change)"},
        "tasks": {"type": "object", "description": "name → state (running | failing), restarts, error"},
        "matcher": {"type": "object", "description": "the matching process: pid (null while it is started again), "
                                                   "pending (subscriptions it has not yet taken in)"},
        "engine": {"type": "object", "description": "owned sources, crs, runners (counts, watermark, lateness_s, "
                                                    "running, error, the detector's pid and nice), failures"},
        "pushed": {"type": "integer"}, "dead_letters": {"type": "integer"}}}
    ref = lambda n: {"$ref": f"#/components/schemas/{n}"}  # noqa: E731
    j = lambda s: {"content": {"application/json": {"schema": s}}}  # noqa: E731
    err = {"description": "refused: message, field and (filters) column", **j(ref("Error"))}
    common = {"400": err, "401": {"description": "no token, or not a known one"},
              "413": {"description": "the body is too large"}, "415": {"description": "the body is not JSON"},
              "503": {"description": "the broker is not available now (Retry-After)"}}
    idp = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
    sse_params = idp + [
        {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"},
         "description": "the composite id of the last alert received: resume after it"},
        {"name": "mode", "in": "query", "schema": {"enum": ["all", "latest"]}},
        {"name": "key", "in": "query", "schema": {"type": "string"}},
        {"name": "annotate", "in": "query", "schema": {"enum": ["places"]},
         "description": "each alert as {alert, places}: the program's places its hull meets"}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "spatec serve", "version": "2",
                 "description": "Subscriptions to a SpaTeC program's composite events. Authentication: "
                                "`Authorization: Bearer TOKEN` (tokens in `<state>/tokens` or SPATEC_TOKENS); each "
                                "subscription belongs to its token. Times in filters are in the program's time zone "
                                "(`GET /program`) unless written with an offset. The port is `--port` (default "
                                "8080); with `--port 0` the one chosen is printed and written to `<state>/port`."},
        "components": {"schemas": comps,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                                           "page": {"type": "apiKey", "in": "cookie", "name": COOKIE}}},
        "security": [{"bearer": []}, {"page": []}],
        "paths": {
            "/subscriptions": {
                "post": {"summary": "subscribe", "requestBody": j(ref("SubscriptionIn")),
                         "responses": {"201": {"description": "made", **j(ref("Made"))}, **common,
                                       "403": {"description": "a push target that is not allowed"}}},
                "get": {"summary": "the caller's subscriptions, by id",
                        "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": MAX_LIST}},
                                       {"name": "after", "in": "query", "schema": {"type": "string"},
                                        "description": "the last id of the page before"}],
                        "responses": {"200": {"description": "the list",
                                              **j({"type": "array", "items": ref("Subscription")})}}},
            },
            "/subscriptions/bulk": {"post": {
                "summary": f"make up to {MAX_BULK:,} subscriptions", "requestBody": j(ref("BulkIn")),
                "responses": {"200": {"description": "one result each, in order: Made, or Error with status",
                                      **j({"type": "object", "properties": {"results": {"type": "array"},
                                                                            "made": {"type": "integer"}}})},
                              **common}}},
            "/subscriptions/bulk-delete": {"post": {
                "summary": f"end up to {MAX_BULK:,} of the caller's subscriptions", "requestBody": j(ref("BulkDeleteIn")),
                "responses": {"200": {"description": "how many ended; the ids not found (or not the caller's)",
                                      **j({"type": "object", "properties": {"deleted": {"type": "integer"},
                                                                            "missing": {"type": "array"}}})},
                              **common}}},
            "/subscriptions/{id}": {
                "parameters": idp,
                "get": {"summary": "one subscription", "responses": {"200": {"description": "it",
                                                                              **j(ref("Subscription"))},
                                                                      "404": {"description": "none of the caller's"}}},
                "put": {"summary": "renew its lease, move its area", "requestBody": j(ref("RenewalIn")),
                        "responses": {"200": {"description": "renewed"}, "404": {"description": "none"},
                                      "409": {"description": "changed by other requests meanwhile: try again"},
                                      **common}},
                "delete": {"summary": "end it", "responses": {"204": {"description": "ended"},
                                                              "404": {"description": "none"}}},
            },
            "/subscriptions/{id}/events": {
                "parameters": sse_params,
                "get": {"summary": "the alerts, as Server-Sent Events",
                        "description": "Events: `alert` (`id:` the composite id, `data:` the alert as "
                                       "`spatec replay` writes it), `error` (`data: {id, reason}`: the subscription "
                                       "is suspended, the stream ends), `end` (`data: {id, reason}`: it ended or its "
                                       "lease lapsed). A comment line every 15 s keeps the connection open.",
                        "responses": {"200": {"description": "text/event-stream"},
                                      "409": {"description": "a push subscription, or a Last-Event-ID not held"}}},
            },
            "/subscriptions/{id}/alerts": {
                "parameters": sse_params,
                "get": {"summary": "the same alerts as one JSON list, up to now (no stream: pages, scripts)",
                        "responses": {"200": {"description": "the alerts"}}}},
            "/program": {"get": {"summary": "time zone, CRS, phrases with output schemas, places (ETag)",
                                 "responses": {"200": {"description": "the program"}}}},
            "/positions": {"get": {"summary": "latest position per source: {source: [lon, lat, t µs]}",
                                   "responses": {"200": {"description": "positions"}}}},
            "/positions/events": {"get": {"summary": "positions as they change (SSE event `positions`)",
                                          "responses": {"200": {"description": "text/event-stream"}}}},
            "/alerts/{id}/ack": {"parameters": idp,
                                 "post": {"summary": "acknowledge an alert (by the caller's token name)",
                                          "requestBody": j(ref("AckIn")),
                                          "responses": {"200": {"description": "recorded"}, **common}}},
            "/alerts/acks": {"get": {"summary": "acknowledged alerts", "responses": {"200": {"description": "list"}}}},
            "/status": {"get": {"summary": "what this process runs (no token needed)", "security": [],
                                "responses": {"200": {"description": "status", **j(ref("Status"))}}}},
            "/health": {"get": {"summary": "200 when healthy, else 503 with the problems", "security": [],
                                "responses": {"200": {"description": "healthy"}, "503": {"description": "not"}}}},
        },
    }

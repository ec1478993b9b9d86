"""The HTTP interface (Starlette; Server-Sent Events by sse-starlette; served by uvicorn).

=====================================  ==================================================
``POST /subscriptions``                ``{"phrase", "where", "area", "certainly", "lease",
                                       "deliver", "key"}`` → ``201 {"id", "expires"}``
``GET /subscriptions``                 every live subscription
``GET /subscriptions/{id}``            one
``PUT /subscriptions/{id}``            renew the lease (``{"lease"}``), move the area
                                       (``{"area", "certainly"}``)
``DELETE /subscriptions/{id}``         end it
``GET /subscriptions/{id}/events``     SSE: ``id:`` = composite id, ``data:`` = the alert;
                                       ``Last-Event-ID`` resumes after it;
                                       ``?mode=latest[&key=FIELD]``: one per key
``GET /program``                       time zone, phrases and their output schema, places
``GET /positions/events``              SSE: latest positions (the operations page)
``POST /alerts/{id}/ack``              acknowledge an alert; ``GET /alerts/acks``
``GET /status``                        what this process runs
``GET /openapi.json``, ``GET /``       this interface; the operations page
=====================================  ==================================================
"""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from spatec.service.hub import latest
from spatec.service.subscriptions import RequestError

PAGE = Path(__file__).with_name("page")
KEEPALIVE = 15


def leaflet_dir() -> Path | None:
    """Leaflet's ``dist`` from the project's npm install (``web/node_modules``), never a CDN."""
    import os

    env = os.environ.get("SPATEC_WEB")
    for base in ([Path(env)] if env else []) + [Path(__file__).resolve().parents[2] / "web", Path.cwd() / "web"]:
        d = base / "node_modules" / "leaflet" / "dist"
        if (d / "leaflet.js").exists():
            return d
    return None


def error(status: int, body: dict) -> JSONResponse:
    return JSONResponse(body, status_code=status)


def build_app(service, lifespan=None) -> Starlette:
    svc = service

    async def body_of(request: Request):
        raw = await request.body()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError as e:
            raise RequestError(f"the body is not JSON: {e}") from None

    async def create(request: Request):
        try:
            sub = await svc.subscribe(await body_of(request))
        except RequestError as e:
            return error(400, e.body())
        return JSONResponse({"id": sub.id, "expires": _iso(sub.expires), "start_seq": sub.start_seq},
                            status_code=201, headers={"Location": f"/subscriptions/{sub.id}"})

    async def listing(request: Request):
        return JSONResponse([st.sub.public() for st in svc.hub.subs.values()])

    async def one(request: Request):
        st = svc.hub.subs.get(request.path_params["id"])
        if st is None:
            return error(404, {"error": "no such subscription (ended, or its lease lapsed)"})
        return JSONResponse(st.sub.public())

    async def renew(request: Request):
        try:
            sub = await svc.renew(request.path_params["id"], await body_of(request))
        except KeyError:
            return error(404, {"error": "no such subscription (ended, or its lease lapsed)"})
        except RequestError as e:
            return error(400, e.body())
        return JSONResponse({"id": sub.id, "expires": _iso(sub.expires)})

    async def delete(request: Request):
        if not await svc.unsubscribe(request.path_params["id"]):
            return error(404, {"error": "no such subscription"})
        return Response(status_code=204)

    async def events(request: Request):
        sid = request.path_params["id"]
        st = svc.hub.subs.get(sid)
        if st is None:
            return error(404, {"error": "no such subscription (ended, or its lease lapsed)"})
        if not st.sub.deliver.get("sse"):
            return error(409, {"error": "this subscription is delivered by push, not SSE"})
        await svc.hub.caught_up.wait()
        last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        if last:
            cursor = svc.hub.seq_of.get(last)
            if cursor is None:
                return error(409, {"error": f"Last-Event-ID {last!r} is not in the log (older than its retention, "
                                            "or never sent): subscribe again"})
        else:
            cursor = st.sub.start_seq - 1
        mode = request.query_params.get("mode", "all")
        key = None
        if mode == "latest":
            try:
                key = svc.checker.latest_key(st.sub, request.query_params.get("key"))
            except RequestError as e:
                return error(400, e.body())
        elif mode != "all":
            return error(400, {"error": "mode: all (default) or latest", "field": "mode"})
        annotate = request.query_params.get("annotate") == "places"
        return EventSourceResponse(_frames(svc, sid, cursor, key, annotate, request), ping=KEEPALIVE,
                                   send_timeout=30)

    async def program(request: Request):
        return JSONResponse(svc.program_doc())

    async def positions(request: Request):
        async def gen():
            sent = {}
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
        return EventSourceResponse(gen(), ping=KEEPALIVE)

    async def ack(request: Request):
        cid = request.path_params["id"]
        body = await body_of(request) if request.headers.get("content-length") not in (None, "0") else {}
        rec = {"id": cid, "at": time.time(), "by": str(body.get("by", "")) if isinstance(body, dict) else ""}
        await svc.broker.acks.put(_key(cid), json.dumps(rec).encode())
        return JSONResponse(rec)

    async def acks(request: Request):
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

    async def status(request: Request):
        return JSONResponse(svc.status())

    async def openapi(request: Request):
        return JSONResponse(openapi_doc())

    async def page(request: Request):
        return FileResponse(PAGE / "index.html")

    routes = [
        Route("/", page),
        Route("/openapi.json", openapi),
        Route("/subscriptions", create, methods=["POST"]),
        Route("/subscriptions", listing, methods=["GET"]),
        Route("/subscriptions/{id}", one, methods=["GET"]),
        Route("/subscriptions/{id}", renew, methods=["PUT"]),
        Route("/subscriptions/{id}", delete, methods=["DELETE"]),
        Route("/subscriptions/{id}/events", events),
        Route("/program", program),
        Route("/positions/events", positions),
        Route("/alerts/acks", acks),
        Route("/alerts/{id}/ack", ack, methods=["POST"]),
        Route("/status", status),
        Mount("/assets", StaticFiles(directory=str(PAGE)), name="assets"),
    ]
    lf = leaflet_dir()
    if lf is not None:
        routes.append(Mount("/vendor/leaflet", StaticFiles(directory=str(lf)), name="leaflet"))
    return Starlette(routes=routes, lifespan=lifespan)


def _key(cid: str) -> str:
    from spatec.service.broker import token

    return token(cid)


def _iso(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


async def _frames(svc, sid: str, cursor: int, key: str | None, annotate: bool, request: Request):
    """The SSE frames of a subscription from ``cursor`` on (``key``: latest per key first)."""
    hub = svc.hub
    first = True
    while True:
        st = hub.subs.get(sid)
        if st is None:
            yield ServerSentEvent(data=json.dumps({"id": sid, "reason": "ended or lapsed"}), event="end")
            return
        st.changed.clear()
        todo = st.after(cursor)
        if first and key is not None:
            todo = latest(todo, key)
        first = False
        for e in todo:
            if annotate:
                yield ServerSentEvent(data=json.dumps({"alert": e.alert, "places": svc.places_of(e)}), id=e.id,
                                      event="alert")
            else:
                yield e.frame          # encoded once, for every subscriber
            cursor = e.seq
        if todo:
            continue
        try:
            await asyncio.wait_for(st.changed.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
        if await request.is_disconnected():
            return


def openapi_doc() -> dict:
    sub_in = {
        "type": "object",
        "properties": {
            "phrase": {"type": "string", "description": "a phrase of the program (omit: every phrase)"},
            "where": {"type": "string", "description": "the language's predicate over the phrase's output fields "
                                                       "(`spatec check --schema`), e.g. line == \"1\" and metres < 50"},
            "area": {"description": "a place name, a GeoJSON geometry (lon/lat) or {\"circle\": [lon, lat, metres]}",
                     "oneOf": [{"type": "string"}, {"type": "object"}]},
            "certainly": {"type": "boolean", "description": "hull inside the area (default: possibly meets it)"},
            "lease": {"oneOf": [{"type": "string"}, {"type": "number"}],
                      "description": "e.g. \"10 min\"; renew with PUT before it lapses"},
            "deliver": {"type": "object", "description": "{\"sse\": true} (default), {\"webhook\": URL}, "
                                                         "{\"nats\": SUBJECT}, {\"mqtt\": {\"url\", \"topic\"}}"},
            "key": {"type": "string", "description": "the field of ?mode=latest (default: the phrase's per key)"},
        },
        "additionalProperties": False,
    }
    err = {"type": "object", "properties": {"error": {"type": "string"}, "field": {"type": "string"},
                                            "column": {"type": "integer"}}}
    j = lambda s: {"content": {"application/json": {"schema": s}}}  # noqa: E731
    idp = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "spatec serve", "version": "1",
                 "description": "Subscriptions to a SpaTeC program's composite events"},
        "paths": {
            "/subscriptions": {
                "post": {"summary": "subscribe", "requestBody": j(sub_in),
                         "responses": {"201": {"description": "made", **j({"type": "object", "properties": {
                             "id": {"type": "string"}, "expires": {"type": "string", "format": "date-time"}}})},
                             "400": {"description": "a bad request: message, field and (filters) column",
                                     **j(err)}}},
                "get": {"summary": "every live subscription", "responses": {"200": {"description": "the list"}}},
            },
            "/subscriptions/{id}": {
                "parameters": idp,
                "get": {"summary": "one subscription", "responses": {"200": {"description": "it"},
                                                                     "404": {"description": "none"}}},
                "put": {"summary": "renew its lease, move its area",
                        "requestBody": j({"type": "object", "properties": {k: sub_in["properties"][k] for k in
                                                                           ("lease", "area", "certainly")}}),
                        "responses": {"200": {"description": "renewed"}, "404": {"description": "none"}}},
                "delete": {"summary": "end it", "responses": {"204": {"description": "ended"}}},
            },
            "/subscriptions/{id}/events": {
                "parameters": idp + [
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"},
                     "description": "the composite id of the last alert received: resume after it"},
                    {"name": "mode", "in": "query", "schema": {"enum": ["all", "latest"]}},
                    {"name": "key", "in": "query", "schema": {"type": "string"}}],
                "get": {"summary": "the alerts, as Server-Sent Events (event id = composite id)",
                        "responses": {"200": {"description": "text/event-stream"}}},
            },
            "/program": {"get": {"summary": "time zone, phrases with output schemas, places",
                                 "responses": {"200": {"description": "the program"}}}},
            "/alerts/{id}/ack": {"parameters": idp, "post": {"summary": "acknowledge an alert",
                                                              "responses": {"200": {"description": "recorded"}}}},
            "/status": {"get": {"summary": "what this process runs", "responses": {"200": {"description": "status"}}}},
        },
    }

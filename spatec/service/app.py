"""The ASGI application of ``spatec serve``: the service started and stopped with it."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from spatec.service.api import build_app
from spatec.service.owners import Tokens, allowed_hosts
from spatec.service.service import Service
from spatec.service.subscriptions import PushPolicy


def make_app(compiled, sources, state: Path, broker=None, lateness: int = 120_000_000, trigger: float = 0.5,
             checkpoint_every: float | None = None, outage=None, announce=True, tokens: Tokens | None = None,
             policy: PushPolicy | None = None, bind: str = "127.0.0.1", hosts=(), origins=(),
             live: dict | None = None, crs: str | None = None, url: str | None = None):
    """``(app, service)``: the ASGI app (behind its Host/Origin guard) whose lifespan runs the service."""
    if tokens is None:
        tokens = Tokens.load(state, create=True)
    service = Service(compiled, sources, state, broker, lateness=lateness, trigger=trigger,
                      checkpoint_every=checkpoint_every, outage=outage, tokens=tokens, policy=policy, live=live,
                      crs=crs)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await service.start()
        if announce:
            print(f"spatec serve: broker {service.broker.url}, {len(service.sources)} source(s), "
                  f"{len(service.hub.subs)} subscription(s) kept", file=sys.stderr, flush=True)
            if url:
                print(f"spatec serve: listening on {url} (API tokens: {', '.join(tokens.names)}); the operations "
                      f"page: {url}?key={Tokens.page_secret(state)}", file=sys.stderr, flush=True)
        try:
            yield
        finally:
            await service.stop()

    return build_app(service, lifespan, allowed_hosts(bind, hosts), origins), service

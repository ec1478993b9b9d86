"""The ASGI application of ``spatec serve``: the service started and stopped with it."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from spatec.service.api import build_app
from spatec.service.service import Service


def make_app(compiled, sources, state: Path, broker=None, lateness: int = 120_000_000, trigger: float = 0.5,
             checkpoint_every: float | None = None, outage=None, announce=True):
    """``(app, service)``: the Starlette app whose lifespan runs the service."""
    from spatec.service.quality import OutageGate

    gate = (lambda: OutageGate(compiled, outage)) if outage is not None else None
    service = Service(compiled, sources, state, broker, lateness=lateness, trigger=trigger,
                      checkpoint_every=checkpoint_every, quality=gate)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await service.start()
        if announce:
            print(f"spatec serve: broker {service.broker.url}, {len(service.sources)} source(s), "
                  f"{len(service.hub.subs)} subscription(s) kept", file=sys.stderr, flush=True)
        try:
            yield
        finally:
            await service.stop()

    return build_app(service, lifespan), service

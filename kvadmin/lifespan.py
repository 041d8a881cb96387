"""ASGI lifespan: what a web server process does once at start, before it serves, and not at
import (uvicorn runs it in each worker process; `manage.py` commands and tests that import the
application do not).

Django's and channels' applications take no lifespan scope, so it is answered here, in front
of them. A startup step that fails is logged and the process serves all the same.
"""

import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

ASGIApp = Callable[..., Awaitable[None]]


class Lifespan:
    def __init__(self, app: ASGIApp, startup: Callable[[], Awaitable[None]]) -> None:
        self.app = app
        self.startup = startup

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "lifespan":
            return await self.app(scope, receive, send)
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception:
                    log.exception("a startup step failed; serving all the same")
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

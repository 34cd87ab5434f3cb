"""The FastAPI app with a fast lane: the hot endpoints skip FastAPI's middleware stack and router.

Every chat completion would otherwise pass through seven middleware layers and a route scan built
for the admin and spend endpoints (about a fifth of the gateway's CPU per request, measured). The
hot handlers catch and shape their own errors, so they need none of those layers; the rest of the
app, its OpenAPI document and its lifespan are FastAPI's, untouched.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from starlette.routing import request_response
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.errors import error_body
from gateway.request_id import RequestIdMiddleware

log = logging.getLogger("tollgate")


class TollgateApp(FastAPI):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._hot: dict[str, ASGIApp] = {}

    def add_hot_route(self, path: str, endpoint: Any) -> None:
        """POST `path` served on the fast lane (and routed normally too, for completeness)."""
        self._hot[path] = RequestIdMiddleware(request_response(endpoint))
        self.router.add_route(path, endpoint, methods=["POST"], include_in_schema=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            hot = self._hot.get(scope["path"])
            if hot is not None:
                scope["app"] = self
                await _guarded(hot, scope, receive, send)
                return
        await super().__call__(scope, receive, send)


async def _guarded(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """The last line of defence: whatever escapes becomes an OpenAI-shaped 500, never a traceback."""
    started = False

    async def tracking(message: Any) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    try:
        await app(scope, receive, tracking)
    except Exception:
        log.exception("unhandled error on the fast lane %s", scope["path"])
        if started:
            raise
        body = error_body("internal error in the gateway", type="gateway_error", code="internal_error")
        await send(
            {
                "type": "http.response.start",
                "status": 500,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

"""The FastAPI app with a fast lane: the hot endpoints skip FastAPI's middleware stack, its router
and Starlette's per-request exception machinery.

Every chat completion would otherwise pass through seven middleware layers, a route scan built for
the admin and spend endpoints, and three `send` wrappers (together about a quarter of the gateway's
CPU per request, measured). The hot handlers catch and shape their own errors, so they need none of
that; the rest of the app, its OpenAPI document and its lifespan are FastAPI's, untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.errors import error_body
from gateway.http.body_limits import guard_body
from gateway.http.request_id import assign_request_id

log = logging.getLogger("tollgate")

Endpoint = Callable[[Request], Awaitable[Response]]


class TollgateApp(FastAPI):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._hot: dict[str, Endpoint] = {}

    def add_hot_route(self, path: str, endpoint: Endpoint) -> None:
        """POST `path` served on the fast lane (and routed normally too, for completeness)."""
        self._hot[path] = endpoint
        self.router.add_route(path, endpoint, methods=["POST"], include_in_schema=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint = self._hot.get(scope["path"])
            if endpoint is not None:
                scope["app"] = self
                await _serve(endpoint, scope, receive, send)
                return
        await super().__call__(scope, receive, send)


async def _serve(endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> None:
    echoed = assign_request_id(scope)
    try:
        response = await endpoint(Request(scope, guard_body(scope, receive)))
    except Exception:
        # The last line of defence: whatever escapes becomes an OpenAI-shaped 500, never a traceback.
        log.exception("unhandled error on the fast lane %s", scope["path"])
        body = error_body("internal error in the gateway", type="gateway_error", code="internal_error")
        response = Response(body, status_code=500, media_type="application/json")
    headers = response.raw_headers
    if not any(name == b"x-tollgate-model" for name, _ in headers):
        headers.append((b"x-tollgate-model", b"none"))
    headers.append((b"x-request-id", echoed))
    await response(scope, receive, send)

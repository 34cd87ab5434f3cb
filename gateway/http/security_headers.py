"""What browsers are told: security headers on every response outside the fast lane (the dashboard,
its assets, the admin and spend APIs), and CORS, which is off unless origins are configured.

CORS off means nothing at all happens per request: no middleware, no header, and a preflight gets
the 405 any unknown OPTIONS gets. With `server.cors_allow_origins` set, the whole app, fast lane
included, is wrapped in Starlette's CORSMiddleware, so the completion endpoints answer browsers too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http.hot_path import TollgateApp

# Responses that are documents of their own (the dashboard page) set a CSP of their own; anything
# else under /dashboard is data or an asset and may load nothing.
_LOCKED_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"
_EVERYWHERE = (
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
)
# Authenticated data: no browser or proxy cache may keep it.
_PRIVATE = ("/admin", "/v1/spend", "/dashboard/api")
_REQUEST_HEADERS = (
    "authorization",
    "content-type",
    "x-api-key",
    "anthropic-version",
    "anthropic-beta",
    "idempotency-key",
    "x-request-id",
    "x-tollgate-tier",
    "x-tollgate-tags",
    "x-tollgate-cache",
    "x-tollgate-timeout-ms",
    "cache-control",
)
_RESPONSE_HEADERS = (
    "x-request-id",
    "x-tollgate-model",
    "x-tollgate-tier",
    "x-tollgate-cache",
    "x-tollgate-cost-usd",
    "x-tollgate-attempts",
    "retry-after",
)


class SecurityHeadersMiddleware:
    """Pure ASGI (the slow lane only): adds each header a response did not set itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        private = path.startswith(_PRIVATE)
        dashboard = path.startswith("/dashboard")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _EVERYWHERE:
                    headers.setdefault(name, value)
                if dashboard:
                    headers.setdefault("content-security-policy", _LOCKED_CSP)
                if private:
                    headers.setdefault("cache-control", "no-store")
            await send(message)

        await self.app(scope, receive, send_with_headers)


class CorsTollgateApp(TollgateApp):
    """The gateway app with CORS outermost, around the fast lane too; used only when origins are set."""

    def __init__(self, *, cors_allow_origins: Sequence[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cors = CORSMiddleware(
            self._serve_inner,
            allow_origins=list(cors_allow_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=list(_REQUEST_HEADERS),
            expose_headers=list(_RESPONSE_HEADERS),
            allow_credentials=False,
            max_age=600,
        )

    async def _serve_inner(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._cors(scope, receive, send)

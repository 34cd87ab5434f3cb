"""JSON bodies whatever the Content-Type says: `curl -d '{...}'` sends
`application/x-www-form-urlencoded`, and FastAPI would then refuse a perfectly good JSON object.
A body that is not JSON still gets FastAPI's own clear 400."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

_FORM = b"application/x-www-form-urlencoded"


class JsonBodyRoute(APIRoute):
    """An `APIRoute` that reads a form-typed (or untyped) body as the JSON it almost always is."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def read_as_json(request: Request) -> Response:
            headers = request.scope["headers"]
            kept = [(k, v) for k, v in headers if k != b"content-type"]
            declared = [v for k, v in headers if k == b"content-type"]
            if not declared or declared[0].split(b";")[0].strip().lower() == _FORM:
                scope = {**request.scope, "headers": [*kept, (b"content-type", b"application/json")]}
                request = Request(scope, request.receive)
            return await handler(request)

        return read_as_json

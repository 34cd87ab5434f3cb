"""Request headers as a plain dict, built once per request.

Starlette's `Headers.get` scans the raw list and raises and catches a KeyError for every header
that is absent; the hot path asks for about ten that usually are. ASGI servers give names in lower
case, so a dict keyed by them answers in one lookup. (Repeated headers keep their last value.)
"""

from __future__ import annotations

from starlette.requests import Request

_KEY = "tollgate.headers"


def request_headers(request: Request) -> dict[str, str]:
    cached: dict[str, str] | None = request.scope.get(_KEY)
    if cached is None:
        cached = {name.decode("latin-1"): value.decode("latin-1") for name, value in request.scope["headers"]}
        request.scope[_KEY] = cached
    return cached

"""Reading a request body with a hard size limit, whether or not the client sent Content-Length, and
turning it into a JSON object or an OpenAI-shaped 400 saying why not."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from gateway.errors import InvalidRequest, PayloadTooLarge
from gateway.http.headers import request_headers


async def read_body(request: Request, limit: int) -> bytes:
    declared = request_headers(request).get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise InvalidRequest("Content-Length is not a number", code="invalid_header") from None
        if size > limit:
            raise PayloadTooLarge(f"request body is {size} bytes; the limit is {limit} bytes")
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# orjson reads 1,024 levels of nesting but writes only 254, and every stage after parsing writes
# the body again (cache keys, adapters; a translation may wrap a value a level or two deeper).
_NESTING_MARGIN = 3


def json_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, nested shallowly enough to be written back, or a 400."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"request body is not valid JSON: {exc}", code="invalid_json") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object", code="invalid_json")
    check_nesting(body)
    return body


def check_nesting(body: Any) -> None:
    """Refuse a body nested too deeply to be written back as JSON, rather than fail later with a 500.
    Writing it inside a few extra arrays checks the depth and the margin at orjson's speed."""
    wrapped = body
    for _ in range(_NESTING_MARGIN):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        raise InvalidRequest(
            f"request body is nested more than {254 - _NESTING_MARGIN} levels deep", code="invalid_json"
        ) from None

"""Reading a request body with a hard size limit, whether or not the client sent Content-Length."""

from __future__ import annotations

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

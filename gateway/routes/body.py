"""Reading a request body with a hard size limit, whether or not the client sent Content-Length, and
turning it into a JSON object or an OpenAI-shaped 400 saying why not."""

from __future__ import annotations

import json
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
    check_duplicate_keys(raw, check_nesting(body))
    return body


def check_nesting(body: Any) -> bytes:
    """Refuse a body nested too deeply to be written back as JSON, rather than fail later with a 500.
    Writing it inside a few extra arrays checks the depth and the margin at orjson's speed; the
    writing is returned (`check_duplicate_keys` reads it)."""
    wrapped = body
    for _ in range(_NESTING_MARGIN):
        wrapped = [wrapped]
    try:
        return orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        raise InvalidRequest(
            f"request body is nested more than {254 - _NESTING_MARGIN} levels deep", code="invalid_json"
        ) from None


def check_duplicate_keys(raw: bytes, written: bytes) -> None:
    """Refuse a key given twice in one object: orjson keeps the last, while the raw body (forwarded
    as it came) may be read otherwise upstream. Every key is followed by one colon; orjson writes
    the colons inside strings as they are, so the parsed body written back holds as many colons as
    the raw one unless keys were dropped. Two byte counts (~70 µs each on 200 KB, about one parse);
    only a body with more colons than its writing is parsed again, slowly, to name the key. (A body
    that spells its colons `\u003a`, which no JSON library does, can hide a duplicate.)"""
    if raw.count(b":") <= written.count(b":"):
        return
    key = _first_duplicate(raw)
    if key is not None:
        raise InvalidRequest(
            f"request body gives the key '{key[:100]}' more than once in one object", code="invalid_json"
        )


def _first_duplicate(raw: bytes) -> str | None:
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for name, _ in items:
            if name in seen and not found:
                found.append(name)
            seen.add(name)
        return dict(items)

    try:
        json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None  # orjson read it: what the standard library cannot, it let through before too
    return found[0] if found else None

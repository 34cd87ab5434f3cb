"""Gemini's failures, classified into the provider error taxonomy in one function.

Gemini answers `{"error": {"code", "message", "status", "details"}}`, with a google.rpc status name;
the same object can arrive as an SSE frame after HTTP 200. A 429 may say when to retry in a
`google.rpc.RetryInfo` detail (`"retryDelay": "37s"`) rather than a `Retry-After` header.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from providers.errors import (
    ContextLengthExceeded,
    ProviderError,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
    parse_retry_after,
)
from providers.types import JSON

STATUS_BY_NAME = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}


def error_from_response(
    status: int, headers: Mapping[str, str], body: bytes, *, provider: str
) -> ProviderError:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body[:300].decode("utf-8", "replace").strip() or f"HTTP {status}"
        return classify(status, {"message": text}, provider=provider)
    error = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):  # the non-SSE stream's JSON array
        error = obj[0].get("error")
    retry_after = parse_retry_after(headers.get("retry-after"))
    return classify(
        status, error if isinstance(error, dict) else {}, provider=provider, retry_after=retry_after
    )


def error_from_frame(error: Any, *, provider: str = "") -> ProviderError:
    """An `error` object sent as a stream frame after the 200."""
    error = error if isinstance(error, dict) else {"message": str(error)}
    status = error.get("code") if isinstance(error.get("code"), int) else None
    return classify(status or STATUS_BY_NAME.get(str(error.get("status")), 500), error, provider=provider)


def classify(status: int, error: JSON, *, provider: str, retry_after: float | None = None) -> ProviderError:
    """Every Gemini failure, by HTTP status, rpc status name and, where needed, the message."""
    name = str(error.get("status") or "")
    message = str(error.get("message") or f"HTTP {status}")
    text = f"{provider or 'gemini'} returned {status} {name}: {message}".replace("  ", " ")
    if retry_after is None:
        retry_after = _retry_delay(error.get("details"))
    common: dict[str, Any] = {"provider": provider, "upstream_status": status, "retry_after": retry_after}
    if status == 429 or name == "RESOURCE_EXHAUSTED":
        return UpstreamRateLimited(text, **common)
    if status in (408, 504) or name == "DEADLINE_EXCEEDED":
        return UpstreamTimeout(text, **common)
    # A bad key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID, not a 401.
    if (
        status in (401, 403)
        or "API_KEY_INVALID" in str(error.get("details"))
        or "API key not valid" in message
    ):
        return UpstreamRejected(text, status=502, code="upstream_auth_failed", **common)
    if status == 400 and "token count" in message and "exceeds the maximum" in message:
        return ContextLengthExceeded(text, status=400, **common)
    if 400 <= status < 500:
        return UpstreamRejected(text, status=status, **common)
    return UpstreamUnavailable(text, **common)


def _retry_delay(details: Any) -> float | None:
    for detail in details if isinstance(details, list) else ():
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            return parse_retry_after(delay[:-1])
    return None

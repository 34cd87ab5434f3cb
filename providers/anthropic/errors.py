"""Anthropic's failures, classified into the provider error taxonomy in one function.

An error body (`{"type":"error","error":{"type","message"}}`) and an `error` SSE event after HTTP 200
both carry an error type; an event has no status, so it gets the status Anthropic documents for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from providers.errors import (
    ContextLengthExceeded,
    ProviderError,
    UpstreamOverloaded,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
    parse_retry_after,
)

# https://docs.claude.com/en/api/errors
STATUS_BY_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def error_from_response(
    status: int, headers: Mapping[str, str], body: bytes, *, provider: str
) -> ProviderError:
    error_type, message = _read_error(body, status)
    return classify(
        status,
        error_type,
        message,
        provider=provider,
        retry_after=parse_retry_after(headers.get("retry-after")),
    )


def error_from_event(data: Any, *, provider: str = "") -> ProviderError:
    """An `error` event mid-stream, e.g. `overloaded_error` after the 200 was already sent."""
    error = data.get("error") if isinstance(data, dict) else None
    error = error if isinstance(error, dict) else {}
    error_type = str(error.get("type") or "api_error")
    message = str(error.get("message") or "error event mid-stream")
    return classify(STATUS_BY_TYPE.get(error_type, 500), error_type, message, provider=provider, stream=True)


def classify(
    status: int,
    error_type: str,
    message: str,
    *,
    provider: str,
    retry_after: float | None = None,
    stream: bool = False,
) -> ProviderError:
    """Every Anthropic failure, by HTTP status (or the status its error type stands for)."""
    text = f"{provider or 'anthropic'} {'sent' if stream else 'returned'} {status} {error_type}: {message}"
    common: dict[str, Any] = {"provider": provider, "upstream_status": status, "retry_after": retry_after}
    if status == 529:
        return UpstreamOverloaded(text, **common)
    if status == 429:
        return UpstreamRateLimited(text, **common)
    if status in (408, 504):
        return UpstreamTimeout(text, **common)
    if status in (401, 403):
        # The gateway's own Anthropic credential is wrong; the client's key is fine, so not a 401.
        return UpstreamRejected(text, status=502, code="upstream_auth_failed", **common)
    if status == 402:
        return UpstreamRejected(text, status=502, code="upstream_billing_failed", **common)
    if status == 400 and "prompt is too long" in message:
        return ContextLengthExceeded(text, status=400, **common)
    if 400 <= status < 500:
        return UpstreamRejected(text, status=status, **common)
    return UpstreamUnavailable(text, **common)


def _read_error(body: bytes, status: int) -> tuple[str, str]:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "api_error", body[:300].decode("utf-8", "replace").strip() or f"HTTP {status}"
    error = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(error, dict):
        return str(error.get("type") or "api_error"), str(error.get("message") or f"HTTP {status}")
    return "api_error", f"HTTP {status}"

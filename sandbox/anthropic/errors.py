"""Anthropic's error answers: ``{"type":"error","error":{"type","message"},"request_id"}`` by status.

The ``request-id`` response header carries the same id as the body. Error types
by status: 400 invalid_request_error, 401 authentication_error, 402
billing_error, 403 permission_error, 404 not_found_error, 413
request_too_large, 429 rate_limit_error, 500 api_error, 504 timeout_error,
529 overloaded_error.
"""

from __future__ import annotations

import os

import orjson

from sandbox.core.errors import ApiError
from sandbox.faults import FaultRule

__all__ = ["base62", "error_body", "error_type", "fault_error", "invalid", "request_id"]

# status -> (error.type, default message)
_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low to access the Anthropic API."),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per "
        "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see "
        "the response headers for current usage. Please reduce the prompt length or the maximum "
        "tokens requested, or try again later.",
    ),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def base62(length: int) -> str:
    """A random id part like Anthropic's (``msg_01XFDUDYJgAACzvnptvVoYEL``)."""
    return "".join(_ALPHABET[b % 62] for b in os.urandom(length))


def request_id() -> str:
    """A fresh ``req_...`` id."""
    return "req_011C" + base62(20)


def error_type(status: int) -> str:
    """The ``error.type`` Anthropic uses for ``status``."""
    known = _ERRORS.get(status)
    if known is not None:
        return known[0]
    return "api_error" if status >= 500 else "invalid_request_error"


def invalid(message: str) -> ApiError:
    """A 400 ``invalid_request_error``."""
    return ApiError(400, message, type="invalid_request_error")


def error_body(error: ApiError, request: str) -> bytes:
    """The JSON body of an error answer (``request``: the request id)."""
    info = {"type": error.type or error_type(error.status), "message": error.message}
    return orjson.dumps({"type": "error", "error": info, "request_id": request})


def fault_error(rule: FaultRule) -> ApiError:
    """The error a status fault answers with; a stream_error fault is an overload."""
    status = rule.status if rule.kind == "status" else 529
    kind, message = _ERRORS.get(status, (error_type(status), "Internal server error"))
    return ApiError(
        status,
        rule.message or message,
        type=rule.type or kind,
        headers=rule.response_headers() if rule.kind == "status" else (),
    )

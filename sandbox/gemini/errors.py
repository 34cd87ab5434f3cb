"""Google's error answers: ``{"error": {"code", "message", "status"[, "details"]}}`` by HTTP status.

A 429 fault with ``retry_after`` also carries Google's ``RetryInfo`` detail
(``"retryDelay": "2s"``), which is how the Gemini API hints a retry delay.
"""

from __future__ import annotations

from typing import Any

import orjson

from sandbox.core.errors import ApiError
from sandbox.faults import FaultRule

__all__ = ["error_body", "fault_error", "invalid", "status_name"]

# status -> (canonical status, default message) as generativelanguage.googleapis.com answers.
_STATUS: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "The caller does not have permission"),
    404: ("NOT_FOUND", "Requested entity was not found."),
    409: ("ABORTED", "The operation was aborted."),
    429: (
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
    ),
    499: ("CANCELLED", "The operation was cancelled."),
    500: (
        "INTERNAL",
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
    501: ("UNIMPLEMENTED", "Operation is not implemented, or supported, or enabled."),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
}


def status_name(status: int) -> str:
    """The canonical status string for an HTTP status."""
    known = _STATUS.get(status)
    if known is not None:
        return known[0]
    return "INTERNAL" if status >= 500 else "FAILED_PRECONDITION"


def invalid(message: str) -> ApiError:
    """A 400 ``INVALID_ARGUMENT``."""
    return ApiError(400, message, type="INVALID_ARGUMENT")


def _details(error: ApiError) -> list[dict[str, Any]]:
    if error.status != 429:
        return []
    delay = next((v for k, v in error.headers if k == "retry-after"), None)
    details: list[dict[str, Any]] = [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [
                {
                    "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                    "quotaValue": "10",
                }
            ],
        },
        {"@type": "type.googleapis.com/google.rpc.Help", "links": [
            {"description": "Learn more about Gemini API quotas",
             "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
    ]  # fmt: skip
    if delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{delay}s"})
    return details


def error_body(error: ApiError) -> bytes:
    """The JSON body of an error answer (and of a mid-stream error frame)."""
    info: dict[str, Any] = {
        "code": error.status,
        "message": error.message,
        "status": error.type or status_name(error.status),
    }
    details = _details(error)
    if details:
        info["details"] = details
    return orjson.dumps({"error": info})


def fault_error(rule: FaultRule) -> ApiError:
    """The error a status fault answers with; a stream_error fault is a 500 INTERNAL."""
    status = rule.status if rule.kind == "status" else 500
    name, message = _STATUS.get(status, (status_name(status), "Unknown error."))
    return ApiError(
        status,
        rule.message or message,
        type=rule.type or name,
        headers=rule.response_headers() if rule.kind == "status" else (),
    )

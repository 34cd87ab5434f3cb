"""Errors of the OpenAI-compatible dialects, and their bodies as OpenAI and vLLM write them.

OpenAI: ``{"error": {"message", "type", "param", "code"}}`` with a string (or
null) ``code``. vLLM since 0.10.1 uses the same envelope, but ``type`` is an
exception-style name (``BadRequestError``) and ``code`` is the HTTP status as an
integer; its ``--api-key`` guard answers 401 with a flat ``{"error":
"Unauthorized"}``.
"""

from __future__ import annotations

import orjson

from sandbox.core.errors import ApiError, phrase
from sandbox.faults import FaultRule

__all__ = ["BAD_JSON", "ApiError", "error_body", "fault_error"]

# status -> (type, code, message) as api.openai.com sends them.
_OPENAI: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Bad request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: sk-sandb****. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    403: (
        "invalid_request_error",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The server is overloaded or not ready yet."),
    504: ("server_error", None, "Gateway timeout."),
    529: ("server_error", "overloaded", "The server is overloaded."),
}
BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON. If you have trouble figuring out how to fix this, please "
    "contact us through our help center at help.openai.com.)"
)
_VLLM_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    422: "UnprocessableEntityError",
    500: "InternalServerError",
    501: "NotImplementedError",
}


def _openai_type(status: int) -> str:
    return _OPENAI.get(status, ("server_error" if status >= 500 else "invalid_request_error",))[0]


def _vllm_type(status: int) -> str:
    if status in _VLLM_TYPES:
        return _VLLM_TYPES[status]
    return phrase(status).replace(" ", "").replace("-", "").removesuffix("Error") + "Error"


def error_body(error: ApiError, *, vllm: bool) -> bytes:
    """The JSON body of an error response (or of a mid-stream error event)."""
    if vllm:
        if error.status == 401:
            return b'{"error":"Unauthorized"}'
        info: dict[str, object] = {
            "message": error.message,
            "type": error.type or _vllm_type(error.status),
            "param": error.param,
            "code": error.status,
        }
    else:
        info = {
            "message": error.message,
            "type": error.type or _openai_type(error.status),
            "param": error.param,
            "code": error.code,
        }
    return orjson.dumps({"error": info})


def fault_error(rule: FaultRule, *, model: str | None) -> ApiError:
    """The error a status or stream_error fault answers with."""
    status = rule.status if rule.kind == "status" else 500
    _, default_code, message = _OPENAI.get(status, ("", None, phrase(status) + "."))
    if status == 429 and model:
        message = message.replace("requests per min", f"{model} on requests per min")
    if status == 429 and rule.retry_after is not None:
        message += f" Please try again in {rule.retry_after:g}s."
    return ApiError(
        status,
        rule.message or message,
        type=rule.type,
        code=rule.code if rule.code is not None else default_code,
        headers=rule.response_headers() if rule.kind == "status" else (),
    )

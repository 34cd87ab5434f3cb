"""Errors the gateway answers with, and the one place they become OpenAI-shaped HTTP bodies.

GatewayError                      caller, policy or gateway fault with a status and stable type
├── InvalidRequest        400     malformed JSON, missing or mistyped fields
├── UnknownModel          404     no configured model or alias of that name
├── PayloadTooLarge       413     body over the configured limit
└── NoDeployment          503     the model has no usable deployment
providers.errors.ProviderError    upstream faults (502/504/429/4xx), mapped by `error_body`
"""

from __future__ import annotations

import orjson

from providers.errors import ProviderError


class GatewayError(Exception):
    status: int = 500
    type: str = "gateway_error"
    code: str = "internal_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code


class InvalidRequest(GatewayError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class UnknownModel(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "model_not_found"


class PayloadTooLarge(GatewayError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class NoDeployment(GatewayError):
    status = 503
    type = "gateway_error"
    code = "no_deployment"


def error_body(message: str, *, type: str, code: str | None, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type, "code": code, "param": param}})


def describe(exc: BaseException) -> tuple[int, bytes, str]:
    """Status, OpenAI-shaped body and stable error type for anything a request can fail with."""
    if isinstance(exc, GatewayError):
        return (
            exc.status,
            error_body(exc.message, type=exc.type, code=exc.code, param=exc.param),
            exc.type,
        )
    if isinstance(exc, ProviderError):
        return exc.status, error_body(exc.message, type=exc.type, code=exc.code), exc.type
    return (
        500,
        error_body("internal error in the gateway", type="gateway_error", code="internal_error"),
        "internal_error",
    )

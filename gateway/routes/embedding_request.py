"""Parse and check a `/v1/embeddings` body (OpenAI's limits: at most 2,048 inputs)."""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest
from gateway.routes.body import json_object
from providers.types import EmbeddingRequest

MAX_INPUTS = 2048


def parse_embedding_request(raw: bytes) -> EmbeddingRequest:
    body = json_object(raw)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string", param="model", code="invalid_type")
    _check_input(body.get("input"))
    dimensions = body.get("dimensions")
    if dimensions is not None and (
        isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
    ):
        raise InvalidRequest(
            "'dimensions' must be a positive integer", param="dimensions", code="invalid_type"
        )
    if body.get("encoding_format") not in (None, "float", "base64"):
        raise InvalidRequest(
            "'encoding_format' must be 'float' or 'base64'", param="encoding_format", code="invalid_value"
        )
    return EmbeddingRequest(body=body, raw=raw, model=model)


def input_texts(request: EmbeddingRequest) -> list[str]:
    """The text inputs, for estimating tokens when an upstream reports none."""
    value = request.body["input"]
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, str)]


def _check_input(value: Any) -> None:
    if value is None:
        raise InvalidRequest(
            "you must provide an input parameter", param="input", code="missing_required_parameter"
        )
    if isinstance(value, str):
        if not value:
            raise InvalidRequest("'input' must not be empty", param="input")
        return
    if not isinstance(value, list) or not value:
        raise InvalidRequest(
            "'input' must be a string or a non-empty array", param="input", code="invalid_type"
        )
    if len(value) > MAX_INPUTS:
        raise InvalidRequest(f"'input' may hold at most {MAX_INPUTS} items", param="input")
    if all(isinstance(v, str) and v for v in value):
        return
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return
    if all(
        isinstance(v, list) and v and all(isinstance(t, int) and not isinstance(t, bool) for t in v)
        for v in value
    ):
        return
    raise InvalidRequest(
        "'input' must be a string, an array of strings, or token arrays", param="input", code="invalid_type"
    )

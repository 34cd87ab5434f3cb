"""Parse and check a legacy `/v1/completions` body (a `prompt`, not `messages`) before anything is
spent on it, the way OpenAI words its refusals.

The body goes upstream as sent (`ChatRequest.legacy`); the pipeline's other stages (budgets, rate
limits, a broken stream's estimate) read its chat rendering: one user message holding the prompt.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest
from gateway.routes.body import json_object
from providers.types import ChatRequest

_NUMBERS: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}
_INTS: dict[str, tuple[int, int]] = {
    "max_tokens": (0, 2**31 - 1),
    "n": (1, 128),
    "best_of": (1, 20),
    "logprobs": (0, 5),
    "seed": (-(2**63), 2**63 - 1),
}
_BOOLS = ("stream", "echo")
_STRINGS = ("suffix", "user")
# Carried into the chat rendering: what budgets, limits and the ledger read from a request.
_CARRIED = ("max_tokens", "temperature", "top_p", "n", "stop", "user", "stream", "seed")


def parse_completion_request(raw: bytes) -> ChatRequest:
    body = json_object(raw)
    model = body.get("model")
    if model is None:
        raise InvalidRequest(
            "you must provide a model parameter", param="model", code="missing_required_parameter"
        )
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string", param="model", code="invalid_type")
    text = _prompt_text(body.get("prompt"))
    _check_scalars(body)
    stream = body.get("stream") is True
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise InvalidRequest(
                "'stream_options' must be an object", param="stream_options", code="invalid_type"
            )
        if not stream:
            raise InvalidRequest(
                "'stream_options' is only allowed when 'stream' is true", param="stream_options"
            )
    include_usage = stream and isinstance(options, dict) and options.get("include_usage") is True
    chat: dict[str, Any] = {key: body[key] for key in _CARRIED if key in body}
    chat["model"] = model
    chat["messages"] = [{"role": "user", "content": text}]
    return ChatRequest(
        body=chat, raw=raw, model=model, stream=stream, include_usage=include_usage, legacy=body
    )


def _prompt_text(prompt: Any) -> str:
    """The prompt as text: a string, strings (joined), or token ids (their count is what matters to
    an estimate, so each stands for one short word)."""
    if prompt is None:
        raise InvalidRequest(
            "you must provide a prompt parameter", param="prompt", code="missing_required_parameter"
        )
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return "\n".join(prompt)
        if all(_is_int(t) for t in prompt):
            return " x" * len(prompt)
        if all(isinstance(p, list) and p and all(_is_int(t) for t in p) for p in prompt):
            return " x" * sum(len(p) for p in prompt)
    raise InvalidRequest(
        "'prompt' must be a string, an array of strings, an array of token ids or an array of arrays "
        "of token ids (none empty)",
        param="prompt",
        code="invalid_type",
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_scalars(body: dict[str, Any]) -> None:
    for name, (low, high) in _NUMBERS.items():
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidRequest(f"'{name}' must be a number", param=name, code="invalid_type")
        if not low <= value <= high:
            raise InvalidRequest(
                f"'{name}' must be between {low:g} and {high:g}; got {value}",
                param=name,
                code="invalid_value",
            )
    for name, (ilow, ihigh) in _INTS.items():
        value = body.get(name)
        if value is None:
            continue
        if not _is_int(value):
            raise InvalidRequest(f"'{name}' must be an integer", param=name, code="invalid_type")
        if not ilow <= value <= ihigh:
            raise InvalidRequest(
                f"'{name}' must be between {ilow} and {ihigh}; got {value}", param=name, code="invalid_value"
            )
    for name in _BOOLS:
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise InvalidRequest(f"'{name}' must be a boolean", param=name, code="invalid_type")
    for name in _STRINGS:
        if body.get(name) is not None and not isinstance(body[name], str):
            raise InvalidRequest(f"'{name}' must be a string", param=name, code="invalid_type")
    if body.get("logit_bias") is not None and not isinstance(body["logit_bias"], dict):
        raise InvalidRequest("'logit_bias' must be an object", param="logit_bias", code="invalid_type")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str):
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 4:
            raise InvalidRequest(
                "'stop' must be a string or an array of up to 4 strings", param="stop", code="invalid_type"
            )

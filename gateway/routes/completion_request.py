"""Parse and check a legacy `/v1/completions` body (a `prompt`, not `messages`) before anything is
spent on it, the way OpenAI words its refusals.

The body goes upstream as sent (`ChatRequest.legacy`); the pipeline's other stages (budgets, rate
limits, a broken stream's estimate) read its chat rendering: one user message holding the prompt.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequest
from gateway.routes.body import json_object
from gateway.routes.body_fields import FieldRules, check_fields, is_int, required_model, stream_flags
from providers.types import ChatRequest

_RULES = FieldRules(
    numbers={
        "temperature": (0.0, 2.0),
        "top_p": (0.0, 1.0),
        "presence_penalty": (-2.0, 2.0),
        "frequency_penalty": (-2.0, 2.0),
    },
    ints={
        "max_tokens": (0, 2**31 - 1),
        "n": (1, 128),
        "best_of": (1, 20),
        "logprobs": (0, 5),
        "seed": (-(2**63), 2**63 - 1),
    },
    bools=("stream", "echo"),
    objects=("logit_bias",),
    strings=("suffix", "user"),
)
# Carried into the chat rendering: what budgets, limits and the ledger read from a request.
_CARRIED = ("max_tokens", "temperature", "top_p", "n", "stop", "user", "stream", "seed")


def parse_completion_request(raw: bytes) -> ChatRequest:
    body = json_object(raw)
    model = required_model(body)
    text = _prompt_text(body.get("prompt"))
    check_fields(body, _RULES)
    stream, include_usage = stream_flags(body)
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
        if all(is_int(t) for t in prompt):
            return " x" * len(prompt)
        if all(isinstance(p, list) and p and all(is_int(t) for t in p) for p in prompt):
            return " x" * sum(len(p) for p in prompt)
    raise InvalidRequest(
        "'prompt' must be a string, an array of strings, an array of token ids or an array of arrays "
        "of token ids (none empty)",
        param="prompt",
        code="invalid_type",
    )

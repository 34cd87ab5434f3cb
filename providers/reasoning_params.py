"""Parameters OpenAI's reasoning models refuse, and the body they take instead: pure, no I/O.

The o-series (o1, o3, o4-mini, ...) and the gpt-5 family answer `max_tokens` with 400 "Unsupported
parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", and
a non-default `temperature` (like `top_p`, the penalties, `logprobs`) with "Unsupported value".
Clients written for chat models send both; the gateway renames the first and drops the rest.
"""

from __future__ import annotations

import re
from typing import Any

# o1, o1-mini, o3-pro, o4-mini-2025-04-16, gpt-5, gpt-5-mini, gpt-5.1...; not gpt-5-chat-latest,
# which is the chat model behind ChatGPT and takes the classic sampling parameters.
_REASONING = re.compile(r"^(o\d+(?:-|$)|gpt-5(?!-chat))")
# Sampling parameters the reasoning models refuse (only their defaults are accepted).
REFUSED = (
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "logprobs",
    "top_logprobs",
    "logit_bias",
)
RENAMED = "max_tokens_renamed"
DROPPED_PREFIX = "param_dropped:"


def is_reasoning_model(upstream_model: str) -> bool:
    """Whether OpenAI's own API treats this model id as a reasoning model (by its name)."""
    return _REASONING.match(upstream_model.lower()) is not None


def to_reasoning_body(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The body a reasoning model takes, and the changes made (`max_tokens_renamed`,
    `param_dropped:<name>`); the body itself when nothing had to change."""
    changes: list[str] = []
    if "max_tokens" in body:
        changes.append(RENAMED)
    dropped = [name for name in REFUSED if name in body]
    changes += [DROPPED_PREFIX + name for name in dropped]
    if not changes:
        return body, changes
    out = {key: value for key, value in body.items() if key not in dropped and key != "max_tokens"}
    if "max_tokens" in body and "max_completion_tokens" not in body:
        out["max_completion_tokens"] = body["max_tokens"]
    return out, changes


def dropped_names(flags: list[str]) -> list[str]:
    """The parameter names among a request's flags that were dropped."""
    return [flag[len(DROPPED_PREFIX) :] for flag in flags if flag.startswith(DROPPED_PREFIX)]


__all__ = ["DROPPED_PREFIX", "REFUSED", "RENAMED", "dropped_names", "is_reasoning_model", "to_reasoning_body"]

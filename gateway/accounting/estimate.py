"""Token estimates for when the upstream reported no usage (a broken stream, a client that left):
such rows are billed from these and marked `usage_estimated`.

About four characters a token on English text, the figure OpenAI and Anthropic both quote; the
ledger issue replaces this with tiktoken counts.
"""

from __future__ import annotations

from typing import Any

from providers.types import Usage

CHARS_PER_TOKEN = 4
_PER_MESSAGE_TOKENS = 3


def tokens_for_chars(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += tokens_for_chars(len(content))
        elif isinstance(content, list):
            total += sum(
                tokens_for_chars(len(str(p.get("text") or ""))) for p in content if isinstance(p, dict)
            )
        total += _PER_MESSAGE_TOKENS
    return total + _PER_MESSAGE_TOKENS


def estimate_usage(messages: list[dict[str, Any]], generated_chars: int) -> Usage:
    return Usage(prompt_tokens=prompt_tokens(messages), completion_tokens=tokens_for_chars(generated_chars))

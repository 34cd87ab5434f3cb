"""Token usage of one request: the vocabulary `providers/` reports and `pricing/` prices.

It sits below both so that pricing can take a `Usage` without importing the providers; it imports
nothing of Tollgate's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Usage:
    """Token counts of one request, with OpenAI's convention: cached and cache-write tokens are
    part of `prompt_tokens`, reasoning tokens part of `completion_tokens`."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    # The share of `cache_write_tokens` written with a 1-hour TTL (Anthropic prices it higher).
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0
    # The provider's own usage object, kept so any cost can be re-derived later.
    raw: dict[str, Any] | None = None
    # Counted by us, not reported by the provider (e.g. Gemini reports no tokens for embeddings).
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


__all__ = ["Usage"]

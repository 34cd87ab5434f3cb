"""The cost of one request from its token usage, in integer nano-USD."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from pricing.money import NANO_PER_USD, TOKENS_PER_MTOK, usd_to_nano


@dataclass(frozen=True, slots=True)
class Price:
    """Per-million-token prices held as nano-USD per million tokens, so $0.075/MTok stays exact.

    A missing cached-read or cache-write price means those tokens are billed as plain input.
    """

    input: int
    output: int
    cached_input: int | None = None
    cache_write: int | None = None
    source: str = "config"

    @classmethod
    def per_mtok(
        cls,
        *,
        input: Decimal | str,
        output: Decimal | str,
        cached_input: Decimal | str | None = None,
        cache_write: Decimal | str | None = None,
        source: str = "config",
    ) -> Price:
        return cls(
            input=usd_to_nano(input),
            output=usd_to_nano(output),
            cached_input=None if cached_input is None else usd_to_nano(cached_input),
            cache_write=None if cache_write is None else usd_to_nano(cache_write),
            source=source,
        )


def cost_nano(
    price: Price,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> int:
    """Sum every token class at its price, then round once (half up) to whole nano-USD.

    Follows OpenAI's convention: cached and cache-write tokens are part of `prompt_tokens`.
    Reasoning tokens are already inside `completion_tokens` and billed as output.
    """
    cached = max(0, min(cached_tokens, prompt_tokens))
    written = max(0, min(cache_write_tokens, prompt_tokens - cached))
    fresh = prompt_tokens - cached - written
    numerator = (
        fresh * price.input
        + cached * (price.input if price.cached_input is None else price.cached_input)
        + written * (price.input if price.cache_write is None else price.cache_write)
        + max(0, completion_tokens) * price.output
    )
    return (numerator + TOKENS_PER_MTOK // 2) // TOKENS_PER_MTOK


__all__ = ["NANO_PER_USD", "Price", "cost_nano"]

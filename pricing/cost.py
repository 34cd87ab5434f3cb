"""The cost of one request from its token usage, in integer nano-USD.

Usage follows OpenAI's convention: `cached_tokens` and `cache_write_tokens` are part of
`prompt_tokens`, `cache_write_1h_tokens` is part of `cache_write_tokens`, and `reasoning_tokens`
is part of `completion_tokens`. Counts that overflow their container are clamped to it, so a
provider's inconsistent usage never bills a token twice.

Rounding: every token class is multiplied at full precision (nano-USD per MTok x tokens is an
exact integer), the classes are summed, and the request's total is rounded ONCE, half up, to
whole nano-USD. The input part is rounded half up from its own exact sum; the output part is
`total - input`, so input + output == total exactly and each part is within 1 nano-USD of its
exact value.
"""

from __future__ import annotations

from dataclasses import dataclass

from pricing.money import NANO_PER_USD, TOKENS_PER_MTOK
from pricing.price import Price, Rates, Tier
from usage import Usage


@dataclass(frozen=True, slots=True)
class CostBreakdown:
    """One request's cost: input covers uncached, cached and cache-write tokens; output covers
    completion tokens, reasoning included. `input_nano + output_nano == total_nano`."""

    input_nano: int
    output_nano: int
    total_nano: int


def cost_breakdown(usage: Usage, price: Price) -> CostBreakdown:
    prompt = max(0, usage.prompt_tokens)
    completion = max(0, usage.completion_tokens)
    cached = _clamp(usage.cached_tokens, prompt)
    written = _clamp(usage.cache_write_tokens, prompt - cached)
    written_1h = _clamp(usage.cache_write_1h_tokens, written)
    reasoning = _clamp(usage.reasoning_tokens, completion)
    rates: Rates = price.rates_for(prompt)
    input_exact = (
        (prompt - cached - written) * rates.input
        + cached * rates.cached_input
        + (written - written_1h) * rates.cache_write
        + written_1h * rates.cache_write_1h
    )
    output_exact = (completion - reasoning) * rates.output + reasoning * rates.reasoning
    total = _round_half_up(input_exact + output_exact)
    input_nano = _round_half_up(input_exact)
    # Rounding is monotonic, so total >= input_nano and the output part is never negative.
    return CostBreakdown(input_nano=input_nano, output_nano=total - input_nano, total_nano=total)


def cost_nano(usage: Usage, price: Price) -> int:
    """Sum every token class at its price, then round once (half up) to whole nano-USD."""
    return cost_breakdown(usage, price).total_nano


def _clamp(tokens: int, ceiling: int) -> int:
    return max(0, min(tokens, ceiling))


def _round_half_up(nano_tokens_per_mtok: int) -> int:
    """(nano-USD per MTok x tokens) -> whole nano-USD, halves rounded up (all values are >= 0)."""
    return (nano_tokens_per_mtok + TOKENS_PER_MTOK // 2) // TOKENS_PER_MTOK


__all__ = ["NANO_PER_USD", "CostBreakdown", "Price", "Rates", "Tier", "cost_breakdown", "cost_nano"]

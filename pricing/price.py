"""What one model costs per token class: base rates, long-context tiers, and their fallbacks.

Every rate is an integer count of nano-USD per million tokens, so a price such as $0.075/MTok
(75 nano-USD a token) stays exact; converting to dollars happens only at the display edge.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from pricing.money import usd_to_nano

Usd = Decimal | str | int


def _nano(usd: Usd | None) -> int | None:
    return None if usd is None else usd_to_nano(usd)


@dataclass(frozen=True, slots=True)
class Tier:
    """Rates for a request whose prompt is longer than `above_tokens` (LiteLLM's `*_above_200k_tokens`).

    Gemini 2.5 Pro and Claude's long-context pricing both charge the WHOLE request at the tier's
    rates once the prompt (cached and cache-write tokens included) exceeds the threshold; a class
    the tier leaves unset (None) keeps the base price, as LiteLLM's cost calculator does.
    """

    above_tokens: int
    input: int | None = None
    output: int | None = None
    cached_input: int | None = None
    cache_write: int | None = None
    cache_write_1h: int | None = None
    reasoning: int | None = None

    @classmethod
    def per_mtok(
        cls,
        above_tokens: int,
        *,
        input: Usd | None = None,
        output: Usd | None = None,
        cached_input: Usd | None = None,
        cache_write: Usd | None = None,
        cache_write_1h: Usd | None = None,
        reasoning: Usd | None = None,
    ) -> Tier:
        return cls(
            above_tokens=above_tokens,
            input=_nano(input),
            output=_nano(output),
            cached_input=_nano(cached_input),
            cache_write=_nano(cache_write),
            cache_write_1h=_nano(cache_write_1h),
            reasoning=_nano(reasoning),
        )


@dataclass(frozen=True, slots=True)
class Rates:
    """The six rates one request is billed at, every fallback already applied (nano-USD per MTok)."""

    input: int
    output: int
    cached_input: int
    cache_write: int
    cache_write_1h: int
    reasoning: int


@dataclass(frozen=True, slots=True)
class Price:
    """Per-million-token prices held as nano-USD per million tokens, so $0.075/MTok stays exact.

    Fallbacks for a class without its own price: cached reads and cache writes are billed as plain
    input, 1-hour cache writes as 5-minute ones, reasoning tokens as output. An embedding model
    has `output == 0`: its usage has prompt tokens only.
    """

    input: int
    output: int
    cached_input: int | None = None
    cache_write: int | None = None
    source: str = "config"
    cache_write_1h: int | None = None
    reasoning: int | None = None
    # Sorted by `above_tokens`, ascending; the highest threshold the prompt exceeds applies.
    tiers: tuple[Tier, ...] = ()

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.tiers, key=lambda tier: tier.above_tokens))
        if ordered != self.tiers:
            object.__setattr__(self, "tiers", ordered)

    @classmethod
    def per_mtok(
        cls,
        *,
        input: Usd,
        output: Usd,
        cached_input: Usd | None = None,
        cache_write: Usd | None = None,
        source: str = "config",
        cache_write_1h: Usd | None = None,
        reasoning: Usd | None = None,
        tiers: Iterable[Tier] = (),
    ) -> Price:
        return cls(
            input=usd_to_nano(input),
            output=usd_to_nano(output),
            cached_input=_nano(cached_input),
            cache_write=_nano(cache_write),
            source=source,
            cache_write_1h=_nano(cache_write_1h),
            reasoning=_nano(reasoning),
            tiers=tuple(tiers),
        )

    def tier_for(self, prompt_tokens: int) -> Tier | None:
        """The tier a prompt of this many tokens (cached and written ones included) falls in."""
        chosen = None
        for tier in self.tiers:
            if prompt_tokens > tier.above_tokens:
                chosen = tier
        return chosen

    def rates_for(self, prompt_tokens: int) -> Rates:
        """The rates a request with this many prompt tokens is billed at, fallbacks applied."""
        tier = self.tier_for(prompt_tokens) or _NO_TIER
        input = self.input if tier.input is None else tier.input
        output = self.output if tier.output is None else tier.output
        cached = _first(tier.cached_input, self.cached_input)
        write = _first(tier.cache_write, self.cache_write)
        write_1h = _first(tier.cache_write_1h, self.cache_write_1h)
        reasoning = _first(tier.reasoning, self.reasoning)
        write_5m = input if write is None else write
        return Rates(
            input=input,
            output=output,
            cached_input=input if cached is None else cached,
            cache_write=write_5m,
            cache_write_1h=write_5m if write_1h is None else write_1h,
            reasoning=output if reasoning is None else reasoning,
        )


_NO_TIER = Tier(above_tokens=0)


def _first(preferred: int | None, fallback: int | None) -> int | None:
    return fallback if preferred is None else preferred


__all__ = ["Price", "Rates", "Tier"]

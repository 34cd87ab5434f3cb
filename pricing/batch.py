"""The Batch API's price of a model: the catalog's own `*_batches` rates where the table has them
(OpenAI and Anthropic charge half, but not always exactly half of every class), else the standard
price times a configured discount. Pure: a `Price` and a table entry in, a `Price` out."""

from __future__ import annotations

from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pricing.litellm_table import to_price
from pricing.price import Price, Tier

# LiteLLM's `*_batches` fields, by the plain rate field they stand in for.
_BATCH_FIELDS = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost",
    "cache_creation_input_token_cost_above_1hr",
    "output_cost_per_reasoning_token",
)


def batch_price(price: Price, entry: dict[str, Any] | None, *, discount: Decimal) -> Price:
    """What one batch item is billed at. A price from the catalog with batch rates takes them (a
    class without its own batch rate is discounted); any other price (config, GPU cost model) is
    the standard one times `discount`."""
    if entry is not None and price.source.startswith("litellm:") and _has_batch_rates(entry):
        swapped = {**entry}
        for name in _BATCH_FIELDS:
            if f"{name}_batches" in entry:
                swapped[name] = entry[f"{name}_batches"]
            elif name in entry:
                swapped[name] = Decimal(repr(entry[name])) * discount
        # Long-context tiers have no batch column: they are discounted like the classes above.
        swapped = {k: v for k, v in swapped.items() if not _tiered(k)}
        batch = to_price(price.source.removeprefix("litellm:"), _as_floats(swapped))
        if batch is not None:
            tiers = tuple(_discounted_tier(tier, discount) for tier in price.tiers)
            return replace(batch, tiers=tiers, source=f"{price.source}:batch")
    return discounted(price, discount)


def discounted(price: Price, discount: Decimal) -> Price:
    """Every rate of `price` (its tiers too) times `discount`, rounded half up to whole nano-USD/MTok."""
    return replace(
        price,
        input=_times(price.input, discount),
        output=_times(price.output, discount),
        cached_input=_maybe(price.cached_input, discount),
        cache_write=_maybe(price.cache_write, discount),
        cache_write_1h=_maybe(price.cache_write_1h, discount),
        reasoning=_maybe(price.reasoning, discount),
        tiers=tuple(_discounted_tier(tier, discount) for tier in price.tiers),
        source=f"{price.source}:batch_discount",
    )


def _tiered(field: str) -> bool:
    return field == "tiered_pricing" or ("_above_" in field and not field.endswith("_above_1hr"))


def _has_batch_rates(entry: dict[str, Any]) -> bool:
    return "input_cost_per_token_batches" in entry and "output_cost_per_token_batches" in entry


def _as_floats(entry: dict[str, Any]) -> dict[str, Any]:
    # to_price reads floats through repr(); a Decimal product goes back as its exact string's float.
    return {k: float(v) if isinstance(v, Decimal) else v for k, v in entry.items()}


def _times(rate: int, discount: Decimal) -> int:
    return int((Decimal(rate) * discount).to_integral_value(rounding=ROUND_HALF_UP))


def _maybe(rate: int | None, discount: Decimal) -> int | None:
    return None if rate is None else _times(rate, discount)


def _discounted_tier(tier: Tier, discount: Decimal) -> Tier:
    return replace(
        tier,
        input=_maybe(tier.input, discount),
        output=_maybe(tier.output, discount),
        cached_input=_maybe(tier.cached_input, discount),
        cache_write=_maybe(tier.cache_write, discount),
        cache_write_1h=_maybe(tier.cache_write_1h, discount),
        reasoning=_maybe(tier.reasoning, discount),
    )


__all__ = ["batch_price", "discounted"]

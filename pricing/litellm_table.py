"""Translation of one entry of LiteLLM's price table (USD per token, JSON floats) into a `Price`.

The table's numbers are short decimal literals (`3e-06`, `1.25e-07`). orjson hands them over as
floats, and `repr()` of a float is the shortest string that reads back to the same float, which
for these literals is the literal itself; `Decimal(repr(value))` therefore recovers the exact
decimal the table wrote, never the binary approximation (`Decimal(3e-06)` would be
0.00000299999999999999992...). A few entries carry float noise in the file itself
(`1.0000000000000001e-07`); rounding to whole nano-USD per MTok absorbs it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from pricing.money import TOKENS_PER_MTOK, usd_to_nano
from pricing.price import Price, Tier

# LiteLLM field -> Price/Tier attribute. Batch, flex and priority variants are not read: the
# gateway prices the standard service tier.
_FIELDS = {
    "input_cost_per_token": "input",
    "output_cost_per_token": "output",
    "cache_read_input_token_cost": "cached_input",
    "cache_creation_input_token_cost": "cache_write",
    "cache_creation_input_token_cost_above_1hr": "cache_write_1h",
    "output_cost_per_reasoning_token": "reasoning",
}
RATE_FIELDS = tuple(_FIELDS)
# `input_cost_per_token_above_200k_tokens`, `cache_creation_input_token_cost_above_1hr_above_200k_tokens`;
# "200k" means 200,000 tokens, as in LiteLLM's own cost calculator.
_TIER_FIELD = re.compile(r"^(?P<field>" + "|".join(_FIELDS) + r")_above_(?P<k>\d+)k_tokens$")
# Modes whose usage has no completion tokens: a missing output price means zero.
_INPUT_ONLY_MODES = {"embedding", "rerank", "moderation"}


def to_price(key: str, entry: dict[str, Any]) -> Price | None:
    """The `Price` of one table entry, or None when it is not priced per token."""
    rates = _rates(entry)
    bands = entry.get("tiered_pricing") or ()
    ranges = [band for band in bands if isinstance(band, dict) and "range" in band]
    base_band = next((band for band in ranges if _range_start(band) == 0), None)
    if "input" not in rates and base_band is not None:
        rates = {**_rates(base_band), **rates}
    if "output" not in rates and entry.get("mode") in _INPUT_ONLY_MODES and "input" in rates:
        rates["output"] = 0
    if "input" not in rates or "output" not in rates:
        return None
    return Price(
        input=rates["input"],
        output=rates["output"],
        cached_input=rates.get("cached_input"),
        cache_write=rates.get("cache_write"),
        cache_write_1h=rates.get("cache_write_1h"),
        reasoning=rates.get("reasoning"),
        tiers=_threshold_tiers(entry) + _range_tiers(ranges),
        source=f"litellm:{key}",
    )


def to_nano_per_mtok(usd_per_token: object) -> int | None:
    if isinstance(usd_per_token, bool) or not isinstance(usd_per_token, int | float):
        return None
    return usd_to_nano(Decimal(repr(usd_per_token)) * TOKENS_PER_MTOK)


def _rates(entry: dict[str, Any]) -> dict[str, int]:
    rates = {}
    for field, attribute in _FIELDS.items():
        nano = to_nano_per_mtok(entry.get(field))
        if nano is not None:
            rates[attribute] = nano
    return rates


def _threshold_tiers(entry: dict[str, Any]) -> tuple[Tier, ...]:
    by_threshold: dict[int, dict[str, int]] = {}
    for field, value in entry.items():
        match = _TIER_FIELD.match(field)
        nano = to_nano_per_mtok(value) if match else None
        if match and nano is not None:
            threshold = int(match["k"]) * 1000
            by_threshold.setdefault(threshold, {})[_FIELDS[match["field"]]] = nano
    return tuple(Tier(above_tokens=threshold, **rates) for threshold, rates in by_threshold.items())


def _range_tiers(ranges: list[dict[str, Any]]) -> tuple[Tier, ...]:
    """`tiered_pricing: [{range: [lo, hi], ...}]`: each band above zero becomes a tier above `lo`."""
    return tuple(
        Tier(above_tokens=_range_start(band), **_rates(band)) for band in ranges if _range_start(band) > 0
    )


def _range_start(band: dict[str, Any]) -> int:
    bounds = band.get("range")
    if isinstance(bounds, list) and bounds and isinstance(bounds[0], int | float):
        return int(bounds[0])
    return 0

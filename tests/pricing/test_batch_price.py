"""Batch prices: the catalog's `*_batches` rates where it has them, else the configured discount."""

from __future__ import annotations

from decimal import Decimal

from pricing.batch import batch_price
from pricing.catalog import PriceCatalog
from pricing.litellm_table import to_price
from pricing.price import Price


def test_catalog_batch_rates_are_used() -> None:
    entry = PriceCatalog.load().entry("gpt-4o-mini", provider="openai")
    assert entry is not None
    standard = to_price("gpt-4o-mini", entry)
    assert standard is not None
    batch = batch_price(standard, entry, discount=Decimal("0.9"))
    # $0.075 / $0.30 per MTok from the table's own columns, not 0.9 x the standard price.
    assert (batch.input, batch.output) == (75_000_000, 300_000_000)
    assert batch.source == "litellm:gpt-4o-mini:batch"


def test_config_price_takes_the_discount() -> None:
    price = Price.per_mtok(input="3", output="15", cached_input="0.30")
    batch = batch_price(price, None, discount=Decimal("0.5"))
    assert (batch.input, batch.output, batch.cached_input) == (1_500_000_000, 7_500_000_000, 150_000_000)
    assert batch.source == "config:batch_discount"

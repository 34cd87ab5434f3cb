"""Config prices layered over the catalog: an override always wins, unknown is said out loud."""

from __future__ import annotations

import pytest

from pricing.book import PRICE_UNKNOWN, PriceBook, price_source
from pricing.catalog import PriceCatalog
from pricing.price import Price


@pytest.fixture(scope="module")
def catalog() -> PriceCatalog:
    return PriceCatalog.load()


def test_a_config_override_wins_over_the_table(catalog: PriceCatalog) -> None:
    # A negotiated 20% discount on gpt-4o: $2 / $8 instead of $2.50 / $10.
    negotiated = Price.per_mtok(input="2", output="8")
    book = PriceBook(catalog, {"gpt-4o": negotiated})
    assert book.lookup("gpt-4o") is negotiated
    assert book.lookup("gpt-4o", provider="openai") is negotiated
    assert price_source(book.lookup("gpt-4o")) == "config"


def test_a_provider_qualified_override_applies_on_that_provider_only(catalog: PriceCatalog) -> None:
    azure = Price.per_mtok(input="2.75", output="11")
    book = PriceBook(catalog, {"azure/gpt-4o": azure})
    assert book.lookup("gpt-4o", provider="azure") is azure
    openai = book.lookup("gpt-4o", provider="openai")
    assert openai is not None and openai.source == "litellm:gpt-4o"


def test_models_the_config_does_not_price_come_from_the_table(catalog: PriceCatalog) -> None:
    book = PriceBook(catalog, {"my-fine-tune": Price.per_mtok(input="3", output="12")})
    price = book.lookup("claude-sonnet-4-5")
    assert price is not None and price.source == "litellm:claude-sonnet-4-5"
    assert book.version == catalog.version


def test_an_unknown_price_is_flagged_in_one_line(catalog: PriceCatalog) -> None:
    book = PriceBook(catalog)
    assert price_source(book.lookup("tollgate-imaginary-model")) == PRICE_UNKNOWN == "price_unknown"


def test_overrides_work_without_litellm() -> None:
    gpu = Price.per_mtok(input="0.06", output="0.77", source="gpu:2.50x1")
    book = PriceBook(PriceCatalog({}, version="litellm-not-installed"), {"llama-3.1-8b": gpu})
    assert price_source(book.lookup("llama-3.1-8b")) == "gpu:2.50x1"
    assert book.lookup("gpt-4o") is None

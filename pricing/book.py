"""Config prices layered over the catalog: negotiated discounts, fine-tunes and self-hosted models."""

from __future__ import annotations

from collections.abc import Mapping

from pricing.catalog import PriceCatalog
from pricing.price import Price

# What a ledger row's `price_source` says when no price was found; its cost is then 0.
PRICE_UNKNOWN = "price_unknown"


class PriceBook:
    """Answers "what does this model cost": a config override always wins over the table.

    `overrides` maps a model id (the public name or the upstream id; `{provider}/{model}` for a
    price that applies on one provider only) to its `Price`, typically `source="config"` or a GPU
    cost model's `source="gpu:…"`. Built once per config load; lookups do no I/O.
    """

    def __init__(self, catalog: PriceCatalog, overrides: Mapping[str, Price] | None = None) -> None:
        self.catalog = catalog
        self.overrides = dict(overrides or {})

    @property
    def version(self) -> str:
        """The catalog version, recorded on each ledger row so any cost can be re-derived."""
        return self.catalog.version

    def lookup(self, model: str, *, provider: str | None = None) -> Price | None:
        if provider and (price := self.overrides.get(f"{provider}/{model}")) is not None:
            return price
        if (price := self.overrides.get(model)) is not None:
            return price
        return self.catalog.lookup(model, provider=provider)


def price_source(price: Price | None) -> str:
    """The ledger's `price_source` for a lookup result: `price.source`, or `price_unknown`."""
    return PRICE_UNKNOWN if price is None else price.source


__all__ = ["PRICE_UNKNOWN", "PriceBook", "price_source"]

"""The price catalog: one version of the price table, by default the copy the package ships.

`pricing/data/prices-<date>.json` is LiteLLM's table trimmed to the fields Tollgate reads
(`python -m pricing.snapshot` writes it); a newer version can be stored in the database with
`tollgate prices update` and replaces it without an upgrade. `PriceCatalog.load()` reads and checks
the shipped table once at start-up; entries are turned into `Price` objects lazily, on the first
lookup of each key, and remembered. Nothing here does I/O after `load`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pricing.litellm_table import to_price
from pricing.price import Price
from pricing.table import PriceTable, TableError, parse_table

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).with_name("data")
TABLE_GLOB = "prices-*.json"
# A trailing release date: gpt-4o-2024-11-20, claude-sonnet-4-5-20250929, vertex's claude-…@20250929.
_DATE_SUFFIX = re.compile(r"[-@](?:\d{4}-\d{2}-\d{2}|\d{8})$")


def shipped_table() -> Path:
    """The table this release ships (the newest, should a checkout hold more than one)."""
    return max(DATA_DIR.glob(TABLE_GLOB), default=DATA_DIR / "prices-missing.json")


class PriceCatalog:
    """Prices, context windows and prompt-cache minimums by model, from one version of the table."""

    def __init__(self, entries: dict[str, Any], *, version: str) -> None:
        self._entries = entries
        self._prices: dict[str, Price | None] = {}
        self.version = version

    @classmethod
    def from_table(cls, table: PriceTable) -> PriceCatalog:
        return cls(table.models, version=table.version)

    @classmethod
    def load(cls, *, path: Path | None = None) -> PriceCatalog:
        """The table at `path` (Tollgate's shape or LiteLLM's), by default the shipped one; never raises.

        With an unreadable or invalid table the catalog is empty and its `version` says so, so
        every lookup returns None and the gateway marks rows `price_unknown`.
        """
        path = path or shipped_table()
        try:
            table = parse_table(path.read_bytes(), source=f"file {path.name}")
        except (OSError, TableError) as exc:
            log.warning("price table %s unusable, every price unknown: %s", path, exc)
            return cls({}, version=f"file-{path.name}+unreadable")
        return cls.from_table(table)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> Mapping[str, Any]:
        """Every entry by table key, read-only (what `tollgate prices update` compares against)."""
        return MappingProxyType(self._entries)

    def resolve(self, model: str, *, provider: str | None = None) -> str | None:
        """The table key a model id is priced by, or None.

        Tried in order: `{provider}/{model}` (LiteLLM keys provider-specific prices that way, e.g.
        `gemini/gemini-2.5-pro`, `vertex_ai/claude-sonnet-4-5`, `azure/gpt-4o`, and a bare key may
        be another provider's price), then `model` itself, then both again with a trailing date
        removed (`gpt-4o-2024-11-20` -> `gpt-4o`) — only reached when the dated key is absent.
        """
        undated = _DATE_SUFFIX.sub("", model)
        candidates = [model] if undated == model else [model, undated]
        for name in candidates:
            if provider and f"{provider}/{name}" in self._entries:
                return f"{provider}/{name}"
            if name in self._entries:
                return name
        return None

    def lookup(self, model: str, *, provider: str | None = None) -> Price | None:
        """The table's price for `model`, with `source="litellm:<key>"`; None when unknown."""
        key = self.resolve(model, provider=provider)
        if key is None:
            return None
        if key not in self._prices:
            entry = self._entries[key]
            self._prices[key] = to_price(key, entry) if isinstance(entry, dict) else None
        return self._prices[key]

    def entry(self, model: str, *, provider: str | None = None) -> dict[str, Any] | None:
        """The table's whole entry for `model` (capability flags and all), or None when unknown."""
        key = self.resolve(model, provider=provider)
        entry = self._entries.get(key) if key else None
        return entry if isinstance(entry, dict) else None

    def context_window(self, model: str, *, provider: str | None = None) -> int | None:
        return self._int_field(model, provider, "max_input_tokens")

    def cache_min_tokens(self, model: str, *, provider: str | None = None) -> int | None:
        """The shortest prompt the provider caches (LiteLLM's `prompt_cache_min_tokens`)."""
        return self._int_field(model, provider, "prompt_cache_min_tokens")

    def _int_field(self, model: str, provider: str | None, field: str) -> int | None:
        key = self.resolve(model, provider=provider)
        entry = self._entries.get(key) if key else None
        value = entry.get(field) if isinstance(entry, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return int(value)


__all__ = ["DATA_DIR", "TABLE_GLOB", "PriceCatalog", "shipped_table"]

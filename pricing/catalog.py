"""The price catalog: LiteLLM's bundled price table read as data (litellm itself is never imported).

`PriceCatalog.load()` reads and parses the table once at start-up (about 30 ms for its 3.4 MB);
entries are turned into `Price` objects lazily, on the first lookup of each key, and remembered.
Nothing here does I/O after `load`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import re
from pathlib import Path
from typing import Any

import orjson

from pricing.litellm_table import to_price
from pricing.price import Price

log = logging.getLogger(__name__)

TABLE_FILE = "litellm/model_prices_and_context_window_backup.json"
# A trailing release date: gpt-4o-2024-11-20, claude-sonnet-4-5-20250929, vertex's claude-…@20250929.
_DATE_SUFFIX = re.compile(r"[-@](?:\d{4}-\d{2}-\d{2}|\d{8})$")
_NOT_A_MODEL = "sample_spec"


class PriceCatalog:
    """Prices, context windows and prompt-cache minimums by model, from one version of the table."""

    def __init__(self, entries: dict[str, Any], *, version: str) -> None:
        self._entries = entries
        self._prices: dict[str, Price | None] = {}
        self.version = version

    @classmethod
    def load(cls, *, path: Path | None = None) -> PriceCatalog:
        """The table at `path`, by default the one installed with litellm; never raises.

        Without litellm, or with an unreadable table, the catalog is empty and its `version`
        says why, so every lookup returns None and the gateway marks rows `price_unknown`.
        """
        if path is None:
            try:
                distribution = importlib.metadata.distribution("litellm")
            except importlib.metadata.PackageNotFoundError:
                return cls({}, version="litellm-not-installed")
            # locate_file finds the data file without importing the package (importing litellm
            # would fetch a remote price map and pull in its dependencies).
            path = Path(str(distribution.locate_file(TABLE_FILE)))
            label = f"litellm-{distribution.version}"
        else:
            label = f"file-{path.name}"
        try:
            data = path.read_bytes()
            entries = orjson.loads(data)
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("price table %s unusable, every price unknown: %s", path, exc)
            return cls({}, version=f"{label}+unreadable")
        if not isinstance(entries, dict):
            log.warning("price table %s is not a mapping, every price unknown", path)
            return cls({}, version=f"{label}+unreadable")
        entries.pop(_NOT_A_MODEL, None)
        return cls(entries, version=f"{label}+sha256:{hashlib.sha256(data).hexdigest()[:8]}")

    def __len__(self) -> int:
        return len(self._entries)

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


__all__ = ["TABLE_FILE", "PriceCatalog"]

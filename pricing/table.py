"""The price table's format: the fields Tollgate keeps from LiteLLM's table, and the checks a table
must pass before it prices anything.

Two shapes are read. LiteLLM's `model_prices_and_context_window.json` (model -> entry) is trimmed to
the known fields below: the rest (image, audio, search prices, deprecation notes, …) is dropped and
counted, since that file grows new fields every release. Tollgate's own shape, `{"tollgate_price_table":
1, "source", "date", "models"}`, is what the package ships and the database stores; there an unknown
field is refused, because nothing but this module writes it. Either way a problem is one line naming
the model and the field. Pure: bytes in, a `PriceTable` (or `TableError`) out.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from datetime import date as Date
from typing import Any

import orjson

from pricing.litellm_table import RATE_FIELDS, to_price

FORMAT = 1
_FORMAT_KEY = "tollgate_price_table"
_WRAPPER_KEYS = frozenset({_FORMAT_KEY, "source", "date", "models"})
# A rate, its long-context tiers (`_above_200k_tokens`) and the Batch API's half price (`_batches`).
_RATE = re.compile(r"^(?:" + "|".join(RATE_FIELDS) + r")(?:_above_\d+k_tokens)?(?:_batches)?$")
_COUNTS = frozenset({"max_input_tokens", "max_output_tokens", "prompt_cache_min_tokens"})
# What routing reads (gateway/routing/capabilities.py) and prompt caching may.
_FLAGS = frozenset(
    {"supports_function_calling", "supports_response_schema", "supports_vision", "supports_prompt_caching"}
)
_TEXTS = frozenset({"mode", "litellm_provider"})
_BANDS = "tiered_pricing"
_LITELLM_TEMPLATE = "sample_spec"  # LiteLLM's documentation entry, not a model


class TableError(ValueError):
    """A table that must not price anything; the message is one line."""


@dataclass(frozen=True, slots=True)
class PriceTable:
    """One version of the price table: model -> entry (known fields only), and where it came from."""

    models: dict[str, dict[str, Any]]
    source: str
    date: str
    dropped_fields: int = 0

    def to_json(self) -> bytes:
        """Tollgate's shape, keys sorted, so the same prices always give the same bytes."""
        body = {_FORMAT_KEY: FORMAT, "source": self.source, "date": self.date, "models": self.models}
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)

    @property
    def digest(self) -> str:
        """SHA-256 of the prices alone (not of where they came from)."""
        return hashlib.sha256(orjson.dumps(self.models, option=orjson.OPT_SORT_KEYS)).hexdigest()

    @property
    def version(self) -> str:
        """What each ledger row's `price_version` names: `prices-<date>+sha256:<8 hex>`."""
        return f"prices-{self.date}+sha256:{self.digest[:8]}"

    def priced(self) -> int:
        """How many models have a per-token price (the rest have only windows and flags)."""
        return sum(1 for key, entry in self.models.items() if to_price(key, entry) is not None)


def parse_table(data: bytes, *, source: str, date: str | None = None) -> PriceTable:
    """Validate `data` in either shape; `source` and `date` label a LiteLLM-shaped table (whose
    file says neither). Raises `TableError` with the first problem found."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TableError(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise TableError("not a JSON object of model -> prices")
    if _FORMAT_KEY in document:
        return _from_tollgate(document)
    document.pop(_LITELLM_TEMPLATE, None)
    models, dropped = _entries(document, strict=False)
    day = _day(date or Date.today().isoformat())
    return _checked(PriceTable(models, source=source, date=day, dropped_fields=dropped))


def _from_tollgate(document: dict[str, Any]) -> PriceTable:
    if unknown := sorted(set(document) - _WRAPPER_KEYS):
        raise TableError(f"unknown top-level field {unknown[0]!r}")
    if document[_FORMAT_KEY] != FORMAT:
        found = document[_FORMAT_KEY]
        raise TableError(f"{_FORMAT_KEY} {found!r} is not a format this release reads ({FORMAT})")
    source, day, models = document.get("source"), document.get("date"), document.get("models")
    if not isinstance(source, str) or not source:
        raise TableError("'source' must say where the prices came from")
    if not isinstance(models, dict):
        raise TableError("'models' must be an object of model -> prices")
    entries, _ = _entries(models, strict=True)
    return _checked(PriceTable(entries, source=source, date=_day(day)))


def _checked(table: PriceTable) -> PriceTable:
    if not any(to_price(key, entry) is not None for key, entry in table.models.items()):
        raise TableError("no model in it has a per-token price")
    return table


def _day(value: object) -> str:
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            return Date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise TableError(f"'date' must be YYYY-MM-DD, not {value!r}")


def _entries(models: dict[str, Any], *, strict: bool) -> tuple[dict[str, dict[str, Any]], int]:
    kept: dict[str, dict[str, Any]] = {}
    dropped = 0
    for model, entry in models.items():
        if not isinstance(entry, dict):
            raise TableError(f"model {model!r}: its entry is not an object")
        fields: dict[str, Any] = {}
        for field, value in entry.items():
            if not _known(field):
                if strict:
                    raise TableError(f"model {model!r}: unknown field {field!r}")
                dropped += 1
                continue
            fields[field] = _value(model, field, value, strict=strict)
        kept[model] = fields
    return kept, dropped


def _known(field: str) -> bool:
    return (
        bool(_RATE.match(field)) or field in _COUNTS or field in _FLAGS or field in _TEXTS or field == _BANDS
    )


def _value(model: str, field: str, value: Any, *, strict: bool) -> Any:
    where = f"model {model!r} field {field!r}"
    if field in _FLAGS:
        if not isinstance(value, bool):
            raise TableError(f"{where}: {value!r} is not true or false")
        return value
    if field in _TEXTS:
        if not isinstance(value, str):
            raise TableError(f"{where}: {value!r} is not text")
        return value
    if field == _BANDS:
        return _bands(where, value, strict=strict)
    number = _non_negative(where, value)
    if field in _COUNTS:
        if number != int(number):
            raise TableError(f"{where}: {value!r} is not a whole number of tokens")
        return int(number)
    return number


def _non_negative(where: str, value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TableError(f"{where}: {value!r} is not a number")
    if value < 0:
        raise TableError(f"{where}: {value!r} is negative")
    return value


def _bands(where: str, bands: Any, *, strict: bool) -> list[dict[str, Any]]:
    """`tiered_pricing: [{range: [lo, hi], input_cost_per_token: …}, …]`, LiteLLM's other tier shape."""
    if not isinstance(bands, list):
        raise TableError(f"{where}: not a list of price bands")
    kept = []
    for number, band in enumerate(bands):
        at = f"{where} band {number}"
        if not isinstance(band, dict):
            raise TableError(f"{at}: not an object")
        if "range" not in band and not strict:
            continue  # priced per query or per result, not per token (LiteLLM's search tools)
        bounds = band.get("range")
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise TableError(f"{at}: 'range' must be [from, to] in tokens")
        fields: dict[str, Any] = {"range": [_non_negative(f"{at} range", bound) for bound in bounds]}
        for field, value in band.items():
            if field == "range":
                continue
            if field not in RATE_FIELDS:
                if strict:
                    raise TableError(f"{at}: unknown field {field!r}")
                continue
            fields[field] = _non_negative(f"{at} field {field!r}", value)
        kept.append(fields)
    return kept


__all__ = ["FORMAT", "PriceTable", "TableError", "parse_table"]

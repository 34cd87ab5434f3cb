"""Anthropic's ``GET /v1/models`` (paged list) and ``GET /v1/models/{model_id}``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from sandbox.anthropic.errors import request_id
from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange

__all__ = ["DEFAULT_MODELS", "AnthropicModels"]

# Listed when no --model is given (any name is still accepted): display name and
# created_at, the epoch where the release date is not known (as the API allows).
DEFAULT_MODELS = {
    "claude-sonnet-4-6": ("Claude Sonnet 4.6", "1970-01-01T00:00:00Z"),
    "claude-opus-4-6": ("Claude Opus 4.6", "1970-01-01T00:00:00Z"),
    "claude-haiku-4-5-20251001": ("Claude Haiku 4.5", "2025-10-01T00:00:00Z"),
}


class AnthropicModels:
    """Model cards in Anthropic's ``{"type": "model", ...}`` shape."""

    def __init__(self, config: SandboxConfig, max_tokens: int, check_model: Callable[[str], None]) -> None:
        self._config = config
        self._max_tokens = max_tokens
        self._check_model = check_model

    def _card(self, model: str) -> dict[str, Any]:
        name, created = DEFAULT_MODELS.get(model, (model, "1970-01-01T00:00:00Z"))
        return {
            "type": "model",
            "id": model,
            "display_name": name,
            "created_at": created,
            "lifecycle": "active",
            "max_input_tokens": self._config.model_len,
            "max_tokens": self._max_tokens,
        }

    async def list_models(self, ex: Exchange) -> None:
        """``GET /v1/models`` (``limit`` is honoured; one page otherwise)."""
        cards = [self._card(m) for m in self._config.models or tuple(DEFAULT_MODELS)]
        raw = ex.query("limit")
        limit = int(raw) if raw and raw.isdigit() else 20
        page = cards[: max(limit, 1)]
        body = {
            "data": page,
            "has_more": len(cards) > len(page),
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        }
        await ex.respond(200, orjson.dumps(body), headers=[("request-id", request_id())])

    async def retrieve_model(self, ex: Exchange, model: str) -> None:
        """``GET /v1/models/{model_id}``."""
        self._check_model(model)
        await ex.respond(200, orjson.dumps(self._card(model)), headers=[("request-id", request_id())])

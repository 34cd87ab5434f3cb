"""Gemini's ``GET /v1beta/models`` and ``GET /v1beta/models/{model}``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange

__all__ = ["DEFAULT_MODELS", "GeminiModels"]

# Listed when no --model is given (any name is still accepted).
DEFAULT_MODELS = ("gemini-2.5-flash", "gemini-2.5-pro", "gemini-embedding-001")
_JSON = b"application/json; charset=UTF-8"
_GENERATE = ["generateContent", "countTokens", "createCachedContent", "batchGenerateContent"]
_EMBED = ["embedContent", "countTextTokens", "countTokens"]


class GeminiModels:
    """Model resources (``name: "models/..."``) with their limits and supported methods."""

    def __init__(self, config: SandboxConfig, check_model: Callable[[str, str], None]) -> None:
        self._config = config
        self._check_model = check_model

    def _card(self, model: str) -> dict[str, Any]:
        embedding = "embedding" in model
        card: dict[str, Any] = {
            "name": f"models/{model}",
            "version": "001",
            "displayName": model.replace("-", " ").title(),
            "description": f"Sandbox emulation of {model}",
            "inputTokenLimit": 2048 if embedding else self._config.model_len,
            "outputTokenLimit": 1 if embedding else 65_536,
            "supportedGenerationMethods": _EMBED if embedding else _GENERATE,
        }
        if not embedding:
            card.update(temperature=1, topP=0.95, topK=64, maxTemperature=2, thinking=True)
        return card

    async def list_models(self, ex: Exchange) -> None:
        """``GET /v1beta/models``."""
        cards = [self._card(m) for m in self._config.models or DEFAULT_MODELS]
        await ex.respond(200, orjson.dumps({"models": cards}), content_type=_JSON)

    async def get_model(self, ex: Exchange, model: str) -> None:
        """``GET /v1beta/models/{model}``."""
        self._check_model(model, "get")
        await ex.respond(200, orjson.dumps(self._card(model)), content_type=_JSON)

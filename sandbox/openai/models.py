"""``GET /v1/models`` and ``GET /v1/models/{model}`` as OpenAI and vLLM answer them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange

__all__ = ["OpenAIModels"]

_VLLM_PERMISSION = {
    "id": "modelperm-sandbox",
    "object": "model_permission",
    "allow_create_engine": False,
    "allow_sampling": True,
    "allow_logprobs": True,
    "allow_search_indices": False,
    "allow_view": True,
    "allow_fine_tuning": False,
    "organization": "*",
    "group": None,
    "is_blocking": False,
}


class OpenAIModels:
    """Model cards: OpenAI's four fields, or vLLM's with root, max_model_len and permissions."""

    def __init__(
        self,
        config: SandboxConfig,
        served: Callable[[], tuple[str, ...]],
        check_model: Callable[[str], None],
    ) -> None:
        self._config = config
        self._served = served
        self._check_model = check_model
        self._vllm = config.dialect == "vllm"
        self.created = int(time.time())

    async def list_models(self, ex: Exchange) -> None:
        """``GET /v1/models``."""
        cards = [self._card(m) for m in self._served()]
        await ex.respond(200, orjson.dumps({"object": "list", "data": cards}))

    async def retrieve_model(self, ex: Exchange, model: str) -> None:
        """``GET /v1/models/{model}``."""
        self._check_model(model)
        await ex.respond(200, orjson.dumps(self._card(model)))

    def _card(self, model: str) -> dict[str, Any]:
        card: dict[str, Any] = {
            "id": model,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm" if self._vllm else "system",
        }
        if self._vllm:
            card.update(root=model, parent=None, max_model_len=self._config.model_len)
            card["permission"] = [_VLLM_PERMISSION | {"created": self.created}]
        return card

"""Gemini ``:embedContent`` and ``:batchEmbedContents``: deterministic vectors in Google's shape."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange
from sandbox.core.embeddings import embed_text
from sandbox.core.latency import LatencyProfile
from sandbox.core.tokens import count_tokens
from sandbox.gemini.errors import invalid
from sandbox.gemini.request import field, unknown_fields

__all__ = ["GeminiEmbeddings"]

_MAX_BATCH = 100
_MAX_DIMS = 3072
_FIELDS = {"model", "content", "taskType", "title", "outputDimensionality"}


class GeminiEmbeddings:
    """One vector per request; latency is the profile's prefill of the input tokens."""

    def __init__(
        self, config: SandboxConfig, profile: LatencyProfile, check_model: Callable[[str, str], None]
    ) -> None:
        self._config = config
        self._profile = profile
        self._check_model = check_model

    def _vector(self, request: object, where: str, model: str) -> tuple[list[float], int]:
        if not isinstance(request, Mapping):
            raise invalid(f"* {where}: must be an object\n")
        unknown_fields(request, _FIELDS)
        named = request.get("model")
        if named is not None and named != f"models/{model}":
            raise invalid(f"* {where}.model: the model in each request must match the model in the URL\n")
        content = request.get("content")
        parts = content.get("parts") if isinstance(content, Mapping) else None
        if not isinstance(parts, list) or not parts:
            raise invalid(f"* {where}.content: content is not specified\n")
        text = " ".join(str(field(p, "text") or "") for p in parts if isinstance(p, Mapping))
        dims = field(request, "outputDimensionality") or self._config.embedding_dims
        if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= _MAX_DIMS:
            raise invalid(f"* {where}.output_dimensionality: must be between 1 and {_MAX_DIMS}\n")
        return embed_text(text, dimensions=dims, seed=self._config.seed), count_tokens(text)

    async def _pace(self, tokens: int) -> None:
        delay = self._profile.time_to_first_token(tokens)
        if delay > 0:
            await asyncio.sleep(delay)

    async def embed(self, ex: Exchange, model: str) -> None:
        """``POST /v1beta/models/{model}:embedContent``."""
        self._check_model(model, "embedContent")
        vector, tokens = self._vector(ex.payload, "EmbedContentRequest", model)
        await self._pace(tokens)
        await ex.respond(200, orjson.dumps({"embedding": {"values": vector}}))

    async def batch(self, ex: Exchange, model: str) -> None:
        """``POST /v1beta/models/{model}:batchEmbedContents``."""
        self._check_model(model, "batchEmbedContents")
        body: Any = ex.payload
        if not isinstance(body, Mapping):
            raise invalid("Invalid JSON payload received. Expected an object.")
        unknown_fields(body, {"requests"})
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise invalid("* BatchEmbedContentsRequest.requests: requests is not specified\n")
        if len(requests) > _MAX_BATCH:
            raise invalid(
                f"* BatchEmbedContentsRequest.requests: at most {_MAX_BATCH} requests can be in one batch\n"
            )
        where = "BatchEmbedContentsRequest.requests"
        results = [self._vector(r, f"{where}[{i}]", model) for i, r in enumerate(requests)]
        await self._pace(sum(tokens for _, tokens in results))
        embeddings = [{"values": vector} for vector, _ in results]
        await ex.respond(200, orjson.dumps({"embeddings": embeddings}))

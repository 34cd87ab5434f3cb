"""``POST /v1/embeddings`` in the OpenAI (and vLLM) wire format, float or base64."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from typing import Any

import orjson

from sandbox.config import SandboxConfig
from sandbox.core.asgi import Exchange
from sandbox.core.embeddings import embed_text, embed_tokens, to_base64
from sandbox.core.latency import LatencyProfile
from sandbox.core.tokens import count_tokens
from sandbox.openai.errors import ApiError
from sandbox.openai.request import require_model

__all__ = ["OpenAIEmbeddings"]

_MAX_INPUTS = 2048


class OpenAIEmbeddings:
    """Deterministic embeddings; latency is the profile's prefill of the input tokens."""

    def __init__(
        self,
        config: SandboxConfig,
        profile: LatencyProfile,
        check_model: Callable[[str], None],
    ) -> None:
        self._config = config
        self._profile = profile
        self._check_model = check_model
        self._vllm = config.dialect == "vllm"

    async def handle(self, ex: Exchange) -> None:
        """Answer one embeddings request."""
        body = ex.payload
        model = require_model(body)
        self._check_model(model)
        inputs = _inputs(body.get("input"))
        dims = body.get("dimensions") or self._config.embedding_dims
        if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= 8192:
            raise ApiError(
                400, "Invalid 'dimensions': expected an integer from 1 to 8192.", param="dimensions"
            )
        fmt = body.get("encoding_format") or "float"
        if fmt not in ("float", "base64"):
            raise ApiError(
                400,
                f"Invalid value: '{fmt}'. Supported values are: 'float' and 'base64'.",
                param="encoding_format",
                code="invalid_value",
            )
        seed = self._config.seed
        data: list[dict[str, Any]] = []
        tokens = 0
        for index, item in enumerate(inputs):
            if isinstance(item, str):
                tokens += count_tokens(item)
                vector = embed_text(item, dimensions=dims, seed=seed)
            else:
                tokens += len(item)
                vector = embed_tokens(item, dimensions=dims, seed=seed)
            value: object = to_base64(vector) if fmt == "base64" else vector
            data.append({"object": "embedding", "index": index, "embedding": value})
        delay = self._profile.time_to_first_token(tokens)
        if delay > 0:
            await asyncio.sleep(delay)
        usage: dict[str, Any] = {"prompt_tokens": tokens, "total_tokens": tokens}
        reply: dict[str, Any] = {"object": "list", "data": data, "model": model, "usage": usage}
        if self._vllm:
            usage.update(completion_tokens=0, prompt_tokens_details=None)
            embd_id = "embd-" + hashlib.blake2b(ex.body, digest_size=16).hexdigest()
            reply.update(id=embd_id, created=int(time.time()))
        await ex.respond(200, orjson.dumps(reply))


def _inputs(value: object) -> list[str | list[int]]:
    """Normalise ``input``: a string, strings, a token list or token lists."""
    if value is None:
        raise ApiError(
            400, "Missing required parameter: 'input'.", param="input",
            code="missing_required_parameter",
        )  # fmt: skip
    invalid = ApiError(
        400,
        "'$.input' is invalid. Please check the API reference: "
        "https://platform.openai.com/docs/api-reference.",
        param="input",
    )
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or len(value) > _MAX_INPUTS:
        raise invalid
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [list(value)]
    items: list[str | list[int]] = []
    for item in value:
        if isinstance(item, str) and item:
            items.append(item)
        elif isinstance(item, list) and item and all(isinstance(t, int) for t in item):
            items.append(item)
        else:
            raise invalid
    return items

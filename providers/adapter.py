"""The small protocol every provider adapter implements, and the capability names it may claim."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol, runtime_checkable

from providers.types import ChatRequest, Completion, EmbeddingRequest, StreamChunk, Target

CHAT = "chat"
STREAM = "stream"
EMBEDDINGS = "embeddings"
# Legacy text completions (`/v1/completions`): OpenAI-compatible upstreams only.
COMPLETIONS = "completions"


@runtime_checkable
class Adapter(Protocol):
    """Sends canonical requests to one upstream and answers in OpenAI's shape.

    `stream` yields chunks as they arrive; it raises a `ProviderError` before the first chunk for a
    failed request and mid-stream for a broken one, and closes the upstream when closed itself.
    """

    name: str
    capabilities: frozenset[str]

    async def complete(self, request: ChatRequest, target: Target) -> Completion: ...

    def stream(self, request: ChatRequest, target: Target) -> AsyncGenerator[StreamChunk, None]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class EmbeddingAdapter(Protocol):
    """An optional ability: adapters that claim `EMBEDDINGS` also implement this.

    The answer is OpenAI's embeddings list shape (`{"object": "list", "data": [...], "usage"}`).
    """

    async def embed(self, request: EmbeddingRequest, target: Target) -> Completion: ...


@runtime_checkable
class TokenCounter(Protocol):
    """An optional ability: an upstream that counts a Messages request's input tokens itself
    (Anthropic's free `POST /v1/messages/count_tokens`). The answer is the upstream's own body
    (`{"input_tokens": N}`); `body` is the client's Anthropic-shaped request."""

    async def count_tokens(self, body: dict[str, object], target: Target) -> Completion: ...

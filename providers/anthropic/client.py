"""The Anthropic Messages adapter: translate, POST `/v1/messages`, map failures, decode the stream."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson

from providers.adapter import CHAT, STREAM
from providers.anthropic.caching import min_cache_tokens, place_cache_breakpoints
from providers.anthropic.errors import error_from_response
from providers.anthropic.stream import AnthropicStreamDecoder
from providers.anthropic.translate import from_anthropic_response, from_anthropic_usage, to_anthropic_request
from providers.errors import ProviderError, UpstreamBadResponse
from providers.http import HTTPFailure, Timeouts, UpstreamHTTP
from providers.sse import ServerSentEvent, SSEDecoder
from providers.streaming import UpstreamCalls, error_from_exception
from providers.types import JSON, ChatRequest, Completion, StreamChunk, Target, Usage

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


class AnthropicAdapter:
    """Chat completions served by Anthropic's Messages API, answered in OpenAI's shape.

    `max_tokens` is required upstream: when the client sends none, the model's entry in
    `max_tokens_by_model` (its output limit, from config) is used, else `default_max_tokens`.
    """

    capabilities = frozenset({CHAT, STREAM})

    def __init__(
        self,
        *,
        name: str,
        client: UpstreamHTTP,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        max_tokens_by_model: Mapping[str, int] | None = None,
        cache_min_tokens_by_model: Mapping[str, int] | None = None,
    ) -> None:
        self.name = name
        self._cache_min_tokens = dict(cache_min_tokens_by_model or {})
        root = base_url.rstrip("/")
        self._url = root + ("/messages" if root.endswith("/v1") else "/v1/messages")
        self._count_url = self._url + "/count_tokens"
        self._headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        self._headers.update(headers or {})
        if api_key:
            self._headers["x-api-key"] = api_key
        self._calls = UpstreamCalls(
            client, self._headers, Timeouts.for_total(timeout), name, error_from_response
        )
        self._default_max_tokens = default_max_tokens
        self._max_tokens_by_model = dict(max_tokens_by_model or {})

    def _payload(self, request: ChatRequest, target: Target, *, stream: bool) -> bytes:
        model = target.upstream_model
        default = self._max_tokens_by_model.get(model, self._default_max_tokens)
        try:
            body = to_anthropic_request(request.body, model=model, default_max_tokens=default)
        except ProviderError as exc:
            exc.provider = self.name
            raise
        if request.cache_ttl is not None:
            minimum = self._cache_min_tokens.get(model) or min_cache_tokens(model)
            body = place_cache_breakpoints(body, min_tokens=minimum, ttl=request.cache_ttl)
        if stream:
            body["stream"] = True
        return orjson.dumps(body)

    async def complete(self, request: ChatRequest, target: Target) -> Completion:
        content = self._payload(request, target, stream=False)
        raw = await self._calls.fetch(self._url, content)
        obj = self._parse(raw)
        try:
            body = from_anthropic_response(obj, created=int(time.time()))
        except ProviderError as exc:
            exc.provider = self.name
            raise
        return Completion(
            body=orjson.dumps(body), usage=from_anthropic_usage(obj.get("usage")), model=body["model"]
        )

    async def stream(self, request: ChatRequest, target: Target) -> AsyncGenerator[StreamChunk, None]:
        content = self._payload(request, target, stream=True)
        response = await self._calls.open_stream(self._url, content)
        try:
            decoder = AnthropicStreamDecoder(
                model=target.upstream_model, created=int(time.time()), provider=self.name
            )
            sse = SSEDecoder()
            frames: list[bytes] = []  # events that made no chunk yet: relayed with the next one
            async for raw in response.chunks():
                for event in sse.feed(raw):
                    for chunk in self._decode(decoder, event, frames):
                        yield chunk
            for event in sse.flush():
                for chunk in self._decode(decoder, event, frames):
                    yield chunk
            if not decoder.done:
                raise UpstreamBadResponse(
                    f"{self.name} ended the stream without message_stop", provider=self.name
                )
        except HTTPFailure as exc:
            raise error_from_exception(exc, provider=self.name) from exc
        finally:
            await response.aclose()

    async def count_tokens(self, body: JSON, target: Target) -> Completion:
        """The client's Messages request, counted by Anthropic (free of charge): its answer as sent."""
        raw = await self._calls.fetch(self._count_url, orjson.dumps({**body, "model": target.upstream_model}))
        counted = self._parse(raw).get("input_tokens")
        if not isinstance(counted, int) or isinstance(counted, bool):
            raise UpstreamBadResponse(f"{self.name} counted no input_tokens", provider=self.name)
        return Completion(body=raw, usage=Usage(), model=target.upstream_model)

    def _decode(
        self, decoder: AnthropicStreamDecoder, event: ServerSentEvent, frames: list[bytes]
    ) -> list[StreamChunk]:
        chunks = decoder.feed(event.event, self._parse(event.data))
        frames.append(_frame(event))
        if chunks:
            chunks[0].native = b"".join(frames)
            frames.clear()
        return chunks

    def _parse(self, data: bytes) -> Any:
        try:
            obj: JSON = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamBadResponse(
                f"{self.name} sent a body that is not JSON", provider=self.name
            ) from exc
        if not isinstance(obj, dict):
            raise UpstreamBadResponse(f"{self.name} sent JSON that is not an object", provider=self.name)
        return obj

    async def aclose(self) -> None:
        """The HTTP client is shared and owned by the app; nothing of ours to close."""


def _frame(event: ServerSentEvent) -> bytes:
    """The event framed again as Anthropic sent it (named, its data one line per `data:` field)."""
    head = b"event: " + event.event.encode() + b"\n" if event.event else b""
    return head + b"".join(b"data: " + line + b"\n" for line in event.data.split(b"\n")) + b"\n"

"""The Gemini adapter: translate, POST `generateContent` / `streamGenerateContent?alt=sse` /
`batchEmbedContents`, map failures, decode the stream."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import orjson

from providers.adapter import CHAT, EMBEDDINGS, STREAM
from providers.errors import ProviderError, UpstreamBadResponse
from providers.gemini.embeddings import from_gemini_embeddings, to_gemini_embeddings_request
from providers.gemini.errors import error_from_response
from providers.gemini.stream import GeminiStreamDecoder
from providers.gemini.translate import from_gemini_response, from_gemini_usage, to_gemini_request
from providers.http import HTTPFailure, Timeouts, UpstreamHTTP
from providers.sse import SSEDecoder
from providers.streaming import UpstreamCalls, error_from_exception
from providers.types import JSON, ChatRequest, Completion, EmbeddingRequest, StreamChunk, Target

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"


def model_path(model: str) -> str:
    """The resource name Gemini's URLs take: `models/<id>`, or a tuned model's own name."""
    return model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"


class GeminiAdapter:
    """Chat completions and embeddings served by the Gemini API, answered in OpenAI's shape."""

    capabilities = frozenset({CHAT, STREAM, EMBEDDINGS})

    def __init__(
        self,
        *,
        name: str,
        client: UpstreamHTTP,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        self.name = name
        root = base_url.rstrip("/")
        self._root = root if root.endswith("/v1beta") else root + "/v1beta"
        self._headers = {"content-type": "application/json", **(headers or {})}
        if api_key:
            self._headers["x-goog-api-key"] = api_key
        self._calls = UpstreamCalls(
            client, self._headers, Timeouts.for_total(timeout), name, error_from_response
        )

    def _url(self, target: Target, method: str) -> str:
        return f"{self._root}/{model_path(target.upstream_model)}:{method}"

    async def complete(self, request: ChatRequest, target: Target) -> Completion:
        payload = self._translate(to_gemini_request, request.body)
        obj = await self._post(self._url(target, "generateContent"), payload)
        body = from_gemini_response(
            obj, id=_completion_id(), created=int(time.time()), model=target.upstream_model
        )
        usage = from_gemini_usage(obj.get("usageMetadata"))
        return Completion(body=orjson.dumps(body), usage=usage, model=body["model"])

    async def embed(self, request: EmbeddingRequest, target: Target) -> Completion:
        model = model_path(target.upstream_model)
        payload = self._translate(lambda body: to_gemini_embeddings_request(body, model=model), request.body)
        obj = await self._post(self._url(target, "batchEmbedContents"), payload)
        try:
            body, usage = from_gemini_embeddings(obj, body=request.body, model=target.upstream_model)
        except ProviderError as exc:
            exc.provider = self.name
            raise
        return Completion(body=orjson.dumps(body), usage=usage, model=target.upstream_model)

    async def stream(self, request: ChatRequest, target: Target) -> AsyncGenerator[StreamChunk, None]:
        payload = self._translate(to_gemini_request, request.body)
        url = self._url(target, "streamGenerateContent") + "?alt=sse"
        response = await self._calls.open_stream(url, payload)
        try:
            decoder = GeminiStreamDecoder(
                id=_completion_id(), created=int(time.time()), model=target.upstream_model, provider=self.name
            )
            sse = SSEDecoder()
            async for raw in response.chunks():
                for event in sse.feed(raw):
                    for chunk in decoder.feed(self._parse(event.data)):
                        yield chunk
            for event in sse.flush():
                for chunk in decoder.feed(self._parse(event.data)):
                    yield chunk
            if not decoder.done:
                raise UpstreamBadResponse(
                    f"{self.name} ended the stream without a finish reason", provider=self.name
                )
            for chunk in decoder.finish():
                yield chunk
        except HTTPFailure as exc:
            raise error_from_exception(exc, provider=self.name) from exc
        finally:
            await response.aclose()

    def _translate(self, translate: Callable[[JSON], JSON], body: JSON) -> bytes:
        """Run a translator; a request it refuses names this provider before any network call."""
        try:
            return orjson.dumps(translate(body))
        except ProviderError as exc:
            exc.provider = self.name
            raise

    async def _post(self, url: str, content: bytes) -> Any:
        body = await self._calls.fetch(url, content)
        return self._parse(body)

    def _parse(self, data: bytes) -> Any:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamBadResponse(
                f"{self.name} sent a body that is not JSON", provider=self.name
            ) from exc
        if not isinstance(obj, dict):
            raise UpstreamBadResponse(f"{self.name} sent JSON that is not an object", provider=self.name)
        return obj

    async def aclose(self) -> None:
        """The HTTP client is shared and owned by the app; nothing of ours to close."""


def _completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"

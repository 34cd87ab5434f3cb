"""OpenAI-compatible upstreams (OpenAI, vLLM, Together, Groq, Fireworks, DeepSeek, Mistral, OpenRouter,
Ollama): the body goes out as the client sent it wherever possible, the answer comes back as is.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson

from providers.adapter import CHAT, COMPLETIONS, EMBEDDINGS, STREAM
from providers.errors import (
    ContextLengthExceeded,
    ProviderError,
    UpstreamBadResponse,
    UpstreamOverloaded,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
    parse_retry_after,
)
from providers.http import HTTPFailure, Timeouts, UpstreamHTTP
from providers.reasoning_params import to_reasoning_body
from providers.sse import DONE, SSEDecoder
from providers.streaming import UpstreamCalls, error_from_exception
from providers.types import JSON, ChatRequest, Completion, EmbeddingRequest, StreamChunk, Target
from usage import Usage


def to_openai_body(
    request: ChatRequest, target: Target, *, stream: bool, cache_key_ok: bool = False
) -> bytes:
    """The bytes to send upstream: the client's own when nothing has to change.

    Streams always ask for the usage chunk, because the ledger needs it whether or not the client did.
    A legacy completions request sends its own body; a reasoning model gets `max_completion_tokens`
    for `max_tokens` and none of the sampling parameters it refuses.
    """
    source = request.legacy if request.legacy is not None else request.body
    needs_usage = stream and not request.include_usage
    # Only OpenAI itself takes prompt_cache_key; other OpenAI-compatible servers may refuse unknown fields.
    cache_key = request.prompt_cache_key if cache_key_ok and "prompt_cache_key" not in source else None
    body, changes = to_reasoning_body(source) if target.reasoning else (source, [])
    if request.raw and request.model == target.upstream_model and not needs_usage and not changes:
        if cache_key is None:
            return request.raw
        # Splice the key in front rather than re-serialise a body that may be 200 KB: the body is a
        # non-empty JSON object, so '{' + the key + ',' + the rest is valid JSON.
        return b'{"prompt_cache_key":"' + cache_key.encode() + b'",' + request.raw.lstrip()[1:]
    body = dict(body)
    if cache_key is not None:
        body["prompt_cache_key"] = cache_key
    body["model"] = target.upstream_model
    if needs_usage:
        options = body.get("stream_options")
        body["stream_options"] = {
            **(options if isinstance(options, dict) else {}),
            "include_usage": True,
        }
    return orjson.dumps(body)


def from_openai_usage(usage: Any) -> Usage:
    """OpenAI's usage object, parsed (anything but a dict is no usage); vLLM omits the details
    objects, some servers send them as null. LiteLLM's usage (its own adapter, or a LiteLLM proxy
    behind an OpenAI-compatible one) is the same shape, but may carry Anthropic's cache reads and
    writes only in its extra top-level fields."""
    if not isinstance(usage, dict):
        return Usage()
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return Usage(
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int(prompt_details.get("cached_tokens") or usage.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(
            prompt_details.get("cache_write_tokens") or usage.get("cache_creation_input_tokens") or 0
        ),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
        raw=usage,
    )


def to_openai_usage(usage: Usage) -> JSON:
    """The OpenAI `usage` object for a canonical `Usage`, cache writes included as OpenAI now reports."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def from_openai_chunk(data: bytes) -> StreamChunk:
    """One streamed chunk, parsed once; an `error` object mid-stream becomes a `ProviderError`."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UpstreamBadResponse(f"upstream sent a stream chunk that is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise UpstreamBadResponse("upstream sent a stream chunk that is not a JSON object")
    if "error" in obj:
        raise _stream_error(obj["error"])
    usage = obj.get("usage")
    choices = obj.get("choices")
    chars = 0
    if choices:
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict):
                chars += len(delta.get("content") or "") + _tool_chars(delta.get("tool_calls"))
            elif isinstance(choice, dict) and isinstance(choice.get("text"), str):
                chars += len(choice["text"])  # a legacy completions chunk
    return StreamChunk(
        data=data,
        usage=from_openai_usage(usage) if usage else None,
        usage_only=bool(usage) and not choices,
        model=obj.get("model"),
        content_chars=chars,
    )


def _tool_chars(tool_calls: Any) -> int:
    if not isinstance(tool_calls, list):
        return 0
    return sum(
        len(str((call.get("function") or {}).get("arguments") or ""))
        for call in tool_calls
        if isinstance(call, dict)
    )


def error_from_response(
    status: int, headers: Mapping[str, str], body: bytes, *, provider: str
) -> ProviderError:
    """Every non-2xx answer from an OpenAI-compatible upstream, classified in one place."""
    message, code = _error_message(body, status)
    retry_after = parse_retry_after(headers.get("retry-after-ms")) if "retry-after-ms" in headers else None
    if retry_after is not None:
        retry_after /= 1000
    else:
        retry_after = parse_retry_after(headers.get("retry-after"))
    text = f"{provider} returned {status}: {message}"
    common: dict[str, Any] = {
        "provider": provider,
        "upstream_status": status,
        "retry_after": retry_after,
    }
    if status == 429 and code == "insufficient_quota":
        return UpstreamRejected(text, status=429, code="insufficient_quota", **common)
    if status == 529:
        return UpstreamOverloaded(text, **common)
    if status == 429:
        return UpstreamRateLimited(text, **common)
    if status == 408:
        return UpstreamTimeout(text, **common)
    if code == "context_length_exceeded" or "maximum context length" in message:
        return ContextLengthExceeded(text, status=400, **common)
    if status in (401, 403):
        # The gateway's provider credential is wrong: the client's key is fine, so not a 401 for them.
        return UpstreamRejected(text, status=502, code="upstream_auth_failed", **common)
    if 400 <= status < 500:
        return UpstreamRejected(text, status=status, **common)
    return UpstreamUnavailable(text, **common)


class OpenAICompatAdapter:
    """Chat completions against any server that speaks OpenAI's API."""

    capabilities = frozenset({CHAT, STREAM, EMBEDDINGS, COMPLETIONS})

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        client: UpstreamHTTP,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        prompt_cache_key: bool = False,
    ) -> None:
        self.name = name
        self._prompt_cache_key = prompt_cache_key
        # Connect fast or fail over; a long answer may legitimately take minutes to finish.
        self._chat_url = base_url.rstrip("/") + "/chat/completions"
        self._embeddings_url = base_url.rstrip("/") + "/embeddings"
        self._completions_url = base_url.rstrip("/") + "/completions"
        self._headers = {"content-type": "application/json", **(headers or {})}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._calls = UpstreamCalls(
            client, self._headers, Timeouts.for_total(timeout), name, error_from_response
        )

    async def complete(self, request: ChatRequest, target: Target) -> Completion:
        content = to_openai_body(request, target, stream=False, cache_key_ok=self._prompt_cache_key)
        return await self._post_json(self._url_for(request), content, expect="choices")

    def _url_for(self, request: ChatRequest) -> str:
        return self._chat_url if request.legacy is None else self._completions_url

    async def embed(self, request: EmbeddingRequest, target: Target) -> Completion:
        if request.model == target.upstream_model:
            content = request.raw
        else:
            content = orjson.dumps({**request.body, "model": target.upstream_model})
        return await self._post_json(self._embeddings_url, content, expect="data")

    async def _post_json(self, url: str, content: bytes, *, expect: str) -> Completion:
        body = await self._calls.fetch(url, content)
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise UpstreamBadResponse(
                f"{self.name} answered with a body that is not JSON", provider=self.name
            ) from exc
        if not isinstance(obj, dict) or expect not in obj:
            raise UpstreamBadResponse(f"{self.name} answered without '{expect}'", provider=self.name)
        return Completion(
            body=body, usage=from_openai_usage(obj.get("usage")), model=str(obj.get("model", ""))
        )

    async def stream(self, request: ChatRequest, target: Target) -> AsyncGenerator[StreamChunk, None]:
        content = to_openai_body(request, target, stream=True, cache_key_ok=self._prompt_cache_key)
        response = await self._calls.open_stream(self._url_for(request), content)
        try:
            decoder = SSEDecoder()
            async for raw in response.chunks():
                events = decoder.feed(raw)
                last = len(events) - 1
                for i, event in enumerate(events):
                    if event.data == DONE:
                        await response.finish()  # keep the connection: the upstream is done
                        return
                    chunk = from_openai_chunk(event.data)
                    chunk.more_ready = i < last
                    yield chunk
            for event in decoder.flush():
                if event.data == DONE:
                    return
                yield from_openai_chunk(event.data)
            raise UpstreamBadResponse(f"{self.name} ended the stream without [DONE]", provider=self.name)
        except HTTPFailure as exc:
            raise error_from_exception(exc, provider=self.name) from exc
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        """The HTTP client is shared and owned by the app; nothing of ours to close."""


def _error_message(body: bytes, status: int) -> tuple[str, str | None]:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body[:300].decode("utf-8", "replace").strip()
        return (text or f"HTTP {status}"), None
    error = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        return str(error.get("message") or f"HTTP {status}"), (str(code) if code else None)
    if isinstance(obj, dict) and "message" in obj:  # vLLM before 0.10.1: a flat error object
        return str(obj["message"]), None
    return f"HTTP {status}", None


def _stream_error(error: JSON | Any) -> ProviderError:
    if not isinstance(error, dict):
        return UpstreamBadResponse(f"upstream stream error: {error!r}")
    message = str(error.get("message") or "upstream error mid-stream")
    code = str(error.get("code") or error.get("type") or "")
    if code == "overloaded_error":
        return UpstreamOverloaded(message)
    if code in ("rate_limit_exceeded", "rate_limit_error"):
        return UpstreamRateLimited(message)
    return UpstreamUnavailable(message)

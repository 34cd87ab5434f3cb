"""The long tail (Bedrock, Vertex AI, Cohere, ...) through LiteLLM's SDK, imported on first use only.

litellm is an optional extra, heavy to import: nothing here imports it at module import time, and it
is loaded with `LITELLM_LOCAL_MODEL_COST_MAP=True` so it never fetches a price map over the network.
Its exceptions are recognised by class name, so this module type-checks and imports without it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson

from providers.adapter import CHAT, EMBEDDINGS, STREAM
from providers.errors import (
    ContextLengthExceeded,
    ProviderError,
    UpstreamBadResponse,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
    UpstreamUnreachable,
    parse_retry_after,
)
from providers.openai_compat import from_openai_usage
from providers.types import JSON, ChatRequest, Completion, EmbeddingRequest, StreamChunk, Target

# litellm exception class name -> what it means here; the most specific class in the MRO wins, so
# ContextWindowExceededError (a BadRequestError) and Timeout (an APIConnectionError) come out right.
ERROR_KINDS = {
    "ContextWindowExceededError": "context",
    "RateLimitError": "rate_limited",
    "Timeout": "timeout",
    "APITimeoutError": "timeout",
    "APIConnectionError": "unreachable",
    "ServiceUnavailableError": "unavailable",
    "InternalServerError": "unavailable",
    "BadGatewayError": "unavailable",
    "AuthenticationError": "auth",
    "PermissionDeniedError": "auth",
    "BadRequestError": "rejected",
    "NotFoundError": "rejected",
    "UnprocessableEntityError": "rejected",
    "ContentPolicyViolationError": "rejected",
    "UnsupportedParamsError": "rejected",
}

# The client's fields that reach litellm: OpenAI's request parameters and nothing else. litellm's
# own keyword arguments include where to connect and with what (`base_url`, `api_base`, `api_key`,
# `extra_headers`, `aws_*`, `vertex_credentials`, ...), and a client `base_url` even beats the
# configured `api_base` (litellm.main: `api_base=base_url or kwargs.get("api_base")`), which would send
# the provider's credentials wherever the client points. So unknown fields are dropped, not passed.
CHAT_PARAMS = frozenset(
    {
        "temperature", "top_p", "n", "stop", "max_tokens", "max_completion_tokens",
        "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user",
        "tools", "tool_choice", "parallel_tool_calls", "functions", "function_call",
        "response_format", "seed", "reasoning_effort", "modalities", "audio", "prediction",
        "service_tier", "web_search_options", "safety_identifier", "verbosity", "thinking",
    }
)  # fmt: skip
EMBEDDING_PARAMS = frozenset({"input", "encoding_format", "dimensions", "user"})


def load_litellm() -> Any:
    """Import litellm now, never from the network's price map."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return importlib.import_module("litellm")


def litellm_installed() -> bool:
    if sys.modules.get("litellm") is not None:
        return True
    # find_spec answers None for a name blocked as `sys.modules["litellm"] = None`, too.
    return importlib.util.find_spec("litellm") is not None


class LiteLLMAdapter:
    """Chat completions, streams and embeddings through `litellm.acompletion` / `aembedding`.

    `model_prefix` is LiteLLM's provider route (`bedrock`, `vertex_ai`, `cohere`, ...), prepended to
    the upstream model id unless it is already there; `extra` goes to every call (e.g. `aws_region_name`,
    `vertex_project`, `drop_params`).
    """

    capabilities = frozenset({CHAT, STREAM, EMBEDDINGS})

    def __init__(
        self,
        *,
        name: str,
        model_prefix: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        if not litellm_installed():
            raise RuntimeError(
                f"provider {name!r} needs litellm, which is not installed: pip install 'tollgate[litellm]'"
            )
        self.name = name
        self._prefix = model_prefix.strip("/") if model_prefix else None
        self._options: JSON = dict(extra or {})
        if api_key:
            self._options["api_key"] = api_key
        if base_url:
            self._options["api_base"] = base_url
        if timeout:
            self._options["timeout"] = timeout

    def _model(self, target: Target) -> str:
        model = target.upstream_model
        if self._prefix and not model.startswith(self._prefix + "/"):
            return f"{self._prefix}/{model}"
        return model

    def _chat_kwargs(self, request: ChatRequest, target: Target, *, stream: bool) -> JSON:
        params = {key: value for key, value in request.body.items() if key in CHAT_PARAMS}
        kwargs: JSON = {**params, **self._options}
        kwargs.update(model=self._model(target), messages=request.messages, stream=stream)
        if stream:
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    async def complete(self, request: ChatRequest, target: Target) -> Completion:
        litellm = load_litellm()
        try:
            response = await litellm.acompletion(**self._chat_kwargs(request, target, stream=False))
        except Exception as exc:
            raise error_from_litellm(exc, provider=self.name) from exc
        body = to_dict(response, provider=self.name)
        body["object"] = "chat.completion"
        model = str(body.get("model") or target.upstream_model)
        return Completion(body=dump(body), usage=from_openai_usage(body.get("usage")), model=model)

    async def embed(self, request: EmbeddingRequest, target: Target) -> Completion:
        litellm = load_litellm()
        params = {key: value for key, value in request.body.items() if key in EMBEDDING_PARAMS}
        try:
            response = await litellm.aembedding(**{**params, **self._options, "model": self._model(target)})
        except Exception as exc:
            raise error_from_litellm(exc, provider=self.name) from exc
        body = to_dict(response, provider=self.name)
        model = str(body.get("model") or target.upstream_model)
        return Completion(body=dump(body), usage=from_openai_usage(body.get("usage")), model=model)

    async def stream(self, request: ChatRequest, target: Target) -> AsyncGenerator[StreamChunk, None]:
        litellm = load_litellm()
        try:
            response = await litellm.acompletion(**self._chat_kwargs(request, target, stream=True))
        except Exception as exc:
            raise error_from_litellm(exc, provider=self.name) from exc
        chunks = LiteLLMStreamNormalizer(model=target.upstream_model, provider=self.name)
        try:
            async for chunk in response:
                out = chunks.feed(to_dict(chunk, provider=self.name))
                if out is not None:
                    yield out
        except ProviderError:
            raise
        except Exception as exc:
            raise error_from_litellm(exc, provider=self.name) from exc
        finally:
            close = getattr(response, "aclose", None)
            if close is not None:
                await close()
        yield chunks.finish()

    async def aclose(self) -> None:
        """litellm keeps its own module-level clients; nothing of ours to close."""


class LiteLLMStreamNormalizer:
    """LiteLLM's chunks held to the stream contract: one id and `created` throughout, usage removed
    from content chunks and sent once at the end in a usage-only chunk."""

    def __init__(self, *, model: str, provider: str = "") -> None:
        self.model = model
        self.provider = provider
        self._id: str | None = None
        self._created = 0
        self._usage: Any = None

    def feed(self, chunk: JSON) -> StreamChunk | None:
        usage = chunk.pop("usage", None)
        if usage:
            self._usage = usage
        if self._id is None:
            self._id = str(chunk.get("id") or "")
            self._created = int(chunk.get("created") or 0)
            self.model = str(chunk.get("model") or self.model)
        if not chunk.get("choices"):
            return None
        chunk.update(id=self._id, created=self._created, object="chat.completion.chunk")
        chunk.setdefault("model", self.model)
        return StreamChunk(data=dump(chunk), model=self.model, content_chars=_generated_chars(chunk))

    def finish(self) -> StreamChunk:
        usage = from_openai_usage(self._usage)
        body: JSON = {
            "id": self._id or "",
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self.model,
            "choices": [],
            "usage": self._usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
        return StreamChunk(data=dump(body), usage=usage, usage_only=True, model=self.model)


def _generated_chars(chunk: JSON) -> int:
    """Text, reasoning and tool-call argument characters: what a broken stream is billed from."""
    chars = 0
    for choice in chunk.get("choices") or ():
        delta = (choice.get("delta") if isinstance(choice, dict) else None) or {}
        chars += len(delta.get("content") or "") + len(delta.get("reasoning_content") or "")
        for call in delta.get("tool_calls") or ():
            chars += len(((call or {}).get("function") or {}).get("arguments") or "")
    return chars


def error_from_litellm(exc: Exception, *, provider: str) -> ProviderError:
    """Every litellm failure, classified by exception class name, then by status code."""
    kind = next((ERROR_KINDS[c.__name__] for c in type(exc).__mro__ if c.__name__ in ERROR_KINDS), None)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    if kind is None and status is not None:
        kind = (
            "rate_limited" if status in (429, 529) else "rejected" if 400 <= status < 500 else "unavailable"
        )
    text = f"{provider} (litellm) {type(exc).__name__}: {exc}"
    common: dict[str, Any] = {
        "provider": provider,
        "upstream_status": status,
        "retry_after": _retry_after(exc),
    }
    if kind == "context":
        return ContextLengthExceeded(text, status=400, **common)
    if kind == "rate_limited":
        return UpstreamRateLimited(text, **common)
    if kind == "timeout":
        return UpstreamTimeout(text, **common)
    if kind == "unreachable":
        return UpstreamUnreachable(text, **common)
    if kind == "auth":
        return UpstreamRejected(text, status=502, code="upstream_auth_failed", **common)
    if kind == "rejected":
        return UpstreamRejected(text, status=status if status and 400 <= status < 500 else 400, **common)
    if kind == "unavailable":
        return UpstreamUnavailable(text, **common)
    return UpstreamBadResponse(text, **common)


def _retry_after(exc: Exception) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None or not hasattr(headers, "get"):
        return None
    value = headers.get("retry-after")
    return parse_retry_after(str(value)) if value is not None else None


def to_dict(obj: Any, *, provider: str) -> JSON:
    """A litellm response object (pydantic) as a plain dict."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump()
    if not isinstance(obj, dict):
        raise UpstreamBadResponse(
            f"{provider} (litellm) answered with {type(obj).__name__}", provider=provider
        )
    return obj


def dump(obj: JSON) -> bytes:
    return orjson.dumps(obj, default=_jsonable)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return str(value)

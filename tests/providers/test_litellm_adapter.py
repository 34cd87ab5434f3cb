"""The LiteLLM adapter against a fake `litellm` module that an import hook serves on first import.

The hook proves the import is lazy and that `LITELLM_LOCAL_MODEL_COST_MAP` is set before it happens;
the fake's exception classes carry litellm's names and hierarchy, which is all the mapping reads.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from providers.adapter import Adapter
from providers.errors import (
    ContextLengthExceeded,
    ProviderError,
    UpstreamBadResponse,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
    UpstreamUnreachable,
)
from providers.litellm_adapter import LiteLLMAdapter
from providers.types import ChatRequest, EmbeddingRequest, Target

TARGET = Target("bedrock", "anthropic.claude-3-haiku")


class APIError(Exception):
    status_code = 500

    def __init__(
        self,
        message: str = "failed",
        *,
        status_code: int | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        if status_code is not None:
            self.status_code = status_code
        self.litellm_response_headers = headers


class BadRequestError(APIError):
    status_code = 400


class ContextWindowExceededError(BadRequestError):
    pass


class UnsupportedParamsError(BadRequestError):
    pass


class AuthenticationError(APIError):
    status_code = 401


class NotFoundError(APIError):
    status_code = 404


class RateLimitError(APIError):
    status_code = 429


class ServiceUnavailableError(APIError):
    status_code = 503


class InternalServerError(APIError):
    status_code = 500


class APIConnectionError(APIError):
    pass


class Timeout(APIConnectionError):
    status_code = 408


class Dumpable:
    """Stands in for litellm's pydantic response objects: only `model_dump()` is used."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def model_dump(self) -> dict[str, Any]:
        return orjson.loads(orjson.dumps(self.data))


class FakeStream:
    def __init__(self, chunks: list[dict[str, Any]], error: Exception | None = None) -> None:
        self.chunks = chunks
        self.error = error
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[Dumpable]:
        for chunk in self.chunks:
            yield Dumpable(chunk)
        if self.error is not None:
            raise self.error

    async def aclose(self) -> None:
        self.closed = True


class FakeLiteLLM(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `import litellm`, recording the environment at that moment and every call made."""

    def __init__(self) -> None:
        self.env_at_import: str | None = None
        self.imports = 0
        self.calls: list[dict[str, Any]] = []
        self.result: Any = None
        self.error: Exception | None = None

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname == "litellm" else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        self.env_at_import = os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")
        self.imports += 1
        for cls in (APIError, BadRequestError, ContextWindowExceededError, RateLimitError, Timeout):
            setattr(module, cls.__name__, cls)
        module.acompletion = self.call  # type: ignore[attr-defined]
        module.aembedding = self.call  # type: ignore[attr-defined]

    async def call(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def litellm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLiteLLM]:
    fake = FakeLiteLLM()
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")
    monkeypatch.delitem(sys.modules, "litellm", raising=False)
    monkeypatch.setattr(sys, "meta_path", [fake, *sys.meta_path])
    yield fake
    sys.modules.pop("litellm", None)


def chat(**body: Any) -> ChatRequest:
    body.setdefault("model", "haiku")
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    return ChatRequest(
        body=body, raw=orjson.dumps(body), model=body["model"], stream=bool(body.get("stream"))
    )


def make(**options: Any) -> LiteLLMAdapter:
    return LiteLLMAdapter(name="bedrock", model_prefix="bedrock", **options)


def test_importing_the_module_does_not_import_litellm() -> None:
    code = "import sys, providers.litellm_adapter; assert 'litellm' not in sys.modules, 'imported'"
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, timeout=60)


def test_construction_without_litellm_installed_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "litellm", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(RuntimeError, match="needs litellm"):
        make()


RESPONSE = {
    "id": "chatcmpl-ll",
    "created": 1700000000,
    "model": "anthropic.claude-3-haiku",
    "object": "chat.completion",
    "system_fingerprint": None,
    "choices": [
        {
            "finish_reason": "stop",
            "index": 0,
            "message": {
                "content": "Hello!",
                "role": "assistant",
                "tool_calls": None,
                "function_call": None,
                "provider_specific_fields": None,
            },
        }
    ],
    "usage": {
        "prompt_tokens": 1300,
        "completion_tokens": 7,
        "total_tokens": 1307,
        "prompt_tokens_details": {"cached_tokens": 1000},
        "completion_tokens_details": None,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 1000,
    },
}


async def test_complete_imports_lazily_and_converts(litellm: FakeLiteLLM) -> None:
    up = make(api_key="k", base_url="http://bedrock", extra={"aws_region_name": "eu-west-1"})
    assert isinstance(up, Adapter)
    assert litellm.imports == 0 and "litellm" not in sys.modules  # constructing imports nothing
    litellm.result = Dumpable(RESPONSE)
    completion = await up.complete(chat(temperature=0.2, stream_options={"x": 1}), TARGET)
    assert litellm.imports == 1 and litellm.env_at_import == "True"
    call = litellm.calls[0]
    assert call["model"] == "bedrock/anthropic.claude-3-haiku" and call["stream"] is False
    assert call["messages"] == [{"role": "user", "content": "hi"}] and call["temperature"] == 0.2
    assert (call["api_key"], call["api_base"], call["aws_region_name"]) == (
        "k",
        "http://bedrock",
        "eu-west-1",
    )
    assert "stream_options" not in call
    body = ChatCompletion.model_validate_json(completion.body)
    assert body.choices[0].message.content == "Hello!"
    usage = completion.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens, usage.completion_tokens) == (
        1300,
        1000,
        200,
        7,
    )
    assert completion.model == "anthropic.claude-3-haiku"
    await up.complete(chat(), Target("bedrock", "bedrock/already-prefixed"))
    assert litellm.calls[1]["model"] == "bedrock/already-prefixed" and litellm.imports == 1


def stream_chunk(id: str, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {
        "index": 0,
        "delta": {"function_call": None, "tool_calls": None, "audio": None, **delta},
        "finish_reason": finish,
    }
    return {
        "id": id,
        "created": 1700000001,
        "model": "claude-3-haiku",
        "object": "chat.completion.chunk",
        "choices": [choice],
        **extra,
    }


async def test_stream_keeps_one_id_and_ends_with_one_usage_chunk(litellm: FakeLiteLLM) -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    chunks = [
        stream_chunk("chatcmpl-a", {"role": "assistant", "content": "He"}),
        stream_chunk("chatcmpl-b", {"content": "llo"}),
        stream_chunk("chatcmpl-c", {}, finish="stop", usage=usage),
    ]
    upstream = FakeStream(chunks)
    litellm.result = upstream
    out = [chunk async for chunk in make().stream(chat(stream=True), TARGET)]
    assert litellm.calls[0]["stream"] is True and litellm.calls[0]["stream_options"] == {
        "include_usage": True
    }
    parsed = [ChatCompletionChunk.model_validate_json(chunk.data) for chunk in out]
    assert {(c.id, c.created) for c in parsed} == {("chatcmpl-a", 1700000001)}
    assert "".join(c.choices[0].delta.content or "" for c in parsed if c.choices) == "Hello"
    assert all(orjson.loads(chunk.data).get("usage") is None for chunk in out[:-1])
    assert out[-1].usage_only and parsed[-1].choices == [] and parsed[-1].usage is not None
    assert out[-1].usage is not None and out[-1].usage.total_tokens == 11
    assert sum(chunk.content_chars for chunk in out) == len("Hello")
    assert upstream.closed


async def test_a_failure_mid_stream_is_mapped(litellm: FakeLiteLLM) -> None:
    litellm.result = FakeStream(
        [stream_chunk("c", {"content": "x"})], error=RateLimitError("slow", headers={"retry-after": "3"})
    )
    received = []
    with pytest.raises(UpstreamRateLimited) as caught:
        async for chunk in make().stream(chat(stream=True), TARGET):
            received.append(chunk)
    assert len(received) == 1 and caught.value.retry_after == 3.0


@pytest.mark.parametrize(
    ("error", "kind", "status"),
    [
        (ContextWindowExceededError("too long"), ContextLengthExceeded, 400),
        (BadRequestError("bad"), UpstreamRejected, 400),
        (UnsupportedParamsError("no top_k"), UpstreamRejected, 400),
        (NotFoundError("which model?"), UpstreamRejected, 404),
        (AuthenticationError("bad key"), UpstreamRejected, 502),
        (RateLimitError("slow"), UpstreamRateLimited, 429),
        (Timeout("slow"), UpstreamTimeout, 504),
        (APIConnectionError("refused"), UpstreamUnreachable, 502),
        (ServiceUnavailableError("down"), UpstreamUnavailable, 502),
        (InternalServerError("oops"), UpstreamUnavailable, 502),
        (APIError("overloaded", status_code=529), UpstreamRateLimited, 429),
        (APIError("teapot", status_code=418), UpstreamRejected, 418),
        (ValueError("litellm bug"), UpstreamBadResponse, 502),
    ],
)
async def test_litellm_exceptions_map_by_class_name(
    litellm: FakeLiteLLM, error: Exception, kind: type[ProviderError], status: int
) -> None:
    litellm.error = error
    with pytest.raises(kind) as caught:
        await make().complete(chat(), TARGET)
    assert type(caught.value) is kind and caught.value.status == status and caught.value.provider == "bedrock"
    with pytest.raises(kind):
        _ = [c async for c in make().stream(chat(stream=True), TARGET)]


async def test_embed_converts_the_embedding_response(litellm: FakeLiteLLM) -> None:
    litellm.result = Dumpable(
        {
            "object": "list",
            "model": "cohere.embed-english-v3",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
            "usage": {"prompt_tokens": 3, "total_tokens": 3},
        }
    )
    body = {"model": "embed", "input": ["hey"]}
    completion = await make().embed(
        EmbeddingRequest(body=body, raw=orjson.dumps(body), model="embed"),
        Target("b", "cohere.embed-english-v3"),
    )
    assert litellm.calls[0]["model"] == "bedrock/cohere.embed-english-v3" and litellm.calls[0]["input"] == [
        "hey"
    ]
    assert CreateEmbeddingResponse.model_validate_json(completion.body).data[0].embedding == [0.1, 0.2]
    assert completion.usage.prompt_tokens == 3


async def test_an_answer_that_is_not_a_response_object_is_a_bad_response(litellm: FakeLiteLLM) -> None:
    litellm.result = "oops"
    with pytest.raises(UpstreamBadResponse):
        await make().complete(chat(), TARGET)

"""The Gemini adapter without a network: httpx.MockTransport answers from plain functions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from providers.adapter import Adapter, EmbeddingAdapter
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
from providers.gemini import GeminiAdapter
from providers.httpx_upstream import HttpxUpstream
from providers.types import ChatRequest, EmbeddingRequest, StreamChunk, Target

TARGET = Target("gemini", "gemini-2.5-flash")
BASE = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"


def chat(**body: Any) -> ChatRequest:
    body.setdefault("model", "fast")
    body.setdefault(
        "messages", [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    return ChatRequest(
        body=body, raw=orjson.dumps(body), model=body["model"], stream=bool(body.get("stream"))
    )


def adapter(handler: Callable[[httpx.Request], httpx.Response], **options: Any) -> GeminiAdapter:
    client = HttpxUpstream(httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    return GeminiAdapter(name="gemini", client=client, api_key="AIza-key", **options)


def frame(
    text: str | None = None, *, finish: str | None = None, usage: dict[str, int] | None = None, **extra: Any
) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}] if text else []},
        "index": 0,
    }
    if finish:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": "gemini-2.5-flash-001",
        "responseId": "r-1",
        **extra,
    }
    if usage:
        body["usageMetadata"] = usage
    return body


def sse(*frames: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(f) + b"\r\n\r\n" for f in frames)


USAGE = {"promptTokenCount": 8, "candidatesTokenCount": 4, "thoughtsTokenCount": 6, "totalTokenCount": 18}


def test_the_adapter_satisfies_both_protocols() -> None:
    up = adapter(lambda _: httpx.Response(200))
    assert isinstance(up, Adapter) and isinstance(up, EmbeddingAdapter)
    assert up.capabilities == frozenset({"chat", "stream", "embeddings"})


async def test_complete_sends_the_wire_request_and_answers_in_openai_shape() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=frame("Hello!", finish="STOP", usage=USAGE))

    completion = await adapter(handler).complete(chat(max_tokens=50), TARGET)
    request = seen[0]
    assert str(request.url) == BASE + ":generateContent"
    assert request.headers["x-goog-api-key"] == "AIza-key" and "authorization" not in request.headers
    assert orjson.loads(request.content) == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "generationConfig": {"maxOutputTokens": 50},
    }
    body = ChatCompletion.model_validate_json(completion.body)
    assert body.choices[0].message.content == "Hello!" and body.id == "r-1"
    assert completion.model == "gemini-2.5-flash-001"
    assert (
        completion.usage.prompt_tokens,
        completion.usage.completion_tokens,
        completion.usage.reasoning_tokens,
    ) == (8, 10, 6)


async def test_base_url_with_version_and_tuned_models() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json=frame("x", finish="STOP"))

    up = adapter(handler, base_url="http://proxy/v1beta/")
    await up.complete(chat(), Target("gemini", "tunedModels/mine-42"))
    await up.complete(chat(), Target("gemini", "models/gemini-2.5-pro"))
    assert seen == [
        "http://proxy/v1beta/tunedModels/mine-42:generateContent",
        "http://proxy/v1beta/models/gemini-2.5-pro:generateContent",
    ]


def google_error(code: int, status: str, message: str, details: list[Any] | None = None) -> bytes:
    return orjson.dumps(
        {"error": {"code": code, "message": message, "status": status, "details": details or []}}
    )


RETRY_INFO = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]
BAD_KEY = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]


@pytest.mark.parametrize(
    ("status", "headers", "body", "kind", "retry_after", "client_status"),
    [
        (429, {}, google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", RETRY_INFO), UpstreamRateLimited, 37.0, 429),
        (429, {"retry-after": "4"}, google_error(429, "RESOURCE_EXHAUSTED", "slow"), UpstreamRateLimited, 4.0, 429),
        (503, {}, google_error(503, "UNAVAILABLE", "The model is overloaded."), UpstreamUnavailable, None, 502),
        (500, {}, google_error(500, "INTERNAL", "oops"), UpstreamUnavailable, None, 502),
        (504, {}, google_error(504, "DEADLINE_EXCEEDED", "slow"), UpstreamTimeout, None, 504),
        (400, {}, google_error(400, "INVALID_ARGUMENT", "bad field"), UpstreamRejected, None, 400),
        (400, {}, google_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", BAD_KEY), UpstreamRejected, None, 502),
        (403, {}, google_error(403, "PERMISSION_DENIED", "denied"), UpstreamRejected, None, 502),
        (404, {}, google_error(404, "NOT_FOUND", "no such model"), UpstreamRejected, None, 404),
        (400, {}, google_error(400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."), ContextLengthExceeded, None, 400),
        (502, {}, b"<html>bad gateway</html>", UpstreamUnavailable, None, 502),
    ],
)  # fmt: skip
async def test_error_classification(
    status: int,
    headers: dict[str, str],
    body: bytes,
    kind: type[ProviderError],
    retry_after: float | None,
    client_status: int,
) -> None:
    up = adapter(lambda _: httpx.Response(status, headers=headers, content=body))
    with pytest.raises(kind) as caught:
        await up.complete(chat(), TARGET)
    error = caught.value
    assert type(error) is kind
    assert (error.retry_after, error.status, error.upstream_status, error.provider) == (
        retry_after,
        client_status,
        status,
        "gemini",
    )
    with pytest.raises(kind):
        _ = [c async for c in up.stream(chat(stream=True), TARGET)]


async def test_connection_failure_timeout_and_refused_input() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("slow", request=request)

    with pytest.raises(UpstreamUnreachable):
        await adapter(refuse).complete(chat(), TARGET)
    with pytest.raises(UpstreamTimeout):
        await adapter(hang).complete(chat(), TARGET)
    with pytest.raises(UpstreamRejected, match="logprobs") as caught:
        await adapter(refuse).complete(chat(logprobs=True), TARGET)
    assert caught.value.provider == "gemini"


async def collect(up: GeminiAdapter, request: ChatRequest) -> list[StreamChunk]:
    return [chunk async for chunk in up.stream(request, TARGET)]


async def test_stream_text_function_call_and_final_usage() -> None:
    seen: list[httpx.Request] = []
    call = {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "SIG"}
    frames = [
        frame("It is ", usage={"promptTokenCount": 8}),
        {
            **frame(),
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "hmm", "thought": True}]}, "index": 0}
            ],
        },
        frame("cold."),
        {
            **frame(),
            "candidates": [
                {"content": {"role": "model", "parts": [call]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": USAGE,
        },
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=sse(*frames), headers={"content-type": "text/event-stream"})

    chunks = await collect(adapter(handler), chat(stream=True))
    assert str(seen[0].url) == BASE + ":streamGenerateContent?alt=sse"
    parsed = [ChatCompletionChunk.model_validate_json(c.data) for c in chunks]
    assert {(c.id, c.created) for c in parsed} == {("r-1", parsed[0].created)}
    assert parsed[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in parsed if c.choices) == "It is cold."
    assert b"hmm" not in b"".join(c.data for c in chunks)
    assert sum(c.content_chars for c in chunks) == len("It is hmmcold.") + len('{"city":"Oslo"}')
    calls = [tc for c in parsed if c.choices for tc in c.choices[0].delta.tool_calls or ()]
    assert len(calls) == 1 and calls[0].index == 0 and calls[0].function is not None
    assert (calls[0].function.name, orjson.loads(calls[0].function.arguments or "")) == (
        "weather",
        {"city": "Oslo"},
    )
    assert [c.choices[0].finish_reason for c in parsed if c.choices and c.choices[0].finish_reason] == [
        "tool_calls"
    ]
    assert chunks[-1].usage_only and parsed[-1].choices == [] and not any(c.usage_only for c in chunks[:-1])
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 10
    assert parsed[-1].usage is not None and parsed[-1].usage.prompt_tokens_details is not None
    assert parsed[-1].usage.total_tokens == 18
    # What Gemini reports on the way is kept, so a stream cut before its end is billed from it.
    reported = [c.usage_so_far.prompt_tokens for c in chunks if c.usage_so_far is not None]
    assert reported[0] == 8


async def test_stream_yields_each_frame_as_it_arrives() -> None:
    release = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield sse(frame("Hi"))
        await release.wait()
        yield sse(frame(" there", finish="STOP", usage=USAGE))

    stream = adapter(lambda _: httpx.Response(200, content=body())).stream(chat(stream=True), TARGET)
    await anext(stream)
    second = await anext(stream)
    assert ChatCompletionChunk.model_validate_json(second.data).choices[0].delta.content == "Hi"
    assert not release.is_set()
    release.set()
    rest = [chunk async for chunk in stream]
    assert rest[-1].usage_only


async def test_error_frame_mid_stream_is_raised() -> None:
    frames = [frame("partial"), {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}]
    up = adapter(lambda _: httpx.Response(200, content=sse(*frames)))
    received: list[StreamChunk] = []
    with pytest.raises(UpstreamUnavailable, match="overloaded"):
        async for chunk in up.stream(chat(stream=True), TARGET):
            received.append(chunk)
    assert len(received) == 2
    rate_limited = adapter(
        lambda _: httpx.Response(200, content=sse({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}))
    )
    with pytest.raises(UpstreamRateLimited):
        await collect(rate_limited, chat(stream=True))


async def test_stream_without_a_finish_reason_is_a_bad_response() -> None:
    up = adapter(lambda _: httpx.Response(200, content=sse(frame("cut"))))
    with pytest.raises(UpstreamBadResponse, match="without a finish reason"):
        await collect(up, chat(stream=True))


async def test_blocked_prompt_streams_an_empty_filtered_answer() -> None:
    blocked = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 3},
    }
    chunks = await collect(adapter(lambda _: httpx.Response(200, content=sse(blocked))), chat(stream=True))
    parsed = [ChatCompletionChunk.model_validate_json(c.data) for c in chunks]
    assert [c.choices[0].finish_reason for c in parsed if c.choices] == [None, "content_filter"]
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 3


async def test_embed_uses_batch_embed_contents() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"embeddings": [{"values": [0.1, 0.2]}]})

    body = {"model": "emb", "input": "hello there"}
    request = EmbeddingRequest(body=body, raw=orjson.dumps(body), model="emb")
    completion = await adapter(handler).embed(request, Target("gemini", "text-embedding-004"))
    assert str(seen[0].url).endswith("/v1beta/models/text-embedding-004:batchEmbedContents")
    assert orjson.loads(seen[0].content)["requests"][0]["model"] == "models/text-embedding-004"
    answer = CreateEmbeddingResponse.model_validate_json(completion.body)
    assert answer.data[0].embedding == [0.1, 0.2] and answer.model == "text-embedding-004"
    assert completion.usage.prompt_tokens == 3 and completion.usage.raw is None

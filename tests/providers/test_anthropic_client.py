"""The Anthropic adapter without a network: httpx.MockTransport answers from plain functions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from providers.adapter import Adapter
from providers.anthropic import AnthropicAdapter
from providers.errors import (
    ContextLengthExceeded,
    ProviderError,
    UpstreamBadResponse,
    UpstreamOverloaded,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
    UpstreamUnreachable,
)
from providers.httpx_upstream import HttpxUpstream
from providers.types import ChatRequest, StreamChunk, Target

TARGET = Target("claude", "claude-sonnet-4-5")


def chat(**body: Any) -> ChatRequest:
    body.setdefault("model", "smart")
    body.setdefault("messages", [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"}])
    return ChatRequest(
        body=body, raw=orjson.dumps(body), model=body["model"], stream=bool(body.get("stream"))
    )


def adapter(handler: Callable[[httpx.Request], httpx.Response], **options: Any) -> AnthropicAdapter:
    client = HttpxUpstream(httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    return AnthropicAdapter(name="claude", client=client, api_key="sk-ant", **options)


def message(**overrides: Any) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Hello!"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 3, "cache_read_input_tokens": 1024},
        **overrides,
    }


def sse(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(
        b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n" for name, data in events
    )


def test_the_adapter_satisfies_the_protocol() -> None:
    up = adapter(lambda _: httpx.Response(200))
    assert isinstance(up, Adapter)
    assert up.capabilities == frozenset({"chat", "stream"})


async def test_complete_sends_the_wire_request_and_answers_in_openai_shape() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=message())

    up = adapter(handler, headers={"anthropic-beta": "x"}, max_tokens_by_model={"claude-sonnet-4-5": 64000})
    completion = await up.complete(chat(temperature=0.5), TARGET)
    request = seen[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["anthropic-beta"] == "x"
    assert "authorization" not in request.headers
    assert orjson.loads(request.content) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64000,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "temperature": 0.5,
        "system": [{"type": "text", "text": "be nice"}],
    }
    body = ChatCompletion.model_validate_json(completion.body)
    assert body.choices[0].message.content == "Hello!"
    assert completion.model == "claude-sonnet-4-5-20250929"
    assert (completion.usage.prompt_tokens, completion.usage.cached_tokens) == (1036, 1024)


async def test_default_max_tokens_and_a_base_url_ending_in_v1() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=message())

    await adapter(handler, base_url="http://proxy/anthropic/v1/").complete(chat(), TARGET)
    assert str(seen[0].url) == "http://proxy/anthropic/v1/messages"
    assert orjson.loads(seen[0].content)["max_tokens"] == 4096


async def test_an_untranslatable_request_never_reaches_the_network() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request should be sent")

    with pytest.raises(UpstreamRejected, match=r"temperature 1\.7") as caught:
        await adapter(handler).complete(chat(temperature=1.7), TARGET)
    assert (caught.value.status, caught.value.code, caught.value.provider) == (
        400,
        "invalid_parameter",
        "claude",
    )
    with pytest.raises(UpstreamRejected):
        _ = [c async for c in adapter(handler).stream(chat(n=3, stream=True), TARGET)]


def error_body(kind: str, text: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": text}, "request_id": "req_1"})


@pytest.mark.parametrize(
    ("status", "headers", "body", "kind", "retryable", "retry_after", "client_status"),
    [
        (429, {"retry-after": "7"}, error_body("rate_limit_error", "slow down"), UpstreamRateLimited, True, 7.0, 429),
        (529, {}, error_body("overloaded_error", "Overloaded"), UpstreamOverloaded, True, None, 503),
        (401, {}, error_body("authentication_error", "invalid x-api-key"), UpstreamRejected, False, None, 502),
        (403, {}, error_body("permission_error", "no"), UpstreamRejected, False, None, 502),
        (402, {}, error_body("billing_error", "no credit"), UpstreamRejected, False, None, 502),
        (400, {}, error_body("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"), ContextLengthExceeded, False, None, 400),
        (400, {}, error_body("invalid_request_error", "bad"), UpstreamRejected, False, None, 400),
        (413, {}, error_body("request_too_large", "too big"), UpstreamRejected, False, None, 413),
        (500, {}, error_body("api_error", "oops"), UpstreamUnavailable, True, None, 502),
        (504, {}, error_body("timeout_error", "slow"), UpstreamTimeout, True, None, 504),
        (502, {}, b"<html>bad gateway</html>", UpstreamUnavailable, True, None, 502),
    ],
)  # fmt: skip
async def test_error_classification(
    status: int,
    headers: dict[str, str],
    body: bytes,
    kind: type[ProviderError],
    retryable: bool,
    retry_after: float | None,
    client_status: int,
) -> None:
    up = adapter(lambda _: httpx.Response(status, headers=headers, content=body))
    with pytest.raises(kind) as caught:
        await up.complete(chat(), TARGET)
    error = caught.value
    assert type(error) is kind
    assert (error.retryable, error.retry_after, error.status) == (retryable, retry_after, client_status)
    assert (error.upstream_status, error.provider) == (status, "claude")
    with pytest.raises(kind):  # the same failure before a stream's first byte
        _ = [c async for c in up.stream(chat(stream=True), TARGET)]


async def test_connection_failure_and_timeout() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(UpstreamUnreachable):
        await adapter(refuse).complete(chat(), TARGET)
    with pytest.raises(UpstreamTimeout):
        _ = [c async for c in adapter(hang).stream(chat(stream=True), TARGET)]


async def test_non_json_success_body_is_a_bad_response() -> None:
    with pytest.raises(UpstreamBadResponse):
        await adapter(lambda _: httpx.Response(200, content=b"nope")).complete(chat(), TARGET)


START = (
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_s",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 20,
                "output_tokens": 1,
                "cache_creation_input_tokens": 500,
                "cache_read_input_tokens": 0,
                "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 500},
            },
        },
    },
)


def block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, value: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": value}


def stop(index: int) -> tuple[str, dict[str, Any]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


EVENTS = [
    START,
    ("ping", {"type": "ping"}),
    block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
    delta(0, {"type": "thinking_delta", "thinking": "the user wants weather"}),
    delta(0, {"type": "signature_delta", "signature": "EqQB"}),
    stop(0),
    block_start(1, {"type": "text", "text": ""}),
    delta(1, {"type": "text_delta", "text": "Checking "}),
    delta(1, {"type": "text_delta", "text": "now."}),
    stop(1),
    block_start(2, {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {}}),
    delta(2, {"type": "input_json_delta", "partial_json": ""}),
    delta(2, {"type": "input_json_delta", "partial_json": '{"city": "Pa'}),
    delta(2, {"type": "input_json_delta", "partial_json": 'ris"}'}),
    stop(2),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 42, "output_tokens_details": {"thinking_tokens": 15}},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]


async def collect(up: AnthropicAdapter, request: ChatRequest) -> list[StreamChunk]:
    return [chunk async for chunk in up.stream(request, TARGET)]


async def test_stream_text_tool_use_and_thinking() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=sse(*EVENTS), headers={"content-type": "text/event-stream"})

    chunks = await collect(adapter(handler), chat(stream=True))
    assert orjson.loads(seen[0].content)["stream"] is True
    parsed = [ChatCompletionChunk.model_validate_json(chunk.data) for chunk in chunks]
    assert {(c.id, c.created) for c in parsed} == {("msg_s", parsed[0].created)}
    assert parsed[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in parsed if c.choices)
    assert text == "Checking now."
    assert b"the user wants weather" not in b"".join(chunk.data for chunk in chunks)
    # Hidden thinking still counts toward what a broken stream would be billed from.
    generated = len("the user wants weather") + len("Checking now.") + len('{"city": "Paris"}')
    assert sum(chunk.content_chars for chunk in chunks) == generated
    calls = [call for c in parsed if c.choices for call in c.choices[0].delta.tool_calls or ()]
    assert calls[0].id == "toolu_9" and calls[0].function is not None and calls[0].function.name == "weather"
    assert {call.index for call in calls} == {0}
    assert orjson.loads("".join(call.function.arguments or "" for call in calls if call.function)) == {
        "city": "Paris"
    }
    assert [c.choices[0].finish_reason for c in parsed if c.choices and c.choices[0].finish_reason] == [
        "tool_calls"
    ]
    last = chunks[-1]
    assert last.usage_only and last.usage is not None and parsed[-1].choices == []
    assert not any(chunk.usage_only for chunk in chunks[:-1])
    usage = last.usage
    assert (usage.prompt_tokens, usage.cache_write_tokens, usage.cache_write_1h_tokens) == (520, 500, 500)
    assert (usage.completion_tokens, usage.reasoning_tokens) == (42, 15)
    assert parsed[-1].usage is not None and parsed[-1].usage.prompt_tokens_details is not None
    assert parsed[-1].usage.prompt_tokens_details.cached_tokens == 0
    assert parsed[-1].usage.total_tokens == 562


async def test_stream_yields_each_chunk_as_it_arrives() -> None:
    """The first text reaches the caller while the upstream is still holding back the rest."""
    release = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield sse(
            START,
            block_start(0, {"type": "text", "text": ""}),
            delta(0, {"type": "text_delta", "text": "Hi"}),
        )
        await release.wait()
        yield sse(stop(0), ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                               "usage": {"output_tokens": 2}}))  # fmt: skip
        yield sse(("message_stop", {"type": "message_stop"}))

    up = adapter(lambda _: httpx.Response(200, content=body()))
    stream = up.stream(chat(stream=True), TARGET)
    first = await anext(stream)
    second = await anext(stream)
    assert ChatCompletionChunk.model_validate_json(second.data).choices[0].delta.content == "Hi"
    assert first.usage is None and not release.is_set()
    release.set()
    rest = [chunk async for chunk in stream]
    assert rest[-1].usage_only and rest[-1].usage is not None and rest[-1].usage.completion_tokens == 2


async def test_overloaded_error_event_after_200_is_raised_mid_stream() -> None:
    events = [
        START,
        block_start(0, {"type": "text", "text": ""}),
        delta(0, {"type": "text_delta", "text": "par"}),
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]
    up = adapter(lambda _: httpx.Response(200, content=sse(*events)))
    received: list[StreamChunk] = []
    with pytest.raises(UpstreamRateLimited, match="Overloaded") as caught:
        async for chunk in up.stream(chat(stream=True), TARGET):
            received.append(chunk)
    assert len(received) == 2 and caught.value.provider == "claude"


async def test_stream_cut_before_message_stop_is_a_bad_response() -> None:
    up = adapter(
        lambda _: httpx.Response(200, content=sse(START, block_start(0, {"type": "text", "text": "x"})))
    )
    with pytest.raises(UpstreamBadResponse, match="without message_stop"):
        await collect(up, chat(stream=True))


async def test_stream_of_garbage_is_a_bad_response() -> None:
    up = adapter(lambda _: httpx.Response(200, content=b"data: {not json\n\n"))
    with pytest.raises(UpstreamBadResponse):
        await collect(up, chat(stream=True))

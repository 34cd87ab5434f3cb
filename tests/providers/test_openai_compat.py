"""The OpenAI-compatible adapter without a network: httpx.MockTransport answers from plain functions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import orjson
import pytest

from providers import httpx_upstream
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
    parse_retry_after,
)
from providers.httpx_upstream import HttpxUpstream
from providers.openai_compat import OpenAICompatAdapter, from_openai_usage, to_openai_body
from providers.types import ChatRequest, Target
from usage import Usage

RAW = b'{"model":"m","messages":[{"role":"user","content":"hi"}],  "temperature":0}'


def chat(raw: bytes = RAW, *, stream: bool = False, include_usage: bool = False) -> ChatRequest:
    body = orjson.loads(raw)
    return ChatRequest(body=body, raw=raw, model=body["model"], stream=stream, include_usage=include_usage)


def adapter(handler: Callable[[httpx.Request], httpx.Response]) -> OpenAICompatAdapter:
    client = HttpxUpstream(httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    return OpenAICompatAdapter(name="up", base_url="http://upstream/v1", client=client, api_key="sk-x")


def test_unchanged_request_is_forwarded_byte_for_byte() -> None:
    assert to_openai_body(chat(), Target("p", "m"), stream=False) is RAW


def test_renamed_model_and_forced_usage_are_rewritten() -> None:
    renamed = orjson.loads(to_openai_body(chat(), Target("p", "m-2024"), stream=False))
    assert renamed["model"] == "m-2024" and renamed["temperature"] == 0
    raw = b'{"model":"m","messages":[],"stream":true,"stream_options":{"foo":1}}'
    streamed = orjson.loads(to_openai_body(chat(raw, stream=True), Target("p", "m"), stream=True))
    assert streamed["stream_options"] == {"foo": 1, "include_usage": True}


def test_vllm_usage_without_details_and_openai_usage_with_them() -> None:
    assert (
        from_openai_usage(
            {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": None}
        ).cached_tokens
        == 0
    )
    usage = from_openai_usage(
        {
            "prompt_tokens": 2000,
            "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 200},
        }
    )
    assert (usage.cached_tokens, usage.reasoning_tokens, usage.total_tokens) == (1024, 200, 2300)


def test_litellm_shaped_usage_reports_anthropic_cache_reads_and_writes_in_its_extra_fields() -> None:
    # LiteLLM (its adapter, or a LiteLLM proxy behind an OpenAI-compatible one) may report Claude's
    # cache only in Anthropic's names; the details object wins where it says something.
    usage = from_openai_usage(
        {
            "prompt_tokens": 1500,
            "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": None},
            "cache_read_input_tokens": 1000,
            "cache_creation_input_tokens": 200,
        }
    )
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (1500, 1000, 200)
    both = {"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}, "cache_read_input_tokens": 7}
    assert from_openai_usage(both).cached_tokens == 4
    assert from_openai_usage(None) == from_openai_usage([1, 2]) == Usage()


@pytest.mark.parametrize(
    ("status", "headers", "body", "kind", "retryable", "retry_after"),
    [
        (
            429,
            {"retry-after-ms": "1500"},
            b'{"error":{"message":"slow down","code":"rate_limit_exceeded"}}',
            UpstreamRateLimited,
            True,
            1.5,
        ),
        (
            429,
            {"retry-after": "3"},
            b'{"error":{"message":"quota","code":"insufficient_quota"}}',
            UpstreamRejected,
            False,
            3.0,
        ),
        (529, {}, b'{"error":{"message":"overloaded"}}', UpstreamOverloaded, True, None),
        (
            400,
            {},
            b'{"error":{"message":"too long","code":"context_length_exceeded"}}',
            ContextLengthExceeded,
            False,
            None,
        ),
        (
            400,
            {},
            b'{"object":"error","message":"This model\'s maximum context length is 4096 tokens"}',
            ContextLengthExceeded,
            False,
            None,
        ),
        (401, {}, b'{"error":{"message":"bad key"}}', UpstreamRejected, False, None),
        (408, {}, b"", UpstreamTimeout, True, None),
        (500, {}, b"<html>oops</html>", UpstreamUnavailable, True, None),
        (503, {"retry-after": "2"}, b'{"error":{"message":"busy"}}', UpstreamUnavailable, True, 2.0),
    ],
)
async def test_error_classification(
    status: int,
    headers: dict[str, str],
    body: bytes,
    kind: type[ProviderError],
    retryable: bool,
    retry_after: float | None,
) -> None:
    up = adapter(lambda _: httpx.Response(status, headers=headers, content=body))
    with pytest.raises(kind) as caught:
        await up.complete(chat(), Target("up", "m"))
    assert caught.value.retryable is retryable
    assert caught.value.retry_after == retry_after
    assert caught.value.upstream_status == status
    if status == 401:
        assert caught.value.status == 502  # the gateway's credential, not the client's


async def test_connection_failure_and_timeout() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(UpstreamUnreachable):
        await adapter(refuse).complete(chat(), Target("up", "m"))
    with pytest.raises(UpstreamTimeout):
        await adapter(hang).complete(chat(), Target("up", "m"))


async def test_non_json_success_body_is_a_bad_response() -> None:
    with pytest.raises(UpstreamBadResponse):
        await adapter(lambda _: httpx.Response(200, content=b"not json")).complete(chat(), Target("up", "m"))


def sse(*events: bytes) -> bytes:
    return b"".join(b"data: " + e + b"\n\n" for e in events)


CHUNK = b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}'
USAGE = b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}'


async def test_stream_yields_chunks_and_usage_and_sends_auth() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200, content=sse(CHUNK, USAGE, b"[DONE]"), headers={"content-type": "text/event-stream"}
        )

    chunks = [c async for c in adapter(handler).stream(chat(stream=True), Target("up", "m"))]
    assert [c.data for c in chunks] == [CHUNK, USAGE]
    assert chunks[1].usage_only and chunks[1].usage is not None and chunks[1].usage.prompt_tokens == 5
    assert seen[0].headers["authorization"] == "Bearer sk-x"
    assert orjson.loads(seen[0].content)["stream_options"] == {"include_usage": True}


async def test_chunks_from_one_upstream_read_say_more_is_ready() -> None:
    """Events that arrive together are marked so the gateway can write their frames together; the
    last one of a read is not (the next may be far off)."""

    async def body() -> AsyncIterator[bytes]:
        yield sse(CHUNK, CHUNK)  # two events in one read
        yield sse(USAGE, b"[DONE]")  # the last one before [DONE] in the next

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body())

    chunks = [c async for c in adapter(handler).stream(chat(stream=True), Target("up", "m"))]
    assert [(c.data, c.more_ready) for c in chunks] == [(CHUNK, True), (CHUNK, False), (USAGE, True)]


async def test_stream_error_event_and_truncation_raise() -> None:
    error = b'{"error":{"message":"overloaded","type":"server_error","code":"rate_limit_exceeded"}}'
    broken = adapter(lambda _: httpx.Response(200, content=sse(CHUNK, error)))
    with pytest.raises(UpstreamRateLimited):
        _ = [c async for c in broken.stream(chat(stream=True), Target("up", "m"))]
    truncated = adapter(lambda _: httpx.Response(200, content=sse(CHUNK)))
    with pytest.raises(UpstreamBadResponse, match="without \\[DONE\\]"):
        _ = [c async for c in truncated.stream(chat(stream=True), Target("up", "m"))]


async def test_an_answer_or_event_too_large_to_hold_is_a_bad_response(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broken or hostile upstream cannot make a worker hold an unbounded answer (every other
    request in the process would go down with it)."""

    async def endless_line() -> AsyncIterator[bytes]:
        yield b"data: "
        for _ in range(20):
            yield b"x" * (1 << 20)

    streaming = adapter(lambda _: httpx.Response(200, content=endless_line()))
    with pytest.raises(UpstreamBadResponse, match="up sent a stream event over 16 MiB"):
        _ = [c async for c in streaming.stream(chat(stream=True), Target("up", "m"))]
    monkeypatch.setattr(httpx_upstream, "MAX_ANSWER_BYTES", 1 << 20)
    huge = adapter(lambda _: httpx.Response(200, content=b"{" + b" " * (2 << 20) + b"}"))
    with pytest.raises(UpstreamBadResponse, match="up sent an answer over 1 MiB"):
        await huge.complete(chat(), Target("up", "m"))


def test_retry_after_parsing() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("garbage") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("-5") == 0.0

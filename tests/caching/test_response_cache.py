"""The response cache on its own: canonical keys, cacheability, storage in memory and Redis, stream
replay that the OpenAI SDK accepts, and streams reassembled into whole answers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import httpx2
import openai
import orjson
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from gateway.caching.keys import canonical_request, is_cacheable, response_cache_key
from gateway.caching.response_cache import (
    CachedAnswer,
    ResponseCache,
    decode,
    from_stream,
    replay_chunks,
    to_stream_chunks,
)
from gateway.state.memory import MemoryStateStore
from gateway.state.redis_store import RedisStateStore
from gateway.state.store import StateStore
from providers.openai_compat import from_openai_usage
from providers.sse import SSEDecoder
from providers.types import Completion
from sandbox.server import SandboxServer
from tests.services import require_redis
from usage import Usage

QUESTION = [{"role": "user", "content": "What is a toll road?"}]
REQUEST: dict[str, Any] = {"model": "gpt-4o-mini", "messages": QUESTION, "temperature": 0}
USAGE_OBJ = {
    "prompt_tokens": 1200,
    "completion_tokens": 40,
    "total_tokens": 1240,
    "prompt_tokens_details": {"cached_tokens": 1024},
}
TEXT = "A toll road is a road you pay to use. " * 60  # longer than one replay delta
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
}


def completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1_760_000_000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None, **extra}],
        "usage": USAGE_OBJ,
    }


def answer(body: dict[str, Any]) -> CachedAnswer:
    return CachedAnswer(body=orjson.dumps(body), model=body["model"], usage=from_openai_usage(body["usage"]))


TEXT_ANSWER = answer(completion({"role": "assistant", "content": TEXT, "refusal": None}))
TOOL_ANSWER = answer(
    completion({"role": "assistant", "content": None, "refusal": None, "tool_calls": [CALL]}, "tool_calls")
)


# --- keys -------------------------------------------------------------------------------------------


def test_key_ignores_stream_user_metadata_and_bookkeeping() -> None:
    key = response_cache_key("team-a", REQUEST)
    same = {
        **REQUEST,
        "stream": True,
        "stream_options": {"include_usage": True},
        "user": "alice",
        "metadata": {"trace": "1"},
        "store": True,
        "prompt_cache_key": "abc",
        "safety_identifier": "u-1",
        "seed": None,  # null is absent
        "n": 1,  # OpenAI's default
    }
    assert response_cache_key("team-a", same) == key
    assert response_cache_key("team-a", {**REQUEST, "temperature": 0.0}) == key  # 0 and 0.0 agree
    assert response_cache_key("team-a", dict(reversed(list(REQUEST.items())))) == key


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.5},
        {"messages": [{"role": "user", "content": "What is a toll bridge?"}]},
        {"tools": [{"type": "function", "function": {"name": "f"}}]},
        {"tool_choice": "required"},
        {"response_format": {"type": "json_object"}},
        {"max_tokens": 10},
        {"max_completion_tokens": 10},
        {"top_p": 0.5},
        {"stop": ["\n"]},
        {"seed": 7},
        {"n": 2},
        {"presence_penalty": 0.5},
        {"frequency_penalty": 0.5},
        {"logit_bias": {"50256": -100}},
        {"logprobs": True},
        {"reasoning_effort": "high"},
        {"model": "gpt-4o"},
        {"some_future_parameter": 1},
    ],
)
def test_key_changes_with_everything_that_changes_the_answer(change: dict[str, Any]) -> None:
    assert response_cache_key("t", {**REQUEST, **change}) != response_cache_key("t", REQUEST)


def test_keys_are_namespaced_per_team_and_by_model_or_tier() -> None:
    a, b = response_cache_key("team-a", REQUEST), response_cache_key("team-b", REQUEST)
    assert a.startswith("response:team-a:") and b.startswith("response:team-b:")
    assert a.rsplit(":", 1)[1] != b.rsplit(":", 1)[1]  # the team is inside the hash too
    assert len(a.rsplit(":", 1)[1]) == 64
    assert response_cache_key("t", REQUEST, model="resolved") != response_cache_key("t", REQUEST)
    assert response_cache_key("t", REQUEST, tier="local") != response_cache_key("t", REQUEST)
    assert orjson.loads(canonical_request(REQUEST, model="m"))["model"] == "m"


def test_only_deterministic_requests_are_cacheable() -> None:
    assert is_cacheable(REQUEST, opt_in=False)
    assert is_cacheable({**REQUEST, "temperature": 0.0, "stream": True}, opt_in=False)
    assert not is_cacheable({"model": "m", "messages": QUESTION}, opt_in=False)  # default temperature 1
    assert not is_cacheable({**REQUEST, "temperature": 0.7}, opt_in=False)
    assert is_cacheable({**REQUEST, "temperature": 0.7}, opt_in=True)
    assert not is_cacheable({**REQUEST, "temperature": False}, opt_in=False)
    # Several samples ask for variety: never cached, opted in or not.
    assert not is_cacheable({**REQUEST, "n": 3}, opt_in=False)
    assert not is_cacheable({**REQUEST, "n": 3}, opt_in=True)
    assert is_cacheable({**REQUEST, "n": 1}, opt_in=False)
    # The live web is not deterministic at temperature 0.
    assert not is_cacheable({**REQUEST, "web_search_options": {}}, opt_in=False)
    assert is_cacheable({**REQUEST, "web_search_options": {}}, opt_in=True)
    # Tool-calling turns are: the tool results are part of the key.
    tools = [{"type": "function", "function": {"name": "get_weather"}}]
    turn = [
        *QUESTION,
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "7C"},
    ]
    assert is_cacheable({**REQUEST, "tools": tools, "messages": turn}, opt_in=False)


def calls(completion: ChatCompletion) -> list[tuple[str, str, str]]:
    return [
        (call.id, call.function.name, call.function.arguments)
        for call in completion.choices[0].message.tool_calls or []
        if call.type == "function"
    ]


# --- storage ----------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[StateStore]:
    if request.param == "memory":
        yield MemoryStateStore()
        return
    redis_store = RedisStateStore.from_url(require_redis(), prefix=f"tollgate-test:{uuid.uuid4().hex}:")
    try:
        yield redis_store
    finally:
        await redis_store.aclose()


async def test_round_trip_keeps_body_model_and_usage(store: StateStore) -> None:
    cache = ResponseCache(store, ttl_seconds=60, max_body_bytes=1 << 20)
    key = response_cache_key("team-a", REQUEST)
    assert await cache.get(key) is None
    usage = Usage(prompt_tokens=1200, completion_tokens=40, cached_tokens=1000, cache_write_tokens=100,
                  cache_write_1h_tokens=50, reasoning_tokens=5, raw={"input_tokens": 50})  # fmt: skip
    stored = CachedAnswer(body=TEXT_ANSWER.body, model="claude-sonnet-4-5", usage=usage)
    assert await cache.put(key, stored)
    assert await cache.get(key) == stored
    assert await cache.get(response_cache_key("team-b", REQUEST)) is None  # another team: a miss
    completion_again = (await cache.get(key) or TEXT_ANSWER).to_completion()
    assert completion_again == Completion(body=stored.body, usage=usage, model="claude-sonnet-4-5")
    assert CachedAnswer.from_completion(completion_again) == stored


async def test_entries_expire_and_big_bodies_are_not_stored(store: StateStore) -> None:
    cache = ResponseCache(store, ttl_seconds=0.05, max_body_bytes=len(TOOL_ANSWER.body))
    assert await cache.put("response:t:small", TOOL_ANSWER)
    assert not await cache.put("response:t:big", TEXT_ANSWER)
    assert await cache.get("response:t:big") is None
    assert await cache.get("response:t:small") == TOOL_ANSWER
    await asyncio.sleep(0.08)
    assert await cache.get("response:t:small") is None


async def test_pretty_printed_bodies_and_unreadable_values(store: StateStore) -> None:
    cache = ResponseCache(store, ttl_seconds=60, max_body_bytes=1 << 20)
    pretty = CachedAnswer(body=b'{\n  "id": "x"\n}\n', model="m", usage=Usage(prompt_tokens=1))
    await cache.put("response:t:pretty", pretty)
    assert await cache.get("response:t:pretty") == pretty  # newlines in the body survive
    await store.set("response:t:junk", b"not a cached answer")
    assert await cache.get("response:t:junk") is None
    assert decode(b'{"v": 99, "model": "m", "usage": {}}\n{}') is None  # a future format: a miss
    assert decode(b'{"v": 1, "model": "m", "usage": {"bogus": 1}}\n{}') is None


# --- stream replay ----------------------------------------------------------------------------------


def frames_to_objects(frames: list[bytes]) -> list[Any]:
    decoder = SSEDecoder()
    events = [event for frame in frames for event in decoder.feed(frame)]
    assert events[-1].data == b"[DONE]" and all(frame.endswith(b"\n\n") for frame in frames)
    return [orjson.loads(event.data) for event in events[:-1]]


@pytest.mark.parametrize("cached", [TEXT_ANSWER, TOOL_ANSWER], ids=["text", "tool_calls"])
@pytest.mark.parametrize("include_usage", [True, False])
def test_replay_is_a_valid_openai_stream(cached: CachedAnswer, include_usage: bool) -> None:
    objects = frames_to_objects(to_stream_chunks(cached, include_usage=include_usage))
    chunks = [ChatCompletionChunk.model_validate(obj) for obj in objects]
    original = ChatCompletion.model_validate_json(cached.body)
    assert all(c.id == original.id and c.model == original.model for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert sum(1 for c in chunks if c.choices and c.choices[0].finish_reason) == 1
    if include_usage:
        assert chunks[-1].choices == [] and chunks[-1].usage == original.usage
        assert all(obj["usage"] is None for obj in objects[:-1])
    else:
        assert all(c.usage is None for c in chunks) and all("usage" not in obj for obj in objects)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == (original.choices[0].message.content or "")
    assert 2 <= len(chunks) <= 10  # a few deltas, not one per token


@pytest.mark.parametrize("cached", [TEXT_ANSWER, TOOL_ANSWER], ids=["text", "tool_calls"])
def test_the_openai_sdk_accumulates_a_replay_into_the_cached_answer(cached: CachedAnswer) -> None:
    sse = b"".join(to_stream_chunks(cached, include_usage=True))
    # The openai SDK runs on httpx2, so its mock transport comes from there.
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(200, content=sse, headers={"content-type": "text/event-stream"})
    )
    with (
        httpx2.Client(transport=transport) as http,
        openai.OpenAI(api_key="k", base_url="http://tollgate/v1", http_client=http, max_retries=0) as sdk,
        sdk.chat.completions.stream(model="gpt-4o-mini", messages=QUESTION) as stream,  # type: ignore[arg-type]
    ):
        final = stream.get_final_completion()
    original = ChatCompletion.model_validate_json(cached.body)
    assert final.choices[0].message.content == original.choices[0].message.content
    assert final.choices[0].finish_reason == original.choices[0].finish_reason
    assert calls(final) == calls(original)
    assert final.usage == original.usage


def test_replay_chunks_carry_usage_for_the_ledger_and_dialect_encoders() -> None:
    chunks = replay_chunks(TEXT_ANSWER)
    assert chunks[-1].usage_only and chunks[-1].usage == TEXT_ANSWER.usage
    assert sum(c.content_chars for c in chunks) == len(TEXT)
    tool = replay_chunks(TOOL_ANSWER)
    assert sum(c.content_chars for c in tool) == len(CALL["function"]["arguments"])  # type: ignore[index]


def test_replay_keeps_logprobs_and_refusals() -> None:
    logprobs = {
        "content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}],
        "refusal": None,
    }
    with_logprobs = answer(completion({"role": "assistant", "content": "Hi"}, logprobs=logprobs))
    chunks = [
        ChatCompletionChunk.model_validate(o)
        for o in frames_to_objects(to_stream_chunks(with_logprobs, include_usage=False))
    ]
    assert [c.choices[0].logprobs.model_dump() for c in chunks if c.choices[0].logprobs] == [logprobs]
    refused = answer(completion({"role": "assistant", "content": None, "refusal": "I can't help."}))
    objects = frames_to_objects(to_stream_chunks(refused, include_usage=False))
    rebuilt = from_stream([orjson.dumps(o) for o in objects], usage=refused.usage)
    assert rebuilt is not None
    assert orjson.loads(rebuilt.body)["choices"][0]["message"]["refusal"] == "I can't help."


# --- reassembly -------------------------------------------------------------------------------------


@pytest.mark.parametrize("cached", [TEXT_ANSWER, TOOL_ANSWER], ids=["text", "tool_calls"])
def test_from_stream_inverts_the_replay(cached: CachedAnswer) -> None:
    rebuilt = from_stream(to_stream_chunks(cached, include_usage=True))
    assert rebuilt is not None
    assert ChatCompletion.model_validate_json(rebuilt.body) == ChatCompletion.model_validate_json(cached.body)
    assert rebuilt.usage == cached.usage and rebuilt.model == cached.model


def test_from_stream_reassembles_split_tool_calls_and_prefers_the_adapters_usage() -> None:
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return orjson.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    parts = [
        chunk({"role": "assistant", "content": ""}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "g", "arguments": "{}"},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Oslo"}'}}]}),
        chunk({}, "tool_calls"),
        orjson.dumps({**base, "choices": [], "usage": USAGE_OBJ}),
    ]
    canonical = Usage(
        prompt_tokens=1200, completion_tokens=40, cache_write_tokens=300, cache_write_1h_tokens=300
    )
    rebuilt = from_stream(parts, usage=canonical)
    assert rebuilt is not None and rebuilt.usage == canonical
    message = ChatCompletion.model_validate_json(rebuilt.body).choices[0].message
    assert message.content is None
    assert calls(ChatCompletion.model_validate_json(rebuilt.body)) == [
        ("call_a", "f", '{"city": "Oslo"}'),
        ("call_b", "g", "{}"),
    ]
    assert from_stream(parts[:-1]) is None  # no usage anywhere: not stored
    assert from_stream(parts[:-1], usage=canonical) is not None
    assert from_stream(parts[:-2] + parts[-1:]) is None  # never finished
    assert from_stream([*parts[:3], orjson.dumps({"error": {"message": "overloaded"}})]) is None
    assert from_stream([]) is None
    assert from_stream([b"not json"]) is None


@pytest.fixture(scope="module")
def openai_sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="openai", profile="instant") as server:
        yield server


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tool_calls"])
def test_a_real_stream_reassembles_into_what_the_same_request_answers_whole(
    openai_sandbox: SandboxServer, tools: bool
) -> None:
    body: dict[str, Any] = {"model": "gpt-4o-mini", "messages": QUESTION, "temperature": 0}
    if tools:
        parameters = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        body["tools"] = [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}]
        body["tool_choice"] = "required"
    with httpx.Client(
        base_url=openai_sandbox.base_url + "/v1", headers={"authorization": "Bearer k"}
    ) as http:
        whole = http.post("/chat/completions", json=body).json()
        streamed = http.post(
            "/chat/completions", json={**body, "stream": True, "stream_options": {"include_usage": True}}
        )
    rebuilt = from_stream([streamed.content])  # the raw SSE bytes, as one frame-bearing chunk
    assert rebuilt is not None
    got, want = ChatCompletion.model_validate_json(rebuilt.body), ChatCompletion.model_validate(whole)
    assert got.choices[0].message.content == want.choices[0].message.content
    assert got.choices[0].finish_reason == want.choices[0].finish_reason
    # The emulator draws a fresh call id per request; the call itself must match.
    assert [call[1:] for call in calls(got)] == [call[1:] for call in calls(want)]
    assert rebuilt.usage.prompt_tokens == whole["usage"]["prompt_tokens"]
    assert rebuilt.usage.completion_tokens == whole["usage"]["completion_tokens"]

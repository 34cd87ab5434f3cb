"""The openai dialect, driven by the official SDK and checked against its pydantic types."""

from __future__ import annotations

import base64
import struct
from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.types import CreateEmbeddingResponse, Model
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionFunctionToolParam,
)

from sandbox.server import SandboxServer
from tests.sandbox.clients import long_prompt, sdk, user

USER = user("Tell me about toll roads.")
WEATHER: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def raw_chat(client: openai.OpenAI, **params: Any) -> dict[str, Any]:
    """The JSON body exactly as the sandbox sent it, before the SDK touches it."""
    response = client.chat.completions.with_raw_response.create(**params)
    data: dict[str, Any] = orjson.loads(response.http_response.content)
    return data


def test_completion_validates_and_echoes_the_model(client: openai.OpenAI) -> None:
    data = raw_chat(client, model="gpt-4o-mini", messages=USER)
    completion = ChatCompletion.model_validate(data)
    assert completion.model == "gpt-4o-mini"
    assert completion.id.startswith("chatcmpl-")
    assert completion.system_fingerprint and completion.system_fingerprint.startswith("fp_")
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason == "stop"
    usage = completion.usage
    assert usage is not None
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert 20 <= usage.completion_tokens <= 64
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 0


def test_stream_chunks_validate_and_usage_matches(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="m", messages=USER, seed=5)
    stream = client.chat.completions.create(
        model="m", messages=USER, seed=5, stream=True, stream_options={"include_usage": True}
    )
    chunks = [ChatCompletionChunk.model_validate(c.model_dump()) for c in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and finishes.count("stop") == 1
    assert chunks[-1].choices == []
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage == whole.usage


def test_stream_wire_format(openai_sb: SandboxServer) -> None:
    body = {"model": "m", "messages": USER, "stream": True}
    response = httpx.post(openai_sb.base_url + "/v1/chat/completions", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    assert all(e.startswith("data: ") for e in events[:-1])
    first = orjson.loads(events[0].removeprefix("data: "))
    assert "usage" not in first  # only with include_usage, as OpenAI does


def test_max_tokens_gives_length(client: openai.OpenAI) -> None:
    legacy = client.chat.completions.create(model="m", messages=USER, max_tokens=5)
    current = client.chat.completions.create(model="m", messages=USER, max_completion_tokens=5)
    for completion in (legacy, current):
        assert completion.choices[0].finish_reason == "length"
        assert completion.usage is not None and completion.usage.completion_tokens == 5


def test_seed_determinism(client: openai.OpenAI) -> None:
    def text(seed: int) -> str | None:
        completion = client.chat.completions.create(model="m", messages=USER, seed=seed)
        return completion.choices[0].message.content

    assert text(1) == text(1)
    assert text(1) != text(2)


def test_n_choices_are_each_billed(client: openai.OpenAI) -> None:
    one = client.chat.completions.create(model="m", messages=USER, max_tokens=7)
    three = client.chat.completions.create(model="m", messages=USER, max_tokens=7, n=3)
    assert [c.index for c in three.choices] == [0, 1, 2]
    assert one.usage is not None and three.usage is not None
    assert three.usage.completion_tokens == 21
    assert three.usage.prompt_tokens == one.usage.prompt_tokens


def test_stop_sequence(client: openai.OpenAI) -> None:
    full = client.chat.completions.create(model="m", messages=USER).choices[0].message.content
    assert full
    stop = full.split()[2]
    cut = client.chat.completions.create(model="m", messages=USER, stop=[stop])
    content = cut.choices[0].message.content
    assert content is not None and stop not in content and full.startswith(content)
    assert cut.choices[0].finish_reason == "stop"


def test_forced_tool_call(client: openai.OpenAI) -> None:
    data = raw_chat(
        client,
        model="m",
        messages=USER,
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    completion = ChatCompletion.model_validate(data)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    assert isinstance(orjson.loads(call.function.arguments)["city"], str)


def test_streamed_tool_call(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="m", messages=USER, tools=[WEATHER], tool_choice="required", stream=True
    )
    chunks = list(stream)
    head = chunks[0].choices[0].delta.tool_calls
    assert head is not None and head[0].id and head[0].function is not None
    assert head[0].function.name == "get_weather"
    arguments = ""
    for chunk in chunks:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            arguments += (call.function.arguments if call.function else None) or ""
    assert "city" in orjson.loads(arguments)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_prefix_cache_reports_128_token_steps(client: openai.OpenAI) -> None:
    messages = user(long_prompt(1300))
    first = client.chat.completions.create(model="m", messages=messages)
    second = client.chat.completions.create(model="m", messages=messages)
    assert first.usage is not None and second.usage is not None
    assert first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert second.usage.prompt_tokens_details is not None
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached is not None and cached >= 1024 and cached % 128 == 0
    assert cached <= second.usage.prompt_tokens


def test_short_prompts_are_not_cached(client: openai.OpenAI) -> None:
    messages = user(long_prompt(500))
    for _ in range(2):
        usage = client.chat.completions.create(model="m", messages=messages).usage
        assert usage is not None and usage.prompt_tokens_details is not None
        assert usage.prompt_tokens_details.cached_tokens == 0


def test_models_list_and_retrieve(client: openai.OpenAI, openai_sb: SandboxServer) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == ["gpt-4o-mini", "gpt-4o", "text-embedding-3-small"]
    raw = httpx.get(openai_sb.base_url + "/v1/models").json()
    assert raw["object"] == "list"
    for card in raw["data"]:
        Model.model_validate(card)
    assert client.models.retrieve("anything").id == "anything"


def test_embeddings_float_and_base64(client: openai.OpenAI, openai_sb: SandboxServer) -> None:
    url = openai_sb.base_url + "/v1/embeddings"
    body = {"model": "text-embedding-3-small", "input": ["the cat sat", "the cat sat down"]}
    floats = CreateEmbeddingResponse.model_validate(
        httpx.post(url, json={**body, "encoding_format": "float"}).json()
    )
    assert len(floats.data) == 2 and len(floats.data[0].embedding) == 256
    assert floats.usage.prompt_tokens == 7
    a, b = (d.embedding for d in floats.data)
    assert abs(sum(x * x for x in a) - 1.0) < 1e-6
    assert sum(x * y for x, y in zip(a, b, strict=True)) > 0.6  # similar texts, close vectors
    packed = httpx.post(url, json={**body, "encoding_format": "base64"}).json()
    decoded = struct.unpack("<256f", base64.b64decode(packed["data"][0]["embedding"]))
    assert decoded == pytest.approx(a, abs=1e-6)
    # The SDK asks for base64 by default and decodes it itself.
    via_sdk = client.embeddings.create(model="e", input="the cat sat", dimensions=64)
    assert len(via_sdk.data[0].embedding) == 64
    tokens = client.embeddings.create(model="e", input=[[1, 2, 3], [4, 5]])
    assert tokens.usage.prompt_tokens == 5


def test_unknown_model_is_404_when_models_are_configured() -> None:
    with SandboxServer(profile="instant", models=["gpt-4o"]) as sb, sdk(sb) as client:
        assert [m.id for m in client.models.list().data] == ["gpt-4o"]
        client.chat.completions.create(model="gpt-4o", messages=USER)
        with pytest.raises(openai.NotFoundError) as caught:
            client.chat.completions.create(model="gpt-5x", messages=USER)
        error = caught.value.response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["code"] == "model_not_found"
        assert set(error) == {"message", "type", "param", "code"}


def test_invalid_requests_are_400_in_openai_shape(openai_sb: SandboxServer) -> None:
    url = openai_sb.base_url + "/v1/chat/completions"
    missing = httpx.post(url, json={"model": "m"})
    assert missing.status_code == 400
    assert missing.json() == {
        "error": {
            "message": "Missing required parameter: 'messages'.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "missing_required_parameter",
        }
    }
    no_model = httpx.post(url, json={"messages": USER})
    assert no_model.status_code == 400
    assert no_model.json()["error"]["type"] == "invalid_request_error"
    bad_json = httpx.post(url, content=b'{"model": ', headers={"content-type": "application/json"})
    assert bad_json.status_code == 400
    assert bad_json.json()["error"]["type"] == "invalid_request_error"
    zero = httpx.post(url, json={"model": "m", "messages": USER, "max_tokens": 0})
    assert zero.json()["error"]["code"] == "integer_below_min_value"
    unknown = httpx.post(openai_sb.base_url + "/v1/nothing", json={})
    assert unknown.status_code == 404


def test_request_log_keeps_the_exact_bytes(openai_sb: SandboxServer) -> None:
    raw = b'{"model":"m",  "messages":[{"role":"user","content":"caf\\u00e9"}], "x":1}'
    headers = {"content-type": "application/json", "authorization": "Bearer sk-abc"}
    httpx.post(openai_sb.base_url + "/v1/chat/completions", content=raw, headers=headers)
    log = httpx.get(openai_sb.base_url + "/_sandbox/requests").json()
    assert len(log) == 1
    entry = log[0]
    assert (entry["method"], entry["path"]) == ("POST", "/v1/chat/completions")
    assert entry["body"].encode() == raw
    assert entry["headers"]["authorization"] == "Bearer sk-abc"
    assert isinstance(entry["time"], float)

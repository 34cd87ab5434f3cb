"""Every provider behind the same endpoints, driven by the official SDKs as clients: the openai SDK
against Anthropic, Gemini and OpenAI upstreams; the anthropic SDK against `/v1/messages`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pydantic
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from sandbox.server import SandboxServer
from tests.conftest import PRICE
from tests.harness import GatewayServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

EVENTS: pydantic.TypeAdapter[RawMessageStreamEvent] = pydantic.TypeAdapter(RawMessageStreamEvent)
CLAUDE_PRICE = {
    "input_per_mtok": "3",
    "output_per_mtok": "15",
    "cached_input_per_mtok": "0.30",
    "cache_write_per_mtok": "3.75",
    "cache_write_1h_per_mtok": "6",
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris? Use get_weather."}]
CHAT_MODELS = ["gpt-4o-mini", "claude", "gemini"]


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, SandboxServer]]:
    with (
        SandboxServer(dialect="openai", profile="instant") as openai_sb,
        SandboxServer(dialect="anthropic", profile="instant") as anthropic_sb,
        SandboxServer(dialect="gemini", profile="instant") as gemini_sb,
        SandboxServer(dialect="anthropic", profile="managed") as slow_anthropic,
    ):
        yield {"openai": openai_sb, "anthropic": anthropic_sb, "gemini": gemini_sb, "slow": slow_anthropic}


@pytest.fixture(scope="module")
def gateway(
    upstreams: dict[str, SandboxServer], sqlite_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayServer]:
    from gateway.config.loader import build_config

    config = build_config(
        {
            "database": {"url": sqlite_url, "auto_migrate": False},
            "ledger": {"flush_interval_ms": 5, "spool_dir": str(tmp_path_factory.mktemp("spool"))},
            "providers": {
                "openai": {
                    "type": "openai",
                    "base_url": upstreams["openai"].base_url + "/v1",
                    "api_key": "sk-o",
                },
                "anthropic": {
                    "type": "anthropic",
                    "base_url": upstreams["anthropic"].base_url,
                    "api_key": "sk-a",
                },
                "anthropic-paced": {
                    "type": "anthropic",
                    "base_url": upstreams["slow"].base_url,
                    "api_key": "sk-a",
                },
                "gemini": {"type": "gemini", "base_url": upstreams["gemini"].base_url, "api_key": "g-k"},
            },
            "models": {
                "gpt-4o-mini": {"provider": "openai", "price": PRICE},
                "claude": {
                    "provider": "anthropic",
                    "upstream_model": "claude-sonnet-4-6",
                    "price": CLAUDE_PRICE,
                },
                "claude-paced": {
                    "provider": "anthropic-paced",
                    "upstream_model": "claude-sonnet-4-6",
                    "price": CLAUDE_PRICE,
                },
                "gemini": {"provider": "gemini", "upstream_model": "gemini-2.5-flash", "price": PRICE},
                "text-embedding-3-small": {
                    "provider": "openai",
                    "price": {"input_per_mtok": "0.02", "output_per_mtok": "0"},
                },
                "gemini-embedding": {
                    "provider": "gemini",
                    "upstream_model": "gemini-embedding-001",
                    "price": {"input_per_mtok": "0.15", "output_per_mtok": "0"},
                },
            },
        },
        environ={},
    )
    with GatewayServer(config) as server:
        yield server


@pytest.fixture
def oai(gateway: GatewayServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url + "/v1", api_key="k", max_retries=0) as client:
        yield client


@pytest.fixture
def claude_sdk(gateway: GatewayServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=gateway.base_url, api_key="k", max_retries=0) as client:
        yield client


@pytest.mark.parametrize("model", CHAT_MODELS)
def test_openai_sdk_against_every_upstream(oai: openai.OpenAI, gateway: GatewayServer, model: str) -> None:
    raw = oai.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": "Hi"}]
    )
    ChatCompletion.model_validate_json(raw.http_response.content)
    reply = raw.parse()
    assert reply.choices[0].message.content and reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.prompt_tokens > 0
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert (row["status"], row["prompt_tokens"], row["completion_tokens"]) == (
        200,
        reply.usage.prompt_tokens,
        reply.usage.completion_tokens,
    )
    assert row["cost_nano"] > 0


@pytest.mark.parametrize("model", CHAT_MODELS)
def test_openai_sdk_streams_from_every_upstream(
    oai: openai.OpenAI, gateway: GatewayServer, model: str
) -> None:
    with oai.chat.completions.with_streaming_response.create(
        model=model,
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        request_id = response.headers["x-request-id"]
        chunks = list(response.parse())
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk.model_dump())
    assert len({c.id for c in chunks}) == 1
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    row = gateway.ledger_row(request_id)
    assert row["completion_tokens"] == chunks[-1].usage.completion_tokens and row["usage_estimated"] is False


@pytest.mark.parametrize("model", CHAT_MODELS)
def test_tool_calls_round_trip(oai: openai.OpenAI, model: str) -> None:
    first = oai.chat.completions.create(model=model, messages=ASK, tools=[WEATHER], tool_choice="required")
    calls = first.choices[0].message.tool_calls
    assert first.choices[0].finish_reason == "tool_calls" and calls
    assert calls[0].function.name == "get_weather"
    assert isinstance(json.loads(calls[0].function.arguments), dict)
    follow_up: list[Any] = [
        *ASK,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": calls[0].id, "content": '{"temp_c": 12}'},
    ]
    answer = oai.chat.completions.create(model=model, messages=follow_up, tools=[WEATHER])
    assert answer.choices[0].message.content


@pytest.mark.parametrize("model", CHAT_MODELS)
def test_anthropic_sdk_through_messages_ingress(
    claude_sdk: anthropic.Anthropic, gateway: GatewayServer, model: str
) -> None:
    raw = claude_sdk.messages.with_raw_response.create(
        model=model, max_tokens=200, system="Be brief.", messages=[{"role": "user", "content": "Hi"}]
    )
    message = raw.parse()
    Message.model_validate_json(raw.http_response.content)
    assert message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 0
    assert message.id.startswith("msg_")  # whichever provider answered: the id clients expect
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert row["endpoint"] == "messages" and row["model"] == model and row["cost_nano"] > 0


@pytest.mark.parametrize("model", CHAT_MODELS)
def test_anthropic_sdk_streams_through_messages_ingress(claude_sdk: anthropic.Anthropic, model: str) -> None:
    hello: Any = [{"role": "user", "content": "Hi"}]
    events = list(claude_sdk.messages.create(model=model, max_tokens=200, messages=hello, stream=True))
    for event in events:
        EVENTS.validate_python(event.model_dump())
    assert events[0].type == "message_start" and events[-1].type == "message_stop"
    with claude_sdk.messages.stream(model=model, max_tokens=200, messages=hello) as stream:
        final = stream.get_final_message()
    assert final.content[0].type == "text" and final.content[0].text
    assert final.usage.output_tokens > 0 and final.id.startswith("msg_")


def test_anthropic_sdk_tool_use_round_trip_answered_by_openai(claude_sdk: anthropic.Anthropic) -> None:
    tool = {
        "name": "get_weather",
        "description": "weather",
        "input_schema": WEATHER["function"]["parameters"],
    }  # type: ignore[index]
    first = claude_sdk.messages.create(
        model="gpt-4o-mini",
        max_tokens=200,
        tools=[tool],
        tool_choice={"type": "any"},
        messages=ASK,  # type: ignore[list-item]
    )
    use = [b for b in first.content if b.type == "tool_use"]
    assert first.stop_reason == "tool_use" and use and use[0].name == "get_weather"
    answer = claude_sdk.messages.create(
        model="gpt-4o-mini",
        max_tokens=200,
        tools=[tool],  # type: ignore[list-item]
        messages=[
            *ASK,  # type: ignore[list-item]
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},  # type: ignore[misc]
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use[0].id, "content": "12 C"}],
            },
        ],
    )
    assert answer.content[0].type == "text"


def test_messages_ingress_errors_are_anthropic_shaped(claude_sdk: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        claude_sdk.messages.create(model="nope", max_tokens=10, messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.body["type"] == "error"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError):
        claude_sdk.messages.create(model="claude", max_tokens=10, messages=[])


def test_anthropic_prompt_cache_reads_are_billed_cheaper(oai: openai.OpenAI, gateway: GatewayServer) -> None:
    context = "Toll roads and their history across Europe. " * 300
    messages: list[Any] = [
        {
            "role": "system",
            "content": [{"type": "text", "text": context, "cache_control": {"type": "ephemeral"}}],
        },
        {"role": "user", "content": "Summarise."},
    ]
    first = oai.chat.completions.with_raw_response.create(model="claude", messages=messages)
    second = oai.chat.completions.with_raw_response.create(model="claude", messages=messages)
    written = gateway.ledger_row(first.headers["x-request-id"])
    read = gateway.ledger_row(second.headers["x-request-id"])
    assert written["cache_write_tokens"] > 1000 and written["cached_tokens"] == 0
    assert read["cached_tokens"] == written["cache_write_tokens"]
    assert read["prompt_tokens"] == written["prompt_tokens"]
    # The same prompt: writing it cost 1.25x input, reading it 0.1x.
    assert read["input_cost_nano"] < written["input_cost_nano"] / 5
    usage = second.parse().usage
    assert usage is not None and usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == read["cached_tokens"]


def test_anthropic_stream_reaches_the_client_chunk_by_chunk(
    oai: openai.OpenAI, gateway: GatewayServer
) -> None:
    """Paced at about 50 tokens/s upstream: the first chunk must arrive long before the last."""
    started = time.monotonic()
    arrivals = []
    with oai.chat.completions.with_streaming_response.create(
        model="claude-paced", messages=[{"role": "user", "content": "Hi"}], stream=True
    ) as response:
        request_id = response.headers["x-request-id"]
        for chunk in response.parse():
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic() - started)
    assert len(arrivals) > 5
    assert arrivals[-1] - arrivals[0] > 0.3, arrivals
    row = gateway.ledger_row(request_id)
    assert row["ttft_ms"] < (arrivals[-1] * 1000) - 300
    assert row["completion_tokens"] > 0


@pytest.mark.parametrize(
    ("model", "estimated"), [("text-embedding-3-small", False), ("gemini-embedding", True)]
)
def test_embeddings_with_usage_and_cost(
    oai: openai.OpenAI, gateway: GatewayServer, model: str, estimated: bool
) -> None:
    # The SDK asks for base64 and decodes it; what it hands back must be a valid response.
    raw = oai.embeddings.with_raw_response.create(model=model, input=["toll roads", "gateways"])
    result = raw.parse()
    CreateEmbeddingResponse.model_validate(result.model_dump())
    assert len(result.data) == 2 and len(result.data[0].embedding) > 10
    assert any(value != 0 for value in result.data[0].embedding)
    assert result.data[0].embedding != result.data[1].embedding
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert row["endpoint"] == "embeddings" and row["status"] == 200
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] == 0 and row["cost_nano"] > 0
    assert row["usage_estimated"] is estimated


def test_embeddings_bad_input_is_400(oai: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oai.embeddings.create(model="text-embedding-3-small", input=[])
    assert caught.value.code == "invalid_request" or caught.value.param == "input"


def test_client_that_leaves_mid_stream_is_billed_from_what_the_provider_reported(
    gateway: GatewayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client reads a few chunks of a paced Claude answer and hangs up: the row says 499 and is
    billed from Anthropic's own `message_start` usage (the prompt exactly, its cache reads at 0.1x)
    plus the part of the answer that was generated, marked as an estimate. Counting the prompt
    ourselves would bill a cached prompt at the full input price."""
    import httpx

    from gateway.accounting import estimate

    counted: list[str] = []
    monkeypatch.setattr(estimate, "count_tokens", lambda text: counted.append(text) or 0)
    document = " ".join(f"clause {i} of the master services agreement." for i in range(400))
    messages = [{"role": "system", "content": document}, {"role": "user", "content": "Tell me a story"}]
    whole = httpx.post(
        gateway.base_url + "/v1/chat/completions",
        json={"model": "claude-paced", "messages": messages},
        timeout=30,
    )
    assert whole.status_code == 200  # the prompt is now in Anthropic's cache
    first = gateway.ledger_row(whole.headers["x-request-id"])
    body = {"model": "claude-paced", "stream": True, "messages": messages}
    with httpx.stream("POST", gateway.base_url + "/v1/chat/completions", json=body, timeout=30) as response:
        request_id = response.headers["x-request-id"]
        seen = 0
        for line in response.iter_lines():
            if line.startswith("data: ") and '"content"' in line:
                seen += 1
                if seen == 3:
                    break
    deadline = time.monotonic() + 5
    while True:
        rows = [r for r in gateway.ledger_rows() if r["id"] == request_id]
        if rows or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    (row,) = rows
    assert row["status"] == 499 and row["error_type"] == "client_closed"
    assert row["usage_estimated"] is True and not counted
    assert first["cache_write_tokens"] > 0 and row["prompt_tokens"] == first["prompt_tokens"]
    assert row["cached_tokens"] == first["cache_write_tokens"]
    assert 0 < row["completion_tokens"] and 0 < row["cost_nano"] < first["cost_nano"]

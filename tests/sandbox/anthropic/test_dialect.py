"""The anthropic dialect, driven by the official SDK and checked against its pydantic types."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import orjson
import pydantic
import pytest
from anthropic.types import Message, MessageParam, ModelInfo, RawMessageStreamEvent, ToolParam

from sandbox.server import SandboxServer
from tests.sandbox.clients import anthropic_sdk, long_prompt

MODEL = "claude-sonnet-4-6"
USER: list[MessageParam] = [{"role": "user", "content": "Tell me about toll roads."}]
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
WEATHER: ToolParam = {
    "name": "get_weather",
    "description": "Current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
}
EVENTS: pydantic.TypeAdapter[RawMessageStreamEvent] = pydantic.TypeAdapter(RawMessageStreamEvent)


def raw(
    http: httpx.Client, sb: SandboxServer, body: dict[str, Any], headers: dict[str, str] = HEADERS
) -> httpx.Response:
    return http.post(sb.base_url + "/v1/messages", json=body, headers=headers)


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``(event name, data)`` of every SSE event, checking the name matches the data's type."""
    out = []
    for chunk in text.strip().split("\n\n"):
        name_line, data_line = chunk.split("\n")
        name, data = name_line.removeprefix("event: "), orjson.loads(data_line.removeprefix("data: "))
        assert data["type"] == name
        out.append((name, data))
    return out


def dump(message: Message) -> list[dict[str, Any]]:
    """Content blocks as plain data (a stream's final message uses the Parsed* block classes)."""
    return [block.model_dump(exclude={"parsed_output"}) for block in message.content]


def test_message_validates_and_carries_a_request_id(claude: anthropic.Anthropic) -> None:
    response = claude.messages.with_raw_response.create(model=MODEL, max_tokens=200, messages=USER)
    message = Message.model_validate(orjson.loads(response.http_response.content))
    assert message.id.startswith("msg_") and message.model == MODEL and message.role == "assistant"
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert message.content[0].type == "text" and message.content[0].text
    usage = message.usage
    assert usage.input_tokens > 0 and 20 <= usage.output_tokens <= 64
    assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)
    assert usage.service_tier == "standard"
    assert response.http_response.headers["request-id"].startswith("req_")
    assert "anthropic-ratelimit-requests-remaining" in response.http_response.headers


def test_stream_events_parse_and_accumulate_to_the_whole_message(claude: anthropic.Anthropic) -> None:
    whole = claude.messages.create(model=MODEL, max_tokens=200, messages=USER)
    events = [EVENTS.validate_python(e.to_dict()) for e in claude.messages.create(
        model=MODEL, max_tokens=200, messages=USER, stream=True)]  # fmt: skip
    kinds = [e.type for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    start = events[0]
    assert start.type == "message_start" and start.message.content == [] and start.message.stop_reason is None
    assert start.message.usage.output_tokens == 1
    with claude.messages.stream(model=MODEL, max_tokens=200, messages=USER) as stream:
        final = stream.get_final_message()
    assert dump(final) == dump(whole)
    assert final.stop_reason == whole.stop_reason and final.usage == whole.usage


def test_stream_wire_format(http: httpx.Client, anthropic_sb: SandboxServer) -> None:
    response = raw(http, anthropic_sb, {"model": MODEL, "max_tokens": 50, "messages": USER, "stream": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["request-id"].startswith("req_")
    events = sse_events(response.text)
    assert [n for n, _ in events][:3] == ["message_start", "content_block_start", "ping"]
    assert "[DONE]" not in response.text
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"]["output_tokens"] > 1 and delta["usage"]["input_tokens"] > 0


def test_max_tokens_and_stop_sequences(claude: anthropic.Anthropic) -> None:
    short = claude.messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 5
    full = claude.messages.create(model=MODEL, max_tokens=200, messages=USER)
    assert full.content[0].type == "text"
    stop = full.content[0].text.split()[3]
    cut = claude.messages.create(model=MODEL, max_tokens=200, messages=USER, stop_sequences=[stop])
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop
    assert cut.content[0].type == "text" and stop not in cut.content[0].text
    with claude.messages.stream(model=MODEL, max_tokens=200, messages=USER, stop_sequences=[stop]) as s:
        assert s.get_final_message().stop_sequence == stop


def cached_request(claude: anthropic.Anthropic, ttl: str = "5m", words: int = 1300) -> Message:
    mark = {"type": "ephemeral", "ttl": ttl}
    system: Any = [{"type": "text", "text": long_prompt(words), "cache_control": mark}]
    return claude.messages.create(model=MODEL, max_tokens=20, system=system, messages=USER)


def test_cache_control_writes_then_reads(claude: anthropic.Anthropic) -> None:
    first, second = cached_request(claude), cached_request(claude)
    written = first.usage.cache_creation_input_tokens
    assert written is not None and written >= 1300 and first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation is not None
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == written
    assert second.usage.cache_read_input_tokens == written and second.usage.cache_creation_input_tokens == 0
    assert first.usage.input_tokens == second.usage.input_tokens < 30  # only the uncached tail
    count = claude.messages.count_tokens(model=MODEL, messages=USER, system=long_prompt(1300)).input_tokens
    assert count == first.usage.input_tokens + written


def test_one_hour_ttl_and_moving_breakpoint(claude: anthropic.Anthropic) -> None:
    usage = cached_request(claude, ttl="1h", words=1100).usage
    assert usage.cache_creation is not None
    written = usage.cache_creation_input_tokens
    assert written is not None and written >= 1100
    assert usage.cache_creation.ephemeral_1h_input_tokens == written
    assert usage.cache_creation.ephemeral_5m_input_tokens == 0
    # A conversation that moves its breakpoint to the newest turn reads the old prefix.
    turn: list[MessageParam] = [
        {"role": "user", "content": [{"type": "text", "text": long_prompt(1200), "cache_control": {"type": "ephemeral"}}]},
    ]  # fmt: skip
    one = claude.messages.create(model=MODEL, max_tokens=20, messages=turn)
    tail: list[MessageParam] = [
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": [{"type": "text", "text": "And then?", "cache_control": {"type": "ephemeral"}}]},
    ]  # fmt: skip
    two = claude.messages.create(
        model=MODEL, max_tokens=20, messages=[{"role": "user", "content": long_prompt(1200)}, *tail]
    )
    assert two.usage.cache_read_input_tokens == one.usage.cache_creation_input_tokens
    assert 0 < (two.usage.cache_creation_input_tokens or 0) < 20


def test_short_prefixes_are_silently_not_cached(claude: anthropic.Anthropic) -> None:
    for _ in range(2):
        usage = cached_request(claude, words=500).usage
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)


def test_cache_control_limits(http: httpx.Client, anthropic_sb: SandboxServer) -> None:
    mark = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": mark} for i in range(5)]
    five = raw(
        http,
        anthropic_sb,
        {"model": MODEL, "max_tokens": 9, "messages": [{"role": "user", "content": blocks}]},
    )
    assert five.status_code == 400
    assert (
        five.json()["error"]["message"]
        == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )
    order = [{"type": "text", "text": "a", "cache_control": mark},
             {"type": "text", "text": "b", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]  # fmt: skip
    bad = raw(http, anthropic_sb, {"model": MODEL, "max_tokens": 9, "system": order, "messages": USER})
    assert (
        bad.status_code == 400 and "system.1.cache_control.ttl: a ttl='1h'" in bad.json()["error"]["message"]
    )


def test_forced_tool_use_round_trip(claude: anthropic.Anthropic) -> None:
    first = claude.messages.create(
        model=MODEL, max_tokens=200, messages=USER, tools=[WEATHER], tool_choice={"type": "any"}
    )
    assert first.stop_reason == "tool_use" and len(first.content) == 1
    call = first.content[0]
    assert call.type == "tool_use" and call.id.startswith("toolu_") and call.name == "get_weather"
    assert isinstance(call.input, dict) and isinstance(call.input["city"], str)
    echoed: Any = call.model_dump(include={"type", "id", "name", "input"})
    follow: list[MessageParam] = [
        *USER,
        {"role": "assistant", "content": [echoed]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Sunny, 21 C"}],
        },
    ]
    answer = claude.messages.create(model=MODEL, max_tokens=200, messages=follow, tools=[WEATHER])
    assert answer.stop_reason == "end_turn" and answer.content[0].type == "text"
    with claude.messages.stream(
        model=MODEL,
        max_tokens=200,
        messages=USER,
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"},
    ) as stream:
        streamed = stream.get_final_message()
    assert streamed.content[0].type == "tool_use" and streamed.content[0].input == call.input


def test_auto_tool_use_when_the_user_names_the_tool(claude: anthropic.Anthropic) -> None:
    plain = claude.messages.create(model=MODEL, max_tokens=200, messages=USER, tools=[WEATHER])
    assert plain.stop_reason == "end_turn"
    asked = claude.messages.create(
        model=MODEL, max_tokens=200, tools=[WEATHER],
        messages=[{"role": "user", "content": "Use get_weather for Paris."}],
    )  # fmt: skip
    assert asked.stop_reason == "tool_use"
    assert [b.type for b in asked.content] == ["text", "tool_use"]


def test_tool_pairing_is_checked(http: httpx.Client, anthropic_sb: SandboxServer) -> None:
    use = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "x"}}
    orphan = [*USER, {"role": "assistant", "content": [use]}, {"role": "user", "content": "well?"}]
    response = raw(
        http, anthropic_sb, {"model": MODEL, "max_tokens": 9, "tools": [WEATHER], "messages": orphan}
    )
    assert response.status_code == 400 and "toolu_01" in response.json()["error"]["message"]
    stray = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "hi"}]}
    ]
    response = raw(http, anthropic_sb, {"model": MODEL, "max_tokens": 9, "messages": stray})
    assert "unexpected `tool_use_id`" in response.json()["error"]["message"]


def test_thinking_blocks_and_signatures(
    http: httpx.Client, claude: anthropic.Anthropic, anthropic_sb: SandboxServer
) -> None:
    thinking: Any = {"type": "enabled", "budget_tokens": 1024}
    message = claude.messages.create(model=MODEL, max_tokens=2000, messages=USER, thinking=thinking)
    assert [b.type for b in message.content] == ["thinking", "text"]
    block = message.content[0]
    assert block.type == "thinking" and block.thinking and block.signature
    with claude.messages.stream(model=MODEL, max_tokens=2000, messages=USER, thinking=thinking) as stream:
        assert dump(stream.get_final_message()) == dump(message)
    tampered = {"type": "thinking", "thinking": block.thinking + "!", "signature": block.signature}
    turns = [*USER, {"role": "assistant", "content": [tampered, {"type": "text", "text": "Hi."}]}, *USER]
    response = raw(
        http, anthropic_sb, {"model": MODEL, "max_tokens": 2000, "thinking": thinking, "messages": turns}
    )
    assert response.status_code == 400 and "Invalid `signature`" in response.json()["error"]["message"]
    low = raw(
        http, anthropic_sb, {"model": MODEL, "max_tokens": 1000, "thinking": thinking, "messages": USER}
    )
    assert "`max_tokens` must be greater than `thinking.budget_tokens`" in low.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": MODEL, "messages": USER}, "max_tokens: Field required"),
        ({"model": MODEL, "max_tokens": 9, "messages": USER * 2},
         'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row'),
        ({"model": MODEL, "max_tokens": 9, "messages": [{"role": "assistant", "content": "hi"}]},
         'messages: first message must use the "user" role'),
        ({"model": MODEL, "max_tokens": 9, "messages": USER, "temperature": 1.5},
         "temperature: Input should be less than or equal to 1"),
        ({"model": MODEL, "max_tokens": 9, "messages": USER, "n": 2}, "n: Extra inputs are not permitted"),
        ({"model": MODEL, "max_tokens": 9, "messages": [{"role": "system", "content": "x"}]},
         "messages.0.role: Input should be 'user' or 'assistant'"),
        ({"model": MODEL, "max_tokens": 9, "messages": []},
         "messages: List should have at least 1 item after validation, not 0"),
    ],
)  # fmt: skip
def test_invalid_requests(
    http: httpx.Client, anthropic_sb: SandboxServer, body: dict[str, Any], message: str
) -> None:
    response = raw(http, anthropic_sb, body)
    assert response.status_code == 400
    data = response.json()
    assert data["type"] == "error" and data["error"] == {"type": "invalid_request_error", "message": message}
    assert data["request_id"] == response.headers["request-id"]


def test_sdk_sees_bad_requests(claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=MODEL, max_tokens=9, messages=USER, extra_body={"temperature": 2})
    assert caught.value.type == "invalid_request_error"


def test_authentication_and_version_headers(http: httpx.Client, anthropic_sb: SandboxServer) -> None:
    body = {"model": MODEL, "max_tokens": 9, "messages": USER}
    missing = raw(http, anthropic_sb, body, headers={"anthropic-version": "2023-06-01"})
    assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"
    no_version = raw(http, anthropic_sb, body, headers={"x-api-key": "k"})
    assert no_version.status_code == 400 and "anthropic-version" in no_version.json()["error"]["message"]
    bearer = raw(
        http, anthropic_sb, body, headers={"authorization": "Bearer k", "anthropic-version": "2023-06-01"}
    )
    assert bearer.status_code == 200


def test_count_tokens_matches_billed_input(claude: anthropic.Anthropic) -> None:
    counted = claude.messages.count_tokens(model=MODEL, messages=USER, tools=[WEATHER])
    billed = claude.messages.create(model=MODEL, max_tokens=9, messages=USER, tools=[WEATHER]).usage
    assert counted.input_tokens == billed.input_tokens > 300  # tools add the hidden tool prompt


def test_models_list_and_retrieve(
    http: httpx.Client, claude: anthropic.Anthropic, anthropic_sb: SandboxServer
) -> None:
    assert [m.id for m in claude.models.list()] == [
        "claude-sonnet-4-6",
        "claude-opus-4-6",
        "claude-haiku-4-5-20251001",
    ]
    data = http.get(anthropic_sb.base_url + "/v1/models?limit=2", headers=HEADERS).json()
    assert (data["has_more"], data["first_id"], data["last_id"]) == (
        True,
        "claude-sonnet-4-6",
        "claude-opus-4-6",
    )
    for card in data["data"]:
        ModelInfo.model_validate(card)
    assert claude.models.retrieve("claude-x").display_name == "claude-x"


def test_unknown_model_is_404_when_models_are_configured() -> None:
    with SandboxServer(dialect="anthropic", profile="instant", models=[MODEL]) as sb, anthropic_sdk(sb) as c:
        c.messages.create(model=MODEL, max_tokens=9, messages=USER)
        with pytest.raises(anthropic.NotFoundError) as caught:
            c.messages.create(model="claude-nope", max_tokens=9, messages=USER)
        assert caught.value.type == "not_found_error"


def test_request_log_and_reset_work(
    http: httpx.Client, anthropic_sb: SandboxServer, claude: anthropic.Anthropic
) -> None:
    claude.messages.create(model=MODEL, max_tokens=9, messages=USER)
    log = http.get(anthropic_sb.base_url + "/_sandbox/requests").json()
    assert [e["path"] for e in log] == ["/v1/messages"] and log[0]["headers"]["anthropic-version"]
    cached_request(claude)
    http.post(anthropic_sb.base_url + "/_sandbox/reset").raise_for_status()
    assert cached_request(claude).usage.cache_read_input_tokens == 0


def test_tool_choice_change_keeps_the_cached_system_prompt(claude: anthropic.Anthropic) -> None:
    system: Any = [{"type": "text", "text": long_prompt(1300), "cache_control": {"type": "ephemeral"}}]
    first = claude.messages.create(model=MODEL, max_tokens=9, system=system, tools=[WEATHER], messages=USER)
    forced = claude.messages.create(
        model=MODEL, max_tokens=9, system=system, tools=[WEATHER], messages=USER, tool_choice={"type": "any"}
    )
    assert first.usage.cache_creation_input_tokens and first.usage.cache_creation_input_tokens > 1300
    assert forced.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens

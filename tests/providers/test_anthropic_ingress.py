"""The Anthropic-compatible ingress: Messages requests in, OpenAI core, Anthropic messages and events out.

Outputs are checked with the anthropic SDK itself: its types, and its real client reading them.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import orjson
import pydantic
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from anthropic.types.shared import ErrorResponse

from providers.anthropic import (
    AnthropicStreamDecoder,
    AnthropicStreamEncoder,
    encode_events,
    from_anthropic_request,
    to_anthropic_error,
    to_anthropic_request,
    to_anthropic_response,
)
from providers.errors import UpstreamRejected
from usage import Usage

EVENT = pydantic.TypeAdapter(RawMessageStreamEvent)

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "list files"}, IMAGE]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Running ls."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}},
                {"type": "tool_use", "id": "toolu_2", "name": "screenshot", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py\nb.py"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "here"}, IMAGE],
                },
                {"type": "text", "text": "now what?", "cache_control": {"type": "ephemeral"}},
            ],
        },
    ],
    "tools": [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    "stop_sequences": ["STOP"],
    "temperature": 0.2,
    "top_k": 5,
    "thinking": {"type": "enabled", "budget_tokens": 2000},
    "metadata": {"user_id": "dev-7"},
    "stream": True,
}


def test_messages_request_becomes_an_openai_chat_request() -> None:
    body = from_anthropic_request(REQUEST)
    assert body["model"] == "claude-sonnet-4-5" and body["max_completion_tokens"] == 1024
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["stop"], body["temperature"], body["user"]) == (["STOP"], 0.2, "dev-7")
    assert body["parallel_tool_calls"] is False and body["tool_choice"] == "auto"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "bash", "parameters": {"type": "object"}, "description": "run"},
        }
    ]
    assert "thinking" not in body and "top_k" not in body
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    assistant = body["messages"][2]
    assert assistant["content"] == [{"type": "text", "text": "Running ls."}]
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == ['{"cmd":"ls"}', "{}"]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "a.py\nb.py"}
    assert body["messages"][4]["content"] == [{"type": "text", "text": "here"}]
    # The screenshot from the tool result rides in the user message that follows the tool messages.
    assert body["messages"][5]["content"][0] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }
    assert body["messages"][5]["content"][1]["cache_control"] == {"type": "ephemeral"}


def test_round_trip_through_the_openai_shape_keeps_the_conversation() -> None:
    """Anthropic -> OpenAI -> Anthropic keeps system, cache marks, images, tool_use and tool_result."""
    again = to_anthropic_request(
        from_anthropic_request(REQUEST), model="claude-sonnet-4-5", default_max_tokens=1
    )
    assert again["system"] == REQUEST["system"]
    assert again["max_tokens"] == 1024 and again["stop_sequences"] == ["STOP"]
    assert again["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert again["tools"] == REQUEST["tools"]
    user, assistant, results = again["messages"]
    assert user["content"] == REQUEST["messages"][0]["content"]
    assert assistant["content"] == REQUEST["messages"][1]["content"][1:]  # thinking dropped, by design
    assert [b["type"] for b in results["content"]] == ["tool_result", "tool_result", "image", "text"]
    assert results["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py\nb.py"}
    assert results["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_top_level_cache_control_and_structured_output() -> None:
    body = from_anthropic_request(
        {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
            "cache_control": {"type": "ephemeral"},
            "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
            "tool_choice": {"type": "any"},
        }
    )
    assert body["messages"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert "tool_choice" not in body  # no tools, nothing to choose from


@pytest.mark.parametrize(
    "request_body",
    [
        {"messages": "hi"},
        {"messages": [{"role": "system", "content": "x"}]},
        {"messages": [{"role": "user", "content": [{"type": "server_tool_use"}]}]},
        {
            "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        },
    ],
)
def test_requests_the_core_cannot_express_are_rejected(request_body: dict[str, Any]) -> None:
    with pytest.raises(UpstreamRejected) as caught:
        from_anthropic_request({"model": "m", "max_tokens": 5, **request_body})
    assert caught.value.status == 400


COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd":"ls"}'},
                    },
                    {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": "{bro"}},
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 2000,
        "completion_tokens": 30,
        "total_tokens": 2030,
        "prompt_tokens_details": {"cached_tokens": 1500},
    },
}


def test_completion_becomes_a_valid_anthropic_message() -> None:
    message = Message.model_validate(to_anthropic_response(COMPLETION, model="smart"))
    assert message.model == "smart" and message.stop_reason == "tool_use"
    assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]
    assert message.content[1].input == {"cmd": "ls"}  # type: ignore[union-attr]
    assert message.content[2].input == {"arguments": "{bro"}  # type: ignore[union-attr]
    assert (
        message.usage.input_tokens,
        message.usage.cache_read_input_tokens,
        message.usage.output_tokens,
    ) == (500, 1500, 30)
    canonical = Usage(prompt_tokens=2000, completion_tokens=30, cached_tokens=1000, cache_write_tokens=600)
    with_usage = Message.model_validate(to_anthropic_response(COMPLETION, model="smart", usage=canonical))
    assert (with_usage.usage.input_tokens, with_usage.usage.cache_creation_input_tokens) == (400, 600)


@pytest.mark.parametrize(
    ("finish", "stop_reason"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "refusal"), (None, "end_turn")],
)
def test_finish_reasons_map_to_stop_reasons(finish: str | None, stop_reason: str) -> None:
    choice = {"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": finish}
    assert (
        Message.model_validate(
            to_anthropic_response({**COMPLETION, "choices": [choice]}, model="m")
        ).stop_reason
        == stop_reason
    )


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "chatcmpl-9",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": choices,
        **extra,
    }


OPENAI_CHUNKS = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Let me "}),
    chunk({"content": "check."}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "bash", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"cmd":'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"ls"}'}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "pwd", "arguments": "{}"},
                }
            ]
        }
    ),
    chunk({}, finish="tool_calls"),
    chunk(
        usage={
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 60},
        }
    ),
]


def encoded_events() -> list[tuple[str, dict[str, Any]]]:
    encoder = AnthropicStreamEncoder(model="smart")
    events = [event for c in OPENAI_CHUNKS for event in encoder.encode(c)]
    return events + encoder.finish()


def test_stream_encoder_emits_valid_events_in_anthropic_order() -> None:
    events = encoded_events()
    for name, data in events:
        assert EVENT.validate_python(data).type == name
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    blocks = [data["content_block"]["type"] for name, data in events if name == "content_block_start"]
    assert blocks == ["text", "tool_use", "tool_use"]
    starts = [data["index"] for name, data in events if name == "content_block_start"]
    stops = [data["index"] for name, data in events if name == "content_block_stop"]
    assert starts == stops == [0, 1, 2]
    final = events[-2][1]
    assert final["delta"]["stop_reason"] == "tool_use"
    assert final["usage"] == {
        "input_tokens": 40,
        "output_tokens": 20,
        "cache_read_input_tokens": 60,
        "cache_creation_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    }


async def test_the_anthropic_sdk_reads_the_encoded_stream_and_message() -> None:
    wire = encode_events(encoded_events())

    def handler(request: httpx2.Request) -> httpx2.Response:
        if orjson.loads(request.content).get("stream"):
            return httpx2.Response(200, content=wire, headers={"content-type": "text/event-stream"})
        return httpx2.Response(200, json=to_anthropic_response(COMPLETION, model="smart"))

    # The anthropic SDK runs on httpx2, so its mock transport comes from there.
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    async with anthropic.AsyncAnthropic(
        api_key="k", base_url="http://gateway", http_client=http, max_retries=0
    ) as sdk:
        params: dict[str, Any] = {
            "model": "smart",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
        }
        async with sdk.messages.stream(**params) as stream:
            final = await stream.get_final_message()
        plain = await sdk.messages.create(**params)
    assert [block.type for block in final.content] == ["text", "tool_use", "tool_use"]
    assert final.content[0].text == "Let me check."  # type: ignore[union-attr]
    assert final.content[1].input == {"cmd": "ls"}  # type: ignore[union-attr]
    assert (final.usage.input_tokens, final.usage.cache_read_input_tokens, final.usage.output_tokens) == (
        40,
        60,
        20,
    )
    assert final.stop_reason == "tool_use"
    assert plain.content[1].type == "tool_use"


def test_anthropic_upstream_through_decoder_and_encoder_keeps_text_and_tool_input() -> None:
    """An Anthropic stream decoded to OpenAI chunks and re-encoded gives the same answer back."""
    from tests.providers.test_anthropic_client import EVENTS

    decoder = AnthropicStreamDecoder(model="claude", created=1)
    encoder = AnthropicStreamEncoder(model="smart")
    events: list[tuple[str, dict[str, Any]]] = []
    for name, data in EVENTS:
        for out in decoder.feed(name, data):
            events += encoder.encode(orjson.loads(out.data), usage=out.usage)
    events += encoder.finish()
    texts = [d["delta"].get("text", "") for n, d in events if n == "content_block_delta"]
    assert "".join(texts) == "Checking now."
    partial = "".join(d["delta"].get("partial_json", "") for n, d in events if n == "content_block_delta")
    assert orjson.loads(partial) == {"city": "Paris"}
    usage = events[-2][1]["usage"]
    assert (usage["input_tokens"], usage["cache_creation_input_tokens"], usage["output_tokens"]) == (
        20,
        500,
        42,
    )


def test_message_start_usage_is_kept_for_a_stream_that_breaks() -> None:
    """The prompt's exact count and its cache writes are known from `message_start` on: a stream cut
    before `message_delta` is billed from them, not from our own count of the prompt."""
    from tests.providers.test_anthropic_client import START

    (opening,) = AnthropicStreamDecoder(model="claude", created=1).feed(*START)
    assert opening.usage is None and opening.usage_so_far is not None
    assert (opening.usage_so_far.prompt_tokens, opening.usage_so_far.cache_write_tokens) == (520, 500)


def test_an_empty_stream_still_opens_and_closes_a_message() -> None:
    events = AnthropicStreamEncoder(model="m", message_id="msg_x").finish()
    assert [name for name, _ in events] == ["message_start", "message_delta", "message_stop"]
    assert events[0][1]["message"]["id"] == "msg_x"


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (402, "billing_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (422, "invalid_request_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (504, "timeout_error"),
        (529, "overloaded_error"),
    ],
)
def test_error_bodies_follow_anthropics_shape(status: int, error_type: str) -> None:
    body = to_anthropic_error(status, "nope")
    assert ErrorResponse.model_validate(body).error.type == error_type
    assert AnthropicStreamEncoder(model="m").error(status, "nope") == [("error", body)]


def test_request_too_large_uses_the_documented_type() -> None:
    assert to_anthropic_error(413, "big")["error"]["type"] == "request_too_large"

"""OpenAI chat requests to Anthropic Messages requests and back, without a network."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pydantic
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat import ChatCompletion

from providers.anthropic.translate import (
    LEADING_USER_TEXT,
    from_anthropic_response,
    from_anthropic_usage,
    to_anthropic_request,
)
from providers.errors import UpstreamBadResponse, UpstreamRejected

MESSAGE_PARAMS = pydantic.TypeAdapter(MessageCreateParamsNonStreaming)


def validated(request: dict[str, Any]) -> Any:
    """Validate against the anthropic SDK's request type; its iterables validate only when consumed."""

    def force(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: force(item) for key, item in value.items()}
        if isinstance(value, list | tuple | Iterator):
            return [force(item) for item in value]
        return value

    return force(MESSAGE_PARAMS.validate_python(request))


def translate(**body: Any) -> dict[str, Any]:
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    request = to_anthropic_request(body, model="claude-x", default_max_tokens=1000)
    validated(request)
    return request


def test_system_and_developer_messages_are_lifted_with_their_cache_marks() -> None:
    mark = {"type": "ephemeral", "ttl": "1h"}
    request = translate(
        messages=[
            {"role": "system", "content": [{"type": "text", "text": "long rules", "cache_control": mark}]},
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": "be brief", "cache_control": {"type": "ephemeral"}},
            {"role": "user", "content": "again"},
        ]
    )
    assert request["system"] == [
        {"type": "text", "text": "long rules", "cache_control": mark},
        {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}},
    ]
    assert request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}]}
    ]
    assert request["max_tokens"] == 1000 and request["model"] == "claude-x"


def test_conversation_starting_with_the_assistant_gets_a_user_turn_first() -> None:
    request = translate(
        messages=[{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "x"}]
    )
    assert request["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": LEADING_USER_TEXT}],
    }
    assert [m["role"] for m in request["messages"]] == ["user", "assistant", "user"]
    only_system = translate(messages=[{"role": "system", "content": "s"}])
    assert [m["role"] for m in only_system["messages"]] == ["user"]


def test_images_pdfs_and_part_cache_marks() -> None:
    parts = [
        {"type": "text", "text": "what is this", "cache_control": {"type": "ephemeral"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "high"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0="}},
    ]
    blocks = translate(messages=[{"role": "user", "content": parts}])["messages"][0]["content"]
    assert blocks == [
        {"type": "text", "text": "what is this", "cache_control": {"type": "ephemeral"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
        },
    ]


def test_tool_calls_results_tools_and_choice() -> None:
    messages = [
        {"role": "user", "content": "weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": ""}},
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "rain"}]},
        {"role": "user", "content": "thanks"},
    ]
    tools = [
        {
            "type": "function",
            "function": {"name": "weather", "description": "d", "parameters": {"type": "object"}},
        }
    ]
    request = translate(messages=messages, tools=tools, tool_choice="required", parallel_tool_calls=False)
    assert request["tools"] == [{"name": "weather", "description": "d", "input_schema": {"type": "object"}}]
    assert request["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert request["messages"][1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "c2", "name": "weather", "input": {}},
    ]
    assert request["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c2", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "rain"}]},
            {"type": "text", "text": "thanks"},
        ],
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("none", {"type": "none"}),
        ({"type": "function", "function": {"name": "f"}}, {"type": "tool", "name": "f"}),
        ("auto", None),
    ],
)
def test_tool_choice_mapping(choice: Any, expected: dict[str, Any] | None) -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    request = translate(tools=tools, tool_choice=choice)
    assert request.get("tool_choice") == expected
    assert request["tools"][0]["input_schema"] == {"type": "object", "properties": {}}


def test_sampling_stop_user_and_passthrough() -> None:
    request = translate(
        temperature=0.3, top_p=0.9, top_k=40, stop="END", user="u-1", max_completion_tokens=77, seed=5,
        presence_penalty=1.0,
    )  # fmt: skip
    assert (request["temperature"], request["top_p"], request["top_k"]) == (0.3, 0.9, 40)
    assert request["stop_sequences"] == ["END"] and request["metadata"] == {"user_id": "u-1"}
    assert request["max_tokens"] == 77
    assert "seed" not in request and "presence_penalty" not in request
    assert translate(stop=["a", "b"], max_tokens=9)["stop_sequences"] == ["a", "b"]


def test_response_formats() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    strict = translate(
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    )
    assert strict["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    json_mode = translate(messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                          response_format={"type": "json_object"})  # fmt: skip
    assert json_mode["system"][0]["text"] == "s"
    assert "JSON" in json_mode["system"][-1]["text"]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"temperature": 1.7}, "temperature 1.7 is out of range"),
        ({"n": 2}, "n > 1"),
        ({"logprobs": True}, "logprobs"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}, "input_audio"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}]}, "data: URLs"),
        (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "r"}]},
            "must be a JSON object",
        ),
        (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]},
            "no tool message answering",
        ),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "zz", "content": "r"}]}, "do not each answer"),
        ({"tools": [{"type": "web_search"}]}, "only tools of type 'function'"),
        ({"messages": [{"role": "function", "name": "f", "content": "x"}]}, "role 'function'"),
    ],
)  # fmt: skip
def test_untranslatable_requests_are_rejected_with_a_clear_400(body: dict[str, Any], match: str) -> None:
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    with pytest.raises(UpstreamRejected, match=match) as caught:
        to_anthropic_request(body, model="m", default_max_tokens=10)
    assert (caught.value.status, caught.value.code, caught.value.retryable) == (
        400,
        "invalid_parameter",
        False,
    )


MESSAGE = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "thinking", "thinking": "secret plan", "signature": "sig"},
        {"type": "text", "text": "Let me check. "},
        {"type": "text", "text": "One moment."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 10,
        "output_tokens": 50,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 2000,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
        "output_tokens_details": {"thinking_tokens": 20},
    },
}


def test_response_becomes_a_valid_chat_completion() -> None:
    body = from_anthropic_response(MESSAGE, created=123)
    completion = ChatCompletion.model_validate(body)
    message = completion.choices[0].message
    assert message.content == "Let me check. One moment."
    assert "secret plan" not in orjson.dumps(body).decode()
    assert message.tool_calls is not None and message.tool_calls[0].id == "toolu_1"
    assert orjson.loads(message.tool_calls[0].function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage is not None and completion.usage.prompt_tokens == 2310
    assert completion.usage.prompt_tokens_details is not None
    assert completion.usage.prompt_tokens_details.cached_tokens == 2000
    assert (completion.id, completion.created, completion.model) == ("msg_01", 123, MESSAGE["model"])


def test_usage_follows_the_openai_convention() -> None:
    usage = from_anthropic_usage(MESSAGE["usage"])
    assert (
        usage.prompt_tokens,
        usage.cached_tokens,
        usage.cache_write_tokens,
        usage.cache_write_1h_tokens,
    ) == (
        2310,
        2000,
        300,
        200,
    )
    assert (usage.completion_tokens, usage.reasoning_tokens, usage.total_tokens) == (50, 20, 2360)
    assert usage.raw is MESSAGE["usage"]
    assert from_anthropic_usage(None).total_tokens == 0


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("pause_turn", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
    ],
)
def test_stop_reasons(stop_reason: str, finish_reason: str) -> None:
    obj = {**MESSAGE, "content": [{"type": "text", "text": "x"}], "stop_reason": stop_reason}
    assert (
        ChatCompletion.model_validate(from_anthropic_response(obj, created=1)).choices[0].finish_reason
        == finish_reason
    )


def test_a_body_that_is_not_a_message_is_a_bad_response() -> None:
    with pytest.raises(UpstreamBadResponse):
        from_anthropic_response({"type": "error"}, created=1)

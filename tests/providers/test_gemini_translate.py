"""OpenAI chat requests to Gemini generateContent bodies and back, without a network."""

from __future__ import annotations

import base64
import struct
from typing import Any

import orjson
import pytest
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion

from providers.errors import UpstreamBadResponse, UpstreamRejected
from providers.gemini import (
    from_gemini_embeddings,
    from_gemini_response,
    from_gemini_usage,
    to_gemini_embeddings_request,
    to_gemini_request,
)
from providers.gemini.content import SKIP_SIGNATURE


def translate(**body: Any) -> dict[str, Any]:
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    return to_gemini_request(body)


def test_roles_system_instruction_and_media() -> None:
    request = translate(
        messages=[
            {"role": "system", "content": "rule one"},
            {"role": "developer", "content": [{"type": "text", "text": "rule two"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png?x=1"}},
                    {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
                ],
            },
            {"role": "assistant", "content": "seen"},
            {"role": "user", "content": "and?"},
        ]
    )
    assert request["systemInstruction"] == {"parts": [{"text": "rule one"}, {"text": "rule two"}]}
    assert [c["role"] for c in request["contents"]] == ["user", "model", "user"]
    assert request["contents"][0]["parts"] == [
        {"text": "look"},
        {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
        {"fileData": {"mimeType": "image/png", "fileUri": "https://example.com/a.png?x=1"}},
        {"inlineData": {"mimeType": "audio/wav", "data": "UklG"}},
    ]


def test_generation_config() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    request = translate(
        temperature=1.5, top_p=0.9, top_k=20, max_tokens=10, max_completion_tokens=99, stop="END", n=2, seed=3,
        presence_penalty=0.5, frequency_penalty=0.1, user="ignored",
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}},
    )  # fmt: skip
    assert request["generationConfig"] == {
        "temperature": 1.5,
        "topP": 0.9,
        "topK": 20,
        "presencePenalty": 0.5,
        "frequencyPenalty": 0.1,
        "seed": 3,
        "maxOutputTokens": 99,
        "stopSequences": ["END"],
        "candidateCount": 2,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }
    assert "generationConfig" not in translate()
    assert translate(response_format={"type": "json_object"})["generationConfig"] == {
        "responseMimeType": "application/json"
    }


def test_tools_calls_responses_and_thought_signatures() -> None:
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                    "extra_content": {"google": {"thought_signature": "SIG=="}},
                },
                {"id": "c2", "type": "function", "function": {"name": "time", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "noon"},
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 3}'},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "time", "arguments": ""}}],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "[1, 2]"},
    ]
    tools = [
        {
            "type": "function",
            "function": {"name": "weather", "description": "w", "parameters": {"type": "object"}},
        },
        {"type": "function", "function": {"name": "time"}},
    ]
    request = translate(
        messages=messages, tools=tools, tool_choice={"type": "function", "function": {"name": "time"}}
    )
    assert request["tools"] == [
        {
            "functionDeclarations": [
                {"name": "weather", "description": "w", "parametersJsonSchema": {"type": "object"}},
                {"name": "time"},
            ]
        }
    ]
    assert request["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["time"]}
    }
    model, answers, second, second_answers = request["contents"][1:]
    assert model["parts"] == [
        {"text": "checking"},
        {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "SIG=="},
        {"functionCall": {"name": "time", "args": {}}},
    ]
    assert answers == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "time", "response": {"result": "noon"}}},
            {"functionResponse": {"name": "weather", "response": {"temp": 3}}},
        ],
    }
    assert second["parts"][0]["thoughtSignature"] == SKIP_SIGNATURE
    assert second_answers["parts"] == [{"functionResponse": {"name": "time", "response": {"result": [1, 2]}}}]


@pytest.mark.parametrize(
    ("choice", "config"),
    [("required", {"mode": "ANY"}), ("none", {"mode": "NONE"}), ("auto", None)],
)
def test_tool_choice(choice: str, config: dict[str, Any] | None) -> None:
    request = translate(tools=[{"type": "function", "function": {"name": "f"}}], tool_choice=choice)
    assert request.get("toolConfig") == (None if config is None else {"functionCallingConfig": config})


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"logprobs": True}, "logprobs"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "file:///x"}}]}]}, "data: URLs"),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "nope", "content": "r"}]}, "does not answer"),
        (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "r"}]},
            "must be a JSON object",
        ),
        (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "user", "content": "forgot"}]},
            "no tool message answering",
        ),
        ({"tools": [{"type": "code_interpreter"}]}, "only tools of type 'function'"),
    ],
)  # fmt: skip
def test_untranslatable_requests_are_rejected_with_a_clear_400(body: dict[str, Any], match: str) -> None:
    with pytest.raises(UpstreamRejected, match=match) as caught:
        translate(**body)
    assert (caught.value.status, caught.value.code) == (400, "invalid_parameter")


RESPONSE: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "thinking about it", "thought": True},
                    {"text": "It is "},
                    {"text": "sunny."},
                    {
                        "functionCall": {"name": "weather", "args": {"city": "Oslo"}},
                        "thoughtSignature": "SIG",
                    },
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 1200,
        "candidatesTokenCount": 30,
        "thoughtsTokenCount": 70,
        "cachedContentTokenCount": 1024,
        "toolUsePromptTokenCount": 5,
        "totalTokenCount": 1305,
    },
    "modelVersion": "gemini-2.5-pro",
    "responseId": "resp-1",
}


def test_response_becomes_a_valid_chat_completion() -> None:
    body = from_gemini_response(RESPONSE, id="chatcmpl-x", created=5, model="gemini-pro")
    completion = ChatCompletion.model_validate(body)
    message = completion.choices[0].message
    assert message.content == "It is sunny." and "thinking about it" not in orjson.dumps(body).decode()
    assert completion.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert call.id == "call_resp-1_0_0" and orjson.loads(call.function.arguments) == {"city": "Oslo"}  # type: ignore[union-attr]
    assert body["choices"][0]["message"]["tool_calls"][0]["extra_content"] == {
        "google": {"thought_signature": "SIG"}
    }
    assert (completion.id, completion.model, completion.created) == ("resp-1", "gemini-2.5-pro", 5)
    assert completion.usage is not None and completion.usage.prompt_tokens == 1205
    assert (
        completion.usage.completion_tokens == 100 and completion.usage.completion_tokens_details is not None
    )
    assert completion.usage.completion_tokens_details.reasoning_tokens == 70


def test_usage_convention() -> None:
    usage = from_gemini_usage(RESPONSE["usageMetadata"])
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, usage.reasoning_tokens) == (
        1205,
        1024,
        100,
        70,
    )
    assert usage.total_tokens == RESPONSE["usageMetadata"]["totalTokenCount"]
    assert from_gemini_usage(None).total_tokens == 0


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "stop"),
        ("OTHER", "stop"),
    ],
)
def test_finish_reasons(reason: str, finish: str) -> None:
    candidate = {"content": {"parts": [{"text": "x"}]}, "finishReason": reason}
    body = from_gemini_response({"candidates": [candidate]}, id="i", created=1, model="m")
    assert ChatCompletion.model_validate(body).choices[0].finish_reason == finish


def test_blocked_prompt_is_an_empty_filtered_completion() -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}}
    completion = ChatCompletion.model_validate(from_gemini_response(blocked, id="i", created=1, model="m"))
    assert completion.choices[0].finish_reason == "content_filter"
    assert completion.choices[0].message.content == ""
    assert completion.usage is not None and completion.usage.prompt_tokens == 9


def test_several_candidates_become_several_choices() -> None:
    candidates = [
        {"content": {"parts": [{"text": t}]}, "finishReason": "STOP", "index": i} for i, t in enumerate("ab")
    ]
    completion = ChatCompletion.model_validate(
        from_gemini_response({"candidates": candidates}, id="i", created=1, model="m")
    )
    assert [(c.index, c.message.content) for c in completion.choices] == [(0, "a"), (1, "b")]


def test_embeddings_request_and_answer() -> None:
    body = {"model": "emb", "input": ["hello world", "hi"], "dimensions": 3}
    assert to_gemini_embeddings_request(body, model="models/text-embedding-004") == {
        "requests": [
            {
                "model": "models/text-embedding-004",
                "content": {"parts": [{"text": "hello world"}]},
                "outputDimensionality": 3,
            },
            {
                "model": "models/text-embedding-004",
                "content": {"parts": [{"text": "hi"}]},
                "outputDimensionality": 3,
            },
        ]
    }
    upstream = {"embeddings": [{"values": [0.5, -1.0, 0.25]}, {"values": [1.0, 0.0, 0.0]}]}
    answer, usage = from_gemini_embeddings(upstream, body=body, model="text-embedding-004")
    parsed = CreateEmbeddingResponse.model_validate(answer)
    assert [d.embedding for d in parsed.data] == [[0.5, -1.0, 0.25], [1.0, 0.0, 0.0]]
    assert usage.prompt_tokens == parsed.usage.prompt_tokens == 4  # ceil(11/4) + ceil(2/4), an estimate
    encoded, _ = from_gemini_embeddings(upstream, body={**body, "encoding_format": "base64"}, model="m")
    raw = base64.b64decode(encoded["data"][0]["embedding"])
    assert list(struct.unpack("<3f", raw)) == [0.5, -1.0, 0.25]


def test_embeddings_refuse_token_inputs_and_short_answers() -> None:
    with pytest.raises(UpstreamRejected):
        to_gemini_embeddings_request({"input": [[1, 2, 3]]}, model="models/m")
    with pytest.raises(UpstreamBadResponse):
        from_gemini_embeddings({"embeddings": []}, body={"input": "x"}, model="m")

"""The `answer` fault: an emulator answers with exactly the (bad) output a test asks for, in a shape
the official SDK accepts, so escalation tests can make one model answer badly and deterministically."""

from __future__ import annotations

import httpx
import orjson
import pytest
from openai.types.chat import ChatCompletion

from sandbox.faults import parse_header, parse_rule
from sandbox.server import SandboxServer

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def ask(server: SandboxServer, fault: dict[str, object], **body: object) -> ChatCompletion:
    response = httpx.post(
        server.base_url + "/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "give me JSON"}], **body},
        headers={"x-sandbox-fault": orjson.dumps(fault).decode(), "authorization": "Bearer sk-x"},
    )
    assert response.status_code == 200, response.text
    return ChatCompletion.model_validate(response.json())


@pytest.mark.parametrize("dialect", ["openai", "vllm"])
def test_content_and_finish_reason_are_the_rules(dialect: str) -> None:
    with SandboxServer(dialect=dialect, profile="instant") as server:
        cut = ask(server, {"kind": "answer", "content": '{"answer": "B', "finish_reason": "length"})
        assert cut.choices[0].message.content == '{"answer": "B'
        assert cut.choices[0].finish_reason == "length"
        assert cut.usage is not None and cut.usage.completion_tokens > 0
        empty = ask(server, {"kind": "answer", "content": ""})
        assert empty.choices[0].message.content == "" and empty.choices[0].finish_reason == "stop"


def test_a_tool_call_with_broken_arguments() -> None:
    with SandboxServer(dialect="vllm", profile="instant") as server:
        answer = ask(
            server,
            {"kind": "answer", "tool_arguments": "{bad", "tool_name": "lookup"},
            tools=TOOLS,
            tool_choice="required",
        )
        calls = answer.choices[0].message.tool_calls
        assert calls is not None and calls[0].function.name == "lookup"  # type: ignore[union-attr]
        assert calls[0].function.arguments == "{bad"  # type: ignore[union-attr]
        assert answer.choices[0].finish_reason == "tool_calls"


def test_a_rule_with_a_model_filter_leaves_other_models_alone() -> None:
    with SandboxServer(dialect="openai", profile="instant") as server:
        rule = {"kind": "answer", "content": "not json", "model": "small", "count": -1}
        httpx.post(server.base_url + "/_sandbox/faults", json=[rule]).raise_for_status()
        messages = [{"role": "user", "content": "hello"}]
        small, large = (
            ChatCompletion.model_validate(
                httpx.post(
                    server.base_url + "/v1/chat/completions",
                    json={"model": model, "messages": messages},
                    headers={"authorization": "Bearer sk-x"},
                ).json()
            )
            for model in ("small", "large")
        )
        assert small.choices[0].message.content == "not json"
        assert large.choices[0].message.content not in (None, "not json")


def test_the_rule_is_checked() -> None:
    assert parse_header('{"kind": "answer", "content": "x"}').content == "x"
    with pytest.raises(ValueError, match="needs 'content', 'tool_arguments' or 'mean_logprob'"):
        parse_rule({"kind": "answer"})
    with pytest.raises(ValueError, match="finish_reason"):
        parse_rule({"kind": "answer", "content": "x", "finish_reason": "tired"})

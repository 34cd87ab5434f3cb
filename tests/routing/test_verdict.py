"""What counts as a verifiably bad answer: each check on its own, and what must not escalate."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.routing.verdict import judge

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["A", "B", "C", "D"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
JSON_SCHEMA = {"response_format": {"type": "json_schema", "json_schema": {"name": "mcq", "schema": SCHEMA}}}
JSON_OBJECT = {"response_format": {"type": "json_object"}}
TOOLS = {
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
}


def answer(
    content: str | None = None,
    *,
    finish: str = "stop",
    calls: list[tuple[str, str]] | None = None,
    logprobs: list[float] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ]
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    if logprobs is not None:
        choice["logprobs"] = {"content": [{"token": "x", "logprob": v} for v in logprobs]}
    return {"choices": [choice]}


@pytest.mark.parametrize(
    ("request_", "response", "reason"),
    [
        (JSON_SCHEMA, answer("The answer is B."), "json_schema"),
        (JSON_SCHEMA, answer('{"answer": "E"}'), "json_schema"),
        (JSON_SCHEMA, answer('{"answer": "B", "why": "x"}'), "json_schema"),
        (JSON_SCHEMA, answer('{"answer": "B'), "json_schema"),
        (JSON_SCHEMA, answer('{"answer": "B', finish="length"), "truncated"),
        (JSON_OBJECT, answer("B"), "json"),
        (TOOLS, answer(calls=[("weather", "{bad")], finish="tool_calls"), "tool_arguments"),
        (TOOLS, answer(calls=[("weather", '{"town": "Oslo"}')], finish="tool_calls"), "tool_arguments"),
        (TOOLS, answer(calls=[("stocks", '{"city": "Oslo"}')], finish="tool_calls"), "tool_arguments"),
        (TOOLS, answer(calls=[("weather", '{"city": "Os')], finish="length"), "truncated"),
        ({}, answer(None, finish="length"), "truncated"),
        ({}, answer(""), "empty"),
        ({}, answer("   \n"), "empty"),
        ({}, {"choices": []}, "empty"),
    ],
)
def test_bad_answers_and_why(request_: dict[str, Any], response: dict[str, Any], reason: str) -> None:
    verdict = judge(request_, response)
    assert verdict is not None and verdict.reason == reason, verdict


@pytest.mark.parametrize(
    ("request_", "response"),
    [
        (JSON_SCHEMA, answer('{"answer": "B"}')),
        (JSON_SCHEMA, answer(' {"answer": "C"}\n')),
        (JSON_OBJECT, answer('{"anything": [1, 2]}')),
        (TOOLS, answer(calls=[("weather", '{"city": "Oslo"}')], finish="tool_calls")),
        ({}, answer("A long essay cut short at", finish="length")),  # plain text is still usable
        ({}, answer("Sure.")),
        ({"response_format": {"type": "text"}}, answer("not json, and not asked to be")),
        # A broken schema is the client's mistake: a larger model would not fix it.
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}},
            answer('{"a": 1}'),
        ),
    ],
)
def test_good_answers_are_left_alone(request_: dict[str, Any], response: dict[str, Any]) -> None:
    assert judge(request_, response) is None


def test_a_refusal_is_an_answer() -> None:
    refused = answer(None)
    refused["choices"][0]["message"]["refusal"] = "I can't help with that."
    assert judge(JSON_SCHEMA, refused) is None


def test_the_confidence_floor_is_opt_in_and_needs_logprobs() -> None:
    unsure = answer("B", logprobs=[-3.0, -2.5])
    assert judge({}, unsure) is None
    verdict = judge({}, unsure, logprob_floor=-1.0)
    assert verdict is not None and verdict.reason == "low_confidence"
    assert judge({}, answer("B", logprobs=[-0.1, -0.2]), logprob_floor=-1.0) is None
    assert judge({}, answer("B"), logprob_floor=-1.0) is None  # no logprobs: nothing to judge


def test_any_bad_choice_counts() -> None:
    two = answer('{"answer": "A"}')
    two["choices"].append(answer("nope")["choices"][0])
    verdict = judge(JSON_SCHEMA, two)
    assert verdict is not None and verdict.reason == "json_schema"

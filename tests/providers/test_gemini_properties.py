"""Properties of the OpenAI -> Gemini translation for ANY valid OpenAI conversation."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

import orjson
from hypothesis import given, settings

from providers.gemini import to_gemini_request
from tests.providers.test_anthropic_properties import conversations, system_texts


@settings(max_examples=100, deadline=None)
@given(conversations())
def test_gemini_contents_use_two_roles_and_answer_every_function_call(messages: list[dict[str, Any]]) -> None:
    request = to_gemini_request({"messages": messages})
    contents = request["contents"]
    assert contents and contents[0]["role"] == "user"
    assert {content["role"] for content in contents} <= {"user", "model"}
    assert all(content["role"] != previous["role"] for previous, content in pairwise(contents))
    assert all(content["parts"] for content in contents)
    system = request.get("systemInstruction")
    assert ([part["text"] for part in system["parts"]] if system else []) == system_texts(messages)
    for position, content in enumerate(contents):
        calls = [part["functionCall"] for part in content["parts"] if "functionCall" in part]
        responses = [part["functionResponse"] for part in content["parts"] if "functionResponse" in part]
        if content["role"] == "model" and calls:
            answer = contents[position + 1]
            assert answer["role"] == "user"
            answered = [
                part["functionResponse"]["name"] for part in answer["parts"] if "functionResponse" in part
            ]
            assert Counter(answered) == Counter(call["name"] for call in calls)
            assert (
                "thoughtSignature"
                in content["parts"][[("functionCall" in p) for p in content["parts"]].index(True)]
            )
        if responses:
            previous = contents[position - 1]
            assert previous["role"] == "model" and any("functionCall" in part for part in previous["parts"])
            kinds = ["functionResponse" in part for part in content["parts"]]
            assert kinds == sorted(kinds, reverse=True)  # the answers lead the turn
    sent = [orjson.loads(c["function"]["arguments"]) for m in messages for c in m.get("tool_calls", [])]
    args = [
        part["functionCall"]["args"]
        for content in contents
        for part in content["parts"]
        if "functionCall" in part
    ]
    assert args == sent

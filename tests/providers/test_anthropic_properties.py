"""Properties of the OpenAI -> Anthropic translation for ANY valid OpenAI conversation.

`conversations()` is also what the Gemini property tests draw from.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.anthropic import from_anthropic_request, to_anthropic_request

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
mark = st.sampled_from([None, {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}])
arguments = st.dictionaries(
    st.sampled_from(["city", "n", "q"]), st.integers(-(10**6), 10**6) | text, max_size=3
)


@st.composite
def content(draw: st.DrawFn) -> Any:
    """A message's content: a string, or text parts that may carry a cache mark."""
    if draw(st.booleans()):
        return draw(text)
    parts = []
    for value in draw(st.lists(text, max_size=3)):
        part: dict[str, Any] = {"type": "text", "text": value}
        cache = draw(mark)
        if cache:
            part["cache_control"] = cache
        parts.append(part)
    return parts


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid OpenAI message list: any order of system, developer, user and assistant messages; an
    assistant's tool calls are followed by one tool message per call, in any order."""
    messages: list[dict[str, Any]] = []
    calls = 0
    for kind in draw(
        st.lists(st.sampled_from(["system", "developer", "user", "assistant", "tools"]), max_size=10)
    ):
        if kind != "tools":
            messages.append({"role": kind, "content": draw(content())})
            continue
        ids = [f"call_{calls + n}" for n in range(draw(st.integers(min_value=1, max_value=3)))]
        calls += len(ids)
        tool_calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": draw(st.sampled_from(["weather", "search"])),
                    "arguments": orjson.dumps(draw(arguments)).decode(),
                },
            }
            for call_id in ids
        ]
        messages.append({"role": "assistant", "content": draw(st.none() | text), "tool_calls": tool_calls})
        for call_id in draw(st.permutations(ids)):
            messages.append({"role": "tool", "tool_call_id": call_id, "content": draw(content())})
    return messages


def system_texts(messages: list[dict[str, Any]]) -> list[str]:
    texts: list[str] = []
    for message in messages:
        if message["role"] in ("system", "developer"):
            value = message["content"]
            texts += [value] if isinstance(value, str) else [part["text"] for part in value]
    return [t for t in texts if t]


@settings(max_examples=100, deadline=None)
@given(conversations())
def test_anthropic_messages_alternate_and_pair_every_tool_use(messages: list[dict[str, Any]]) -> None:
    request = to_anthropic_request({"messages": messages}, model="m", default_max_tokens=10)
    turns = request["messages"]
    assert turns and turns[0]["role"] == "user"
    assert all(turn["role"] != previous["role"] for previous, turn in pairwise(turns))
    assert {turn["role"] for turn in turns} <= {"user", "assistant"}
    assert all(turn["content"] for turn in turns)
    assert all(block.get("text") != "" for turn in turns for block in turn["content"])
    assert [block["text"] for block in request.get("system", [])] == system_texts(messages)
    for position, turn in enumerate(turns):
        if turn["role"] == "user":
            kinds = [block["type"] for block in turn["content"]]
            assert kinds == sorted(kinds, key=lambda kind: kind != "tool_result")  # results lead the turn
            asked = turns[position - 1]["content"] if position else []
            asked_ids = Counter(block["id"] for block in asked if block["type"] == "tool_use")
            answered = Counter(
                block["tool_use_id"] for block in turn["content"] if block["type"] == "tool_result"
            )
            assert answered == asked_ids  # every tool_use answered exactly once, nothing else answered
    tool_uses = [b for turn in turns for b in turn["content"] if b["type"] == "tool_use"]
    sent = {
        c["id"]: orjson.loads(c["function"]["arguments"]) for m in messages for c in m.get("tool_calls", [])
    }
    assert {b["id"]: b["input"] for b in tool_uses} == sent
    if turns[-1]["role"] == "assistant":
        assert not any(block["type"] == "tool_use" for block in turns[-1]["content"])


@settings(max_examples=100, deadline=None)
@given(conversations())
def test_anthropic_requests_survive_the_round_trip_through_the_ingress(
    messages: list[dict[str, Any]],
) -> None:
    """What the adapter sends Anthropic is a fixed point of ingress -> adapter translation."""
    first = to_anthropic_request({"messages": messages}, model="m", default_max_tokens=10)
    again = to_anthropic_request(from_anthropic_request(first), model="m", default_max_tokens=99)
    assert again == first

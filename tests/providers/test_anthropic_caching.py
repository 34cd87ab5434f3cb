"""Automatic cache breakpoints: where they go, what they leave alone, and that the sandbox reads them."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.anthropic import to_anthropic_request
from providers.anthropic.caching import approx_tokens, min_cache_tokens, place_cache_breakpoints
from sandbox.anthropic.prompt import render_prompt
from sandbox.core.errors import ApiError
from sandbox.core.tokens import Tokenizer
from sandbox.server import SandboxServer
from tests.providers.test_anthropic_properties import conversations
from tests.sandbox.clients import long_prompt

MODEL = "claude-sonnet-4-6"
EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
BIG = "word " * 2000  # ~2,860 tokens by the default estimate
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather. " * 40,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def anthropic(messages: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    return to_anthropic_request({"messages": messages, **body}, model=MODEL, default_max_tokens=100)


def chat(turns: int, *, system: str = BIG) -> list[dict[str, Any]]:
    """A system prompt and `turns` user turns with assistant replies between them."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for n in range(turns):
        if n:
            messages.append({"role": "assistant", "content": f"answer {n}"})
        messages.append({"role": "user", "content": f"question {n}"})
    return messages


def marks(request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, cache_control) of every breakpoint, in cache order."""
    found = [
        (f"tools.{i}", t["cache_control"])
        for i, t in enumerate(request.get("tools", []))
        if "cache_control" in t
    ]
    system = request.get("system")
    if isinstance(system, list):
        found += [(f"system.{i}", b["cache_control"]) for i, b in enumerate(system) if "cache_control" in b]
    for m, message in enumerate(request["messages"]):
        content = message["content"]
        if isinstance(content, list):
            for j, block in enumerate(content):
                if "cache_control" in block:
                    found.append((f"messages.{m}.{j}", block["cache_control"]))
                for k, part in (
                    enumerate(block.get("content") or []) if block.get("type") == "tool_result" else []
                ):
                    if isinstance(part, dict) and "cache_control" in part:
                        found.append((f"messages.{m}.{j}.{k}", part["cache_control"]))
    if "cache_control" in request:
        found.append(("top", request["cache_control"]))
    return found


def strip_marks(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: strip_marks(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [strip_marks(v) for v in obj]
    return obj


def test_first_turn_marks_tools_and_system_only() -> None:
    request = anthropic(chat(1), tools=TOOLS)
    placed = place_cache_breakpoints(request, min_tokens=1024)
    # The tools alone are under the minimum: only the system prompt (which includes them) is marked.
    assert marks(placed) == [("system.0", EPHEMERAL)]
    low = place_cache_breakpoints(request, min_tokens=100)
    assert marks(low) == [("tools.0", EPHEMERAL), ("system.0", EPHEMERAL)]


def test_later_turns_mark_the_previous_and_the_final_user_turn() -> None:
    request = anthropic(chat(3))
    placed = place_cache_breakpoints(request, min_tokens=1024)
    # messages: user q0, assistant a1, user q1, assistant a2, user q2
    assert marks(placed) == [
        ("system.0", EPHEMERAL),
        ("messages.2.0", EPHEMERAL),
        ("messages.4.0", EPHEMERAL),
    ]
    assert strip_marks(placed) == request


def test_nothing_is_marked_below_the_minimum() -> None:
    request = anthropic(chat(3, system="short system prompt"), tools=TOOLS)
    assert marks(place_cache_breakpoints(request, min_tokens=1024)) == []
    # Cumulative: the history pushes later turns over a low minimum while the early prefix stays under.
    count = approx_tokens("short system prompt")
    placed = place_cache_breakpoints(request, min_tokens=count + 700, count_tokens=approx_tokens)
    assert all(where.startswith("messages.") for where, _ in marks(placed))


def test_lone_turn_marks_static_context_before_the_question() -> None:
    parts = [{"type": "text", "text": BIG}, {"type": "text", "text": "What does it say?"}]
    request = anthropic([{"role": "user", "content": parts}])
    assert marks(place_cache_breakpoints(request, min_tokens=1024)) == [("messages.0.0", EPHEMERAL)]
    lone = anthropic([{"role": "user", "content": BIG}])
    assert marks(place_cache_breakpoints(lone, min_tokens=1024)) == []


def test_assistant_prefill_is_never_marked() -> None:
    messages = [*chat(2), {"role": "assistant", "content": "Sure, here"}]
    placed = place_cache_breakpoints(anthropic(messages), min_tokens=1024)
    assert [where for where, _ in marks(placed)] == ["system.0", "messages.0.0", "messages.2.0"]


def test_client_breakpoints_are_kept_and_counted() -> None:
    messages = chat(3)
    messages[0] = {"role": "system", "content": [{"type": "text", "text": BIG, "cache_control": EPHEMERAL}]}
    request = anthropic(messages, tools=[{**TOOLS[0], "cache_control": EPHEMERAL}])
    placed = place_cache_breakpoints(request, min_tokens=100)
    # Two client marks leave room for two: the final and the previous user turn, in that priority.
    assert marks(placed) == [
        ("tools.0", EPHEMERAL),
        ("system.0", EPHEMERAL),
        ("messages.2.0", EPHEMERAL),
        ("messages.4.0", EPHEMERAL),
    ]
    three = anthropic([{**m, "cache_control": EPHEMERAL} if m["role"] == "user" else m for m in chat(3)])
    placed = place_cache_breakpoints(three, min_tokens=100)
    assert [where for where, _ in marks(placed)] == [
        "system.0",
        "messages.0.0",
        "messages.2.0",
        "messages.4.0",
    ]


def test_never_more_than_four_and_none_when_the_client_set_four() -> None:
    parts = [{"type": "text", "text": f"{BIG} {i}", "cache_control": EPHEMERAL} for i in range(4)]
    request = anthropic([{"role": "system", "content": parts}, *chat(3)[1:]], tools=TOOLS)
    placed = place_cache_breakpoints(request, min_tokens=0)
    assert placed == request and placed is not request
    top = {**anthropic(chat(3)), "cache_control": EPHEMERAL}
    placed = place_cache_breakpoints({**top, "tools": anthropic(chat(1), tools=TOOLS)["tools"]}, min_tokens=0)
    assert len(marks(placed)) == 4  # the top-level mark counts: three added, not four
    assert "cache_control" not in placed["messages"][-1]["content"][-1]


def test_one_hour_ttl_and_the_ordering_rule() -> None:
    request = anthropic(chat(3), tools=TOOLS)
    assert {str(m) for _, m in marks(place_cache_breakpoints(request, min_tokens=100, ttl="1h"))} == {
        str(HOUR)
    }
    # A client 5m mark on the system prompt: ours after it must be 5m, ours before it may stay 1h.
    messages = chat(3)
    messages[0] = {"role": "system", "content": [{"type": "text", "text": BIG, "cache_control": EPHEMERAL}]}
    placed = place_cache_breakpoints(anthropic(messages, tools=TOOLS), min_tokens=100, ttl="1h")
    assert marks(placed) == [
        ("tools.0", HOUR),
        ("system.0", EPHEMERAL),
        ("messages.2.0", EPHEMERAL),
        ("messages.4.0", EPHEMERAL),
    ]
    # A client 1h mark on the final turn: ours before it must be 1h even when 5m was asked for.
    messages = chat(3)
    messages[-1] = {**messages[-1], "cache_control": HOUR}
    placed = place_cache_breakpoints(anthropic(messages), min_tokens=100)
    assert marks(placed) == [("system.0", HOUR), ("messages.2.0", HOUR), ("messages.4.0", HOUR)]
    # Between a client 5m mark and a later client 1h mark neither TTL is valid: nothing is added there.
    messages = chat(3)
    messages[0] = {"role": "system", "content": [{"type": "text", "text": BIG, "cache_control": EPHEMERAL}]}
    messages[-1] = {**messages[-1], "cache_control": HOUR}
    placed = place_cache_breakpoints(anthropic(messages, tools=TOOLS), min_tokens=100)
    assert marks(placed) == [("tools.0", HOUR), ("system.0", EPHEMERAL), ("messages.4.0", HOUR)]
    with pytest.raises(ValueError, match="ttl"):
        place_cache_breakpoints(request, min_tokens=0, ttl="10m")


def test_input_is_not_mutated_and_strings_become_blocks() -> None:
    request: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 10,
        "system": BIG,
        "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply"},
            {"role": "user", "content": "second"},
        ],
    }
    before = copy.deepcopy(request)
    placed = place_cache_breakpoints(request, min_tokens=1024)
    assert request == before
    messages = request["messages"]
    assert placed["system"] == [{"type": "text", "text": BIG, "cache_control": EPHEMERAL}]
    assert placed["messages"][2]["content"] == [
        {"type": "text", "text": "second", "cache_control": EPHEMERAL}
    ]
    assert placed["messages"][1] is messages[1]  # untouched parts are shared, not copied


def test_minimum_cacheable_length_per_model() -> None:
    assert min_cache_tokens("claude-sonnet-4-5-20250929") == 1024
    assert min_cache_tokens("claude-sonnet-4-20250514") == 1024
    assert min_cache_tokens("claude-opus-4-1-20250805") == 1024
    assert min_cache_tokens("claude-opus-4-20250514") == 1024
    assert min_cache_tokens("claude-3-haiku-20240307") == 2048
    assert min_cache_tokens("claude-3-5-haiku-latest") == 2048
    assert min_cache_tokens("claude-opus-4-5-20251101") == 4096
    assert min_cache_tokens("claude-opus-4.6") == 4096
    assert min_cache_tokens("anthropic.claude-haiku-4-5-20251001-v1:0") == 4096
    assert min_cache_tokens("claude-opus-5") == 512
    assert min_cache_tokens("claude-sonnet-4-6") == 1024
    assert min_cache_tokens("something-else") == 1024


def ttl_order_ok(found: list[tuple[str, dict[str, Any]]]) -> bool:
    ttls = [m.get("ttl", "5m") for _, m in found]
    return "5m" not in ttls or "1h" not in ttls[ttls.index("5m") :]


tools = st.lists(
    st.builds(
        lambda name, desc, cache: {
            "type": "function",
            "function": {"name": name, "description": desc},
            **({"cache_control": cache} if cache else {}),
        },
        st.sampled_from(["a", "b", "c"]),
        st.text(max_size=40),
        st.sampled_from([None, EPHEMERAL, HOUR]),
    ),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(
    conversations(),
    tools,
    st.integers(min_value=0, max_value=40),
    st.sampled_from(["5m", "1h"]),
    st.integers(min_value=1, max_value=8),
)
def test_any_translated_request_gets_at_most_four_marks_and_nothing_else(
    messages: list[dict[str, Any]], tool_list: list[dict[str, Any]], min_tokens: int, ttl: str, divisor: int
) -> None:
    def count(text: str) -> int:
        return len(text) // divisor

    request = to_anthropic_request(
        {"messages": messages, "tools": tool_list}, model=MODEL, default_max_tokens=10
    )
    before = copy.deepcopy(request)
    placed = place_cache_breakpoints(request, min_tokens=min_tokens, ttl=ttl, count_tokens=count)
    assert request == before  # not mutated
    found, given_marks = marks(placed), marks(request)
    assert strip_marks(placed) == strip_marks(request)  # only cache_control keys were added
    assert set(map(str, given_marks)) <= set(map(str, found))  # client marks kept where they were
    if len(given_marks) >= 4:
        assert placed == request
    else:
        assert len(found) <= 4
    if ttl_order_ok(given_marks):
        assert ttl_order_ok(found)
    if accepted(request):  # what the emulated API takes with the client's marks, it takes with ours
        assert accepted(placed)


def accepted(request: dict[str, Any]) -> bool:
    try:
        render_prompt(request, tokenizer=Tokenizer(), tool_choice="auto")
    except ApiError:
        return False
    return True


@pytest.fixture(scope="module")
def anthropic_sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="anthropic", profile="instant") as server:
        yield server


def test_a_conversation_through_the_sandbox_reads_its_prefix_from_the_second_turn(
    anthropic_sandbox: SandboxServer,
) -> None:
    minimum = anthropic_sandbox.config.cache_minimum
    messages: list[dict[str, Any]] = [{"role": "system", "content": long_prompt(2 * minimum, topic="tolls")}]
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    usages = []
    with httpx.Client(base_url=anthropic_sandbox.base_url, headers=headers, timeout=10) as http:
        for turn in range(5):
            messages.append({"role": "user", "content": f"Question {turn}: how do toll roads price trips?"})
            request = to_anthropic_request({"messages": messages}, model=MODEL, default_max_tokens=60)
            response = http.post("/v1/messages", json=place_cache_breakpoints(request, min_tokens=minimum))
            assert response.status_code == 200, response.text
            body = response.json()
            usages.append(body["usage"])
            messages.append({"role": "assistant", "content": body["content"][0]["text"]})
    first, *later = usages
    assert first["cache_creation_input_tokens"] >= 2 * minimum and first["cache_read_input_tokens"] == 0
    for previous, usage in zip(usages, later, strict=False):
        assert usage["cache_read_input_tokens"] > 0
        # Each turn reads at least everything the turn before it read: the history is cached too.
        assert usage["cache_read_input_tokens"] >= previous["cache_read_input_tokens"]
    assert later[-1]["cache_read_input_tokens"] > later[0]["cache_read_input_tokens"]
    # Only the newest exchange is ever paid at the full input price.
    assert all(usage["input_tokens"] < 40 for usage in later)

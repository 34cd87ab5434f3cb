"""Which models are OpenAI reasoning models, and the body they are sent."""

from __future__ import annotations

import pytest

from providers.reasoning_params import dropped_names, is_reasoning_model, to_reasoning_body


@pytest.mark.parametrize(
    "name",
    ["o1", "o1-mini", "o3", "o3-pro", "o4-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "gpt-5.1"],
)
def test_reasoning_names(name: str) -> None:
    assert is_reasoning_model(name)


@pytest.mark.parametrize(
    "name", ["gpt-4o", "gpt-4o-mini", "gpt-5-chat-latest", "omni-moderation-latest", "gpt-4.1"]
)
def test_chat_names(name: str) -> None:
    assert not is_reasoning_model(name)


def test_max_tokens_renamed_and_sampling_dropped() -> None:
    body = {"model": "o3", "messages": [], "max_tokens": 9, "temperature": 0.3, "logprobs": True, "seed": 1}
    out, changes = to_reasoning_body(body)
    assert out == {"model": "o3", "messages": [], "max_completion_tokens": 9, "seed": 1}
    assert changes == ["max_tokens_renamed", "param_dropped:temperature", "param_dropped:logprobs"]
    assert dropped_names(changes) == ["temperature", "logprobs"]


def test_an_explicit_max_completion_tokens_wins() -> None:
    out, _ = to_reasoning_body({"max_tokens": 9, "max_completion_tokens": 4})
    assert out == {"max_completion_tokens": 4}


def test_nothing_to_change_returns_the_same_body() -> None:
    body = {"model": "o3", "max_completion_tokens": 5}
    out, changes = to_reasoning_body(body)
    assert out is body and changes == []

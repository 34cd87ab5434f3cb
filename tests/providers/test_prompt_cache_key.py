"""OpenAI `prompt_cache_key`: one key per team and stable prefix, the same in every process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from providers.prompt_cache_key import prompt_cache_key, with_prompt_cache_key

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = {"role": "system", "content": "You are the billing assistant of Example Corp."}
TOOLS = [{"type": "function", "function": {"name": "lookup_invoice", "parameters": {"type": "object"}}}]


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [SYSTEM, *messages], **extra}


def ask(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_one_off_questions_over_one_system_prompt_share_a_key() -> None:
    one = prompt_cache_key("team-a", body(ask("What is my balance?")))
    two = prompt_cache_key("team-a", body(ask("Why was I charged twice?"), temperature=0.3, stream=True))
    assert one == two
    assert len(one) == 24 and int(one, 16) >= 0


def test_key_changes_with_team_instructions_and_tools() -> None:
    base = prompt_cache_key("team-a", body(ask("hi")))
    assert prompt_cache_key("team-b", body(ask("hi"))) != base
    assert prompt_cache_key("team-a", body(ask("hi"), tools=TOOLS)) != base
    other = {"model": "gpt-4o", "messages": [{"role": "system", "content": "Be terse."}, ask("hi")]}
    assert prompt_cache_key("team-a", other) != base
    developer = {"model": "gpt-4o", "messages": [{**SYSTEM, "role": "developer"}, ask("hi")]}
    assert prompt_cache_key("team-a", developer) != base


def test_a_conversation_gets_its_own_key_once_it_has_history() -> None:
    def conversation(opening: str) -> dict[str, Any]:
        return body(ask(opening), {"role": "assistant", "content": "Sure."}, ask("And then?"))

    first, second = conversation("Plan a trip to Oslo"), conversation("Plan a trip to Rome")
    assert prompt_cache_key("t", first) != prompt_cache_key("t", second)
    longer = {
        **first,
        "messages": [*first["messages"], {"role": "assistant", "content": "Ok."}, ask("More?")],
    }
    assert prompt_cache_key("t", longer) == prompt_cache_key("t", first)  # stays with its conversation
    assert prompt_cache_key("t", body(ask("Plan a trip to Oslo"))) == prompt_cache_key("t", body(ask("x")))


def test_key_ignores_key_order_and_is_the_same_in_another_process() -> None:
    request = body(ask("hi"), tools=TOOLS)
    reordered = {"tools": TOOLS, "messages": list(request["messages"]), "model": "gpt-4o"}
    key = prompt_cache_key("team-a", request)
    assert prompt_cache_key("team-a", reordered) == key
    code = (
        "from providers.prompt_cache_key import prompt_cache_key;"
        f"print(prompt_cache_key('team-a', {request!r}))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == key


def test_with_key_never_overrides_the_clients_key_or_mutates() -> None:
    request = body(ask("hi"))
    keyed = with_prompt_cache_key(request, "abc")
    assert keyed["prompt_cache_key"] == "abc" and "prompt_cache_key" not in request
    own = body(ask("hi"), prompt_cache_key="client-chosen")
    assert with_prompt_cache_key(own, "abc") is own  # unchanged: the client's bytes can go as they are


def test_odd_bodies_still_get_a_key() -> None:
    assert len(prompt_cache_key("t", {})) == 24
    assert len(prompt_cache_key("t", {"messages": "nope", "tools": None})) == 24
    assert len(prompt_cache_key("t", {"messages": [None, ask("x")]})) == 24

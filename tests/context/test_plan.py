"""Middle-out trimming and tool-output dedupe over plain message lists (no gateway, no tokenizer)."""

from __future__ import annotations

from typing import Any

from gateway.context.conversation import PER_MESSAGE, REPLY, message_tokens, units
from gateway.context.plan import reference, shrink


def words(text: str) -> int:
    """A counter tests can do in their heads: one token a word."""
    return len(text.split())


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}],
    }


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def filler(n: int) -> str:
    return " ".join(["word"] * n)


SYSTEM = {"role": "system", "content": "be brief"}


def test_a_conversation_that_fits_is_left_as_it_is() -> None:
    messages = [SYSTEM, user("hi"), assistant("hello"), user("and?")]
    plan = shrink(messages, count=words, overhead=REPLY, limit=1000, trim=True, dedupe=True)
    assert plan.messages == messages and not plan.changed and plan.removed == 0
    assert plan.before == REPLY + sum(message_tokens(m, words) for m in messages)


def test_middle_out_drops_the_oldest_middle_turns_and_keeps_the_ends() -> None:
    messages = [SYSTEM, user("first question " + filler(10))]
    for turn in range(6):
        messages += [assistant(f"answer {turn} " + filler(50)), user(f"question {turn} " + filler(50))]
    full = shrink(messages, count=words, overhead=REPLY, limit=None, trim=True, dedupe=False)
    limit = full.before - 200  # about two turns too many
    plan = shrink(messages, count=words, overhead=REPLY, limit=limit, trim=True, dedupe=False)
    assert plan.after <= limit < plan.before
    kept = plan.messages
    assert kept[:2] == messages[:2], "the system prompt and the first user turn stay"
    assert kept[-3:] == messages[-3:], "the latest turns stay"
    dropped = [m for m in messages if m not in kept]
    assert dropped == messages[2 : 2 + len(dropped)], "what goes is the oldest of the middle"
    assert len(dropped) == plan.trimmed_messages == 4  # 4 x 53 tokens: the fewest that fit
    assert plan.trimmed_tokens == plan.before - plan.after and plan.deduped == 0


def test_a_tool_call_never_loses_its_results() -> None:
    messages = [SYSTEM, user("task")]
    for n in range(4):
        messages += [call(f"c{n}"), result(f"c{n}", filler(100)), result(f"c{n}", "second " + filler(100))]
    messages.append(user("now finish"))
    plan = shrink(messages, count=words, overhead=REPLY, limit=400, trim=True, dedupe=False)
    kept = plan.messages
    ids_called = {c["id"] for m in kept for c in m.get("tool_calls") or ()}
    ids_answered = {m["tool_call_id"] for m in kept if m["role"] == "tool"}
    assert ids_called == ids_answered and ids_called, "every kept call has its results, none orphaned"
    assert plan.after <= 400 and kept[-1] == user("now finish")


def test_units_pin_the_instructions_the_first_and_latest_user_turns_and_the_last_exchange() -> None:
    messages = [SYSTEM, user("a"), assistant("b"), user("c"), call("x"), result("x", "y"), assistant("z")]
    found = [(u.start, u.end, u.pinned) for u in units(messages)]
    assert found == [(0, 1, True), (1, 2, True), (2, 3, False), (3, 4, True), (4, 6, False), (6, 7, True)]


def test_what_cannot_fit_says_so_rather_than_dropping_a_pinned_turn() -> None:
    messages = [SYSTEM, user(filler(500)), assistant("ok"), user("again " + filler(500))]
    plan = shrink(messages, count=words, overhead=REPLY, limit=300, trim=True, dedupe=False)
    assert plan.after > 300, "the caller refuses it"
    assert plan.messages == [SYSTEM, messages[1], messages[3]]


def test_a_repeated_tool_output_becomes_a_reference_to_the_first() -> None:
    output = "row " * 200
    messages = [
        user("check twice"),
        call("c1"),
        result("c1", output),
        assistant("again"),
        call("c2"),
        result("c2", output),
        result("c2b", "short"),
        result("c3", "short"),
    ]
    plan = shrink(messages, count=words, overhead=REPLY, limit=None, trim=False, dedupe=True)
    assert plan.messages[2]["content"] == output
    assert plan.messages[5] == {"role": "tool", "tool_call_id": "c2", "content": reference("c1")}
    assert plan.messages[7]["content"] == "short", "a reference must be shorter than what it replaces"
    assert plan.deduped == 1 and plan.trimmed_messages == 0
    ref = PER_MESSAGE + words(reference("c1"))
    assert plan.deduped_tokens == plan.removed == message_tokens(messages[5], words) - ref
    assert messages[5]["content"] == output, "the client's list is not changed"


def test_when_trimming_drops_the_first_copy_the_next_copy_carries_it_whole() -> None:
    output = filler(300)
    messages = [user("go"), assistant(filler(50)), call("c1"), result("c1", output)]
    messages += [assistant(filler(50)), call("c2"), result("c2", output), user("last " + filler(5))]
    plan = shrink(messages, count=words, overhead=REPLY, limit=390, trim=True, dedupe=True)
    contents = [m.get("content") for m in plan.messages]
    assert output in contents, "the one copy left is whole"
    assert reference("c1") not in contents, "no reference to a dropped result"
    assert plan.after <= 390 and plan.trimmed_messages == 3 and plan.deduped == 0
    # The saving is counted once: the whole conversation before, what is sent after.
    assert plan.removed == plan.before - (REPLY + sum(message_tokens(m, words) for m in plan.messages))


def test_check_config_names_the_bad_context_field() -> None:
    import pytest

    from gateway.config.context import ContextConfig
    from gateway.config.loader import ConfigError, build_config
    from gateway.context.policy import combine

    base = {
        "providers": {"o": {"type": "openai", "base_url": "http://127.0.0.1:1/v1"}},
        "models": {"m": {"provider": "o"}},
    }
    with pytest.raises(ConfigError, match=r"teams\.t\.context\.max_input_tokens"):
        build_config({**base, "teams": {"t": {"context": {"max_input_tokens": 0}}}}, environ={})
    with pytest.raises(ConfigError, match="on_overflow: trim needs trim: middle-out"):
        build_config({**base, "teams": {"t": {"context": {"on_overflow": "trim"}}}}, environ={})
    with pytest.raises(ConfigError, match=r"teams\.t\.context\.trim"):
        build_config({**base, "teams": {"t": {"context": {"trim": "head"}}}}, environ={})
    config = build_config({**base, "teams": {"t": {"context": {"trim": False}}}}, environ={})
    assert config.teams["t"].context is not None and config.teams["t"].context.trim == "off"
    team = ContextConfig(max_input_tokens=900, dedupe_tool_outputs=True)
    route = ContextConfig(max_input_tokens=500, trim="middle-out", on_overflow="trim")
    merged = combine(team, route)
    assert merged == ContextConfig(
        max_input_tokens=500, trim="middle-out", on_overflow="trim", dedupe_tool_outputs=True
    ), "the team's fields over the route's, the lower cap"

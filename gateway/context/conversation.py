"""A chat conversation as the context policy sees it: what each message costs in prompt tokens, which
messages must stay together (an assistant's tool calls and their results), and which may never be
dropped (the instructions, the first and the latest user turns, the last exchange).

Pure: the token counter is handed in (the shipped o200k_base tokenizer in the gateway, anything in
tests), and messages are the canonical OpenAI-shaped dicts, never changed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

Count = Callable[[str], int]
Message = Mapping[str, Any]

# OpenAI's accounting for chat: each message costs 3 tokens of framing, the reply 3 to prime it.
PER_MESSAGE: Final = 3
REPLY: Final = 3
# An image part, whatever its size: OpenAI's figure for one 512 px tile at high detail plus its base.
IMAGE_TOKENS: Final = 255
_PINNED_ROLES = frozenset({"system", "developer"})
_RESULT_ROLES = frozenset({"tool", "function"})


def content_text(content: Any) -> str:
    """The text of a message's content: the string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text") or "") for part in content if isinstance(part, dict) and "text" in part
        )
    return ""


def message_tokens(message: Message, count: Count) -> int:
    """What one message costs in prompt tokens: framing, its text, images, tool calls and name."""
    total = PER_MESSAGE + count(content_text(message.get("content")))
    content = message.get("content")
    if isinstance(content, list):
        total += IMAGE_TOKENS * sum(
            1 for part in content if isinstance(part, dict) and "text" not in part and part.get("type")
        )
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            total += (
                PER_MESSAGE
                + count(str(function.get("name") or ""))
                + count(str(function.get("arguments") or ""))
            )
    function_call = message.get("function_call")
    if isinstance(function_call, dict):
        total += count(str(function_call.get("name") or "")) + count(
            str(function_call.get("arguments") or "")
        )
    name = message.get("name")
    if isinstance(name, str):
        total += count(name)
    return total


def request_overhead(body: Mapping[str, Any], count: Count) -> int:
    """Prompt tokens a request spends outside its messages: tool definitions, a response schema."""
    total = REPLY
    for field in ("tools", "functions"):
        if body.get(field):
            total += count(orjson.dumps(body[field]).decode())
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        total += count(orjson.dumps(response_format).decode())
    return total


@dataclass(frozen=True, slots=True)
class Unit:
    """Messages `start` to `end` (exclusive) that are dropped together or not at all."""

    start: int
    end: int
    pinned: bool


def units(messages: Sequence[Message]) -> list[Unit]:
    """The conversation cut where it may be cut: an assistant message with tool (or function) calls
    takes the results that follow it, every other message stands alone. Pinned, never dropped: the
    system and developer messages, everything up to the first user message, the latest user message
    and the last unit (the exchange the answer continues)."""
    roles = [message.get("role") for message in messages]
    users = [i for i, role in enumerate(roles) if role == "user"]
    first_user = users[0] if users else -1
    last_user = users[-1] if users else -1
    found: list[Unit] = []
    i = 0
    while i < len(messages):
        end = i + 1
        message = messages[i]
        if roles[i] == "assistant" and (message.get("tool_calls") or message.get("function_call")):
            while end < len(messages) and roles[end] in _RESULT_ROLES:
                end += 1
        pinned = i <= first_user or roles[i] in _PINNED_ROLES or i == last_user or end == len(messages)
        found.append(Unit(i, end, pinned))
        i = end
    return found


def droppable_bytes(messages: Sequence[Message]) -> int:
    """JSON bytes of the messages trimming may drop: the router's cheap estimate of how small a
    conversation can get (it estimates tokens from bytes, `providers.facts.BYTES_PER_TOKEN`)."""
    return sum(
        len(orjson.dumps(messages[i]))
        for unit in units(messages)
        if not unit.pinned
        for i in range(unit.start, unit.end)
    )

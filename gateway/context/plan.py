"""How a conversation is made to cost less: tool results said once (a later verbatim repeat becomes a
short reference to the earlier one), then, only when it is still over its limit, the oldest middle
turns dropped until it fits (middle-out: the instructions, the first user turn and the latest turns
stay; a tool call never loses its results).

The two interact: a reference must never point at a result that trimming dropped, so when the first
copy of an output goes, the next kept copy carries it in full. Totals are kept incrementally, so
planning is linear in the conversation's length. Pure: no I/O, the token counter handed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.context.conversation import (
    PER_MESSAGE,
    Count,
    Message,
    message_tokens,
    units,
)


def reference(call_id: str) -> str:
    """What a repeated tool result becomes: a pointer to the earlier, identical one."""
    return f"[identical to the result of tool call {call_id} above; repeated output left out]"


@dataclass(frozen=True, slots=True)
class Plan:
    """The conversation to send and what it saved. `after` over the limit means it could not fit."""

    messages: list[Message]
    before: int
    after: int
    trimmed_messages: int = 0
    trimmed_tokens: int = 0
    deduped: int = 0
    deduped_tokens: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.trimmed_messages or self.deduped)

    @property
    def removed(self) -> int:
        return self.before - self.after


@dataclass(slots=True)
class _Group:
    """The tool results with one content: each kept one after the first is a reference."""

    members: list[int]
    first: int = 0  # index into members of the first kept one
    ref_tokens: int = 0


@dataclass(slots=True)
class _State:
    tokens: list[int]
    kept: list[bool]
    group_of: dict[int, _Group] = field(default_factory=dict)

    def cost(self, i: int) -> int:
        group = self.group_of.get(i)
        if group is None or group.members[group.first] == i:
            return self.tokens[i]
        return group.ref_tokens

    def drop(self, i: int) -> int:
        """Drop message i; returns how much the total fell (a first copy's drop makes the next kept
        copy whole again)."""
        fell = self.cost(i)
        self.kept[i] = False
        group = self.group_of.get(i)
        if group is not None and group.members[group.first] == i:
            while group.first < len(group.members) and not self.kept[group.members[group.first]]:
                group.first += 1
            if group.first < len(group.members):
                fell -= self.tokens[group.members[group.first]] - group.ref_tokens
        return fell


def shrink(
    messages: Sequence[Message],
    *,
    count: Count,
    overhead: int,
    limit: int | None,
    trim: bool,
    dedupe: bool,
) -> Plan:
    """The cheapest conversation the policy allows: deduped when `dedupe`, trimmed down to `limit`
    prompt tokens when `trim` (only as far as needed). `overhead` is what the request costs outside
    its messages (`request_overhead`)."""
    tokens = [message_tokens(m, count) for m in messages]
    state = _State(tokens, [True] * len(messages))
    if dedupe:
        for group in _groups(messages, tokens, count):
            for i in group.members:
                state.group_of[i] = group
    before = overhead + sum(tokens)
    total = overhead + sum(state.cost(i) for i in range(len(messages)))
    dropped = 0
    if trim and limit is not None and total > limit:
        for unit in units(messages):
            if total <= limit:
                break
            if unit.pinned:
                continue
            for i in range(unit.start, unit.end):
                total -= state.drop(i)
                dropped += 1
    sent, deduped, deduped_tokens = _render(messages, state)
    return Plan(
        messages=sent,
        before=before,
        after=total,
        trimmed_messages=dropped,
        trimmed_tokens=before - total - deduped_tokens,
        deduped=deduped,
        deduped_tokens=deduped_tokens,
    )


def _groups(messages: Sequence[Message], tokens: list[int], count: Count) -> list[_Group]:
    """Tool results whose content repeats verbatim, where a reference is cheaper than the content."""
    by_content: dict[str | bytes, list[int]] = {}
    for i, message in enumerate(messages):
        if message.get("role") not in ("tool", "function"):
            continue
        content = message.get("content")
        key: str | bytes | None = (
            content
            if isinstance(content, str)
            else orjson.dumps(content)
            if isinstance(content, list)
            else None
        )
        if key:
            by_content.setdefault(key, []).append(i)
    groups = []
    for members in by_content.values():
        if len(members) < 2:
            continue
        ref_tokens = PER_MESSAGE + count(reference(_call_id(messages[members[0]])))
        if ref_tokens < tokens[members[0]]:
            groups.append(_Group(members, ref_tokens=ref_tokens))
    return groups


def _call_id(message: Message) -> str:
    return str(message.get("tool_call_id") or message.get("name") or "")


def _render(messages: Sequence[Message], state: _State) -> tuple[list[Message], int, int]:
    """The kept messages, each later copy of a repeated result replaced by its reference."""
    sent: list[Message] = []
    deduped = deduped_tokens = 0
    for i, message in enumerate(messages):
        if not state.kept[i]:
            continue
        group = state.group_of.get(i)
        if group is None or group.members[group.first] == i:
            sent.append(message)
            continue
        first = messages[group.members[group.first]]
        replaced: dict[str, Any] = {**message, "content": reference(_call_id(first))}
        sent.append(replaced)
        deduped += 1
        deduped_tokens += state.tokens[i] - group.ref_tokens
    return sent, deduped, deduped_tokens


def fits(plan: Plan, limit: int | None) -> bool:
    return limit is None or plan.after <= limit


__all__ = ["Plan", "fits", "reference", "shrink"]

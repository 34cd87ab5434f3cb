"""Automatic prompt-cache breakpoints for Anthropic Messages requests: pure, no I/O, clock or config.

Anthropic caches a prompt prefix (in the order tools, system, messages) only where a content block
carries `cache_control`, so a gateway that wants the saving has to place those marks itself.

**Stable** means: the client will send these bytes again, unchanged and at the same position, on a
later request. The cache is a prefix cache, so a breakpoint pays off only where a later request
repeats everything before it. Where that holds:

- Tools and system prompt: an application's fixed instructions, shared by all its requests. A
  breakpoint goes at the end of the system prompt (or at the last tool when there is no system
  prompt), and another at the last tool, so the tools are still read from cache when the system
  prompt varies per request (dates, user names).
- Conversation history: a chat client sends the whole history again plus one new user turn on every
  call, so in a request that already has history, everything up to and including the final user
  turn will be the prefix of the next call. Two breakpoints go there. The first is at the end of the
  final user turn, which writes the conversation so the next call reads all of it. The second is at
  the end of the second-to-last user turn. The previous call put its final-turn breakpoint there, so
  it is an exact hit. It also keeps the last entry inside the roughly 20-block lookback when an
  agent's tool loop added many blocks since the previous call.
- A lone user turn (no history yet) is treated as volatile. Most single-turn traffic is one-off
  questions over a shared system prompt, and marking the question would pay the 25% write premium
  for an entry nobody reads. The exception is a lone turn made of several blocks (a document or
  retrieved passages, then the question): the block before the last one is marked as static context.
- Never marked: an assistant prefill (a final assistant turn), thinking blocks, empty text.

Rules kept:

- A breakpoint goes only where the cumulative prefix reaches `min_tokens`, because below the model's
  minimum Anthropic silently caches nothing. The count is an estimate (`approx_tokens` unless the
  caller passes a tokenizer) that errs generous: a mark just under the real minimum costs a slot,
  while a missing mark costs the saving.
- At most 4 breakpoints in all, counting those the client set (on blocks, on content inside a
  `tool_result`, and a top-level `cache_control`). Client marks are never moved or removed; when the
  budget is short, the most valuable places win: the static prefix, then the final user turn, then
  the previous user turn or the static context, then the last tool.
- TTL order (a `1h` entry must not follow a `5m` one): a mark placed before a client `1h` mark is
  itself `1h`, and one placed after a client `5m` mark is `5m`. This costs nothing extra, because the
  client's mark writes that stretch at its own TTL anyway. Between a client `5m` mark and a later
  client `1h` mark (an order Anthropic already rejects) no mark is added.
- The input is never mutated. What changes is copied, and everything else is shared with the input.
  A string `system` or message content that gets a mark becomes a one-block list, which Anthropic
  treats the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from providers.types import JSON

MAX_BREAKPOINTS = 4
TTLS = ("5m", "1h")
# Images and PDF pages: about 1,600 tokens each (a 1,092 x 1,092 image at Anthropic's w*h/750).
MEDIA_TOKENS = 1_600
# The hidden tool-use system prompt Anthropic adds when tools are given (Claude 4 models, tool_choice
# auto/none); it sits after the system prompt, so it counts only towards message breakpoints.
TOOL_PROMPT_TOKENS = 346
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})

# Per-model minimum cacheable prefix (upstream-apis.md section 2, Anthropic's caching docs). First
# match wins; model ids are lower-cased with dots as dashes, so Bedrock and Vertex ids match too.
# Where sources disagree (Sonnet 4.6: 1024 or 2048) the lower figure is kept, for the same reason
# the token estimate errs generous.
_MIN_TOKENS: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"opus-5(?!\d)"), 512),
    (re.compile(r"opus-4-[56](?!\d)|haiku-4-5(?!\d)"), 4096),
    (re.compile(r"haiku-3|3-haiku|3-5-haiku"), 2048),
)
DEFAULT_MIN_TOKENS = 1024


def min_cache_tokens(model: str) -> int:
    """The shortest prefix `model` caches; 1024 (Sonnet 4.x, Opus 4/4.1) for models not listed."""
    name = model.lower().replace(".", "-")
    for pattern, tokens in _MIN_TOKENS:
        if pattern.search(name):
            return tokens
    return DEFAULT_MIN_TOKENS


def approx_tokens(text: str) -> int:
    """About 3.5 characters a token, Anthropic's rule of thumb for Claude on English text."""
    return (len(text) * 2 + 6) // 7


@dataclass(slots=True)
class _Block:
    """One content block in cache order: where it lives, the tokens up to its end, client marks."""

    section: str  # "tools", "system" or "messages"
    index: int  # tool, system block or message index
    position: int  # block index inside the message's content (0 for tools and system)
    end: int
    markable: bool
    client_ttls: list[str]


def place_cache_breakpoints(
    request: JSON,
    *,
    min_tokens: int,
    ttl: str = "5m",
    count_tokens: Callable[[str], int] = approx_tokens,
) -> JSON:
    """A copy of an Anthropic Messages `request` with `cache_control` marks added where caching pays."""
    if ttl not in TTLS:
        raise ValueError(f"ttl must be one of {TTLS}, got {ttl!r}")
    blocks = _blocks(request, count_tokens)
    marks = _client_marks(request, blocks)
    budget = MAX_BREAKPOINTS - len(marks)
    chosen: dict[int, str] = {}
    taken = {at for at, _ in marks}
    for at in _candidates(request, blocks):
        if len(chosen) >= budget:
            break
        block = blocks[at]
        kind = _ttl_at(at, ttl, marks)
        if at in taken or not block.markable or block.end < min_tokens or kind is None:
            continue
        taken.add(at)
        chosen[at] = kind
    if not chosen:
        return dict(request)
    return _apply(request, blocks, chosen)


def _blocks(request: JSON, count: Callable[[str], int]) -> list[_Block]:
    blocks: list[_Block] = []
    total = 0
    tools = request.get("tools") or []
    for i, tool in enumerate(tools):
        total += _tool_tokens(tool, count)
        blocks.append(_Block("tools", i, 0, total, isinstance(tool, dict), _ttls(tool)))
    system = request.get("system")
    if isinstance(system, str):
        if system:
            total += count(system)
            blocks.append(_Block("system", 0, 0, total, True, []))
    elif isinstance(system, list):
        for i, block in enumerate(system):
            total += _block_tokens(block, count)
            blocks.append(_Block("system", i, 0, total, _markable(block), _ttls(block)))
    if tools:
        total += TOOL_PROMPT_TOKENS
    for m, message in enumerate(request.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            if content:
                total += count(content)
                blocks.append(_Block("messages", m, 0, total, True, []))
            continue
        for j, block in enumerate(content or ()):
            total += _block_tokens(block, count)
            blocks.append(_Block("messages", m, j, total, _markable(block), _ttls(block)))
    return blocks


def _tool_tokens(tool: Any, count: Callable[[str], int]) -> int:
    if not isinstance(tool, dict):
        return 0
    return count(orjson.dumps({k: v for k, v in tool.items() if k != "cache_control"}).decode())


def _block_tokens(block: Any, count: Callable[[str], int]) -> int:
    if not isinstance(block, dict):
        return 0
    kind = block.get("type")
    if kind == "text":
        return count(str(block.get("text") or ""))
    if kind in ("image", "document"):
        source = block.get("source") or {}
        if isinstance(source, dict) and source.get("type") == "text":
            return count(str(source.get("data") or ""))
        return MEDIA_TOKENS
    if kind == "tool_use":
        return count(str(block.get("name") or "")) + count(orjson.dumps(block.get("input")).decode())
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return count(content)
        return sum(_block_tokens(part, count) for part in content or ())
    if kind in _UNMARKABLE:
        return 0  # thinking from earlier turns is stripped by the API and costs nothing
    return count(orjson.dumps({k: v for k, v in block.items() if k != "cache_control"}).decode())


def _markable(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") in _UNMARKABLE:
        return False
    return block.get("type") != "text" or bool(block.get("text"))


def _ttls(block: Any) -> list[str]:
    """TTLs of the client's marks on a block, counting marks on content inside a tool_result."""
    if not isinstance(block, dict):
        return []
    found = [_mark_ttl(block["cache_control"])] if block.get("cache_control") is not None else []
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        for part in block["content"]:
            found += _ttls(part)
    return found


def _mark_ttl(mark: Any) -> str:
    return "1h" if isinstance(mark, dict) and mark.get("ttl") == "1h" else "5m"


def _client_marks(request: JSON, blocks: list[_Block]) -> list[tuple[int, str]]:
    """(block index, ttl) of every breakpoint the client set, in cache order."""
    marks = [(at, kind) for at, block in enumerate(blocks) for kind in block.client_ttls]
    top = request.get("cache_control")
    # A top-level mark applies to the last block; on a block already marked it adds nothing.
    if top is not None and blocks and not blocks[-1].client_ttls:
        marks.append((len(blocks) - 1, _mark_ttl(top)))
    return marks


def _candidates(request: JSON, blocks: list[_Block]) -> list[int]:
    """Block indices worth a breakpoint, most valuable first."""
    last_tool = last_system = -1
    turns: dict[int, list[int]] = {}
    for at, block in enumerate(blocks):
        if block.section == "tools":
            last_tool = at
        elif block.section == "system":
            last_system = at
        else:
            turns.setdefault(block.index, []).append(at)
    messages = request.get("messages") or []
    users = [m for m in turns if isinstance(messages[m], dict) and messages[m].get("role") == "user"]
    ranked: list[int] = [last_system if last_system >= 0 else last_tool]
    if len(users) >= 2 or (users and users[-1] > 0):
        ranked.append(_last_markable(blocks, turns[users[-1]]))  # the final user turn
        if len(users) >= 2:
            ranked.append(_last_markable(blocks, turns[users[-2]]))  # the previous user turn
    elif users and len(turns[users[-1]]) >= 2:
        ranked.append(_last_markable(blocks, turns[users[-1]][:-1]))  # static context before a question
    ranked.append(last_tool)
    return [at for at in ranked if at >= 0]


def _last_markable(blocks: list[_Block], turn: list[int]) -> int:
    return next((at for at in reversed(turn) if blocks[at].markable), -1)


def _ttl_at(at: int, wanted: str, marks: list[tuple[int, str]]) -> str | None:
    """`wanted`, unless a client mark forces the order: 1h before a 1h mark, 5m after a 5m mark.
    None (no mark) between a client 5m mark and a later client 1h mark, where neither TTL is valid."""
    before_1h = any(where > at and kind == "1h" for where, kind in marks)
    after_5m = any(where < at and kind == "5m" for where, kind in marks)
    if before_1h and after_5m:
        return None
    return "1h" if before_1h else "5m" if after_5m else wanted


def _apply(request: JSON, blocks: list[_Block], ttls: dict[int, str]) -> JSON:
    out = dict(request)
    tools: list[Any] | None = None
    system: list[Any] | None = None
    messages: list[Any] | None = None
    contents: dict[int, list[Any]] = {}
    for at, kind in ttls.items():
        block = blocks[at]
        mark: JSON = {"type": "ephemeral", "ttl": "1h"} if kind == "1h" else {"type": "ephemeral"}
        if block.section == "tools":
            tools = tools if tools is not None else list(request["tools"])
            tools[block.index] = {**tools[block.index], "cache_control": mark}
        elif block.section == "system":
            if system is None:
                original = request["system"]
                system = [_text(original)] if isinstance(original, str) else list(original)
            system[block.index] = {**system[block.index], "cache_control": mark}
        else:
            messages = messages if messages is not None else list(request["messages"])
            content = contents.get(block.index)
            if content is None:
                original = messages[block.index]["content"]
                content = [_text(original)] if isinstance(original, str) else list(original)
                contents[block.index] = content
                messages[block.index] = {**messages[block.index], "content": content}
            content[block.position] = {**content[block.position], "cache_control": mark}
    if tools is not None:
        out["tools"] = tools
    if system is not None:
        out["system"] = system
    if messages is not None:
        out["messages"] = messages
    return out


def _text(text: str) -> JSON:
    return {"type": "text", "text": text}

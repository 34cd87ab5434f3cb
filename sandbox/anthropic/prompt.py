"""Render Anthropic ``tools``, ``system`` and ``messages`` (in cache order) into a prompt with breakpoints.

Every content block (a tool, a system block, a message block) ends at a block
boundary with a chained hash; a ``cache_control`` on it is a breakpoint. The
checks that real requests fail on are made here: roles, alternation,
``tool_use``/``tool_result`` pairing, empty content, the 4-breakpoint limit and
the rule that a ``1h`` breakpoint may not follow a ``5m`` one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.anthropic.blocks import PromptBuilder, block_tokens, canonical, check_block
from sandbox.anthropic.breakpoint_cache import Breakpoint
from sandbox.anthropic.errors import invalid
from sandbox.core.tokens import Prompt, Tokenizer

__all__ = ["RenderedPrompt", "render_prompt"]

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
# The hidden tool-use system prompt Anthropic adds when tools are given
# (Claude 4 models: 346 tokens for auto/none, 313 for any/tool). It follows the
# system prompt, so a tool_choice change only invalidates cached messages.
_TOOL_PROMPT = {"auto": 346, "none": 346, "any": 313, "tool": 313}
_MAX_BREAKPOINTS = 4


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    """A validated request prompt: tokens and digest, block ends/hashes, breakpoints, turn facts."""

    prompt: Prompt
    ends: tuple[int, ...]
    hashes: tuple[int, ...]
    breakpoints: tuple[Breakpoint, ...]
    last_role: str
    last_user_text: str
    answers_tools: bool
    # (message index, first block type) of the last assistant turn, if any.
    last_assistant: tuple[int, str] | None


def _tools(b: PromptBuilder, tools: object) -> set[str]:
    if tools is None:
        return set()
    if not isinstance(tools, list):
        raise invalid("tools: Input should be a valid list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise invalid(f"tools.{i}: Input should be a valid dictionary")
        name = tool.get("name")
        custom = tool.get("type") in (None, "custom")
        if not isinstance(name, str) or (custom and not _TOOL_NAME.match(name)):
            raise invalid(f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        if custom and not isinstance(tool.get("input_schema"), Mapping):
            raise invalid(f"tools.{i}.custom.input_schema: Field required")
        if name in names:
            raise invalid("tools: Tool names must be unique.")
        names.add(name)
        text = f"{name} {tool.get('description', '')} {canonical(tool).decode()}"
        b.block(b.tokenizer.tokens(text), canonical(tool), tool.get("cache_control"), f"tools.{i}")
    return names


def _system(b: PromptBuilder, system: object) -> None:
    if system is None or system == "":
        return
    if isinstance(system, str):
        b.block(b.tokenizer.tokens(system), canonical({"type": "text", "text": system}), None, "system")
        return
    if not isinstance(system, list):
        raise invalid("system: Input should be a valid string or list")
    for i, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise invalid(f"system.{i}.type: Input should be 'text'")
        if not isinstance(block.get("text"), str) or not block["text"]:
            raise invalid("system: text content blocks must be non-empty")
        b.block(
            b.tokenizer.tokens(block["text"]), canonical(block), block.get("cache_control"), f"system.{i}"
        )


def _blocks(message: Mapping[str, Any], i: int, last: bool) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else []
    elif not isinstance(content, list):
        raise invalid(f"messages.{i}.content: Input should be a valid string or list")
    if not content and not (last and message.get("role") == "assistant"):
        raise invalid(
            f"messages.{i}: all messages must have non-empty content except for the optional "
            "final assistant message"
        )
    return content


def _pairing(i: int, kinds: list[tuple[str, Mapping[str, Any]]], pending: list[str]) -> list[str]:
    """Check tool_result blocks against the previous turn's tool_use ids; return this turn's ids."""
    answered = {b["tool_use_id"] for kind, b in kinds if kind == "tool_result"}
    missing = [t for t in pending if t not in answered]
    if missing:
        raise invalid(
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message."
        )
    for j, (kind, block) in enumerate(kinds):
        if kind == "tool_result" and block["tool_use_id"] not in pending:
            raise invalid(
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{block['tool_use_id']}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )
    return [b["id"] for kind, b in kinds if kind == "tool_use"]


def render_prompt(
    body: Mapping[str, Any],
    *,
    tokenizer: Tokenizer,
    tool_choice: str,
    signature_ok: Callable[[str, str], bool] | None = None,
) -> tuple[RenderedPrompt, set[str]]:
    """Validate and render a request's prompt; also return the tool names."""
    b = PromptBuilder(tokenizer)
    names = _tools(b, body.get("tools"))
    _system(b, body.get("system"))
    if names:
        b.structure(*(["<tools>"] * _TOOL_PROMPT.get(tool_choice, 346)))
    messages = body.get("messages")
    if messages is None:
        raise invalid("messages: Field required")
    if not isinstance(messages, list):
        raise invalid("messages: Input should be a valid list")
    if not messages:
        raise invalid("messages: List should have at least 1 item after validation, not 0")
    role, user_text, answers = "", "", False
    pending: list[str] = []
    last_assistant: tuple[int, str] | None = None
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise invalid(f"messages.{i}: Input should be a valid dictionary")
        previous, role = role, message.get("role", "")
        if role not in ("user", "assistant"):
            raise invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise invalid('messages: first message must use the "user" role')
        if role == previous:
            raise invalid(
                f'messages: roles must alternate between "user" and "assistant", but found multiple '
                f'"{role}" roles in a row'
            )
        last = i == len(messages) - 1
        content = _blocks(message, i, last)
        kinds = [
            (check_block(block, f"messages.{i}.content.{j}", role, signature_ok), block)
            for j, block in enumerate(content)
        ]
        pending = _pairing(i, kinds, pending if role == "user" else [])
        if role == "assistant":
            last_assistant = (i, kinds[0][0] if kinds else "")
        else:
            user_text = " ".join(str(blk["text"]) for kind, blk in kinds if kind == "text")
            answers = any(kind == "tool_result" for kind, _ in kinds)
        b.structure("<|im_start|>", role)
        for j, (_, block) in enumerate(kinds):
            where = f"messages.{i}.content.{j}"
            b.block(block_tokens(block, tokenizer), canonical(block), block.get("cache_control"), where)
        if last and role == "assistant" and kinds and kinds[-1][0] == "text":
            if str(kinds[-1][1]["text"]) != str(kinds[-1][1]["text"]).rstrip():
                raise invalid("messages: final assistant content cannot end with trailing whitespace")
        if not last or role == "user":
            b.structure("<|im_end|>")
    if role == "user":
        b.structure("<|im_start|>", "assistant")
    return _finish(b, body, role, user_text, answers, last_assistant), names


def _finish(
    b: PromptBuilder,
    body: Mapping[str, Any],
    role: str,
    user_text: str,
    answers: bool,
    last_assistant: tuple[int, str] | None,
) -> RenderedPrompt:
    top = body.get("cache_control")
    if top is not None and b.ends:  # a top-level mark caches up to the last block
        b.mark(top, "cache_control")
    if len(b.marks) > _MAX_BREAKPOINTS:
        raise invalid(
            f"A maximum of {_MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(b.marks)}."
        )
    prompt = Prompt(tokens=b.tokens, digest=int.from_bytes(b.hasher.digest(), "little"))
    return RenderedPrompt(
        prompt, tuple(b.ends), tuple(b.hashes), tuple(b.marks), role, user_text, answers, last_assistant
    )

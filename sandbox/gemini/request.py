"""Validate a Gemini ``generateContent`` body into GeminiParams (engine request plus Gemini options).

Field names are accepted in camelCase or snake_case, as Google's JSON parser
does; unknown names are rejected (``Unknown name "x": Cannot find field.``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from sandbox.core.engine import GenerationRequest, ToolCallSpec
from sandbox.core.errors import ApiError
from sandbox.core.tokens import Tokenizer
from sandbox.gemini.errors import invalid
from sandbox.gemini.schema import function_tool, generation_options

__all__ = ["BLOCKED", "IMAGE_TOKENS", "UNSAFE", "GeminiParams", "field", "parse_generate", "render_contents"]

BLOCKED = "__blocked__"
UNSAFE = "__unsafe__"
# An image (or a file part) costs 258 tokens, Gemini's price of an image up to 384 px.
IMAGE_TOKENS = 258
_TOP = {"contents", "systemInstruction", "tools", "toolConfig", "safetySettings", "generationConfig",
        "cachedContent", "model", "labels", "serviceTier"}  # fmt: skip
_DATA = ("text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode",
         "codeExecutionResult")  # fmt: skip


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def field(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` under its camelCase or snake_case spelling."""
    value = obj.get(name)
    return obj.get(_snake(name)) if value is None else value


def unknown_fields(obj: Mapping[str, Any], known: set[str], where: str | None = None) -> None:
    """Reject a field name that is neither a known camelCase nor snake_case name."""
    allowed = known | {_snake(k) for k in known}
    for key in obj:
        if key not in allowed:
            at = f" at '{where}'" if where else ""
            raise invalid(f'Invalid JSON payload received. Unknown name "{key}"{at}: Cannot find field.')


@dataclass(frozen=True, slots=True)
class GeminiParams:
    """A validated request: the engine's part and what only Gemini's answer needs."""

    generation: GenerationRequest
    function_call: bool = False
    thinking_budget: int | None = None  # None: off; -1: dynamic; >0: at most this many
    include_thoughts: bool = False
    max_output_tokens: int | None = None
    image_tokens: int = 0
    blocked: bool = False
    unsafe: bool = False


def _part_text(part: Any, where: str) -> tuple[str, int]:
    if not isinstance(part, Mapping) or not any(field(part, k) is not None for k in _DATA):
        raise invalid(f"* {where}.data: required oneof field 'data' must have one initialized field\n")
    text = field(part, "text")
    if isinstance(text, str):
        return text, 0
    call = field(part, "functionCall") or field(part, "functionResponse")
    if isinstance(call, Mapping):
        return f"{call.get('name', '')}({orjson.dumps(call, option=orjson.OPT_SORT_KEYS).decode()})", 0
    media = field(part, "inlineData") or field(part, "fileData")
    if isinstance(media, Mapping):
        mark = zlib.crc32(orjson.dumps(media, option=orjson.OPT_SORT_KEYS))
        return f"[media {mark:08x}]" + " px" * (IMAGE_TOKENS - 3), IMAGE_TOKENS
    return orjson.dumps(part, option=orjson.OPT_SORT_KEYS).decode(), 0


def _content(content: Any, where: str, *, system: bool = False) -> tuple[str, str, int]:
    if not isinstance(content, Mapping):
        raise invalid(f"* {where}: must be an object\n")
    role = content.get("role") or "user"
    if not system and role not in ("user", "model", "function"):
        raise invalid("Please use a valid role: user, model.")
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        raise invalid(f"* {where}.parts: contents.parts must not be empty.\n")
    texts, media = zip(*(_part_text(p, f"{where}.parts[{j}]") for j, p in enumerate(parts)), strict=True)
    return str(role), "".join(texts), sum(media)


def render_contents(body: Mapping[str, Any], tokenizer: Tokenizer) -> tuple[Any, list[tuple[str, str, int]]]:
    """Validate system instruction and contents; return the Prompt and each turn (role, text, media)."""
    contents = field(body, "contents")
    if not isinstance(contents, list) or not contents:
        raise invalid("* GenerateContentRequest.contents: contents is not specified\n")
    turns = [_content(c, f"GenerateContentRequest.contents[{i}]") for i, c in enumerate(contents)]
    system = field(body, "systemInstruction")
    if system is not None:
        turns.insert(
            0, ("system", *_content(system, "GenerateContentRequest.system_instruction", system=True)[1:])
        )
    tools = field(body, "tools")
    preamble = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS).decode() if tools else ""
    prompt = tokenizer.render_chat(((role, text, None) for role, text, _ in turns), preamble=preamble)
    return prompt, turns


def parse_generate(body: object, *, model: str, tokenizer: Tokenizer, max_model_len: int) -> GeminiParams:
    """Validate a generateContent body (already parsed JSON)."""
    if not isinstance(body, Mapping):
        raise invalid("Invalid JSON payload received. Expected an object.")
    unknown_fields(body, _TOP)
    if field(body, "cachedContent") is not None:
        raise ApiError(403, "CachedContent not found (or permission denied)", type="PERMISSION_DENIED")
    prompt, turns = render_contents(body, tokenizer)
    options = generation_options(field(body, "generationConfig"))
    text = " ".join(t for _, t, _ in turns)
    if len(prompt) > max_model_len:
        raise invalid(
            f"The input token count ({len(prompt)}) exceeds the maximum number of tokens allowed "
            f"({max_model_len})."
        )
    last_role, last_text, _ = turns[-1]
    last_parts = field(body, "contents")[-1].get("parts")
    answers = any(isinstance(p, Mapping) and field(p, "functionResponse") for p in last_parts)
    call = function_tool(body, last_text if last_role == "user" and not answers else "")
    tool = call or (ToolCallSpec("", options.json_schema) if options.json_schema is not None else None)
    budget = options.thinking_budget
    thoughts = budget if budget is not None and budget != 0 else None
    generation = GenerationRequest(
        model=model,
        prompt=prompt,
        n=options.candidates,
        max_tokens=options.max_output_tokens,
        stop=options.stop,
        seed=options.seed,
        tool=tool,
    )
    return GeminiParams(
        generation=generation,
        function_call=call is not None,
        thinking_budget=thoughts,
        include_thoughts=options.include_thoughts,
        max_output_tokens=options.max_output_tokens,
        image_tokens=sum(m for _, _, m in turns),
        blocked=BLOCKED in text,
        unsafe=UNSAFE in text,
    )

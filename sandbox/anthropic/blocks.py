"""Anthropic content blocks: validate one, turn it into tokens and a cache-stable form, and collect them.

Images and PDF pages cost a flat 1,600 tokens (about a 1,092 x 1,092 image at
Anthropic's ``width·height/750``); thinking blocks from earlier turns are
stripped by the API and cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from hashlib import blake2b
from typing import Any

import orjson

from sandbox.anthropic.breakpoint_cache import Breakpoint
from sandbox.anthropic.errors import invalid
from sandbox.core.tokens import Tokenizer

__all__ = ["MEDIA_TOKENS", "PromptBuilder", "block_tokens", "canonical", "check_block"]

MEDIA_TOKENS = 1600
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_OPAQUE = ("search_result", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
           "code_execution_tool_result", "container_upload")  # fmt: skip
_TAGS = ("text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", *_OPAQUE)
# Block types each role may send.
_ROLE_TYPES = {
    "user": {"text", "image", "document", "tool_result", "search_result", "container_upload"},
    "assistant": {"text", "tool_use", "thinking", "redacted_thinking", *_OPAQUE},
}


_EXPECTED: dict[type, str] = {str: "a valid string", dict: "a valid dictionary"}


def _require(block: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = block.get(key)
    if value is None:
        raise invalid(f"{where}.{key}: Field required")
    if not isinstance(value, kind) or isinstance(value, bool):
        raise invalid(f"{where}.{key}: Input should be {_EXPECTED[kind]}")
    return value


def _check_source(block: Mapping[str, Any], where: str, *, document: bool) -> None:
    source = _require(block, "source", dict, where)
    kind = source.get("type")
    where = f"{where}.source"
    if kind == "base64":
        media = source.get("media_type")
        allowed = ("application/pdf",) if document else _IMAGE_TYPES
        if media not in allowed:
            names = " or ".join(f"'{m}'" for m in allowed)
            raise invalid(f"{where}.base64.media_type: Input should be {names}")
        _require(source, "data", str, f"{where}.base64")
    elif kind == "url":
        _require(source, "url", str, f"{where}.url")
    elif kind == "file":
        _require(source, "file_id", str, f"{where}.file")
    elif document and kind == "text":
        _require(source, "data", str, f"{where}.text")
    elif document and kind == "content":
        if not isinstance(source.get("content"), list | str):
            raise invalid(f"{where}.content.content: Field required")
    else:
        raise invalid(
            f"{where}.type: Input tag '{kind}' found using 'type' does not match any of the expected tags"
        )


def check_block(
    block: object, where: str, role: str, signature_ok: Callable[[str, str], bool] | None = None
) -> str:
    """Validate a content block sent by ``role``; return its type."""
    if not isinstance(block, Mapping):
        raise invalid(f"{where}: Input should be a valid dictionary or object to extract fields from")
    kind = block.get("type")
    if kind not in _TAGS:
        expected = ", ".join(f"'{t}'" for t in _TAGS)
        raise invalid(
            f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected "
            f"tags: {expected}"
        )
    if kind not in _ROLE_TYPES[role]:
        raise invalid(f"{where}.type: `{kind}` blocks are not permitted in `{role}` messages")
    if kind == "text":
        if not _require(block, "text", str, where):
            raise invalid("messages: text content blocks must be non-empty")
    elif kind in ("image", "document"):
        _check_source(block, f"{where}.{kind}", document=kind == "document")
    elif kind == "tool_use":
        _require(block, "id", str, f"{where}.tool_use")
        _require(block, "name", str, f"{where}.tool_use")
        _require(block, "input", dict, f"{where}.tool_use")
    elif kind == "tool_result":
        _require(block, "tool_use_id", str, f"{where}.tool_result")
        content = block.get("content")
        if isinstance(content, list):
            for k, part in enumerate(content):
                check_block(part, f"{where}.tool_result.content.{k}", "user")
        elif content is not None and not isinstance(content, str):
            raise invalid(f"{where}.tool_result.content: Input should be a valid string or list")
    elif kind == "thinking":
        text = _require(block, "thinking", str, f"{where}.thinking")
        signature = _require(block, "signature", str, f"{where}.thinking")
        if signature_ok is not None and not signature_ok(text, signature):
            raise invalid(f"{where}: Invalid `signature` in `thinking` block")
    elif kind == "redacted_thinking":
        _require(block, "data", str, f"{where}.redacted_thinking")
    return str(kind)


def canonical(block: Mapping[str, Any]) -> bytes:
    """The block without its ``cache_control``, serialised stably (moving a breakpoint keeps hits)."""
    return orjson.dumps({k: v for k, v in block.items() if k != "cache_control"}, option=orjson.OPT_SORT_KEYS)


def block_tokens(block: Mapping[str, Any], tokenizer: Tokenizer) -> list[str]:
    """The prompt tokens of a validated block."""
    kind = block.get("type")
    if kind == "text":
        return tokenizer.tokens(str(block["text"]))
    if kind in ("image", "document"):
        source = block["source"]
        if kind == "document" and source.get("type") == "text":
            return tokenizer.tokens(str(source["data"]))
        return [f"[{kind}]", *(["px"] * MEDIA_TOKENS)]
    if kind == "tool_use":
        return [*tokenizer.tokens(block["name"]), *tokenizer.tokens(orjson.dumps(block["input"]).decode())]
    if kind == "tool_result":
        content = block.get("content")
        tokens = ["[result]"]
        if isinstance(content, str):
            tokens += tokenizer.tokens(content)
        elif isinstance(content, list):
            for part in content:
                tokens += block_tokens(part, tokenizer)
        return tokens
    if kind in ("thinking", "redacted_thinking"):
        return []
    return tokenizer.tokens(orjson.dumps(block).decode())


class PromptBuilder:
    """Collects prompt tokens, block boundaries with chained hashes, and breakpoints."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.tokens: list[str] = []
        self.hasher = blake2b(digest_size=8)
        self.ends: list[int] = []
        self.hashes: list[int] = []
        self.marks: list[Breakpoint] = []
        self.last_ttl = "1h"

    def structure(self, *tokens: str) -> None:
        """Add tokens that are not a content block (role markers)."""
        self.tokens.extend(tokens)
        self.hasher.update("\x00".join(tokens).encode() + b"\x01")

    def block(self, tokens: Sequence[str], stable: bytes, cache_control: object, where: str) -> None:
        """Add a content block (``stable``: its cache-stable form) and its breakpoint, if any."""
        self.tokens.extend(tokens)
        self.hasher.update(stable + b"\x02")
        self.ends.append(len(self.tokens))
        self.hashes.append(int.from_bytes(self.hasher.copy().digest(), "little"))
        if cache_control is not None:
            self.mark(cache_control, where)

    def mark(self, cache_control: object, where: str) -> None:
        """Make the last block so far a breakpoint."""
        if self.marks and self.marks[-1].block == len(self.ends) - 1:
            return
        if not isinstance(cache_control, Mapping) or cache_control.get("type") != "ephemeral":
            raise invalid(f"{where}.cache_control.type: Input should be 'ephemeral'")
        ttl = cache_control.get("ttl", "5m")
        if ttl not in ("5m", "1h"):
            raise invalid(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")
        if ttl == "1h" and self.last_ttl == "5m":
            raise invalid(
                f"{where}.cache_control.ttl: a ttl='1h' cache_control block must not come after a "
                "ttl='5m' cache_control block. Note that blocks are processed in the following "
                "order: `tools`, `system`, `messages`."
            )
        self.last_ttl = ttl
        self.marks.append(Breakpoint(len(self.ends) - 1, ttl))

"""Write an Anthropic ``message`` and its stream events exactly as api.anthropic.com shapes them."""

from __future__ import annotations

from typing import Any

import orjson

from sandbox.anthropic.breakpoint_cache import CacheUsage
from sandbox.anthropic.errors import base62
from sandbox.anthropic.output import OutBlock, Output, tool_input

__all__ = ["MessageWriter"]


class MessageWriter:
    """Formats one reply, whole or as ``message_start`` … ``message_stop`` events.

    ``usage.input_tokens`` is the uncached part only: total input is
    ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``.
    """

    def __init__(self, *, model: str, prompt_tokens: int, cache: CacheUsage) -> None:
        self.id = "msg_01" + base62(22)
        self._model = model
        self._cache = cache
        self._input = prompt_tokens - cache.read - cache.written

    def usage(self, output_tokens: int) -> dict[str, Any]:
        """The ``usage`` object of the message."""
        cache = self._cache
        return {
            "input_tokens": self._input,
            "cache_creation_input_tokens": cache.written,
            "cache_read_input_tokens": cache.read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": cache.write_5m,
                "ephemeral_1h_input_tokens": cache.write_1h,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }

    def _message(self, content: list[dict[str, Any]], output: Output | None, tokens: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": content,
            "stop_reason": output.stop_reason if output else None,
            "stop_sequence": output.stop_sequence if output else None,
            "usage": self.usage(tokens),
        }

    @staticmethod
    def block(block: OutBlock) -> dict[str, Any]:
        """A finished content block."""
        if block.kind == "thinking":
            return {"type": "thinking", "thinking": block.text, "signature": block.signature}
        if block.kind == "tool_use":
            return {"type": "tool_use", "id": block.id, "name": block.name, "input": tool_input(block)}
        return {"type": "text", "text": block.text}

    def message(self, output: Output) -> bytes:
        """The whole ``message`` object."""
        content = [self.block(b) for b in output.blocks]
        return orjson.dumps(self._message(content, output, output.output_tokens))

    # Stream events: each is (event name, data).

    def start(self) -> bytes:
        """``message_start``: empty content, the input usage, one output token so far."""
        return orjson.dumps({"type": "message_start", "message": self._message([], None, 1)})

    @staticmethod
    def block_start(index: int, block: OutBlock) -> bytes:
        """``content_block_start`` with the block's empty shell."""
        if block.kind == "thinking":
            shell: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        elif block.kind == "tool_use":
            shell = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
        else:
            shell = {"type": "text", "text": ""}
        return orjson.dumps({"type": "content_block_start", "index": index, "content_block": shell})

    @staticmethod
    def block_delta(index: int, block: OutBlock, fragment: str) -> bytes:
        """``content_block_delta``: text_delta, thinking_delta or input_json_delta."""
        if block.kind == "thinking":
            delta = {"type": "thinking_delta", "thinking": fragment}
        elif block.kind == "tool_use":
            delta = {"type": "input_json_delta", "partial_json": fragment}
        else:
            delta = {"type": "text_delta", "text": fragment}
        return orjson.dumps({"type": "content_block_delta", "index": index, "delta": delta})

    @staticmethod
    def signature_delta(index: int, block: OutBlock) -> bytes:
        """The ``signature_delta`` that closes a thinking block."""
        delta = {"type": "signature_delta", "signature": block.signature}
        return orjson.dumps({"type": "content_block_delta", "index": index, "delta": delta})

    @staticmethod
    def block_stop(index: int) -> bytes:
        """``content_block_stop``."""
        return orjson.dumps({"type": "content_block_stop", "index": index})

    def message_delta(self, output: Output) -> bytes:
        """``message_delta``: the stop reason and the cumulative usage."""
        usage = self.usage(output.output_tokens)
        del usage["cache_creation"], usage["service_tier"]
        delta = {"stop_reason": output.stop_reason, "stop_sequence": output.stop_sequence}
        return orjson.dumps({"type": "message_delta", "delta": delta, "usage": usage})

    PING = b'{"type": "ping"}'
    STOP = b'{"type":"message_stop"}'

"""OpenAI chat.completion.chunks re-encoded as Anthropic's streaming events for the ingress.

Anthropic opens, fills and closes one content block at a time, so text and each tool call become
their own block. Usage is only known at the end of an OpenAI stream, so `message_start` reports zero
input tokens unless the provider said earlier (Gemini's usage on every chunk); the true counts come in
`message_delta`'s usage, which Anthropic's SDK accumulates. (A provider that speaks Anthropic is not
re-encoded at all: `gateway.routes.dialects.AnthropicStream` relays its own events.)
"""

from __future__ import annotations

from typing import Any

from providers.anthropic.ingress import (
    STOP_REASONS,
    Event,
    message_id,
    to_anthropic_error,
    to_anthropic_usage,
)
from providers.openai_compat import from_openai_usage
from providers.types import JSON
from usage import Usage


class AnthropicStreamEncoder:
    """Feed it each OpenAI chunk dict, then call `finish()`; each call returns (event name, data) pairs."""

    def __init__(self, *, model: str, message_id: str | None = None) -> None:
        self.model = model
        self.message_id = message_id
        self._started = False
        self._open: tuple[str, int] | None = None  # ("text", 0) or ("tool", OpenAI tool index)
        self._next_block = 0
        self._stop_reason = "end_turn"
        self._usage = Usage()

    def encode(self, chunk: JSON, *, usage: Usage | None = None, so_far: Usage | None = None) -> list[Event]:
        """Events for one chunk; pass the adapter's canonical `usage` when the chunk carries it, and
        `so_far` when the provider reported usage before the end (the prompt's count, for
        `message_start`)."""
        if so_far is not None and not self._started:
            self._usage = so_far
        events = self._start(chunk.get("id"))
        if usage is not None or chunk.get("usage"):
            self._usage = usage or from_openai_usage(chunk.get("usage"))
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # Anthropic has one answer per message
            delta = choice.get("delta") or {}
            if delta.get("content"):
                events += self._text(delta["content"])
            for call in delta.get("tool_calls") or ():
                events += self._tool(call)
            if choice.get("finish_reason"):
                self._stop_reason = STOP_REASONS.get(choice["finish_reason"], "end_turn")
                events += self._close()
        return events

    def finish(self) -> list[Event]:
        events = [*self._start(None), *self._close()]
        delta = {"stop_reason": self._stop_reason, "stop_sequence": None}
        usage = to_anthropic_usage(self._usage)
        events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    def error(self, status: int, message: str) -> list[Event]:
        """A failure after the stream began: Anthropic's `error` event, the last one sent."""
        return [("error", to_anthropic_error(status, message))]

    def _start(self, chunk_id: Any) -> list[Event]:
        if self._started:
            return []
        self._started = True
        message: JSON = {
            "id": self.message_id or message_id(chunk_id),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**to_anthropic_usage(self._usage), "output_tokens": 0},
        }
        return [("message_start", {"type": "message_start", "message": message})]

    def _text(self, text: str) -> list[Event]:
        events: list[Event] = []
        if self._open is None or self._open[0] != "text":
            events += self._open_block("text", 0, {"type": "text", "text": ""})
        return [*events, self._delta({"type": "text_delta", "text": text})]

    def _tool(self, call: JSON) -> list[Event]:
        index = int(call.get("index", 0))
        function = call.get("function") or {}
        events: list[Event] = []
        if self._open != ("tool", index):
            block: JSON = {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{index}",
                "name": function.get("name") or "",
                "input": {},
            }
            events += self._open_block("tool", index, block)
        if function.get("arguments"):
            events.append(self._delta({"type": "input_json_delta", "partial_json": function["arguments"]}))
        return events

    def _open_block(self, kind: str, key: int, block: JSON) -> list[Event]:
        events = self._close()
        self._open = (kind, key)
        start = {"type": "content_block_start", "index": self._next_block, "content_block": block}
        return [*events, ("content_block_start", start)]

    def _delta(self, delta: JSON) -> Event:
        return (
            "content_block_delta",
            {"type": "content_block_delta", "index": self._next_block, "delta": delta},
        )

    def _close(self) -> list[Event]:
        if self._open is None:
            return []
        self._open = None
        index = self._next_block
        self._next_block += 1
        return [("content_block_stop", {"type": "content_block_stop", "index": index})]

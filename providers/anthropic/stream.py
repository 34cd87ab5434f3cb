"""Anthropic's streaming events decoded into OpenAI `chat.completion.chunk`s, one event at a time.

`message_start` carries the input and cache usage, `message_delta` the stop reason and the cumulative
output count, `message_stop` the end: it becomes OpenAI's trailing usage-only chunk. Thinking blocks
are never shown as content; their tokens are already inside `output_tokens`.
"""

from __future__ import annotations

from typing import Any

import orjson

from providers.anthropic.errors import error_from_event
from providers.anthropic.translate import from_anthropic_usage, to_finish_reason
from providers.openai_compat import to_openai_usage
from providers.types import JSON, StreamChunk


class AnthropicStreamDecoder:
    """Feed it each SSE event (name and parsed data); it returns the chunks that event completes.

    Raises the matching `ProviderError` for an `error` event. `done` turns true at `message_stop`.
    """

    def __init__(self, *, model: str, created: int, provider: str = "") -> None:
        self.id = ""
        self.model = model
        self.created = created
        self.provider = provider
        self.done = False
        self._usage: JSON = {}
        self._tool_index: dict[int, int] = {}  # Anthropic block index -> OpenAI tool_calls index
        self._finished = False
        self._pending_chars = 0  # generated characters not yet attached to a chunk

    def feed(self, event: str | None, data: Any) -> list[StreamChunk]:
        chunks = self._dispatch(event, data)
        if chunks and self._pending_chars:
            # Thinking text is never shown, but a broken stream is billed from generated characters.
            chunks[0].content_chars += self._pending_chars
            self._pending_chars = 0
        return chunks

    def _dispatch(self, event: str | None, data: Any) -> list[StreamChunk]:
        kind = data.get("type") if isinstance(data, dict) else None
        kind = kind or event
        if kind == "message_start":
            return self._start(data.get("message") or {})
        if kind == "content_block_start":
            return self._block_start(int(data.get("index", 0)), data.get("content_block") or {})
        if kind == "content_block_delta":
            return self._block_delta(int(data.get("index", 0)), data.get("delta") or {})
        if kind == "message_delta":
            usage = data.get("usage") or {}
            self._usage.update({key: value for key, value in usage.items() if value is not None})
            return self._finish((data.get("delta") or {}).get("stop_reason"))
        if kind == "message_stop":
            chunks = [] if self._finished else self._finish(None)
            self.done = True
            return [*chunks, self._usage_chunk()]
        if kind == "error":
            raise error_from_event(data, provider=self.provider)
        return []  # ping, content_block_stop and event types newer than this decoder

    def _start(self, message: JSON) -> list[StreamChunk]:
        self.id = str(message.get("id") or self.id)
        self.model = str(message.get("model") or self.model)
        self._usage = dict(message.get("usage") or {})
        opening = self._chunk({"role": "assistant", "content": ""})
        opening.usage_so_far = from_anthropic_usage(self._usage)
        return [opening]

    def _block_start(self, index: int, block: JSON) -> list[StreamChunk]:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            self._pending_chars += len(block["text"])
            return [self._chunk({"content": block["text"]})]
        if kind != "tool_use":
            return []
        tool_index = self._tool_index[index] = len(self._tool_index)
        arguments = orjson.dumps(block["input"]).decode() if block.get("input") else ""
        self._pending_chars += len(arguments)
        call = {
            "index": tool_index,
            "id": block.get("id") or "",
            "type": "function",
            "function": {"name": block.get("name") or "", "arguments": arguments},
        }
        return [self._chunk({"tool_calls": [call]})]

    def _block_delta(self, index: int, delta: JSON) -> list[StreamChunk]:
        kind = delta.get("type")
        self._pending_chars += len(
            delta.get("text") or delta.get("partial_json") or delta.get("thinking") or ""
        )
        if kind == "text_delta" and delta.get("text"):
            return [self._chunk({"content": delta["text"]})]
        if kind == "input_json_delta" and delta.get("partial_json") and index in self._tool_index:
            call = {"index": self._tool_index[index], "function": {"arguments": delta["partial_json"]}}
            return [self._chunk({"tool_calls": [call]})]
        return []  # thinking_delta, signature_delta, citations_delta

    def _finish(self, stop_reason: Any) -> list[StreamChunk]:
        self._finished = True
        return [self._chunk({}, finish_reason=to_finish_reason(stop_reason))]

    def _chunk(self, delta: JSON, *, finish_reason: str | None = None) -> StreamChunk:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return StreamChunk(data=orjson.dumps(self._envelope([choice])), model=self.model)

    def _usage_chunk(self) -> StreamChunk:
        usage = from_anthropic_usage(self._usage)
        body = self._envelope([])
        body["usage"] = to_openai_usage(usage)
        return StreamChunk(data=orjson.dumps(body), usage=usage, usage_only=True, model=self.model)

    def _envelope(self, choices: list[JSON]) -> JSON:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

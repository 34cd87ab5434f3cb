"""Gemini's `streamGenerateContent?alt=sse` frames decoded into OpenAI `chat.completion.chunk`s.

Every frame is a whole `GenerateContentResponse` holding only the new parts; function calls arrive
whole, never split. There is no `[DONE]`: the stream ends when the HTTP body does, and the last
frames carry `finishReason` and the final `usageMetadata`, which `finish()` turns into OpenAI's
trailing usage-only chunk.
"""

from __future__ import annotations

from typing import Any

import orjson

from providers.gemini.errors import error_from_frame
from providers.gemini.translate import from_gemini_usage, read_parts, to_finish_reason
from providers.openai_compat import to_openai_usage
from providers.types import JSON, StreamChunk


class GeminiStreamDecoder:
    """Feed it each parsed frame, then call `finish()`; `done` says a finish reason was seen."""

    def __init__(self, *, id: str, created: int, model: str, provider: str = "") -> None:
        self.id = id
        self.created = created
        self.model = model
        self.provider = provider
        self.done = False
        self._usage: Any = None
        self._calls: dict[int, int] = {}  # candidate index -> tool calls sent so far
        self._pending_chars = 0  # generated characters not yet attached to a chunk

    def feed(self, frame: Any) -> list[StreamChunk]:
        if not isinstance(frame, dict):
            return []
        if "error" in frame:
            raise error_from_frame(frame["error"], provider=self.provider)
        if not self._calls and frame.get("responseId"):
            self.id = str(frame["responseId"])  # nothing sent yet, so every chunk still shares it
        self.model = str(frame.get("modelVersion") or self.model)
        if frame.get("usageMetadata"):
            self._usage = frame["usageMetadata"]
        chunks: list[StreamChunk] = []
        candidates = frame.get("candidates") or ()
        for position, candidate in enumerate(candidates):
            self._pending_chars += generated_chars(candidate)
            chunks += self._candidate(int(candidate.get("index", position)), candidate)
        if not candidates and (frame.get("promptFeedback") or {}).get("blockReason"):
            # The prompt was blocked: a filtered, empty answer, as in the non-streaming case.
            chunks += self._open(0)
            chunks.append(self._chunk(0, {}, finish_reason="content_filter"))
            self.done = True
        if chunks and self._pending_chars:
            # Thoughts are never shown, but a broken stream is billed from generated characters.
            chunks[0].content_chars += self._pending_chars
            self._pending_chars = 0
        if chunks and frame.get("usageMetadata"):
            chunks[-1].usage_so_far = from_gemini_usage(self._usage)
        return chunks

    def finish(self) -> list[StreamChunk]:
        usage = from_gemini_usage(self._usage)
        body = self._envelope([])
        body["usage"] = to_openai_usage(usage)
        return [StreamChunk(data=orjson.dumps(body), usage=usage, usage_only=True, model=self.model)]

    def _candidate(self, index: int, candidate: JSON) -> list[StreamChunk]:
        chunks = self._open(index)
        sent = self._calls[index]
        texts, calls = read_parts(candidate, call_prefix=f"call_{self.id}_{index}", first_call=sent)
        delta: JSON = {}
        if texts:
            delta["content"] = "".join(texts)
        if calls:
            delta["tool_calls"] = [{"index": sent + n, **call} for n, call in enumerate(calls)]
            self._calls[index] = sent + len(calls)
        reason = candidate.get("finishReason")
        finish = to_finish_reason(reason, tool_calls=self._calls[index] > 0) if reason else None
        if delta or finish:
            chunks.append(self._chunk(index, delta, finish_reason=finish))
        self.done = self.done or finish is not None
        return chunks

    def _open(self, index: int) -> list[StreamChunk]:
        """The role chunk OpenAI streams start each choice with."""
        if index in self._calls:
            return []
        self._calls[index] = 0
        return [self._chunk(index, {"role": "assistant", "content": ""})]

    def _chunk(self, index: int, delta: JSON, *, finish_reason: str | None = None) -> StreamChunk:
        choice = {"index": index, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return StreamChunk(data=orjson.dumps(self._envelope([choice])), model=self.model)

    def _envelope(self, choices: list[JSON]) -> JSON:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }


def generated_chars(candidate: JSON) -> int:
    """Characters the model generated in this frame: text, thoughts and function-call arguments."""
    chars = 0
    for part in (candidate.get("content") or {}).get("parts") or ():
        if "functionCall" in part:
            chars += len(orjson.dumps(part["functionCall"].get("args") or {}))
        else:
            chars += len(part.get("text") or "")
    return chars

"""Write GenerateContentResponse objects, whole or as the frames of a stream, as Gemini shapes them.

``usageMetadata.promptTokenCount`` includes the cached tokens
(``cachedContentTokenCount``); ``candidatesTokenCount`` excludes thoughts
(``thoughtsTokenCount``); ``totalTokenCount`` is prompt + candidates +
thoughts. In a stream every frame carries the usage so far (cumulative, not a
delta) and the last frame of each candidate its ``finishReason``. When thoughts
use up ``maxOutputTokens`` the candidate has no parts and ``MAX_TOKENS``, as
Gemini 2.5 does.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import orjson

from sandbox.core.engine import Choice, Plan
from sandbox.core.textgen import Completion
from sandbox.gemini.request import GeminiParams

__all__ = ["ResponseWriter"]

_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP"}
_HARM = ("HARM_CATEGORY_HATE_SPEECH", "HARM_CATEGORY_DANGEROUS_CONTENT", "HARM_CATEGORY_HARASSMENT",
         "HARM_CATEGORY_SEXUALLY_EXPLICIT")  # fmt: skip


def _ratings(blocked: str) -> list[dict[str, Any]]:
    return [
        {"category": c, "probability": "HIGH", "blocked": True} if c == blocked
        else {"category": c, "probability": "NEGLIGIBLE"}
        for c in _HARM
    ]  # fmt: skip


class ResponseWriter:
    """Formats one answer: its candidates, usage, model version and response id."""

    def __init__(self, *, model: str, params: GeminiParams, plan: Plan, thoughts: Completion | None) -> None:
        self.response_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")[:22]
        self._model = model
        self._params = params
        self._plan = plan
        self._thoughts = thoughts
        self.thought_tokens = len(thoughts.pieces) if thoughts else 0

    def usage(self, candidates: int | None = None) -> dict[str, Any]:
        """``usageMetadata`` with ``candidates`` output tokens (all of them by default)."""
        plan, params = self._plan, self._params
        prompt = plan.prompt_tokens
        out = plan.completion_tokens if candidates is None else candidates
        if params.blocked or params.unsafe:
            out = 0
        thoughts = 0 if params.blocked else self.thought_tokens
        usage: dict[str, Any] = {"promptTokenCount": prompt}
        if out:
            usage["candidatesTokenCount"] = out
        usage["totalTokenCount"] = prompt + out + thoughts
        if plan.cached_tokens:
            usage["cachedContentTokenCount"] = plan.cached_tokens
        details = [{"modality": "TEXT", "tokenCount": prompt - params.image_tokens}]
        if params.image_tokens:
            details.append({"modality": "IMAGE", "tokenCount": params.image_tokens})
        usage["promptTokensDetails"] = details
        if plan.cached_tokens:
            usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": plan.cached_tokens}]
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        return usage

    def _body(self, candidates: list[dict[str, Any]] | None, usage: dict[str, Any]) -> bytes:
        body: dict[str, Any] = {}
        if candidates is not None:
            body["candidates"] = candidates
        else:
            body["promptFeedback"] = {"blockReason": "SAFETY", "safetyRatings": _ratings(_HARM[1])}
        body.update(usageMetadata=usage, modelVersion=self._model, responseId=self.response_id)
        return orjson.dumps(body)

    def _parts(self, choice: Choice, text: str, *, first: bool) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if first and self._thoughts is not None and self._params.include_thoughts:
            parts.append({"text": self._thoughts.text, "thought": True})
        if choice.tool_name:
            parts.append({"functionCall": {"name": choice.tool_name, "args": orjson.loads(choice.text)}})
        elif text:
            parts.append({"text": text})
        return parts

    def _candidate(self, choice: Choice, parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
        if self._params.unsafe:
            return {"finishReason": "SAFETY", "index": choice.index, "safetyRatings": _ratings(_HARM[1])}
        content: dict[str, Any] = {"parts": parts, "role": "model"} if parts else {"role": "model"}
        candidate: dict[str, Any] = {"content": content}
        if finish is not None:
            candidate["finishReason"] = finish
        candidate["index"] = choice.index
        return candidate

    def response(self) -> bytes:
        """The whole GenerateContentResponse."""
        if self._params.blocked:
            return self._body(None, self.usage())
        candidates = [
            self._candidate(c, self._parts(c, c.text, first=True), _FINISH[c.finish_reason])
            for c in self._plan.choices
        ]
        return self._body(candidates, self.usage())

    def frames(self, step: int) -> Iterator[tuple[int, bytes]]:
        """``(output token position, frame)`` pairs of a stream, ``step`` tokens a frame."""
        plan = self._plan
        if self._params.blocked or self._params.unsafe:
            yield 0, self.response()
            return
        calls = [c for c in plan.choices if c.tool_name]
        texts = [c for c in plan.choices if not c.tool_name]
        if calls:  # Gemini sends a function call whole, in one frame
            candidates = [self._candidate(c, self._parts(c, "", first=True), "STOP") for c in calls]
            yield 0, self._body(candidates, self.usage(sum(c.tokens for c in calls)))
        longest = max((len(c.pieces) for c in texts), default=0)
        done = sum(c.tokens for c in calls)
        for pos in range(0, max(longest, 1 if texts else 0), step):
            candidates = []
            for c in texts:
                if pos >= max(len(c.pieces), 1):
                    continue
                chunk = c.pieces[pos : pos + step]
                last = pos + step >= len(c.pieces)
                done += len(chunk)
                finish = _FINISH[c.finish_reason] if last else None
                candidates.append(self._candidate(c, self._parts(c, "".join(chunk), first=pos == 0), finish))
            yield pos, self._body(candidates, self.usage(done))

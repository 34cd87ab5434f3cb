"""Deterministic completion text and tool-call arguments from a seed and a prompt digest."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from sandbox.core.tokens import count_tokens, split_tokens

__all__ = ["Completion", "TextGenerator"]

_WORDS = (
    "the a an of to in and for with on that this it is was be by as at from or "
    "model token cache prompt request answer gateway route budget ledger team latency "
    "stream chunk reply server client upstream policy retry limit cost price usage "
    "quick small large simple careful steady useful clear final early late bright "
    "system network engine queue replica cluster window context vector signal record "
    "reads writes sends keeps makes takes gives finds shows holds moves turns builds "
    "checks counts tracks serves waits starts stops runs loads saves opens closes "
    "today often never always rarely again still also only just then here there "
    "river mountain garden harbor village market library kitchen theater station "
    "carefully quickly quietly eventually gradually immediately naturally reliably"
).split()
_WORD_TOKENS = {word: count_tokens(word) for word in _WORDS}

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True, slots=True)
class Completion:
    """One generated choice: its one-token pieces, their text and why it ended."""

    pieces: tuple[str, ...]
    text: str
    finish_reason: FinishReason


class TextGenerator:
    """Produces the same text for the same server seed, prompt, choice and request seed."""

    def __init__(
        self, seed: int, *, min_tokens: int = 20, max_tokens: int = 60, cache_size: int = 4096
    ) -> None:
        self._seed = seed
        self._min = min_tokens
        self._max = max_tokens
        self._cache_size = cache_size
        self._cache: OrderedDict[tuple[int, int, int | None], Completion] = OrderedDict()

    def complete(
        self,
        digest: int,
        *,
        index: int = 0,
        request_seed: int | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] = (),
        ignore_eos: bool = False,
    ) -> Completion:
        """Return choice ``index`` for a prompt, capped at ``max_tokens`` and cut at ``stop``;
        with ``ignore_eos`` (vLLM's sampling parameter) it runs on to ``max_tokens`` exactly."""
        natural = self._natural(digest, index, request_seed)
        if ignore_eos and max_tokens is not None and len(natural.pieces) < max_tokens:
            rng = random.Random(self._mix(digest, index, request_seed) ^ 0xE05)
            more = natural.text + " " + _sentences(rng, max_tokens - len(natural.pieces) + 1)
            natural = Completion(tuple(split_tokens(more)), more, "length")
        result = natural
        if max_tokens is not None and max_tokens < len(natural.pieces):
            pieces = natural.pieces[:max_tokens]
            result = Completion(pieces, "".join(pieces), "length")
        if stop:
            cut = min((i for s in stop if s and (i := result.text.find(s)) >= 0), default=-1)
            if cut >= 0:
                text = result.text[:cut]
                result = Completion(tuple(split_tokens(text)), text, "stop")
        return result

    def tool_arguments(
        self,
        digest: int,
        parameters: Mapping[str, Any] | None,
        *,
        index: int = 0,
        request_seed: int | None = None,
    ) -> str:
        """Return a small JSON object (as text) that fits a function's parameter schema."""
        rng = random.Random(self._mix(digest, index, request_seed) ^ 0x7001)
        value = _value_for(parameters or {"type": "object"}, rng, depth=0)
        if not isinstance(value, dict):
            value = {"value": value}
        return orjson.dumps(value).decode()

    def _mix(self, digest: int, index: int, request_seed: int | None) -> int:
        seed_part = 0 if request_seed is None else (request_seed & (2**64 - 1)) + 1
        return digest ^ (self._seed << 64) ^ (index << 130) ^ (seed_part << 140)

    def _natural(self, digest: int, index: int, request_seed: int | None) -> Completion:
        key = (digest, index, request_seed)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        rng = random.Random(self._mix(digest, index, request_seed))
        text = _sentences(rng, rng.randint(self._min, self._max))
        completion = Completion(tuple(split_tokens(text)), text, "stop")
        self._cache[key] = completion
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return completion


def _sentences(rng: random.Random, target: int) -> str:
    """Write whole words until about ``target`` tokens, ending with a full stop."""
    parts: list[str] = []
    used = 0
    sentence_left = 0
    while used < target - 1:
        word = rng.choice(_WORDS)
        if sentence_left == 0:
            if parts:
                parts.append(".")
                used += 1
            sentence_left = rng.randint(5, 14)
            word = word.capitalize()
        elif sentence_left > 2 and rng.random() < 0.08:
            parts.append(",")
            used += 1
        parts.append(word if not parts else " " + word)
        used += _WORD_TOKENS[word.lower()]
        sentence_left -= 1
    parts.append(".")
    return "".join(parts)


def _value_for(schema: Mapping[str, Any], rng: random.Random, *, depth: int) -> Any:
    """Pick a plausible value for a JSON-Schema fragment (simple types, enums, objects)."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return rng.choice(enum)
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        if depth >= 3:
            return {}
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return {}
        required = schema.get("required")
        names = [n for n in required if n in properties] if isinstance(required, list) else []
        names = names or list(properties)[:2]
        return {n: _value_for(properties[n], rng, depth=depth + 1) for n in names}
    if kind == "array":
        items = schema.get("items")
        if depth >= 3 or not isinstance(items, Mapping):
            return []
        return [_value_for(items, rng, depth=depth + 1)]
    if kind == "integer":
        return rng.randint(1, 100)
    if kind == "number":
        return round(rng.uniform(0, 100), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return rng.choice(_WORDS)

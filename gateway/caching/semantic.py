"""The semantic cache: an index of recent questions' embeddings per team, each pointing at the
exact-match response-cache entry that answered it. A new question close enough (cosine similarity
at or above the threshold) to a remembered one gets that answer.

The index lives in each replica's memory (bounded, oldest first out); the answers it points to are
in the shared response cache. Pure Python on purpose: a few hundred 256-dimension vectors per team
compare in a few milliseconds, and the feature is off by default.
"""

from __future__ import annotations

import base64
import math
import struct
from collections import OrderedDict, deque
from typing import Any

import orjson

from providers.types import JSON

Vector = tuple[float, ...]


def question_text(body: JSON) -> str | None:
    """What the cache compares: the last user message, as text."""
    for message in reversed(body.get("messages") or ()):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(p.get("text") or "") for p in content if isinstance(p, dict)) or None
    return None


def vector_from(embedding_body: bytes) -> Vector | None:
    """The first embedding of an OpenAI embeddings response (floats or base64), normalised."""
    try:
        data: Any = orjson.loads(embedding_body)["data"][0]["embedding"]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return None
    if isinstance(data, str):
        raw = base64.b64decode(data)
        data = struct.unpack(f"<{len(raw) // 4}f", raw)
    norm = math.sqrt(sum(x * x for x in data)) or 1.0
    return tuple(x / norm for x in data)


class SemanticIndex:
    def __init__(self, *, threshold: float, max_entries: int) -> None:
        self._threshold = threshold
        self._max = max_entries
        self._teams: OrderedDict[str, deque[tuple[Vector, str]]] = OrderedDict()

    def nearest(self, team: str, vector: Vector) -> tuple[str, float] | None:
        """The cache key of the closest remembered question at or above the threshold."""
        best: tuple[str, float] | None = None
        for known, key in self._teams.get(team, ()):
            if len(known) != len(vector):
                continue
            similarity = math.fsum(a * b for a, b in zip(known, vector, strict=True))
            if similarity >= self._threshold and (best is None or similarity > best[1]):
                best = (key, similarity)
        return best

    def remember(self, team: str, vector: Vector, key: str) -> None:
        entries = self._teams.setdefault(team, deque(maxlen=self._max))
        entries.append((vector, key))

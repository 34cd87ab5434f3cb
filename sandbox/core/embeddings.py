"""Deterministic unit-length embedding vectors: hashed bags of tokens, so similar texts point alike."""

from __future__ import annotations

import base64
import itertools
import math
import sys
import zlib
from array import array
from collections.abc import Sequence

from sandbox.core.tokens import bare_tokens

__all__ = ["embed_text", "embed_tokens", "to_base64"]


def _embed(features: Sequence[bytes], *, dimensions: int, seed: int) -> list[float]:
    vector = [0.0] * dimensions
    salt = seed.to_bytes(8, "little", signed=True)
    for feature in features:
        h = zlib.crc32(feature, zlib.crc32(salt))
        # Two signed buckets per feature (the hashing trick), so collisions cancel out.
        vector[h % dimensions] += 1.0 if h & 0x80000000 else -1.0
        g = zlib.crc32(feature, h)
        vector[g % dimensions] += 0.5 if g & 0x80000000 else -0.5
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        vector[0], norm = 1.0, 1.0
    return [v / norm for v in vector]


def embed_text(text: str, *, dimensions: int, seed: int = 0) -> list[float]:
    """The vector of a text: its lower-cased tokens and token pairs, hashed."""
    tokens = [t.lower().encode() for t in bare_tokens(text)]
    pairs = [a + b"\x00" + b for a, b in itertools.pairwise(tokens)]
    return _embed(tokens + pairs, dimensions=dimensions, seed=seed)


def embed_tokens(token_ids: Sequence[int], *, dimensions: int, seed: int = 0) -> list[float]:
    """The vector of a pre-tokenized input (a list of token ids)."""
    return _embed([str(t).encode() for t in token_ids], dimensions=dimensions, seed=seed)


def to_base64(vector: Sequence[float]) -> str:
    """OpenAI's ``encoding_format: "base64"``: little-endian float32, base64-encoded."""
    packed = array("f", vector)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode()

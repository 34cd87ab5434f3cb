"""OpenAI embeddings requests as Gemini `batchEmbedContents`, and the vectors back in OpenAI's list.

Gemini reports no token usage for embeddings, so `prompt_tokens` is an estimate of about four
characters per token (rounded up per input); `Usage.raw` stays None to say no count came upstream.
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Any

from providers.errors import UpstreamBadResponse
from providers.errors import invalid_parameter as invalid
from providers.types import JSON
from usage import Usage

CHARS_PER_TOKEN = 4


def embedding_inputs(body: JSON) -> list[str]:
    """The texts to embed; token-id inputs have no meaning to Gemini's tokenizer and are rejected."""
    value = body.get("input")
    inputs = [value] if isinstance(value, str) else value
    if not isinstance(inputs, list) or not inputs or not all(isinstance(text, str) for text in inputs):
        raise invalid("Gemini embeddings take input as a string or a non-empty list of strings")
    return inputs


def to_gemini_embeddings_request(body: JSON, *, model: str) -> JSON:
    """The `batchEmbedContents` body; `model` is the `models/...` resource name the URL uses too."""
    requests = []
    for text in embedding_inputs(body):
        request: JSON = {"model": model, "content": {"parts": [{"text": text}]}}
        if body.get("dimensions"):
            request["outputDimensionality"] = body["dimensions"]
        requests.append(request)
    return {"requests": requests}


def from_gemini_embeddings(obj: Any, *, body: JSON, model: str) -> tuple[JSON, Usage]:
    """OpenAI's `{"object": "list", ...}` answer and its (estimated) usage."""
    embeddings = obj.get("embeddings") if isinstance(obj, dict) else None
    inputs = embedding_inputs(body)
    if not isinstance(embeddings, list) or len(embeddings) != len(inputs):
        raise UpstreamBadResponse("Gemini answered without one embedding per input")
    base64_format = body.get("encoding_format") == "base64"
    data = []
    for index, embedding in enumerate(embeddings):
        values = embedding.get("values") or []
        vector: Any = _to_base64(values) if base64_format else values
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = sum(math.ceil(len(text) / CHARS_PER_TOKEN) for text in inputs)
    answer = {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return answer, Usage(prompt_tokens=tokens, estimated=True)


def _to_base64(values: list[float]) -> str:
    """OpenAI's base64 encoding: little-endian float32s (what its SDK asks for by default)."""
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()

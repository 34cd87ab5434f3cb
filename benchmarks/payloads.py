"""The request bodies, built once: the same bytes go to the sandbox directly and through the gateway."""

from __future__ import annotations

import random

import orjson

MODEL = "bench-model"
MAX_TOKENS = 16
LARGE_PROMPT_BYTES = 200_000
_WORDS = (
    "the a to of and in is it for on gateway token budget route model cache ledger cost price team "
    "key rate limit retry stream chunk prompt reply user agent server proxy fast slow cheap local "
    "cloud vllm"
).split()


def chat_body(
    content: str, *, stream: bool = False, max_tokens: int = MAX_TOKENS, model: str = MODEL
) -> bytes:
    body: dict[str, object] = {
        "model": model,
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": content},
        ],
        "max_tokens": max_tokens,
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return orjson.dumps(body)


def small_body(*, stream: bool = False, model: str = MODEL) -> bytes:
    """A typical short chat turn with a short answer: the gateway's overhead dominates nothing else."""
    return chat_body("Summarise the benefits of an LLM gateway in one sentence.", stream=stream, model=model)


def large_prompt_text(size: int = LARGE_PROMPT_BYTES, seed: int = 7) -> str:
    """~4 bytes a token of English-like prose: 200 KB is about 50,000 tokens (the sandbox reports it)."""
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        roll = rng.random()
        word += "," if roll < 0.22 else "." if roll < 0.34 else ""
        parts.append(word)
        length += len(word) + 1
    return " ".join(parts)


def large_body(model: str = MODEL) -> bytes:
    return chat_body(large_prompt_text(), model=model)

"""Canonical request, usage and response types every adapter speaks: OpenAI Chat Completions in shape.

The hot path passes these typed objects or untouched bytes; raw dicts stay inside the translators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# `Usage` lives below providers/ and pricing/ (the `usage` package); re-exported for code that imports
# it here with the other canonical types.
from providers.facts import RequestFacts
from usage import Usage

JSON = dict[str, Any]


@dataclass(slots=True)
class ChatRequest:
    """A validated chat completion request as the client sent it.

    `body` is the parsed JSON object; `raw` the exact bytes received, forwarded untouched when the
    upstream speaks OpenAI and nothing needs to change.
    """

    body: JSON
    raw: bytes
    model: str
    stream: bool = False
    include_usage: bool = False
    # Provider prompt caching, decided by the gateway from the team's policy: the TTL for automatic
    # Anthropic breakpoints (None: leave the request as the client sent it) and OpenAI's
    # prompt_cache_key (None: send none).
    cache_ttl: str | None = None
    prompt_cache_key: str | None = None
    # A legacy `/v1/completions` body (prompt, not messages): sent as is to an OpenAI-compatible
    # upstream's `/completions`. `body` then holds its chat rendering, which routing, budgets and
    # estimates read.
    legacy: JSON | None = None
    # What the client asked, read once here (`providers.facts`); every stage reads it, none re-parses.
    facts: RequestFacts = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.facts is None:
            self.facts = RequestFacts.read(self.body, self.raw, model=self.model, stream=self.stream)

    @property
    def messages(self) -> list[JSON]:
        messages: list[JSON] = self.body["messages"]
        return messages


@dataclass(slots=True)
class EmbeddingRequest:
    """A validated `/v1/embeddings` request: parsed body plus the exact bytes received."""

    body: JSON
    raw: bytes
    model: str


@dataclass(slots=True, frozen=True)
class Target:
    """Where one attempt goes: a provider and the model id the upstream knows."""

    provider: str
    upstream_model: str
    # The upstream refuses `max_tokens` and sampling parameters (OpenAI's reasoning models; see
    # `providers.reasoning_params`). Not part of its identity: keys and comparisons ignore it.
    reasoning: bool = field(default=False, compare=False)

    @property
    def key(self) -> str:
        """Names it in breaker state, latency figures and the ledger: `provider/upstream-model`."""
        return f"{self.provider}/{self.upstream_model}"


@dataclass(slots=True)
class Completion:
    """A finished non-streaming answer: the OpenAI-shaped body for the client, and what it cost."""

    body: bytes
    usage: Usage
    model: str
    status: int = 200


@dataclass(slots=True)
class StreamChunk:
    """One OpenAI-shaped `chat.completion.chunk`, ready to frame as SSE.

    `usage` is set on the chunk that carries the final usage; `usage_only` marks OpenAI's trailing
    `choices: []` usage chunk so the gateway can drop it for clients that did not ask for it.
    """

    data: bytes
    usage: Usage | None = None
    usage_only: bool = False
    model: str | None = None
    # Characters of generated text in this chunk: what a broken stream is billed from.
    content_chars: int = 0
    # Usage the provider reported before the end (Anthropic's `message_start`: the prompt with its
    # cache reads and writes; Gemini's `usageMetadata` on every chunk). A stream that breaks before
    # its final usage is billed from the latest of these rather than from our own count.
    usage_so_far: Usage | None = None
    # The adapter already holds the stream's next chunk (the same upstream read): the gateway may
    # write this chunk's frame together with the following ones rather than on its own.
    more_ready: bool = False
    # The provider's own SSE frames behind this chunk (and any event before it that made no chunk),
    # when it speaks Anthropic: an Anthropic-dialect client gets them relayed as they came.
    native: bytes = b""


__all__ = ["JSON", "ChatRequest", "Completion", "EmbeddingRequest", "StreamChunk", "Target", "Usage"]

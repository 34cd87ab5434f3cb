"""What a request asks for, read from its body once when it is parsed and never again: every stage
(policy, routing, caching, the ledger) reads these instead of re-walking the JSON, so two stages can
no longer disagree about how much output a request may produce or how many tokens its prompt holds.

The facts are what the client sent. A change the gateway makes on the way upstream (a temperature
cap, prompt-cache marks) rewrites the body in one step (`gateway.routes.rewrite`) that records what
it changed; the facts keep saying what was asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

# Bytes of request JSON per prompt token, rounded down so the estimate errs high: English prose runs
# about 4 bytes a token, code and JSON about 3, CJK text about 3. Budgets reserve on it and the
# router checks context windows on it; an estimate that is too high costs a reservation that is
# settled down a moment later, one that is too low costs a context-length error.
BYTES_PER_TOKEN: Final = 3
# Output a request that sets no max_tokens is reserved for (budgets, token rate limits): its worst case.
DEFAULT_MAX_OUTPUT: Final = 4096

NONE: Final[frozenset[str]] = frozenset()
_IMAGE_PARTS = frozenset({"image_url", "input_image", "image"})
_STRUCTURED = frozenset({"tools", "json_schema"})


@dataclass(frozen=True, slots=True)
class RequestFacts:
    model: str
    stream: bool = False
    prompt_bytes: int = 0
    # max_completion_tokens, else max_tokens, as sent; None when the client set neither.
    max_output: int | None = None
    # What the answering model must support: "tools", "json_schema", "vision".
    uses: frozenset[str] = NONE
    temperature: float | None = None
    user: str | None = None

    @classmethod
    def read(cls, body: Mapping[str, Any], raw: bytes, *, model: str, stream: bool = False) -> RequestFacts:
        temperature = body.get("temperature")
        user = body.get("user")
        return cls(
            model=model,
            stream=stream,
            prompt_bytes=len(raw),
            max_output=_max_output(body),
            uses=uses_of(body),
            temperature=temperature
            if isinstance(temperature, int | float) and not isinstance(temperature, bool)
            else None,
            user=user if isinstance(user, str) else None,
        )

    @property
    def prompt_tokens(self) -> int:
        """The prompt's size in tokens, estimated from its bytes (high rather than low)."""
        return self.prompt_bytes // BYTES_PER_TOKEN

    @property
    def worst_case_output(self) -> int:
        """The most output this request can produce: what budgets and token limits reserve."""
        return self.max_output if self.max_output is not None else DEFAULT_MAX_OUTPUT

    @property
    def fitting_output(self) -> int:
        """The output a context window must leave room for: what was asked, or nothing (an unset
        max_tokens lets the model write until its window is full)."""
        return self.max_output or 0

    @property
    def structured(self) -> bool:
        """Whether the answer is machine-read: tools, or a JSON schema."""
        return bool(self.uses & _STRUCTURED)


def _max_output(body: Mapping[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def uses_of(body: Mapping[str, Any]) -> frozenset[str]:
    """The capabilities a chat body uses."""
    found = set()
    if body.get("tools") or body.get("functions"):
        found.add("tools")
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        found.add("json_schema")
    messages = body.get("messages")
    if isinstance(messages, list) and _has_image(messages):
        found.add("vision")
    return frozenset(found) if found else NONE


def _has_image(messages: list[Any]) -> bool:
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") in _IMAGE_PARTS for part in content
        ):
            return True
    return False

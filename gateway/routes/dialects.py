"""The client-facing wire formats the completion pipeline speaks: OpenAI Chat Completions and
Anthropic Messages. Each parses a body into the canonical request and renders answers, stream
frames and errors back in its own shape; everything between is shared."""

from __future__ import annotations

from typing import Protocol

import orjson

from gateway.errors import InvalidRequest, describe
from gateway.routes.body import json_object
from gateway.routes.chat_request import parse_chat_request
from gateway.routes.completion_request import parse_completion_request
from providers.anthropic.ingress import (
    encode_events,
    from_anthropic_request,
    to_anthropic_error,
    to_anthropic_response,
)
from providers.anthropic.ingress_stream import AnthropicStreamEncoder
from providers.errors import UpstreamOverloaded
from providers.sse import DONE_EVENT, encode_data
from providers.types import ChatRequest, Completion, StreamChunk


class StreamEncoder(Protocol):
    def chunk(self, chunk: StreamChunk) -> bytes: ...

    def end(self) -> bytes: ...

    def error(self, exc: BaseException) -> bytes: ...


class Dialect(Protocol):
    endpoint: str

    def parse(self, raw: bytes) -> ChatRequest: ...

    def render(self, completion: Completion, chat: ChatRequest) -> bytes: ...

    def encoder(self, chat: ChatRequest) -> StreamEncoder: ...

    def error(self, exc: BaseException) -> tuple[int, bytes, str]:
        """Status, body and the ledger's error type."""
        ...


class OpenAIStream:
    """Upstream chunks pass through as they are; the usage chunk only if the client asked."""

    __slots__ = ("_include_usage",)

    def __init__(self, include_usage: bool) -> None:
        self._include_usage = include_usage

    def chunk(self, chunk: StreamChunk) -> bytes:
        if chunk.usage_only and not self._include_usage:
            return b""
        return encode_data(chunk.data)

    def end(self) -> bytes:
        return DONE_EVENT

    def error(self, exc: BaseException) -> bytes:
        return encode_data(describe(exc)[1])


class OpenAIChat:
    endpoint = "chat.completions"

    def parse(self, raw: bytes) -> ChatRequest:
        return parse_chat_request(raw)

    def render(self, completion: Completion, chat: ChatRequest) -> bytes:
        return completion.body

    def encoder(self, chat: ChatRequest) -> StreamEncoder:
        return OpenAIStream(chat.include_usage)

    def error(self, exc: BaseException) -> tuple[int, bytes, str]:
        return describe(exc)


class OpenAICompletions(OpenAIChat):
    """Legacy `POST /v1/completions`: the upstream's `text_completion` answer relayed as it came."""

    endpoint = "completions"

    def parse(self, raw: bytes) -> ChatRequest:
        return parse_completion_request(raw)


class AnthropicStream:
    """A stream from a provider that speaks Anthropic is relayed as its own events (`StreamChunk
    .native`), counts and ids as they came; any other is re-encoded from its OpenAI chunks."""

    __slots__ = ("_encoder", "_native")

    def __init__(self, model: str) -> None:
        self._encoder = AnthropicStreamEncoder(model=model)
        self._native: bool | None = None

    def chunk(self, chunk: StreamChunk) -> bytes:
        if self._native is None:
            self._native = bool(chunk.native)
        if self._native:
            return chunk.native
        events = self._encoder.encode(orjson.loads(chunk.data), usage=chunk.usage, so_far=chunk.usage_so_far)
        return encode_events(events)

    def end(self) -> bytes:
        return b"" if self._native else encode_events(self._encoder.finish())

    def error(self, exc: BaseException) -> bytes:
        status, _, _ = describe(exc)
        return encode_events(self._encoder.error(anthropic_status(exc, status), str(exc)))


def anthropic_status(exc: BaseException, status: int) -> int:
    """Anthropic's own status for a failure: its 529 for an overloaded upstream (503 elsewhere)."""
    return 529 if isinstance(exc, UpstreamOverloaded) else status


class AnthropicMessages:
    """`POST /v1/messages` for clients built on the anthropic SDK, answered by any provider."""

    endpoint = "messages"

    def parse(self, raw: bytes) -> ChatRequest:
        body = json_object(raw)
        _check_max_tokens(body.get("max_tokens", _MISSING))
        try:
            translated = orjson.dumps(from_anthropic_request(body))
        except (TypeError, AttributeError, ValueError) as exc:
            # The translator trusts the shapes it walks (a list of blocks, a source object): a value
            # of another type deep inside is the client's mistake, not the gateway's.
            raise InvalidRequest(
                "a value in the Messages request has the wrong type", code="invalid_type"
            ) from exc
        # Checked again in the OpenAI shape, so both dialects share one set of rules.
        return parse_chat_request(translated)

    def render(self, completion: Completion, chat: ChatRequest) -> bytes:
        message = to_anthropic_response(
            orjson.loads(completion.body), model=chat.model, usage=completion.usage
        )
        return orjson.dumps(message)

    def encoder(self, chat: ChatRequest) -> StreamEncoder:
        return AnthropicStream(chat.model)

    def error(self, exc: BaseException) -> tuple[int, bytes, str]:
        status, body, error_type = describe(exc)
        status = anthropic_status(exc, status)
        # The message `describe` chose: an internal error's own text never reaches the client.
        message = orjson.loads(body)["error"]["message"]
        return status, orjson.dumps(to_anthropic_error(status, message)), error_type


_MISSING = object()


def _check_max_tokens(value: object) -> None:
    """Anthropic's own words (pydantic's): a missing field, a value that is no integer (1e30 is a
    float) and one below 1 are three different mistakes."""
    if value is _MISSING:
        raise InvalidRequest("max_tokens: Field required", param="max_tokens")
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidRequest(
            "max_tokens: Input should be a valid integer", param="max_tokens", code="invalid_type"
        )
    if value < 1:
        raise InvalidRequest(
            "max_tokens: Input should be greater than or equal to 1", param="max_tokens", code="invalid_value"
        )


OPENAI_CHAT = OpenAIChat()
OPENAI_COMPLETIONS = OpenAICompletions()
ANTHROPIC_MESSAGES = AnthropicMessages()

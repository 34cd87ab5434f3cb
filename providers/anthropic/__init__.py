"""Anthropic's Messages API: the adapter that calls it, and the translators for both directions."""

from providers.anthropic.client import AnthropicAdapter
from providers.anthropic.ingress import (
    encode_events,
    from_anthropic_request,
    to_anthropic_error,
    to_anthropic_response,
)
from providers.anthropic.ingress_stream import AnthropicStreamEncoder
from providers.anthropic.stream import AnthropicStreamDecoder
from providers.anthropic.translate import from_anthropic_response, from_anthropic_usage, to_anthropic_request

__all__ = [
    "AnthropicAdapter",
    "AnthropicStreamDecoder",
    "AnthropicStreamEncoder",
    "encode_events",
    "from_anthropic_request",
    "from_anthropic_response",
    "from_anthropic_usage",
    "to_anthropic_error",
    "to_anthropic_request",
    "to_anthropic_response",
]

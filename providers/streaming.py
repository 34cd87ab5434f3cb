"""Calling an upstream the same way for every adapter: send, map a transport failure, and turn an
error status into the adapter's own `ProviderError`, for a whole answer (`fetch`) or before any event
of a stream is read (`open_stream`)."""

from __future__ import annotations

from collections.abc import Callable

from providers.errors import ProviderError, UpstreamTimeout, UpstreamUnreachable
from providers.http import (
    ConnectTimedOut,
    HTTPFailure,
    ReadTimedOut,
    Timeouts,
    UpstreamHTTP,
    UpstreamResponse,
    post,
)

ErrorFromResponse = Callable[..., ProviderError]


def error_from_exception(exc: HTTPFailure, *, provider: str) -> ProviderError:
    """No HTTP answer at all: a timeout, or an upstream that cannot be reached or hung up."""
    if isinstance(exc, ConnectTimedOut | ReadTimedOut):
        return UpstreamTimeout(f"{provider} timed out: {exc}", provider=provider)
    return UpstreamUnreachable(f"{provider} unreachable: {exc}", provider=provider)


async def fetch(
    client: UpstreamHTTP,
    url: str,
    *,
    content: bytes,
    headers: dict[str, str],
    timeouts: Timeouts,
    provider: str,
    error_from_response: ErrorFromResponse,
) -> bytes:
    """A successful answer's whole body."""
    try:
        answer = await post(client, url, content=content, headers=headers, timeouts=timeouts)
    except HTTPFailure as exc:
        raise error_from_exception(exc, provider=provider) from exc
    if answer.status >= 400:
        raise error_from_response(answer.status, answer.headers, answer.body, provider=provider)
    return answer.body


async def open_stream(
    client: UpstreamHTTP,
    url: str,
    *,
    content: bytes,
    headers: dict[str, str],
    timeouts: Timeouts,
    provider: str,
    error_from_response: ErrorFromResponse,
) -> UpstreamResponse:
    """A response whose body is still to be read; the caller closes it. Failures raise, closed."""
    try:
        response = await client.send(url, content=content, headers=headers, timeouts=timeouts)
    except HTTPFailure as exc:
        raise error_from_exception(exc, provider=provider) from exc
    if response.status >= 400:
        try:
            body = await response.read()
        except HTTPFailure as exc:
            raise error_from_exception(exc, provider=provider) from exc
        finally:
            await response.aclose()
        raise error_from_response(response.status, response.headers, body, provider=provider)
    return response

"""Calling an upstream the same way for every adapter: send, map a transport failure, and turn an
error status into the adapter's own `ProviderError`, for a whole answer (`fetch`) or before any event
of a stream is read (`open_stream`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from providers.errors import ProviderError, UpstreamBadResponse, UpstreamTimeout, UpstreamUnreachable
from providers.http import (
    AnswerTooLarge,
    ConnectTimedOut,
    HTTPFailure,
    ReadTimedOut,
    Timeouts,
    UpstreamHTTP,
    UpstreamResponse,
    post,
)
from providers.proxy import ProxyRefused

ErrorFromResponse = Callable[..., ProviderError]


def error_from_exception(exc: HTTPFailure, *, provider: str) -> ProviderError:
    """No HTTP answer at all: a timeout, or an upstream that cannot be reached or hung up."""
    if isinstance(exc, ConnectTimedOut | ReadTimedOut):
        return UpstreamTimeout(f"{provider} timed out: {exc}", provider=provider)
    if isinstance(exc, AnswerTooLarge):
        return UpstreamBadResponse(f"{provider} sent {exc}", provider=provider)
    if isinstance(exc, ProxyRefused):
        # 407/403 are the proxy's policy and will not change on a retry here; a 5xx (the proxy
        # could not reach the upstream) may. Another deployment may not go through this proxy.
        error = UpstreamUnreachable(f"{provider} unreachable: {exc}", provider=provider, code="proxy_refused")
        error.retryable = exc.status >= 500
        return error
    return UpstreamUnreachable(f"{provider} unreachable: {exc}", provider=provider)


@dataclass(frozen=True, slots=True)
class UpstreamCalls:
    """How one adapter calls its upstream: its client, headers, timeouts and error dialect, fixed at
    construction so each call names only the URL and the body."""

    client: UpstreamHTTP
    headers: dict[str, str]
    timeouts: Timeouts
    provider: str
    error_from_response: ErrorFromResponse

    async def fetch(
        self, url: str, content: bytes = b"", *, method: str = "POST", content_type: str | None = None
    ) -> bytes:
        """A successful answer's whole body; `content_type`, when given, replaces the adapter's own
        (a multipart upload to a provider's files endpoint)."""
        headers = self.headers if content_type is None else {**self.headers, "content-type": content_type}
        try:
            answer = await post(
                self.client, url, content=content, headers=headers, timeouts=self.timeouts, method=method
            )
        except HTTPFailure as exc:
            raise error_from_exception(exc, provider=self.provider) from exc
        if answer.status >= 400:
            raise self.error_from_response(answer.status, answer.headers, answer.body, provider=self.provider)
        return answer.body

    async def open_stream(self, url: str, content: bytes) -> UpstreamResponse:
        """A response whose body is still to be read; the caller closes it. Failures raise, closed."""
        try:
            response = await self.client.send(
                url, content=content, headers=self.headers, timeouts=self.timeouts
            )
        except HTTPFailure as exc:
            raise error_from_exception(exc, provider=self.provider) from exc
        if response.status >= 400:
            try:
                body = await response.read()
            except HTTPFailure as exc:
                raise error_from_exception(exc, provider=self.provider) from exc
            finally:
                await response.aclose()
            raise self.error_from_response(response.status, response.headers, body, provider=self.provider)
        return response

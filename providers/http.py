"""What an adapter needs from HTTP, and nothing more: POST bytes, read the status and headers, then
the body whole or chunk by chunk, and close early to cancel.

Adapters depend on this narrow interface rather than on a client library so the gateway can use
the cheapest client that does the job (`providers.http1`, a pooled HTTP/1.1 client on asyncio;
httpx plus aiohttp cost three times its CPU per upstream call, measured) while tests and unusual
deployments can still bring an `httpx.AsyncClient` (`HttpxUpstream`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import httpx


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Connect fast or fail over; once connected, `read` bounds each wait for the next bytes."""

    connect: float
    read: float

    @classmethod
    def for_total(cls, total: float | None) -> Timeouts:
        read = total or 600.0
        return cls(connect=min(10.0, read), read=read)


class HTTPFailure(Exception):
    """The upstream could not be talked to; no HTTP status to show for it."""


class ConnectFailed(HTTPFailure):
    """Refused, unresolvable or unreachable: nothing was sent."""


class ConnectTimedOut(HTTPFailure):
    pass


class ReadTimedOut(HTTPFailure):
    pass


class ConnectionBroke(HTTPFailure):
    """The connection closed or spoke something that is not HTTP/1.1 in the middle of an answer."""


class UpstreamResponse(Protocol):
    """An answer whose status and headers have arrived; the body is still to be read."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]:
        """Lower-case names."""
        ...

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None:
        """Done with it; an unfinished body closes the connection, which cancels the upstream call."""
        ...


class UpstreamHTTP(Protocol):
    async def send(
        self, url: str, *, content: bytes, headers: Mapping[str, str], timeouts: Timeouts
    ) -> UpstreamResponse:
        """POST `content`; returns once the status line and headers have arrived."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


async def post(
    client: UpstreamHTTP, url: str, *, content: bytes, headers: Mapping[str, str], timeouts: Timeouts
) -> Answer:
    """A whole answer, body included."""
    response = await client.send(url, content=content, headers=headers, timeouts=timeouts)
    try:
        body = await response.read()
    finally:
        await response.aclose()
    return Answer(response.status, response.headers, body)


class HttpxUpstream:
    """Any `httpx.AsyncClient` as an upstream client: tests bring `httpx.MockTransport` this way."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def send(
        self, url: str, *, content: bytes, headers: Mapping[str, str], timeouts: Timeouts
    ) -> UpstreamResponse:
        timeout = httpx.Timeout(timeouts.read, connect=timeouts.connect)
        request = self._client.build_request(
            "POST", url, content=content, headers=dict(headers), timeout=timeout
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _failure(exc) from exc
        return _HttpxResponse(response)

    async def aclose(self) -> None:
        await self._client.aclose()


class _HttpxResponse:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    async def read(self) -> bytes:
        try:
            return await self._response.aread()
        except httpx.HTTPError as exc:
            raise _failure(exc) from exc

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise _failure(exc) from exc

    async def aclose(self) -> None:
        await self._response.aclose()


def _failure(exc: httpx.HTTPError) -> HTTPFailure:
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return ConnectTimedOut(message)
    if isinstance(exc, httpx.TimeoutException):
        return ReadTimedOut(message)
    if isinstance(exc, httpx.ConnectError):
        return ConnectFailed(message)
    return ConnectionBroke(message)

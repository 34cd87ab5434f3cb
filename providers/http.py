"""What an adapter needs from HTTP, and nothing more: POST bytes, read the status and headers, then
the body whole or chunk by chunk, and close early to cancel.

Adapters depend on this narrow interface rather than on a client library so the gateway can use
the cheapest client that does the job (`providers.http1`, a pooled HTTP/1.1 client on asyncio;
httpx plus aiohttp cost three times its CPU per upstream call, measured) while tests and unusual
deployments can still bring an `httpx.AsyncClient` (`providers.httpx_upstream`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Protocol


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


class AnswerTooLarge(HTTPFailure):
    """More than the gateway holds for one answer or one stream event: a broken or hostile upstream
    must not be able to exhaust a worker's memory (and every other request in it with it)."""


# No chat completion comes near these; the largest legitimate answers are embeddings of big batches
# (2,048 inputs of 3,072 floats as JSON is ~130 MB).
MAX_ANSWER_BYTES = 256 << 20
MAX_EVENT_BYTES = 16 << 20


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

    async def finish(self) -> None:
        """Done with it after the last event the caller needs (e.g. a stream's `[DONE]`): unlike
        `aclose`, the upstream is not cancelled and the connection may be kept for reuse."""
        ...


class UpstreamHTTP(Protocol):
    async def send(
        self,
        url: str,
        *,
        content: bytes,
        headers: Mapping[str, str],
        timeouts: Timeouts,
        method: str = "POST",
    ) -> UpstreamResponse:
        """POST `content` (or GET, for a provider's batch objects and files); returns once the
        status line and headers have arrived."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


async def post(
    client: UpstreamHTTP,
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    timeouts: Timeouts,
    method: str = "POST",
) -> Answer:
    """A whole answer, body included."""
    response = await client.send(url, content=content, headers=headers, timeouts=timeouts, method=method)
    try:
        body = await response.read()
    finally:
        await response.aclose()
    return Answer(response.status, response.headers, body)

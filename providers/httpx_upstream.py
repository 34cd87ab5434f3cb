"""Any `httpx.AsyncClient` as an upstream client (`providers.http.UpstreamHTTP`): tests bring
`httpx.MockTransport` this way. Its own module so that the gateway, which serves on
`providers.http1`, does not import httpx (about 10 MB of RSS and a tenth of its start-up)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import httpx

from providers.http import (
    MAX_ANSWER_BYTES,
    AnswerTooLarge,
    ConnectFailed,
    ConnectionBroke,
    ConnectTimedOut,
    HTTPFailure,
    ReadTimedOut,
    Timeouts,
    UpstreamResponse,
)


class HttpxUpstream:
    """Any `httpx.AsyncClient` as an upstream client: tests bring `httpx.MockTransport` this way."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def send(
        self,
        url: str,
        *,
        content: bytes,
        headers: Mapping[str, str],
        timeouts: Timeouts,
        method: str = "POST",
    ) -> UpstreamResponse:
        timeout = httpx.Timeout(timeouts.read, connect=timeouts.connect)
        request = self._client.build_request(
            method, url, content=content, headers=dict(headers), timeout=timeout
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
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in self._response.aiter_bytes():
                parts.append(chunk)
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    await self._response.aclose()
                    raise AnswerTooLarge(f"an answer over {MAX_ANSWER_BYTES >> 20} MiB")
        except httpx.HTTPError as exc:
            raise _failure(exc) from exc
        return b"".join(parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise _failure(exc) from exc

    async def aclose(self) -> None:
        await self._response.aclose()

    async def finish(self) -> None:
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

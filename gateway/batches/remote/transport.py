"""One call to a provider's batch endpoints over the gateway's upstream client: send, read the whole
answer, and map a failure into the provider error taxonomy the way the chat adapters do, so the
runner retries and backs off on the same `ProviderError.retryable` and `retry_after`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from providers.errors import UpstreamBadResponse
from providers.http import HTTPFailure, Timeouts, UpstreamHTTP
from providers.streaming import ErrorFromResponse, error_from_exception

__all__ = ["BatchCalls"]


@dataclass(frozen=True, slots=True)
class BatchCalls:
    """A provider's client, credentials, timeouts and error dialect, fixed at construction."""

    client: UpstreamHTTP
    headers: Mapping[str, str]
    timeouts: Timeouts
    provider: str
    error_from_response: ErrorFromResponse

    async def fetch(
        self,
        url: str,
        *,
        method: str = "POST",
        content: bytes = b"",
        content_type: str | None = "application/json",
    ) -> bytes:
        """A successful answer's whole body; any failure raises a `ProviderError`."""
        headers = dict(self.headers)
        if content_type is not None:
            headers["content-type"] = content_type
        try:
            response = await self.client.send(
                url, content=content, headers=headers, timeouts=self.timeouts, method=method
            )
            try:
                body = await response.read()
            finally:
                await response.aclose()
        except HTTPFailure as exc:
            raise error_from_exception(exc, provider=self.provider) from exc
        if response.status >= 400:
            raise self.error_from_response(response.status, response.headers, body, provider=self.provider)
        return body

    async def fetch_json(
        self,
        url: str,
        *,
        method: str = "POST",
        content: bytes = b"",
        content_type: str | None = "application/json",
    ) -> dict[str, Any]:
        """A successful answer that must be one JSON object (a batch, a file)."""
        body = await self.fetch(
            url, method=method, content=content, content_type=content_type if content else None
        )
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise UpstreamBadResponse(
                f"{self.provider} answered {url} with a body that is not JSON", provider=self.provider
            ) from exc
        if not isinstance(obj, dict):
            raise UpstreamBadResponse(
                f"{self.provider} answered {url} with JSON that is not an object", provider=self.provider
            )
        return obj

"""Opening an upstream stream the same way for every adapter: send, map a transport failure, and
turn an error status into the adapter's own `ProviderError` before any event is read."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from providers.errors import ProviderError
from providers.openai_compat import error_from_exception

ErrorFromResponse = Callable[..., ProviderError]


async def open_stream(
    client: httpx.AsyncClient,
    url: str,
    *,
    content: bytes,
    headers: dict[str, str],
    http_timeout: httpx.Timeout,
    provider: str,
    error_from_response: ErrorFromResponse,
) -> httpx.Response:
    """A response whose body is still to be read; the caller closes it. Failures raise, closed."""
    upstream = client.build_request("POST", url, content=content, headers=headers, timeout=http_timeout)
    try:
        response = await client.send(upstream, stream=True)
    except httpx.HTTPError as exc:
        raise error_from_exception(exc, provider=provider) from exc
    if response.status_code >= 400:
        try:
            body = await response.aread()
        finally:
            await response.aclose()
        raise error_from_response(response.status_code, response.headers, body, provider=provider)
    return response

"""The batch endpoints' answers over the adapters' shared `UpstreamCalls` (so failures map into the
provider error taxonomy as chat's do, and the runner retries on the same `ProviderError.retryable`):
one JSON object (a batch, a file) or the lines of a JSONL results file."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from providers.errors import UpstreamBadResponse
from providers.streaming import UpstreamCalls

__all__ = ["fetch_json", "jsonl_objects"]


async def fetch_json(
    calls: UpstreamCalls,
    url: str,
    *,
    method: str = "POST",
    content: bytes = b"",
    content_type: str = "application/json",
) -> dict[str, Any]:
    """A successful answer that must be one JSON object; a body-less call sends no content type."""
    body = await calls.fetch(url, content, method=method, content_type=content_type if content else None)
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise UpstreamBadResponse(
            f"{calls.provider} answered {url} with a body that is not JSON", provider=calls.provider
        ) from exc
    if not isinstance(obj, dict):
        raise UpstreamBadResponse(
            f"{calls.provider} answered {url} with JSON that is not an object", provider=calls.provider
        )
    return obj


def jsonl_objects(content: bytes, *, provider: str) -> Iterator[dict[str, Any]]:
    """Each non-blank line of a results file, which must be a JSON object."""
    for raw in content.splitlines():
        if not raw.strip():
            continue
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UpstreamBadResponse(f"{provider} sent a batch result line that is not JSON") from exc
        if not isinstance(line, dict):
            raise UpstreamBadResponse(f"{provider} sent a batch result line that is not an object")
        yield line

"""Anthropic's Message Batches API behind the runner's `RemoteBatchAPI`: each canonical request is
translated exactly as the Anthropic chat adapter translates it (`to_anthropic_request`, the default
`max_tokens`, automatic cache breakpoints), results are turned back into OpenAI chat completions as
the chat adapter does (`from_anthropic_response`, usage with cache reads, writes and the 1h split).
https://docs.anthropic.com/en/api/creating-message-batches
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from gateway.batches.remote.transport import fetch_json, jsonl_objects
from gateway.batches.remote.types import RemoteError, RemoteItem, RemoteResult, RemoteState, RemoteStatus
from providers.anthropic.caching import min_cache_tokens, place_cache_breakpoints
from providers.anthropic.client import ANTHROPIC_VERSION, DEFAULT_MAX_TOKENS
from providers.anthropic.errors import STATUS_BY_TYPE, error_from_response
from providers.anthropic.translate import from_anthropic_response, from_anthropic_usage, to_anthropic_request
from providers.errors import ProviderError, UpstreamBadResponse
from providers.http import Timeouts, UpstreamHTTP
from providers.streaming import UpstreamCalls
from providers.types import JSON, Completion

__all__ = [
    "AnthropicBatchAPI",
    "from_anthropic_batch",
    "from_result_line",
    "from_results",
    "to_batch_params",
    "to_batch_requests",
]

EXPIRED = RemoteError("expired", "The batch expired before this request ran.", 408)
CANCELLED = RemoteError("cancelled", "The batch was cancelled before this request ran.", 409)


# --- pure translation ---


def to_batch_params(
    item: RemoteItem, *, default_max_tokens: int, cache_min_tokens: Mapping[str, int] | None = None
) -> JSON:
    """The Messages params for one item, as `AnthropicAdapter` builds its request body (no stream)."""
    request = item.request
    model = request.model
    body = to_anthropic_request(request.body, model=model, default_max_tokens=default_max_tokens)
    if request.cache_ttl is not None:
        minimum = (cache_min_tokens or {}).get(model) or min_cache_tokens(model)
        body = place_cache_breakpoints(body, min_tokens=minimum, ttl=request.cache_ttl)
    return body


def to_batch_requests(
    items: Iterable[RemoteItem], *, default_max_tokens: int, provider: str = "anthropic"
) -> bytes:
    """`POST /v1/messages/batches`' body. An item Anthropic cannot take (n > 1, logprobs...) fails
    the whole submit with a 400 naming it: validate items with `to_batch_params` before batching."""
    requests: list[JSON] = []
    for item in items:
        try:
            params = to_batch_params(item, default_max_tokens=default_max_tokens)
        except ProviderError as exc:
            exc.provider = provider
            exc.message = f"item {item.custom_id}: {exc.message}"
            exc.args = (exc.message,)
            raise
        requests.append({"custom_id": item.custom_id, "params": params})
    return orjson.dumps({"requests": requests})


def from_anthropic_batch(batch: Mapping[str, Any]) -> RemoteStatus:
    """The runner's view of a `message_batch`: an ended batch that was cancelled or ran out of time
    says so, so the runner knows why items came back unrun."""
    status = batch.get("processing_status")
    counts = batch.get("request_counts") or {}
    done = sum(int(counts.get(key) or 0) for key in ("succeeded", "errored", "canceled", "expired"))
    state: RemoteState
    if status == "in_progress":
        state = "in_progress"
    elif status == "canceling":
        state = "cancelling"
    elif status == "ended":
        if batch.get("cancel_initiated_at"):
            state = "cancelled"
        elif int(counts.get("expired") or 0):
            state = "expired"
        else:
            state = "ended"
    else:
        raise UpstreamBadResponse(f"Anthropic reported a processing_status it does not document: {status!r}")
    return RemoteStatus(state, done=done)


def from_result_line(line: Mapping[str, Any], *, created: int) -> RemoteResult:
    """One line of the results JSONL: `{"custom_id","result":{"type",...}}`."""
    custom_id = str(line.get("custom_id"))
    result = line.get("result") or {}
    kind = result.get("type")
    if kind == "succeeded":
        message = result.get("message")
        body = from_anthropic_response(message, created=created)
        usage = from_anthropic_usage(message.get("usage") if isinstance(message, dict) else None)
        return RemoteResult(custom_id, completion=Completion(orjson.dumps(body), usage, str(body["model"])))
    if kind == "errored":
        outer = result.get("error")
        outer = outer if isinstance(outer, dict) else {}
        inner = outer.get("error")
        error: Mapping[str, Any] = inner if isinstance(inner, dict) else outer
        error_type = str(error.get("type") or "api_error")
        message_text = str(error.get("message") or "")
        return RemoteResult(
            custom_id, error=RemoteError(error_type, message_text, STATUS_BY_TYPE.get(error_type, 500))
        )
    if kind == "canceled":
        return RemoteResult(custom_id, error=CANCELLED)
    if kind == "expired":
        return RemoteResult(custom_id, error=EXPIRED)
    return RemoteResult(custom_id, error=RemoteError("upstream_error", f"unknown result type {kind!r}", 502))


def from_results(content: bytes, *, created: int) -> list[RemoteResult]:
    """Every line of the results file, one result per custom id (the first wins)."""
    seen: dict[str, RemoteResult] = {}
    for line in jsonl_objects(content, provider="Anthropic"):
        result = from_result_line(line, created=created)
        seen.setdefault(result.custom_id, result)
    return list(seen.values())


# --- the client ---


class AnthropicBatchAPI:
    """`RemoteBatchAPI` over `{base_url}/v1/messages/batches`, with the chat adapter's headers."""

    def __init__(
        self,
        *,
        name: str,
        client: UpstreamHTTP,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        self.name = name
        root = base_url.rstrip("/")
        self._url = root + ("/messages/batches" if root.endswith("/v1") else "/v1/messages/batches")
        self._default_max_tokens = default_max_tokens
        sent = {"anthropic-version": ANTHROPIC_VERSION, **(headers or {})}
        if api_key:
            sent["x-api-key"] = api_key
        self._calls = UpstreamCalls(client, sent, Timeouts.for_total(timeout), name, error_from_response)

    async def submit(self, items: list[RemoteItem], *, metadata: dict[str, str]) -> str:
        """Anthropic's batches carry no metadata: the runner keeps its own by the returned id."""
        if not items:
            raise ValueError("a batch needs at least one item")
        content = to_batch_requests(items, default_max_tokens=self._default_max_tokens, provider=self.name)
        batch = await fetch_json(self._calls, self._url, content=content)
        return self._id(batch)

    async def poll(self, upstream_id: str) -> RemoteStatus:
        return from_anthropic_batch(await self._batch(upstream_id))

    async def results(self, upstream_id: str) -> list[RemoteResult]:
        batch = await self._batch(upstream_id)
        url = batch.get("results_url")
        if not isinstance(url, str) or not url:
            raise UpstreamBadResponse(
                f"{self.name} batch {upstream_id} has no results yet ({batch.get('processing_status')})",
                provider=self.name,
            )
        content = await self._calls.fetch(url, method="GET")
        return from_results(content, created=int(time.time()))

    async def cancel(self, upstream_id: str) -> None:
        await fetch_json(self._calls, f"{self._url}/{upstream_id}/cancel")

    async def _batch(self, upstream_id: str) -> JSON:
        return await fetch_json(self._calls, f"{self._url}/{upstream_id}", method="GET")

    def _id(self, batch: Mapping[str, Any]) -> str:
        value = batch.get("id")
        if not isinstance(value, str) or not value:
            raise UpstreamBadResponse(f"{self.name} answered without a batch id", provider=self.name)
        return value

"""OpenAI's own Batch API behind the runner's `RemoteBatchAPI`: items go up as one JSONL file of
`/v1/chat/completions` requests, results come back from the output and error files.

Pure translation first (the JSONL, the multipart upload body, the status, each result line), then
the thin client that sends them. Each line's body is what `OpenAICompatAdapter` would send for the
same request (`to_openai_body`: the client's own bytes when nothing changes, the reasoning models'
parameter rewriting, `prompt_cache_key`), so a batch item and an interactive call cost the same
tokens. https://platform.openai.com/docs/api-reference/batch
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from gateway.batches.remote.transport import fetch_json, jsonl_objects
from gateway.batches.remote.types import RemoteError, RemoteItem, RemoteResult, RemoteState, RemoteStatus
from providers.errors import UpstreamBadResponse, UpstreamRejected
from providers.http import Timeouts, UpstreamHTTP
from providers.openai_compat import error_from_response, from_openai_usage, to_openai_body
from providers.reasoning_params import is_reasoning_model
from providers.streaming import UpstreamCalls
from providers.types import JSON, ChatRequest, Completion, Target

__all__ = [
    "ENDPOINT",
    "OpenAIBatchAPI",
    "from_batch_file",
    "from_batch_line",
    "from_openai_batch",
    "to_batch_file",
    "to_batch_line",
    "to_multipart",
    "with_missing",
]

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"  # the only window OpenAI offers for chat completions

# No HTTP status stands for these; the runner shows them in the error file as OpenAI does its own.
EXPIRED = RemoteError("expired", "The batch's completion window ran out before this request ran.", 408)
CANCELLED = RemoteError("cancelled", "The batch was cancelled before this request ran.", 409)

_STATES: dict[str, RemoteState] = {
    "validating": "in_progress",
    "in_progress": "in_progress",
    "finalizing": "in_progress",
    "completed": "ended",
    "cancelling": "cancelling",
    "cancelled": "cancelled",
    "expired": "expired",
    "failed": "failed",
}
# What OpenAI writes in the error file for a request the batch never ran.
_UNRUN = {"batch_expired": EXPIRED, "batch_cancelled": CANCELLED}


# --- pure translation ---


def to_batch_line(item: RemoteItem, *, reasoning: bool, provider: str = "openai") -> bytes:
    """One JSONL line: `{"custom_id","method","url","body"}`, the body as the chat adapter sends it."""
    request = _for_batch(item.request)
    target = Target(provider, request.model, reasoning=reasoning)
    body = to_openai_body(request, target, stream=False, cache_key_ok=True)
    return (
        b'{"custom_id":'
        + orjson.dumps(item.custom_id)
        + b',"method":"POST","url":"'
        + ENDPOINT.encode()
        + b'","body":'
        + body
        + b"}"
    )


def _for_batch(request: ChatRequest) -> ChatRequest:
    """The request with the client's bytes dropped when they cannot be a batch line's body as they
    are: they span lines (JSONL), name another model than the upstream one, or ask for a stream
    (a batch answers whole). A legacy completions body is not sent: the batch's endpoint is chat."""
    body = request.body
    streams = "stream" in body or "stream_options" in body
    keeps_raw = (
        body.get("model") == request.model
        and not streams
        and b"\n" not in request.raw
        and b"\r" not in request.raw
    )
    if keeps_raw and request.legacy is None:
        return request
    if streams:
        body = {key: value for key, value in body.items() if key not in ("stream", "stream_options")}
    return dataclasses.replace(request, body=body, raw=b"", stream=False, include_usage=False, legacy=None)


def to_batch_file(items: Iterable[RemoteItem], *, reasoning: Callable[[str], bool]) -> bytes:
    """The batch input file; `reasoning` says which upstream models refuse the sampling parameters."""
    return b"\n".join(to_batch_line(item, reasoning=reasoning(item.request.model)) for item in items) + b"\n"


def to_multipart(content: bytes, *, filename: str, purpose: str, boundary: str) -> tuple[bytes, str]:
    """`POST /files`' multipart/form-data body and its content type (RFC 7578)."""
    if boundary.encode() in content:
        raise ValueError("the multipart boundary occurs in the file")
    dash = b"--" + boundary.encode()
    body = b"".join(
        (
            dash + b'\r\ncontent-disposition: form-data; name="purpose"\r\n\r\n',
            purpose.encode(),
            b"\r\n" + dash + b'\r\ncontent-disposition: form-data; name="file"; filename="',
            filename.encode(),
            b'"\r\ncontent-type: application/jsonl\r\n\r\n',
            content,
            b"\r\n" + dash + b"--\r\n",
        )
    )
    return body, f"multipart/form-data; boundary={boundary}"


def from_openai_batch(batch: Mapping[str, Any]) -> RemoteStatus:
    """The runner's view of a `batch` object."""
    status = str(batch.get("status"))
    state = _STATES.get(status)
    if state is None:
        raise UpstreamBadResponse(f"OpenAI reported a batch status it does not document: {status!r}")
    counts = batch.get("request_counts") or {}
    done = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
    message = None
    if state == "failed":
        errors = (batch.get("errors") or {}).get("data") or []
        message = "; ".join(_describe(error) for error in errors if isinstance(error, dict)) or "failed"
    return RemoteStatus(state, done=done, message=message)


def _describe(error: Mapping[str, Any]) -> str:
    line = error.get("line")
    where = f" (line {line})" if line is not None else ""
    return f"{error.get('code') or 'error'}: {error.get('message') or ''}{where}"


def from_batch_line(line: Mapping[str, Any]) -> RemoteResult:
    """One line of an output or error file: a completion, or what went wrong."""
    custom_id = str(line.get("custom_id"))
    response = line.get("response")
    error = line.get("error")
    if isinstance(response, dict):
        status = int(response.get("status_code") or 0)
        body = response.get("body")
        if 200 <= status < 300 and isinstance(body, dict) and "choices" in body:
            completion = Completion(
                body=orjson.dumps(body),
                usage=from_openai_usage(body.get("usage")),
                model=str(body.get("model", "")),
            )
            return RemoteResult(custom_id, completion=completion)
        detail = body.get("error") if isinstance(body, dict) else None
        if isinstance(detail, dict):
            code = str(detail.get("code") or detail.get("type") or "upstream_error")
            return RemoteResult(custom_id, error=RemoteError(code, str(detail.get("message") or ""), status))
        return RemoteResult(custom_id, error=RemoteError("upstream_error", f"HTTP {status}", status or 500))
    if isinstance(error, dict):
        code = str(error.get("code") or "upstream_error")
        if code in _UNRUN:
            return RemoteResult(custom_id, error=_UNRUN[code])
        return RemoteResult(custom_id, error=RemoteError(code, str(error.get("message") or ""), 500))
    return RemoteResult(custom_id, error=RemoteError("upstream_error", "OpenAI gave no response", 500))


def from_batch_file(content: bytes) -> list[RemoteResult]:
    """Every line of an output or error file."""
    return [from_batch_line(line) for line in jsonl_objects(content, provider="OpenAI")]


def custom_ids(content: bytes) -> list[str]:
    """The custom ids of a batch input file, in order."""
    ids: list[str] = []
    for raw in content.splitlines():
        if raw.strip():
            line = orjson.loads(raw)
            if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                ids.append(line["custom_id"])
    return ids


def with_missing(
    submitted: list[str], found: Iterable[RemoteResult], *, state: RemoteState, message: str | None = None
) -> list[RemoteResult]:
    """One result per submitted id, in submission order: OpenAI leaves the requests a cancel stopped
    out of both files (and a failed batch ran nothing), so those become errors here. The first
    result for an id wins; results for ids not submitted are kept after the rest."""
    by_id: dict[str, RemoteResult] = {}
    for result in found:
        by_id.setdefault(result.custom_id, result)
    if state == "failed":
        missing = RemoteError("batch_failed", message or "OpenAI failed the batch", 400)
    elif state == "expired":
        missing = EXPIRED
    elif state in ("cancelled", "cancelling"):
        missing = CANCELLED
    else:
        missing = RemoteError("missing", "OpenAI returned no result for this request", 502)
    out = [by_id.pop(cid, RemoteResult(cid, error=missing)) for cid in submitted]
    return out + list(by_id.values())


# --- the client ---


class OpenAIBatchAPI:
    """`RemoteBatchAPI` over `{base_url}/files` and `{base_url}/batches` (base_url ends in `/v1`)."""

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        client: UpstreamHTTP,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        reasoning: Callable[[str], bool] = is_reasoning_model,
    ) -> None:
        self.name = name
        self._root = base_url.rstrip("/")
        self._reasoning = reasoning
        sent = dict(headers or {})
        if api_key:
            sent["authorization"] = f"Bearer {api_key}"
        self._calls = UpstreamCalls(client, sent, Timeouts.for_total(timeout), name, error_from_response)

    async def submit(self, items: list[RemoteItem], *, metadata: dict[str, str]) -> str:
        if not items:
            raise ValueError("a batch needs at least one item")
        content = to_batch_file(items, reasoning=self._reasoning)
        form, content_type = to_multipart(
            content, filename="batch.jsonl", purpose="batch", boundary="tollgate-" + os.urandom(16).hex()
        )
        file = await fetch_json(self._calls, self._root + "/files", content=form, content_type=content_type)
        file_id = self._field(file, "id")
        create: JSON = {
            "input_file_id": file_id,
            "endpoint": ENDPOINT,
            "completion_window": COMPLETION_WINDOW,
        }
        if metadata:
            create["metadata"] = metadata
        batch = await fetch_json(self._calls, self._root + "/batches", content=orjson.dumps(create))
        return self._field(batch, "id")

    async def poll(self, upstream_id: str) -> RemoteStatus:
        return from_openai_batch(await self._batch(upstream_id))

    async def results(self, upstream_id: str) -> list[RemoteResult]:
        batch = await self._batch(upstream_id)
        status = from_openai_batch(batch)
        if status.state in ("in_progress", "cancelling"):
            # Its files are not written yet; retryable, so a runner that asked early polls again.
            raise UpstreamBadResponse(
                f"{self.name} batch {upstream_id} has no results yet ({batch.get('status')})",
                provider=self.name,
            )
        found: list[RemoteResult] = []
        for key in ("output_file_id", "error_file_id"):
            if batch.get(key):
                found += from_batch_file(await self._content(str(batch[key])))
        try:
            submitted = custom_ids(await self._content(str(batch.get("input_file_id"))))
        except (UpstreamRejected, orjson.JSONDecodeError):
            # The input file is gone (deleted, or its content not downloadable): what the files hold.
            return found
        return with_missing(submitted, found, state=status.state, message=status.message)

    async def cancel(self, upstream_id: str) -> None:
        await fetch_json(self._calls, f"{self._root}/batches/{upstream_id}/cancel")

    async def _batch(self, upstream_id: str) -> JSON:
        return await fetch_json(self._calls, f"{self._root}/batches/{upstream_id}", method="GET")

    async def _content(self, file_id: str) -> bytes:
        return await self._calls.fetch(f"{self._root}/files/{file_id}/content", method="GET")

    def _field(self, obj: Mapping[str, Any], key: str) -> str:
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            raise UpstreamBadResponse(f"{self.name} answered without {key!r}", provider=self.name)
        return value

"""`POST /v1/chat/completions`: parse, resolve the model, call the upstream, answer, and leave one
ledger row whatever happens (success, bad input, upstream failure or a client that went away).

A plain Starlette endpoint rather than a FastAPI one: this is the hot path, and it needs no
dependency injection or response-model validation.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gateway.accounting.record import RequestRecord
from gateway.chat_request import parse_chat_request
from gateway.errors import UnknownModel, describe
from gateway.models import Deployment, Model
from gateway.request_id import CLIENT_REQUEST_ID_KEY, REQUEST_ID_KEY
from gateway.routes.body import read_body
from gateway.runtime import Runtime
from pricing.money import format_usd
from providers.adapter import Adapter
from providers.errors import ProviderError, UpstreamBadResponse
from providers.sse import DONE_EVENT, encode_data
from providers.types import ChatRequest, StreamChunk, Usage

log = logging.getLogger("tollgate.chat")

_CLIENT_CLOSED = 499


async def chat_completions(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    record = RequestRecord.begin(
        id=request.scope[REQUEST_ID_KEY],
        client_request_id=request.scope[CLIENT_REQUEST_ID_KEY],
        stream=False,
    )
    handed_to_stream = False
    try:
        raw = await read_body(request, runtime.config.server.max_body_bytes)
        chat = parse_chat_request(raw)
        record.requested_model = chat.model
        record.stream = chat.stream
        model = runtime.registry.resolve(chat.model)
        if model is None:
            raise UnknownModel(f"the model '{chat.model}' does not exist", param="model")
        deployment = model.deployments[0]
        adapter = runtime.adapters[deployment.target.provider]
        _attribute(record, model, deployment)
        if chat.stream:
            response = await _open_stream(runtime, record, adapter, chat, model, deployment)
            handed_to_stream = True
            return response
        completion = await adapter.complete(chat, deployment.target)
        record.set_usage(completion.usage, deployment.price)
        record.status = 200
        headers = _headers(record, model)
        headers["x-tollgate-cost-usd"] = format_usd(record.cost_nano)
        return Response(completion.body, media_type="application/json", headers=headers)
    except Exception as exc:
        return _error_response(record, exc)
    finally:
        if not handed_to_stream:
            _close_record(runtime, record)


def _attribute(record: RequestRecord, model: Model, deployment: Deployment) -> None:
    record.model = model.name
    record.tier = model.tier
    record.provider = deployment.target.provider
    record.upstream_model = deployment.target.upstream_model
    record.attempts = 1


def _headers(record: RequestRecord, model: Model | None) -> dict[str, str]:
    headers = {"x-tollgate-attempts": str(record.attempts)}
    if model is not None:
        headers["x-tollgate-model"] = model.name
        headers["x-tollgate-tier"] = model.tier
    return headers


def _error_response(record: RequestRecord, exc: Exception) -> Response:
    status, body, error_type = describe(exc)
    if status == 500:
        log.exception("request %s failed inside the gateway", record.id)
    record.fail(status=status, error_type=error_type, message=str(exc))
    headers = {"x-tollgate-attempts": str(record.attempts)}
    if record.model:
        headers["x-tollgate-model"] = record.model
    if isinstance(exc, ProviderError) and exc.retry_after is not None:
        headers["retry-after"] = str(max(1, round(exc.retry_after)))
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _close_record(runtime: Runtime, record: RequestRecord) -> None:
    if record.status == 0:
        record.fail(status=_CLIENT_CLOSED, error_type="client_closed", message="client went away")
    record.finish()
    runtime.ledger.record(record)


async def _open_stream(
    runtime: Runtime,
    record: RequestRecord,
    adapter: Adapter,
    chat: ChatRequest,
    model: Model,
    deployment: Deployment,
) -> Response:
    """Wait for the first chunk before answering, so a failed start is a proper HTTP error."""
    chunks = adapter.stream(chat, deployment.target)
    try:
        first = await anext(chunks)
    except StopAsyncIteration:
        raise UpstreamBadResponse(f"{deployment.target.provider} sent an empty stream") from None
    except BaseException:
        await chunks.aclose()
        raise
    record.mark_first_byte()
    headers = _headers(record, model)
    headers["cache-control"] = "no-cache"
    headers["x-accel-buffering"] = "no"
    return StreamingResponse(
        _relay(runtime, record, first, chunks, chat.include_usage, deployment),
        media_type="text/event-stream",
        headers=headers,
    )


async def _relay(
    runtime: Runtime,
    record: RequestRecord,
    first: StreamChunk,
    chunks: AsyncGenerator[StreamChunk, None],
    include_usage: bool,
    deployment: Deployment,
) -> AsyncIterator[bytes]:
    """Frame upstream chunks as SSE; the usage chunk is kept for the ledger even when the client
    did not ask for it. The ledger row is written in `finally`, so a disconnect still bills."""
    usage: Usage | None = None
    try:
        chunk = first
        while True:
            if chunk.usage is not None:
                usage = chunk.usage
            if include_usage or not chunk.usage_only:
                yield encode_data(chunk.data)
            try:
                chunk = await anext(chunks)
            except StopAsyncIteration:
                break
        yield DONE_EVENT
        record.status = 200
    except ProviderError as exc:
        status, body, error_type = describe(exc)
        record.fail(status=status, error_type=error_type, message=str(exc))
        yield encode_data(body)
    finally:
        record.set_usage(usage or Usage(), deployment.price)
        _close_record(runtime, record)
        with anyio.CancelScope(shield=True):
            await chunks.aclose()

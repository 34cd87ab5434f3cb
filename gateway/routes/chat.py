"""`POST /v1/chat/completions`: parse, resolve the model, run it through the executor, answer, and
leave one ledger row whatever happens (success, bad input, upstream failure, a client that left).

A plain Starlette endpoint rather than a FastAPI one: this is the hot path, and it needs no
dependency injection or response-model validation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gateway.accounting.estimate import estimate_usage
from gateway.accounting.record import RequestRecord
from gateway.chat_request import parse_chat_request
from gateway.errors import InvalidRequest, UnknownModel, describe
from gateway.executor import Trace
from gateway.models import Model
from gateway.request_id import CLIENT_REQUEST_ID_KEY, REQUEST_ID_KEY
from gateway.resilience.idempotency import StoredResponse, fingerprint
from gateway.routes.body import read_body
from gateway.runtime import Runtime
from pricing.money import format_usd
from providers.errors import ProviderError
from providers.sse import DONE_EVENT, encode_data
from providers.types import ChatRequest, StreamChunk, Usage

log = logging.getLogger("tollgate.chat")

_CLIENT_CLOSED = 499
_MAX_IDEMPOTENCY_KEY = 255
TIMEOUT_HEADER = "x-tollgate-timeout-ms"
TAGS_HEADER = "x-tollgate-tags"
_MAX_TAGS = 10
_MAX_TAG_LENGTH = 64


def parse_tags(value: str | None) -> tuple[str, ...]:
    """`x-tollgate-tags: checkout, search` -> ("checkout", "search"): at most ten, each short."""
    if not value:
        return ()
    tags = [tag.strip() for tag in value.split(",") if tag.strip()]
    if len(tags) > _MAX_TAGS or any(len(tag) > _MAX_TAG_LENGTH for tag in tags):
        raise InvalidRequest(
            f"{TAGS_HEADER} takes at most {_MAX_TAGS} tags of at most {_MAX_TAG_LENGTH} characters",
            param=TAGS_HEADER,
        )
    return tuple(dict.fromkeys(tags))


class _Idempotency:
    """The key a request holds while it runs, so its answer can be stored or the key released."""

    __slots__ = ("digest", "key")

    def __init__(self, key: str, digest: str) -> None:
        self.key = key
        self.digest = digest


async def chat_completions(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    record = RequestRecord.begin(
        id=request.scope[REQUEST_ID_KEY], client_request_id=request.scope[CLIENT_REQUEST_ID_KEY]
    )
    trace = Trace()
    held: _Idempotency | None = None
    handed_to_stream = False
    try:
        raw = await read_body(request, runtime.config.server.max_body_bytes)
        chat = parse_chat_request(raw)
        record.requested_model = chat.model
        record.stream = chat.stream
        record.user = chat.body.get("user") if isinstance(chat.body.get("user"), str) else None
        record.tags = parse_tags(request.headers.get(TAGS_HEADER))
        model = runtime.registry.resolve(chat.model)
        if model is None:
            raise UnknownModel(f"the model '{chat.model}' does not exist", param="model")
        deadline = _deadline(request, runtime, model)
        key = request.headers.get("idempotency-key")
        if key is not None:
            replay, held = await _claim(runtime, record, key, raw, deadline)
            if replay is not None:
                return replay
        if chat.stream:
            first, chunks = await runtime.executor.open_stream(chat, model, deadline=deadline, trace=trace)
            record.mark_first_byte()
            record.overhead_ms = max(0.0, (record.ttft_ms or 0.0) - trace.waiting_ms)
            _attribute(record, trace)
            handed_to_stream = True
            return StreamingResponse(
                _relay(runtime, record, chat, first, chunks, trace, held),
                media_type="text/event-stream",
                headers={**_headers(record, trace), "cache-control": "no-cache", "x-accel-buffering": "no"},
            )
        completion = await runtime.executor.complete(chat, model, deadline=deadline, trace=trace)
        _attribute(record, trace)
        record.upstream_ms = trace.waiting_ms
        bill(runtime, record, completion.usage, trace)
        record.status = 200
        headers = _headers(record, trace)
        headers["x-tollgate-cost-usd"] = format_usd(record.cost_nano)
        if held is not None:
            await runtime.idempotency.complete(
                held.key, held.digest, StoredResponse(200, headers, completion.body)
            )
        if runtime.config.ledger.store_bodies:
            record.keep_bodies(raw, completion.body, limit=runtime.config.ledger.body_max_bytes)
        return Response(completion.body, media_type="application/json", headers=headers)
    except Exception as exc:
        _attribute(record, trace)
        if held is not None and not handed_to_stream:
            await runtime.idempotency.release(held.key)
        return _error_response(record, trace, exc)
    finally:
        if not handed_to_stream:
            _close_record(runtime, record)


def _deadline(request: Request, runtime: Runtime, model: Model) -> float:
    """One deadline for the whole request, monotonic: the model's or the gateway's, and shorter if
    the client asks (it may never ask for longer)."""
    seconds = model.deadline_seconds or runtime.config.resilience.deadline_seconds
    asked = request.headers.get(TIMEOUT_HEADER)
    if asked is not None:
        try:
            client_seconds = int(asked) / 1000
        except ValueError:
            raise InvalidRequest(
                f"{TIMEOUT_HEADER} must be whole milliseconds", param=TIMEOUT_HEADER
            ) from None
        if client_seconds <= 0:
            raise InvalidRequest(f"{TIMEOUT_HEADER} must be positive", param=TIMEOUT_HEADER)
        seconds = min(seconds, client_seconds)
    return time.monotonic() + seconds


async def _claim(
    runtime: Runtime, record: RequestRecord, key: str, raw: bytes, deadline: float
) -> tuple[Response | None, _Idempotency | None]:
    if not key or len(key) > _MAX_IDEMPOTENCY_KEY:
        raise InvalidRequest(
            f"Idempotency-Key must be 1 to {_MAX_IDEMPOTENCY_KEY} characters", param="Idempotency-Key"
        )
    record.idempotency_key = key
    digest = fingerprint(raw)
    stored = await runtime.idempotency.claim(key, digest, wait_until=deadline)
    if stored is None:
        return None, _Idempotency(key, digest)
    # A repeat: the stored answer, no upstream call, and a zero-cost row that says why.
    record.status = stored.status
    record.cache_status = "idempotent_replay"
    record.model = stored.headers.get("x-tollgate-model")
    headers = {**stored.headers, "x-tollgate-idempotent-replay": "true", "x-tollgate-cost-usd": "0"}
    media_type = "text/event-stream" if record.stream else "application/json"
    return Response(stored.body, status_code=stored.status, media_type=media_type, headers=headers), None


def bill(runtime: Runtime, record: RequestRecord, usage: Usage, trace: Trace) -> None:
    price = trace.deployment.price if trace.deployment else None
    record.set_usage(usage, price, baseline=runtime.registry.baseline, version=runtime.prices.version)
    if price is None:
        runtime.metrics.price_unknown.labels(record.model or record.requested_model).inc()


def _attribute(record: RequestRecord, trace: Trace) -> None:
    record.attempts = trace.attempts
    record.fallback_used = trace.fallback_used
    record.deployments_tried = ",".join(trace.tried) or None
    if trace.model is not None and trace.deployment is not None:
        record.model = trace.model.name
        record.tier = trace.model.tier
        record.provider = trace.deployment.target.provider
        record.upstream_model = trace.deployment.target.upstream_model


def _headers(record: RequestRecord, trace: Trace) -> dict[str, str]:
    headers = {"x-tollgate-attempts": str(trace.attempts)}
    if trace.model is not None:
        headers["x-tollgate-model"] = trace.model.name
        headers["x-tollgate-tier"] = trace.model.tier
    return headers


def _error_response(record: RequestRecord, trace: Trace, exc: Exception) -> Response:
    status, body, error_type = describe(exc)
    if status == 500:
        log.exception("request %s failed inside the gateway", record.id)
    record.fail(status=status, error_type=error_type, message=str(exc))
    headers = _headers(record, trace)
    if isinstance(exc, ProviderError) and exc.retry_after is not None:
        headers["retry-after"] = str(max(1, round(exc.retry_after)))
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _close_record(runtime: Runtime, record: RequestRecord) -> None:
    if record.status == 0:
        record.fail(status=_CLIENT_CLOSED, error_type="client_closed", message="client went away")
    record.finish()
    runtime.ledger.record(record)
    runtime.metrics.requests.labels(record.endpoint, record.model or "none", str(record.status)).inc()


async def _relay(
    runtime: Runtime,
    record: RequestRecord,
    chat: ChatRequest,
    first: StreamChunk,
    chunks: AsyncGenerator[StreamChunk, None],
    trace: Trace,
    held: _Idempotency | None,
) -> AsyncIterator[bytes]:
    """Frame upstream chunks as SSE. The usage chunk is kept for the ledger even when the client
    did not ask for it; a stream that breaks before usage arrived is billed from an estimate. The
    ledger row is written in `finally`, so a client that disconnects is still billed."""
    usage: Usage | None = None
    generated = 0
    keep = runtime.config.ledger.store_bodies
    sent: list[bytes] | None = [] if held is not None or keep else None
    try:
        chunk = first
        while True:
            generated += chunk.content_chars
            if chunk.usage is not None:
                usage = chunk.usage
            if chat.include_usage or not chunk.usage_only:
                frame = encode_data(chunk.data)
                if sent is not None:
                    sent.append(frame)
                yield frame
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
        if usage is None:
            usage = estimate_usage(chat.messages, generated)
            record.usage_estimated = True
        bill(runtime, record, usage, trace)
        if keep and sent is not None:
            record.keep_bodies(chat.raw, b"".join(sent), limit=runtime.config.ledger.body_max_bytes)
        _close_record(runtime, record)
        with anyio.CancelScope(shield=True):
            await chunks.aclose()
            if held is not None:
                if record.status == 200 and sent is not None:
                    stored = StoredResponse(200, _headers(record, trace), b"".join(sent) + DONE_EVENT)
                    await runtime.idempotency.complete(held.key, held.digest, stored)
                else:
                    await runtime.idempotency.release(held.key)

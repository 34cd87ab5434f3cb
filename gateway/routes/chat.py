"""The completion pipeline behind `POST /v1/chat/completions` and `POST /v1/messages`: parse,
resolve the model, run it through the executor, answer in the client's dialect, and leave one
ledger row whatever happens (success, bad input, upstream failure, a client that left).

A plain Starlette endpoint rather than a FastAPI one: this is the hot path, and it needs no
dependency injection or response-model validation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator

import anyio
from starlette.requests import Request
from starlette.responses import Response

from gateway.accounting.closing import attribute
from gateway.accounting.estimate import estimate_usage, with_generated
from gateway.accounting.record import RequestRecord
from gateway.caching.lookup import look_up
from gateway.caching.response_cache import CachedAnswer, from_stream, replay_chunks
from gateway.config.schema import TeamConfig
from gateway.context.policy import ContextRefused, apply_context_policy, combine, route_context
from gateway.errors import InvalidRequest, UnknownModel, describe
from gateway.execution.executor import Trace
from gateway.execution.idempotency import StoredResponse, fingerprint
from gateway.http.headers import request_headers
from gateway.http.relay_response import RelayResponse
from gateway.http.request_id import CLIENT_REQUEST_ID_KEY, REQUEST_ID_KEY
from gateway.models import Model
from gateway.policy.gate import PolicyGate
from gateway.policy.principal import Principal
from gateway.routes.dialects import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_COMPLETIONS,
    Dialect,
    StreamEncoder,
)
from gateway.routes.ingress import sign_in
from gateway.routes.outcome import ROUTE_HEADER, request_deadline, response_headers
from gateway.routes.responses_dialect import ResponsesDialect
from gateway.routes.rewrite import parameter_flags, rewrite_for_upstream
from gateway.routes.settlement import HeldKey, Settlement
from gateway.routing.escalation import complete_checked
from gateway.routing.router import TIER_HEADER
from gateway.runtime import Runtime
from pricing.money import format_usd
from providers.errors import ProviderError
from providers.types import ChatRequest, StreamChunk
from usage import Usage

log = logging.getLogger("tollgate.chat")

_MAX_IDEMPOTENCY_KEY = 255


async def chat_completions(request: Request) -> Response:
    """OpenAI's `POST /v1/chat/completions`."""
    return await serve(request, OPENAI_CHAT)


async def completions(request: Request) -> Response:
    """OpenAI's legacy `POST /v1/completions`, for OpenAI-compatible and vLLM deployments."""
    return await serve(request, OPENAI_COMPLETIONS)


async def messages(request: Request) -> Response:
    """Anthropic's `POST /v1/messages`, answered by whichever provider the model routes to."""
    return await serve(request, ANTHROPIC_MESSAGES)


async def serve(request: Request, dialect: Dialect) -> Response:
    runtime: Runtime = request.app.state.runtime
    record = RequestRecord.begin(
        id=request.scope[REQUEST_ID_KEY],
        client_request_id=request.scope[CLIENT_REQUEST_ID_KEY],
        endpoint=dialect.endpoint,
    )
    # The span ends when the ledger row is closed, which for a stream is after this returns.
    with runtime.tracing.request_span(record, headers=request_headers(request)):
        return await _handle(request, dialect, runtime, record)


async def _handle(request: Request, dialect: Dialect, runtime: Runtime, record: RequestRecord) -> Response:
    settlement = Settlement(runtime, runtime.gate, record, Trace())
    try:
        return await _answer(request, dialect, settlement)
    except Exception as exc:
        attribute(record, settlement.trace)
        return await settlement.failed(exc, dialect)
    finally:
        # Before the response leaves: the row is journaled (and, under power durability, on disk)
        # by the time the client can read the answer's last byte.
        if not settlement.streaming and (synced := settlement.close()) is not None:
            await synced


async def _answer(request: Request, dialect: Dialect, settlement: Settlement) -> Response:
    """Sign in, parse, route, claim the idempotency key, pass the gate, try the cache, then ask
    upstream: each step leaves on `settlement` what the request's end must settle."""
    runtime, gate, record, trace = settlement.runtime, settlement.gate, settlement.record, settlement.trace
    inbound = await sign_in(request, runtime, record)
    headers, principal, raw = inbound.headers, inbound.principal, inbound.raw
    if isinstance(dialect, ResponsesDialect):  # a response may continue a stored one (its team's)
        chat = await dialect.parse_stored(raw, team=principal.team)
    else:
        chat = dialect.parse(raw)
    facts = chat.facts
    record.requested_model, record.stream, record.user = facts.model, facts.stream, facts.user
    runtime.tracing.describe(record, max_tokens=facts.max_output, temperature=facts.temperature)
    model = settlement.model = await _route(runtime, gate, request, principal, chat, record)
    deadline = request_deadline(request, runtime, model)
    key = headers.get("idempotency-key")
    if key is not None:
        replay = await _claim(settlement, key, raw, deadline)
        if replay is not None:
            return replay
    admitted = settlement.admitted = await gate.admit(principal, facts, model, tags=record.tags)
    record.tags, record.flags = admitted.tags, admitted.flags
    policy = gate.cache_policy(principal.team)
    lookup = await look_up(
        runtime, headers, chat, model, principal=principal, policy=policy, allow=admitted.allows
    )
    settlement.looked_up(lookup)
    if lookup.answer is not None:
        return await _from_cache(settlement, chat, model, dialect, lookup.answer, lookup.status)
    team = gate.team(principal)
    await _fit_context(runtime, chat, model, record, team)
    record.flags += rewrite_for_upstream(chat, team_name=principal.team, team=team, cache=policy)
    if chat.stream:
        first, chunks = await runtime.executor.open_stream(
            chat, model, deadline=deadline, trace=trace, allow=admitted.allows
        )
        record.mark_first_byte()
        record.overhead_ms = max(0.0, (record.ttft_ms or 0.0) - trace.waiting_ms)
        attribute(record, trace)
        record.flags += parameter_flags(chat, trace.deployment)
        settlement.streaming = True
        return RelayResponse(
            _relay(settlement, chat, dialect.encoder(chat), first, chunks),
            media_type="text/event-stream",
            headers={**settlement.headers(), "cache-control": "no-cache", "x-accel-buffering": "no"},
        )
    # Routing checks (gateway.routing): one retry a tier up on a verifiably bad `auto` answer.
    completion = await complete_checked(
        runtime, chat, model, record, deadline=deadline, trace=trace, allow=admitted.allows, team=team
    )
    attribute(record, trace)
    record.flags += parameter_flags(chat, trace.deployment)
    record.upstream_ms = trace.waiting_ms
    settlement.bill(completion.usage)
    record.status = 200
    answer_headers = settlement.headers()
    answer_headers["x-tollgate-cost-usd"] = format_usd(record.cost_nano)
    body = dialect.render(completion, chat)
    await settlement.answered(
        stored=StoredResponse(200, answer_headers, body) if settlement.held is not None else None,
        answer=CachedAnswer.from_completion(completion) if settlement.miss is not None else None,
        prompt=raw,
        response=body,
    )
    # Routing checks: maybe also ask the tier above, in the background, to measure agreement.
    runtime.shadow.sample(runtime, chat, completion, record, trace, team=team)
    return Response(body, media_type="application/json", headers=answer_headers)


async def _route(
    runtime: Runtime,
    gate: PolicyGate,
    request: Request,
    principal: Principal,
    chat: ChatRequest,
    record: RequestRecord,
) -> Model:
    """`auto` goes through the complexity router; any other name is the model the client asked for."""
    if runtime.router.is_auto(chat.model):
        if chat.legacy is not None:
            raise InvalidRequest(
                f"'{chat.model}' routes chat requests only: name a model for /v1/completions",
                param="model",
                code="invalid_value",
            )
        router, forced, team = runtime.router, request_headers(request).get(TIER_HEADER), gate.team(principal)
        if router.blocking:
            # Off the event loop (torch releases the GIL while it computes): others are served meanwhile.
            route = await asyncio.to_thread(router.route, chat, forced=forced, team=team)
        else:
            route = router.route(chat, forced=forced, team=team)
        record.route_reason, record.route_score, record.route = route.reason, route.score, route.route
        return route.model
    model = runtime.registry.resolve(chat.model)
    if model is None:
        raise UnknownModel(f"the model '{chat.model}' does not exist", param="model")
    record.route_reason = "model named by the client"
    return model


async def _fit_context(
    runtime: Runtime, chat: ChatRequest, model: Model, record: RequestRecord, team: TeamConfig | None
) -> None:
    """The context policy (`gateway.context`) of the team and the matched route: refuse, trim or
    dedupe before the body goes upstream, and note each change for the row and the client."""
    context = combine(
        team.context if team is not None else None, route_context(runtime.config.routing, record.route)
    )
    try:
        change = await apply_context_policy(chat, context, model)
    except ContextRefused:
        record.flags.append("context_refused")
        raise
    if change is not None:
        record.flags += change.flags
        record.context_tokens_removed = change.plan.removed
        record.context_saving_nano = change.saving_nano
        record.context_note = change.header


async def _from_cache(
    settlement: Settlement,
    chat: ChatRequest,
    model: Model,
    dialect: Dialect,
    answer: CachedAnswer,
    status: str,
) -> Response:
    """A response-cache hit, whole or replayed as a stream."""
    headers = {
        **(settlement.admitted.headers if settlement.admitted else {}),
        "x-tollgate-model": model.name,
        "x-tollgate-tier": model.tier,
        "x-tollgate-attempts": "0",
        "x-tollgate-cache": status,
        "x-tollgate-cost-usd": "0",
        **({ROUTE_HEADER: settlement.record.route} if settlement.record.route else {}),
    }
    await settlement.answered_from_cache(answer, model)
    if not chat.stream:
        return Response(
            dialect.render(answer.to_completion(), chat), media_type="application/json", headers=headers
        )
    encoder = dialect.encoder(chat)
    frames = b"".join(encoder.chunk(c) for c in replay_chunks(answer, include_usage=True)) + encoder.end()
    return Response(frames, media_type="text/event-stream", headers={**headers, "cache-control": "no-cache"})


async def _claim(settlement: Settlement, key: str, raw: bytes, deadline: float) -> Response | None:
    """Hold the idempotency key, or answer a repeat with what the first request answered."""
    runtime, record = settlement.runtime, settlement.record
    if not key or len(key) > _MAX_IDEMPOTENCY_KEY:
        raise InvalidRequest(
            f"Idempotency-Key must be 1 to {_MAX_IDEMPOTENCY_KEY} characters", param="Idempotency-Key"
        )
    record.idempotency_key = key
    digest = fingerprint(raw)
    stored = await runtime.idempotency.claim(key, digest, wait_until=deadline, team=record.team)
    if stored is None:
        settlement.held = HeldKey(key, digest, record.team)
        return None
    # A repeat: the stored answer, no upstream call, and a zero-cost row that says why.
    record.status = stored.status
    record.cache_status = "idempotent_replay"
    record.model = stored.headers.get("x-tollgate-model")
    headers = {**stored.headers, "x-tollgate-idempotent-replay": "true", "x-tollgate-cost-usd": "0"}
    media_type = "text/event-stream" if record.stream else "application/json"
    return Response(stored.body, status_code=stored.status, media_type=media_type, headers=headers)


def _joined(pending: list[bytes], frame: bytes) -> bytes:
    """`frame` after whatever frames are waiting, which are then gone."""
    if not pending:
        return frame
    pending.append(frame)
    joined = b"".join(pending)
    pending.clear()
    return joined


_YIELD_EVERY = 256


async def _relay(
    settlement: Settlement,
    chat: ChatRequest,
    encoder: StreamEncoder,
    first: StreamChunk,
    chunks: AsyncGenerator[StreamChunk, None],
) -> AsyncIterator[bytes]:
    """Frame upstream chunks in the client's dialect. The usage chunk is read for the ledger
    whether or not the client sees it; a stream that breaks before usage arrived is billed from an
    estimate. The settlement runs in `finally`, so a client that disconnects is still billed."""
    runtime, record = settlement.runtime, settlement.record
    usage: Usage | None = None
    reported: Usage | None = None  # what the provider said before the end (`usage_so_far`)
    generated = 0
    keep = settlement.keeps_bodies()
    sent: list[bytes] | None = [] if settlement.held is not None or keep else None
    datas: list[bytes] | None = [] if settlement.miss is not None else None
    # Frames of chunks that arrived in one upstream read go out in one write (one syscall, not one
    # per token), but only once the first generated text is out: until then each frame goes alone
    # and at once, so the time to the first token never waits for the rest of a read.
    pending: list[bytes] = []
    flowing = False
    relayed = 0
    try:
        chunk = first
        while True:
            relayed += 1
            if relayed % _YIELD_EVERY == 0:
                # Chunks already buffered (a fast upstream, or a burst after a stall) come without
                # the loop getting a turn: a 1 MB read is ~17,000 chunks, ~0.2 s of other clients
                # waiting. Token-paced streams never get here between reads.
                await asyncio.sleep(0)
            generated += chunk.content_chars
            if chunk.usage is not None:
                usage = chunk.usage
            elif chunk.usage_so_far is not None:
                reported = chunk.usage_so_far
            if datas is not None:
                datas.append(chunk.data)
            frame = encoder.chunk(chunk)
            if frame:
                if sent is not None:
                    sent.append(frame)
                if chunk.more_ready and flowing:
                    pending.append(frame)
                else:
                    yield _joined(pending, frame)
                flowing = flowing or chunk.content_chars > 0
            try:
                chunk = await anext(chunks)
            except StopAsyncIteration:
                break
        tail = encoder.end()
        if sent is not None:
            sent.append(tail)
        record.status = 200
    except ProviderError as exc:
        runtime.executor.redact(exc)  # a mid-stream error is past the executor's own scrubbing
        status, _, error_type = describe(exc)
        record.fail(status=status, error_type=error_type, message=str(exc))
        tail = encoder.error(exc)
    except BaseException:  # the client went away (or the server is stopping): settle, send nothing
        with anyio.CancelScope(shield=True):
            await _close_stream(settlement, chat, usage, reported, generated, sent, datas, keep)
            await chunks.aclose()
        raise
    # The stream's end is settled and its row journaled before the last frame goes out, so a
    # process killed after the client read the whole answer never leaves it without its row.
    with anyio.CancelScope(shield=True):
        await _close_stream(settlement, chat, usage, reported, generated, sent, datas, keep)
    try:
        yield _joined(pending, tail)
    finally:
        with anyio.CancelScope(shield=True):
            await chunks.aclose()


async def _close_stream(
    settlement: Settlement,
    chat: ChatRequest,
    usage: Usage | None,
    reported: Usage | None,
    generated: int,
    sent: list[bytes] | None,
    datas: list[bytes] | None,
    keep: bool,
) -> None:
    """Bill the stream (from an estimate if it ended before usage came), settle it, close its row."""
    try:
        if usage is None:
            usage = await _estimated(chat, reported, generated)
            settlement.record.usage_estimated = True
        await _settle_stream(settlement, chat, usage, sent, datas, keep)
    finally:
        synced = settlement.close()
        if synced is not None:
            await synced


async def _estimated(chat: ChatRequest, reported: Usage | None, generated: int) -> Usage:
    """A stream's usage when it ended before the provider said: what it reported so far with the
    text since, else counted from the prompt and the text relayed."""
    if reported is not None:
        return with_generated(reported, generated)
    # Off the loop: the first estimate loads the tokenizer (~0.4 s of parsing), and counting a long
    # prompt is milliseconds; other clients must not wait for either.
    return await anyio.to_thread.run_sync(estimate_usage, chat.messages, generated)


async def _settle_stream(
    settlement: Settlement,
    chat: ChatRequest,
    usage: Usage,
    sent: list[bytes] | None,
    datas: list[bytes] | None,
    keep: bool,
) -> None:
    """Bill what the stream produced (the budget settles with it), and store a stream that ended
    well for idempotent repeats and the response cache."""
    record = settlement.record
    settlement.bill(usage)
    whole = b"".join(sent) if sent is not None else None
    ok = record.status == 200
    await settlement.answered(
        stored=StoredResponse(200, response_headers(record, settlement.trace), whole)
        if ok and whole is not None
        else None,
        answer=from_stream(datas, usage=usage) if ok and datas is not None else None,
        prompt=chat.raw,
        response=whole if keep else None,
    )

"""`POST /v1/embeddings`: through the executor like a chat, priced on input tokens alone."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from gateway.accounting.closing import attribute, bill, close_record
from gateway.accounting.estimate import count_all
from gateway.accounting.record import RequestRecord
from gateway.errors import UnknownModel
from gateway.execution.executor import Trace
from gateway.http.headers import request_headers
from gateway.http.request_id import CLIENT_REQUEST_ID_KEY, REQUEST_ID_KEY
from gateway.policy.gate import Admitted
from gateway.routes.dialects import OPENAI_CHAT
from gateway.routes.embedding_request import input_texts, parse_embedding_request
from gateway.routes.ingress import sign_in
from gateway.routes.outcome import error_response, request_deadline, response_headers
from gateway.runtime import Runtime
from pricing.money import format_usd
from providers.facts import RequestFacts
from usage import Usage


async def embeddings(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    record = RequestRecord.begin(
        id=request.scope[REQUEST_ID_KEY],
        client_request_id=request.scope[CLIENT_REQUEST_ID_KEY],
        endpoint="embeddings",
    )
    with runtime.tracing.request_span(record, headers=request_headers(request)):
        return await _embed(request, runtime, record)


async def _embed(request: Request, runtime: Runtime, record: RequestRecord) -> Response:
    trace = Trace()
    gate = runtime.gate
    admitted: Admitted | None = None
    try:
        inbound = await sign_in(request, runtime, record)
        embedding = parse_embedding_request(inbound.raw)
        record.requested_model = embedding.model
        model = runtime.registry.resolve(embedding.model)
        if model is None:
            raise UnknownModel(f"the model '{embedding.model}' does not exist", param="model")
        deadline = request_deadline(request, runtime, model)
        # Embeddings produce no output tokens: their worst case is the input alone.
        facts = RequestFacts(model=embedding.model, prompt_bytes=len(inbound.raw), max_output=0)
        admitted = await gate.admit(inbound.principal, facts, model, tags=record.tags)
        record.tags, record.flags = admitted.tags, admitted.flags
        answer = await runtime.executor.embed(
            embedding, model, deadline=deadline, trace=trace, allow=admitted.allows
        )
        attribute(record, trace)
        record.upstream_ms = trace.waiting_ms
        usage = answer.usage
        if usage.prompt_tokens == 0:
            # An upstream that reports no tokens: count them, and say the row is an estimate.
            # Counted off the loop: the first count loads the tokenizer (~0.4 s of parsing).
            tokens = await asyncio.to_thread(count_all, input_texts(embedding))
            usage = Usage(prompt_tokens=tokens, estimated=True)
        bill(runtime, record, usage, trace)
        record.status = 200
        await gate.finish(admitted, cost_nano=record.cost_nano, tokens=record.prompt_tokens)
        headers = {**admitted.headers, **response_headers(record, trace)}
        headers["x-tollgate-cost-usd"] = format_usd(record.cost_nano)
        return Response(answer.body, media_type="application/json", headers=headers)
    except Exception as exc:
        attribute(record, trace)
        if admitted is not None and record.status != 200:
            await gate.abandon(admitted)
        return error_response(record, trace, exc, OPENAI_CHAT)
    finally:
        if (synced := close_record(runtime, record)) is not None:
            await synced

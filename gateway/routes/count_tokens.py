"""`POST /v1/messages/count_tokens` (Anthropic's shape): how many input tokens a Messages request
holds, for clients such as Claude Code that size their context before sending.

A model served by Anthropic is asked upstream (the count is free there, and only Anthropic knows its
tokenizer); any other is counted here, with the shipped o200k_base tokenizer where that is the
model's own, else with the same tokenizer as an estimate. `x-tollgate-token-count` says which:
`upstream`, `o200k_base` or `estimated`. Every request leaves a ledger row at zero cost.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.accounting.closing import attribute, close_record
from gateway.accounting.estimate import count_tokens, prompt_tokens
from gateway.accounting.record import RequestRecord
from gateway.errors import InvalidRequest, UnknownModel
from gateway.execution.executor import Trace
from gateway.http.headers import request_headers
from gateway.http.request_id import CLIENT_REQUEST_ID_KEY, REQUEST_ID_KEY
from gateway.models import Deployment, Model
from gateway.policy.gate import Admitted
from gateway.routes.body import json_object
from gateway.routes.chat_request import parse_chat_request
from gateway.routes.dialects import ANTHROPIC_MESSAGES
from gateway.routes.ingress import sign_in
from gateway.routes.outcome import error_response, request_deadline, response_headers
from gateway.runtime import Runtime
from pricing.tokenizer import encoding_for
from providers.anthropic.ingress import from_anthropic_request
from providers.facts import RequestFacts
from providers.types import JSON

COUNT_HEADER = "x-tollgate-token-count"


async def count_message_tokens(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    record = RequestRecord.begin(
        id=request.scope[REQUEST_ID_KEY],
        client_request_id=request.scope[CLIENT_REQUEST_ID_KEY],
        endpoint="messages.count_tokens",
    )
    with runtime.tracing.request_span(record, headers=request_headers(request)):
        return await _count(request, runtime, record)


async def _count(request: Request, runtime: Runtime, record: RequestRecord) -> Response:
    trace = Trace()
    gate = runtime.gate
    admitted: Admitted | None = None
    try:
        inbound = await sign_in(request, runtime, record)
        body, chat = parse_count_request(inbound.raw)
        record.requested_model = body["model"]
        model = runtime.registry.resolve(body["model"])
        if model is None:
            raise UnknownModel(f"the model '{body['model']}' does not exist", param="model")
        # The model's policy applies (allowed models and tiers, data policy, request rate); a count
        # costs nothing, so nothing is reserved against a budget.
        facts = RequestFacts(model=body["model"], max_output=0)
        admitted = await gate.admit(inbound.principal, facts, model, tags=record.tags)
        record.tags, record.flags = admitted.tags, admitted.flags
        deployment = _first(runtime, model, admitted)
        if deployment is not None and _counts_upstream(runtime, deployment):
            answer = await runtime.executor.count_tokens(
                body,
                model,
                deadline=request_deadline(request, runtime, model),
                trace=trace,
                allow=admitted.allows,
            )
            attribute(record, trace)
            record.upstream_ms = trace.waiting_ms
            payload, how = answer.body, "upstream"
        else:
            trace.model, trace.deployment = model, deployment
            attribute(record, trace)
            # Off the loop: the first count loads the tokenizer (~0.4 s of parsing).
            tokens = await anyio.to_thread.run_sync(_local_count, chat, body)
            upstream = deployment.target.upstream_model if deployment is not None else model.name
            payload = orjson.dumps({"input_tokens": tokens})
            how = "o200k_base" if encoding_for(upstream) else "estimated"
        record.status = 200
        await gate.finish(admitted, cost_nano=0, tokens=0)
        headers = {**admitted.headers, **response_headers(record, trace), COUNT_HEADER: how}
        headers["x-tollgate-cost-usd"] = "0"
        return Response(payload, media_type="application/json", headers=headers)
    except Exception as exc:
        attribute(record, trace)
        if admitted is not None and record.status != 200:
            await gate.abandon(admitted)
        return error_response(record, trace, exc, ANTHROPIC_MESSAGES)
    finally:
        close_record(runtime, record)


def parse_count_request(raw: bytes) -> tuple[JSON, JSON]:
    """The client's body (sent upstream as is) and its OpenAI chat rendering (counted locally),
    checked by the rules `/v1/messages` applies, `max_tokens` aside (count_tokens takes none)."""
    body = json_object(raw)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("model: Field required (a non-empty string)", param="model")
    try:
        translated = from_anthropic_request(body)
    except (TypeError, AttributeError, ValueError) as exc:
        raise InvalidRequest(
            "a value in the Messages request has the wrong type", code="invalid_type"
        ) from exc
    chat = parse_chat_request(orjson.dumps(translated)).body
    return body, chat


def _first(runtime: Runtime, model: Model, admitted: Admitted) -> Deployment | None:
    return next((d for m, d in runtime.registry.chain(model) if admitted.allows(m, d)), None)


def _counts_upstream(runtime: Runtime, deployment: Deployment) -> bool:
    spec = runtime.config.providers.get(deployment.target.provider)
    return spec is not None and spec.type == "anthropic"


def _local_count(chat: JSON, body: JSON) -> int:
    """The chat rendering's tokens (`accounting.estimate`), plus the tool definitions as JSON."""
    tools: Any = body.get("tools")
    extra = count_tokens(orjson.dumps(tools).decode()) if tools else 0
    return prompt_tokens(chat["messages"]) + extra

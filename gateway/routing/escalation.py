"""Escalation: a non-streamed `auto` answer from a tier below the top that is verifiably bad
(`gateway.routing.verdict`) is asked once more of the next tier up, and the client gets that answer.

The request keeps one ledger row: the answer's model and tokens, `escalated_from` (tier/model of the
discarded attempt), `escalation_reason`, and `escalation_cost_nano`, which `RequestRecord.set_usage`
adds to the row's cost, so the budget settles both attempts. `x-tollgate-escalated` names the reason.
A retry that fails leaves the first answer standing (flag `escalation_failed:<reason>`): the client
asked for an answer, and it has one. A forced tier (`x-tollgate-tier`) is never escalated.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from gateway.execution.executor import Trace
from gateway.routing.router import FORCED_REASON
from gateway.routing.verdict import judge, parse_object
from pricing.cost import cost_breakdown
from pricing.price import Price
from providers.types import ChatRequest, Completion, Usage

if TYPE_CHECKING:
    from gateway.accounting.record import RequestRecord
    from gateway.config.schema import Config, TeamConfig
    from gateway.execution.executor import Executor
    from gateway.models import Allow, Model
    from gateway.observability.metrics import Metrics
    from gateway.routing.router import Router

log = logging.getLogger("tollgate.escalation")

HEADER = "x-tollgate-escalated"


class RoutingChecks(Protocol):
    """What a routing check runs on (the gateway's `Runtime` is one): the policy it reads, the
    router that names the tier above, the executor that asks it, and the metrics that count it."""

    config: Config
    router: Router
    executor: Executor
    metrics: Metrics


async def complete_checked(
    runtime: RoutingChecks,
    chat: ChatRequest,
    model: Model,
    record: RequestRecord,
    *,
    deadline: float,
    trace: Trace,
    allow: Allow,
    team: TeamConfig | None,
) -> Completion:
    """`executor.complete`, plus one retry a tier up when the answer fails a check. `trace` ends up
    describing both attempts (the answer's model, every deployment tried)."""
    settings = runtime.config.routing.escalation
    if not eligible(runtime.config, chat, record, is_auto=runtime.router.is_auto(chat.model)):
        return await runtime.executor.complete(chat, model, deadline=deadline, trace=trace, allow=allow)
    floor = settings.logprob_floor
    asked = _with_logprobs(chat) if floor is not None and _returns_logprobs(model) else chat
    first = await runtime.executor.complete(asked, model, deadline=deadline, trace=trace, allow=allow)
    if trace.model is None:
        return first
    tier = runtime.router.tier_of(trace.model)
    body = parse_object(first.body)
    verdict = judge(chat.body, body, logprob_floor=floor) if tier is not None and body is not None else None
    if verdict is None or tier is None:
        return _without_logprobs(first, body) if asked is not chat else first
    target = runtime.router.tier_above(tier, chat, team)
    if target is None:
        return _without_logprobs(first, body) if asked is not chat else first
    retry = Trace()
    try:
        second = await runtime.executor.complete(chat, target, deadline=deadline, trace=retry, allow=allow)
    except Exception as exc:  # the first answer stands; the client is not failed for our second try
        log.warning("request %s: escalation (%s) failed: %s", record.id, verdict.reason, exc)
        record.flags.append(f"escalation_failed:{verdict.reason}")
        _merge(trace, retry, answered=False)
        return _without_logprobs(first, body) if asked is not chat else first
    record.escalated_from = f"{tier}/{trace.model.name}"[:320]
    record.escalation_reason = verdict.reason
    price = trace.deployment.price if trace.deployment else None
    record.escalation_cost_nano = attempt_cost(first.usage, price)
    runtime.metrics.escalations.labels(verdict.reason, tier).inc()
    log.info("request %s escalated from %s: %s", record.id, record.escalated_from, verdict.detail)
    _merge(trace, retry, answered=True)
    return second


def eligible(config: Config, chat: ChatRequest, record: RequestRecord, *, is_auto: bool) -> bool:
    """Escalation is on, for this route, and the request is a non-streamed `auto` one whose tier
    the router chose (not one the client forced)."""
    if not config.routing.escalation.enabled or chat.stream or not is_auto:
        return False
    if (record.route_reason or "").startswith(FORCED_REASON):
        return False
    return route_allows(config, record.route)


def route_allows(config: Config, route: str | None) -> bool:
    """The per-route switch (`routing.routes[].escalate`); the shipped default routes all escalate."""
    return next((spec.escalate for spec in config.routing.routes or () if spec.name == route), True)


def attempt_cost(usage: Usage, price: Price | None) -> int:
    """What one attempt cost at its deployment's price (0 when the price is unknown)."""
    if price is None:
        return 0
    return cost_breakdown(usage, price).total_nano


def _merge(trace: Trace, retry: Trace, *, answered: bool) -> None:
    trace.attempts += retry.attempts
    trace.tried += [key for key in retry.tried if not trace.tried or key != trace.tried[-1]]
    trace.waiting_ms += retry.waiting_ms
    if answered:
        trace.model, trace.deployment = retry.model, retry.deployment
        trace.fallback_used = retry.fallback_used


def _returns_logprobs(model: Model) -> bool:
    """Asked only of self-hosted deployments (vLLM returns them cheaply; a managed API may bill or
    refuse the parameter)."""
    return bool(model.deployments) and model.deployments[0].self_hosted


def _with_logprobs(chat: ChatRequest) -> ChatRequest:
    if chat.body.get("logprobs") is not None:
        return chat  # the client asked (or refused) itself: leave its request alone
    # The body changes, so the bytes forwarded upstream are rebuilt from it.
    return replace(chat, body={**chat.body, "logprobs": True}, raw=b"")


def _without_logprobs(completion: Completion, body: Mapping[str, Any] | None) -> Completion:
    """The answer as the client would have had it without our logprobs request."""
    if body is None or not isinstance(body.get("choices"), list):
        return completion
    choices = [{**c, "logprobs": None} if isinstance(c, dict) else c for c in body["choices"]]
    return replace(completion, body=orjson.dumps({**body, "choices": choices}))

"""Shadow checks: a sampled share of the non-streamed `auto` requests answered below the top tier is
also sent, in the background, to the tier above, and the ledger keeps whether the two answers agreed
(`gateway.routing.agreement`). This is how an operator tunes routing thresholds on their own traffic.

Off the request path: `sample` only starts a task, after the client's answer is ready, and nothing
the task does can delay or fail that answer. At most `max_in_flight` run at once; a sample beyond
that is dropped, never queued, and so is one sampled while the gateway stops (each counted in
`tollgate_shadow_checks_total{outcome=dropped_*}`).

A shadow call gets its own ledger row: tag `shadow`, `shadow_of` (the request it shadowed),
`shadow_agreement` (1/0; NULL when it failed or the judge could not say), no team and no key, so it is
counted in no team's budget and in no rate limit (the policy gate is never asked). A judge model's
call is one more such row, tagged `shadow` and `shadow_judge`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import orjson

from gateway.accounting.closing import Books, attribute, bill, close_record
from gateway.accounting.record import RequestRecord
from gateway.execution.executor import Trace
from gateway.routing.agreement import Agreement, compare, needs_judge
from gateway.routing.escalation import RoutingChecks
from gateway.routing.verdict import parse_object
from providers.types import ChatRequest, Completion

if TYPE_CHECKING:
    from gateway.config.schema import TeamConfig
    from gateway.models import Allow, Deployment, Model

log = logging.getLogger("tollgate.shadow")

TAG: Final = "shadow"
JUDGE_TAG: Final = "shadow_judge"
_FORCED = "forced by "
_JUDGE_PROMPT_CHARS = 4000
_JUDGE_SYSTEM = (
    "You compare two answers to the same request. Reply with one word: yes if they agree "
    "(same facts, same conclusion, same choice), no if they do not."
)


class ShadowRuntime(RoutingChecks, Books, Protocol):
    """A routing check's needs, and the books its own rows are costed and written with."""


class ShadowChecks:
    """The background tasks of one gateway process: bounded, and ended by `stop`."""

    def __init__(self, *, rand: Callable[[], float] = random.random) -> None:
        self._rand = rand
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def sample(
        self,
        runtime: ShadowRuntime,
        chat: ChatRequest,
        completion: Completion,
        record: RequestRecord,
        trace: Trace,
        *,
        team: TeamConfig | None,
    ) -> None:
        """Maybe start a shadow check of this answer. Never raises: the client's answer is ready."""
        try:
            self._sample(runtime, chat, completion, record, trace, team)
        except Exception:
            log.exception("request %s: shadow sampling failed", record.id)

    def _sample(
        self,
        runtime: ShadowRuntime,
        chat: ChatRequest,
        completion: Completion,
        record: RequestRecord,
        trace: Trace,
        team: TeamConfig | None,
    ) -> None:
        settings = runtime.config.routing.shadow
        if settings.sample_rate <= 0 or chat.stream or not runtime.router.is_auto(chat.model):
            return
        if record.escalation_reason is not None or (record.route_reason or "").startswith(_FORCED):
            return  # already known to be bad, or a tier the client chose itself
        if trace.model is None or (tier := runtime.router.tier_of(trace.model)) is None:
            return
        if self._rand() >= settings.sample_rate:
            return
        target = runtime.router.tier_above(tier, chat, team)
        if target is None:
            return
        if self._closed or len(self._tasks) >= settings.max_in_flight:
            outcome = "dropped_shutdown" if self._closed else "dropped_saturated"
            runtime.metrics.shadow_checks.labels(outcome, tier).inc()
            return
        allow = _allow(team)
        task = asyncio.create_task(self._check(runtime, chat, completion, record, tier, target, allow))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self, *, grace: float = 2.0) -> None:
        """Let running checks finish for up to `grace` seconds, then cancel the rest (dropped)."""
        self._closed = True
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _check(
        self,
        runtime: ShadowRuntime,
        chat: ChatRequest,
        completion: Completion,
        original: RequestRecord,
        tier: str,
        target: Model,
        allow: Allow,
    ) -> None:
        row = _shadow_row(original, chat, tier, target)
        trace = Trace()
        outcome = "failed"
        try:
            answer = await runtime.executor.complete(
                chat, target, deadline=_deadline(runtime, target), trace=trace, allow=allow
            )
            _bill(runtime, row, trace, answer)
            row.status = 200
            threshold = runtime.config.routing.shadow.similarity_threshold
            agreement = _compare(completion.body, answer.body, threshold)
            agreed: bool | None = agreement.agreed if agreement is not None else None
            judge = runtime.config.routing.shadow.judge_model
            if agreement is not None and judge is not None and needs_judge(agreement):
                agreed = await _ask_judge(runtime, judge, chat, completion.body, answer.body, original)
            row.shadow_agreement = agreed
            outcome = "failed" if agreed is None else ("agree" if agreed else "disagree")
        except asyncio.CancelledError:
            runtime.metrics.shadow_checks.labels("dropped_shutdown", tier).inc()
            raise
        except Exception as exc:
            _attribute(row, trace)
            row.fail(status=getattr(exc, "status", None) or 502, error_type="shadow_failed", message=str(exc))
            log.info("shadow of %s on %s failed: %s", original.id, target.name, exc)
        runtime.metrics.shadow_checks.labels(outcome, tier).inc()
        _write(runtime, row)


def _shadow_row(original: RequestRecord, chat: ChatRequest, tier: str, target: Model) -> RequestRecord:
    row = RequestRecord.begin(id=str(uuid.uuid4()), client_request_id=None, endpoint=original.endpoint)
    row.requested_model = chat.model
    row.tags = (TAG,)
    row.shadow_of = original.id
    row.route_reason = f"shadow of {original.id}: {tier}/{original.model} -> {target.tier}"[:256]
    route = getattr(original, "route", None)  # the matched route, once the ledger has one
    if route is not None:
        setattr(row, "route", route)  # noqa: B010
    return row


def _allow(team: TeamConfig | None) -> Allow:
    """The team's data policy holds for the shadow call too (a local-only team's prompt stays local)."""
    if team is None or team.data_policy != "local-only":
        return None

    def self_hosted(_model: Model, deployment: Deployment) -> bool:
        return deployment.self_hosted

    return self_hosted


def _deadline(runtime: ShadowRuntime, model: Model) -> float:
    return time.monotonic() + (model.deadline_seconds or runtime.config.resilience.deadline_seconds)


def _attribute(row: RequestRecord, trace: Trace) -> None:
    attribute(row, trace)
    row.upstream_ms = trace.waiting_ms


def _bill(runtime: ShadowRuntime, row: RequestRecord, trace: Trace, answer: Completion) -> None:
    _attribute(row, trace)
    bill(runtime, row, answer.usage, trace)


def _write(runtime: ShadowRuntime, row: RequestRecord) -> None:
    if row.status == 0:
        row.fail(status=499, error_type="shadow_dropped", message="the shadow check did not finish")
    close_record(runtime, row)


def _compare(first: bytes, second: bytes, threshold: float) -> Agreement | None:
    a, b = parse_object(first), parse_object(second)
    if a is None or b is None:
        return None
    return compare(a, b, threshold=threshold)


async def _ask_judge(
    runtime: ShadowRuntime, name: str, chat: ChatRequest, first: bytes, second: bytes, original: RequestRecord
) -> bool | None:
    """The judge's yes or no (None when it is not configured right, fails, or says neither)."""
    model = runtime.registry.resolve(name)
    if model is None:
        log.warning("routing.shadow.judge_model '%s' is not a configured model", name)
        return None
    body = judge_request(chat.body, _answer_text(first), _answer_text(second))
    request = ChatRequest(body=body, raw=orjson.dumps(body), model=model.name)
    row = RequestRecord.begin(id=str(uuid.uuid4()), client_request_id=None, endpoint=original.endpoint)
    row.requested_model, row.tags, row.shadow_of = model.name, (TAG, JUDGE_TAG), original.id
    row.route_reason = f"shadow judge for {original.id}"
    trace = Trace()
    try:
        verdict = await runtime.executor.complete(
            request, model, deadline=_deadline(runtime, model), trace=trace, allow=None
        )
        _bill(runtime, row, trace, verdict)
        row.status = 200
        return judge_says(_answer_text(verdict.body))
    except Exception as exc:
        _attribute(row, trace)
        row.fail(status=getattr(exc, "status", None) or 502, error_type="shadow_failed", message=str(exc))
        return None
    finally:
        _write(runtime, row)


def judge_request(request: Mapping[str, Any], first: str, second: str) -> dict[str, Any]:
    """The chat body that asks a judge whether two answers to `request` agree."""
    asked = _last_user_text(request)[:_JUDGE_PROMPT_CHARS]
    prompt = (
        f"Request:\n{asked}\n\nAnswer A:\n{first[:_JUDGE_PROMPT_CHARS]}\n\n"
        f"Answer B:\n{second[:_JUDGE_PROMPT_CHARS]}\n\nDo these two answers agree? yes/no"
    )
    return {
        "model": "judge",
        "messages": [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": prompt}],
        "max_tokens": 3,
        "temperature": 0,
    }


def judge_says(text: str) -> bool | None:
    word = text.strip().lower().lstrip("*\"' ")
    if word.startswith("yes"):
        return True
    if word.startswith("no"):
        return False
    return None


def _last_user_text(request: Mapping[str, Any]) -> str:
    for message in reversed(request.get("messages") or ()):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(
                    p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
                )
    return ""


def _answer_text(raw: bytes) -> str:
    """The first choice's content, or its tool calls as JSON."""
    body = parse_object(raw)
    choices = body.get("choices") if body else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return ""
    message = choices[0].get("message") or {}
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str) and content:
        return content
    calls = message.get("tool_calls") if isinstance(message, Mapping) else None
    return orjson.dumps(calls).decode() if calls else ""

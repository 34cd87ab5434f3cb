"""Runs one request along its fallback chain: retries with backoff on each deployment, circuit
breakers, the gateway-wide retry budget and one overall deadline.

Retries are a plain loop (full-jitter backoff or Retry-After from `execution.backoff`, bounded by
the deadline and the retry budget): tenacity drove the same policy at ~25 µs a request, measured.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from gateway.config.schema import ResilienceConfig
from gateway.errors import GatewayError, NoDeployment
from gateway.execution.backoff import plan_delay
from gateway.execution.breaker import CircuitBreakers
from gateway.execution.fleets import Fleets, Stream, hold, prompt_prefix
from gateway.execution.latency import LatencyBook
from gateway.execution.retry_budget import RetryBudget
from gateway.models import Allow, Deployment, Model, ModelRegistry, usable
from gateway.observability.redaction import Redactor
from gateway.observability.tracing import Tracing
from local_backend.fleet import Lease
from providers.adapter import COMPLETIONS, Adapter, EmbeddingAdapter, TokenCounter
from providers.errors import (
    ContextLengthExceeded,
    ProviderError,
    UpstreamBadResponse,
    UpstreamRejected,
    UpstreamTimeout,
)
from providers.types import ChatRequest, Completion, EmbeddingRequest, Target

T = TypeVar("T")
Attempt = Callable[[Adapter, Target], Awaitable[T]]
# Takes a fleet replica's lease over once an attempt has answered (a stream: until it ends), given
# when the attempt started (perf_counter_ns). Without one the lease ends with the attempt.
Settle = Callable[[T, Lease, int], Awaitable[T]]


class DeadlineExceeded(GatewayError):
    status = 504
    type = "timeout_error"
    code = "deadline_exceeded"


class ShareExceeded(UpstreamTimeout):
    """An attempt used its share of the deadline (`attempt_bound`) with deployments still behind it:
    the next one is tried at once, this one is not retried (its retries would eat their time)."""


@dataclass(slots=True)
class Trace:
    """What happened to one request on its way upstream, for headers and the ledger row."""

    attempts: int = 0
    tried: list[str] = field(default_factory=list)
    model: Model | None = None
    deployment: Deployment | None = None
    fallback_used: bool = False
    # Time spent waiting on upstreams and backing off: what is not the gateway's own overhead.
    waiting_ms: float = 0.0

    def begin(self, model: Model, deployment: Deployment, *, first: Deployment) -> None:
        self.attempts += 1
        if not self.tried or self.tried[-1] != deployment.key:
            self.tried.append(deployment.key)
        self.model = model
        self.deployment = deployment
        self.fallback_used = deployment is not first


class Executor:
    def __init__(
        self,
        *,
        registry: ModelRegistry,
        adapters: dict[str, Adapter],
        breakers: CircuitBreakers,
        budget: RetryBudget,
        config: ResilienceConfig,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        fleets: Fleets | None = None,
        tracing: Tracing | None = None,
        redactor: Redactor | None = None,
        latency: LatencyBook | None = None,
    ) -> None:
        self._registry = registry
        self._adapters = adapters
        self._breakers = breakers
        self._budget = budget
        self._config = config
        self._sleep = sleep
        self._rand = rand
        self._fleets = fleets
        self._tracing = tracing or Tracing.off()
        self._redactor = redactor or Redactor(())
        self._latency = latency

    def redact(self, exc: ProviderError) -> ProviderError:
        """An upstream's error with any configured secret it echoed taken out (see `redaction`)."""
        return self._redactor.provider_error(exc)

    async def complete(
        self, chat: ChatRequest, model: Model, *, deadline: float, trace: Trace, allow: Allow = None
    ) -> Completion:
        async def once(adapter: Adapter, target: Target) -> Completion:
            _check_serves(chat, adapter, target)
            return await adapter.complete(chat, target)

        return await self._run(model, deadline, trace, once, allow, self._prefix(chat))

    async def embed(
        self, request: EmbeddingRequest, model: Model, *, deadline: float, trace: Trace, allow: Allow = None
    ) -> Completion:
        async def once(adapter: Adapter, target: Target) -> Completion:
            if not isinstance(adapter, EmbeddingAdapter):
                raise UpstreamRejected(
                    f"provider '{target.provider}' does not serve embeddings",
                    status=400,
                    code="unsupported_endpoint",
                )
            return await adapter.embed(request, target)

        return await self._run(model, deadline, trace, once, allow)

    async def count_tokens(
        self, body: dict[str, object], model: Model, *, deadline: float, trace: Trace, allow: Allow = None
    ) -> Completion:
        """A Messages request's input tokens, counted by a deployment that can (`TokenCounter`)."""

        async def once(adapter: Adapter, target: Target) -> Completion:
            if not isinstance(adapter, TokenCounter):
                raise UpstreamRejected(
                    f"provider '{target.provider}' does not count tokens",
                    status=400,
                    code="unsupported_endpoint",
                )
            return await adapter.count_tokens(body, target)

        return await self._run(model, deadline, trace, once, allow)

    async def open_stream(
        self, chat: ChatRequest, model: Model, *, deadline: float, trace: Trace, allow: Allow = None
    ) -> Stream:
        """Retries and fallbacks happen only here, before the first chunk reaches the client."""
        first_byte = self._config.first_byte_timeout_seconds

        async def once(adapter: Adapter, target: Target) -> Stream:
            _check_serves(chat, adapter, target)
            started = time.perf_counter_ns()
            chunks = adapter.stream(chat, target)
            try:
                async with asyncio.timeout(first_byte):
                    first = await anext(chunks)
            except StopAsyncIteration:
                raise UpstreamBadResponse(
                    f"{target.provider} sent an empty stream", provider=target.provider
                ) from None
            except TimeoutError:
                await chunks.aclose()
                raise UpstreamTimeout(
                    f"{target.provider} sent no first byte within {first_byte:g}s", provider=target.provider
                ) from None
            except BaseException:
                await chunks.aclose()
                raise
            if self._latency is not None:
                ttft_ms = (time.perf_counter_ns() - started) / 1e6
                self._latency.observe(target.key, ttft_ms)
            return first, chunks

        return await self._run(model, deadline, trace, once, allow, self._prefix(chat), settle=_held)

    def _prefix(self, chat: ChatRequest) -> str | None:
        return prompt_prefix(chat.body) if self._fleets is not None else None

    async def _run(
        self,
        model: Model,
        deadline: float,
        trace: Trace,
        once: Attempt[T],
        allow: Allow,
        prefix: str | None = None,
        *,
        settle: Settle[T] | None = None,
    ) -> T:
        await self._budget.record_request()
        chain = self._registry.chain(model)
        if self._fleets is not None and prefix is not None:
            ordered = _by_fleet(chain, self._fleets, prefix)
            if not usable(ordered, allow):
                # Spilling would leave this request nowhere to go (no fallbacks, or none its team's
                # data policy allows): it queues on the fleet instead.
                ordered = _by_fleet(chain, self._fleets, prefix, spill=False)
            chain = ordered
        if not usable(chain, allow):
            raise NoDeployment(
                f"no deployment of '{model.name}' that this request may use is available (no healthy "
                "replica, or none its team's data policy allows); try again shortly"
            )
        first = chain[0][1]
        error: ProviderError | None = None
        larger_than = 0
        for index, (candidate, deployment) in enumerate(chain):
            if candidate.context_window <= larger_than:
                continue
            if allow is not None and not allow(candidate, deployment):
                continue
            if not await self._breakers.allow(deployment.key):
                continue
            if trace.attempts and not await self._budget.try_spend():
                break  # a fallback is extra upstream load too
            left = sum(allow is None or allow(m, d) for m, d in chain[index + 1 :])
            try:
                return await self._on_deployment(
                    candidate, deployment, first, deadline, left, trace, once, settle
                )
            except ContextLengthExceeded as exc:
                error, larger_than = exc, candidate.context_window
            except ProviderError as exc:
                if not _moves_on(exc):
                    raise
                error = exc
        if error is not None:
            raise error
        raise NoDeployment(
            f"every deployment of '{model.name}' is unavailable (circuit open); try again shortly"
        )

    async def _on_deployment(
        self,
        model: Model,
        deployment: Deployment,
        first: Deployment,
        deadline: float,
        left: int,
        trace: Trace,
        once: Attempt[T],
        settle: Settle[T] | None,
    ) -> T:
        for retry in range(self._config.retry.max_attempts):
            try:
                return await self._attempt(model, deployment, first, deadline, left, trace, once, settle)
            except ProviderError as exc:
                if retry + 1 >= self._config.retry.max_attempts:
                    raise
                delay = await self._retry_delay(exc, deployment, deadline, retry)
                if delay is None:
                    raise
            trace.waiting_ms += delay * 1000
            await self._sleep(delay)
        raise AssertionError("max_attempts is at least 1")  # pragma: no cover

    async def _retry_delay(
        self, exc: ProviderError, deployment: Deployment, deadline: float, retry: int
    ) -> float | None:
        """How long to wait before retry number `retry` (from 0) on this deployment, or None when
        it must not be retried: not retryable, the wait would not fit, the breaker has just opened,
        or the gateway-wide retry budget is spent."""
        if not exc.retryable or isinstance(exc, ShareExceeded):
            return None
        delay = plan_delay(
            self._config.retry,
            retry=retry,
            retry_after=exc.retry_after,
            remaining=deadline - time.monotonic(),
            rand=self._rand,
        )
        if delay is None or await self._breakers.is_open(deployment.key):
            return None
        if not await self._budget.try_spend():
            return None
        return delay

    async def _leased(
        self,
        once: Attempt[T],
        adapter: Adapter,
        deployment: Deployment,
        started: int,
        settle: Settle[T] | None,
    ) -> T:
        """One call, counted against its replica while it runs when the model is fleet-served;
        `settle` (a stream) takes the lease over once the call has answered. A non-streamed answer
        feeds nothing back: its latency is its whole decode, not a time to first token, and its
        tokens over that latency would be a decode speed with the prefill and any queueing in it."""
        lease = self._fleets.lease(deployment) if self._fleets is not None else None
        if lease is None:
            return await once(adapter, deployment.target)
        try:
            result = await once(adapter, deployment.target)
        except BaseException:
            lease.release()
            raise
        if settle is None:
            lease.release()
            return result
        return await settle(result, lease, started)  # which releases it when it is done with it

    async def _attempt(
        self,
        model: Model,
        deployment: Deployment,
        first: Deployment,
        deadline: float,
        left: int,
        trace: Trace,
        once: Attempt[T],
        settle: Settle[T] | None,
    ) -> T:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded("the request's deadline passed before the upstream answered")
        bound = attempt_bound(remaining, left, self._config.attempt_floor_seconds)
        trace.begin(model, deployment, first=first)
        adapter = self._adapters[deployment.target.provider]
        started = time.perf_counter_ns()
        try:
            with self._tracing.attempt_span(deployment.key, trace.attempts):
                async with asyncio.timeout(bound):
                    try:
                        result = await self._leased(once, adapter, deployment, started, settle)
                    except ProviderError as exc:
                        # Scrubbed before anything sees it: the span records it on the way out.
                        raise self._redactor.provider_error(exc)  # noqa: B904 (the same exception)
        except TimeoutError:
            trace.waiting_ms += (time.perf_counter_ns() - started) / 1e6
            await self._breakers.record_failure(deployment.key)
            if bound < remaining:
                raise ShareExceeded(
                    f"no answer from {deployment.target.provider} within {bound:.3g}s, this attempt's "
                    "share of the request's deadline",
                    provider=deployment.target.provider,
                ) from None
            raise DeadlineExceeded(
                f"no answer from {deployment.target.provider} within the request's deadline"
            ) from None
        except ProviderError as exc:
            trace.waiting_ms += (time.perf_counter_ns() - started) / 1e6
            if exc.retryable or _moves_on(exc):
                await self._breakers.record_failure(deployment.key)
            raise
        trace.waiting_ms += (time.perf_counter_ns() - started) / 1e6
        await self._breakers.record_success(deployment.key)
        return result


def _check_serves(chat: ChatRequest, adapter: Adapter, target: Target) -> None:
    """A legacy completions request goes only where `/v1/completions` exists (OpenAI-compatible
    servers and vLLM): elsewhere a 400 that names the provider, before any network call."""
    if chat.legacy is not None and COMPLETIONS not in adapter.capabilities:
        raise UpstreamRejected(
            f"legacy completions (/v1/completions) are served only by OpenAI-compatible and vLLM "
            f"deployments; '{chat.model}' is served by provider '{target.provider}': use "
            "/v1/chat/completions",
            status=400,
            code="unsupported_endpoint",
        )


def attempt_bound(remaining: float, left: int, floor: float) -> float:
    """Seconds one attempt may take (for a stream: until its first chunk) when `left` deployments
    could still be tried after it: an even share, remaining / (left + 1), but never under `floor`
    nor over what remains. The last deployment gets all that remains."""
    if left <= 0:
        return remaining
    return min(remaining, max(floor, remaining / (left + 1)))


async def _held(stream: Stream, lease: Lease, started: int) -> Stream:
    """A fleet stream's settle: its TTFT is now (the first chunk is in); the replica stays leased
    until the stream ends (`fleets.hold`)."""
    try:
        lease.observe_ttft((time.perf_counter_ns() - started) / 1e6)
        return await hold(stream, lease)
    except BaseException:
        lease.release()
        await stream[1].aclose()
        raise


def _by_fleet(
    chain: list[tuple[Model, Deployment]], fleets: Fleets, prefix: str, *, spill: bool = True
) -> list[tuple[Model, Deployment]]:
    """Each fleet-served model's deployments in the fleet's order (or none, when it spills)."""
    ordered: list[tuple[Model, Deployment]] = []
    done: set[str] = set()
    for model, deployment in chain:
        if model.name in done:
            continue
        order = fleets.order(model, prefix, spill=spill)
        if order is None:
            ordered.append((model, deployment))
            continue
        done.add(model.name)
        ordered += [(model, d) for d in order]
    return ordered


def _moves_on(exc: ProviderError) -> bool:
    """Whether another deployment might succeed where this one failed.

    Retryable faults and a broken credential or missing model at one provider: yes. The request
    itself being wrong (bad parameter, content policy): no, it would fail everywhere.
    """
    return (
        exc.retryable
        or exc.code in ("upstream_auth_failed", "proxy_refused")  # proxy_refused: providers/streaming.py
        or exc.upstream_status == 404
    )

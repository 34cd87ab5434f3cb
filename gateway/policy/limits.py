"""Rate limits: requests and tokens per minute, per key and per team, as token buckets in the
`StateStore` (so replicas sharing Redis share them).

Tokens are counted up front from an estimate of the prompt, then corrected once the real usage is
known: a request that used more goes into debt that the next ones wait out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.errors import GatewayError
from gateway.state.store import GateResult, StateStore, Take


@dataclass(frozen=True, slots=True)
class Limit:
    """One bucket: `scope` names who it limits (`team:x`, `key:k`), `per_minute` how much."""

    scope: str
    unit: str  # "requests" or "tokens"
    per_minute: int

    @property
    def key(self) -> str:
        return f"rl:{self.scope}:{self.unit}"


@dataclass(slots=True)
class Admission:
    """What a request took, so the token count can be corrected after, and headers to send."""

    taken: list[tuple[Limit, int]] = field(default_factory=list)
    estimated_tokens: int = 0
    headers: dict[str, str] = field(default_factory=dict)


class RateLimited(GatewayError):
    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"

    def __init__(self, message: str, *, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.headers = headers


class RateLimits:
    def __init__(self, store: StateStore) -> None:
        self._store = store

    def takes(self, limits: list[Limit], *, estimated_tokens: int) -> list[Take]:
        """What each bucket is asked for: a request, or its estimated tokens."""
        tokens = max(1, estimated_tokens)
        return [
            Take(
                limit.key,
                float(limit.per_minute),
                limit.per_minute / 60.0,
                1 if limit.unit == "requests" else tokens,
            )
            for limit in limits
        ]

    def admitted(
        self, limits: list[Limit], takes: list[Take], result: GateResult, estimated_tokens: int
    ) -> Admission:
        """The headers every answer carries; `RateLimited` when a bucket was short (the store then
        took nothing: a refused request is free)."""
        admission = Admission(estimated_tokens=estimated_tokens)
        headers = admission.headers
        refused: Limit | None = None
        wait = 0.0
        for limit, take, bucket in zip(limits, takes, result.buckets, strict=True):
            _describe(headers, limit, bucket.remaining, take.refill_per_second)
            if not bucket.allowed:
                if refused is None:
                    refused = limit
                wait = max(wait, 60.0 if bucket.retry_after == float("inf") else bucket.retry_after)
            admission.taken.append((limit, int(take.amount)))
        if refused is not None:
            headers["retry-after"] = str(max(1, round(wait + 0.5)))
            raise RateLimited(
                f"rate limit reached for {refused.scope}: {refused.per_minute} {refused.unit} per minute",
                headers=headers,
            )
        return admission

    async def correct(self, corrections: list[Take]) -> None:
        """Charge (or give back) what `corrections` says the estimate missed, with no budget to
        settle beside it (a key with limits and no budget)."""
        await self._store.settle([], corrections)

    def corrections(self, admission: Admission, *, actual_tokens: int) -> list[Take]:
        """The forced takes that charge the token buckets what the estimate missed (or refund it)."""
        difference = actual_tokens - admission.estimated_tokens
        if difference == 0:
            return []
        return [
            Take(limit.key, float(limit.per_minute), limit.per_minute / 60.0, difference)
            for limit, _ in admission.taken
            if limit.unit == "tokens"
        ]


def _describe(headers: dict[str, str], limit: Limit, remaining: float, rate: float) -> None:
    """OpenAI's rate-limit headers; the tightest bucket of each unit wins."""
    name = f"x-ratelimit-remaining-{limit.unit}"
    left = max(0, int(remaining))
    if name in headers and int(headers[name]) <= left:
        return
    headers[f"x-ratelimit-limit-{limit.unit}"] = str(limit.per_minute)
    headers[name] = str(left)
    headers[f"x-ratelimit-reset-{limit.unit}"] = go_duration((limit.per_minute - max(0.0, remaining)) / rate)


def go_duration(seconds: float) -> str:
    """OpenAI writes resets as Go durations: `1s`, `6m0s`, `1h2m3s`; sub-second as `250ms`."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"

"""Rate limits: requests and tokens per minute, per key and per team, as token buckets in the
`StateStore` (so replicas sharing Redis share them).

Tokens are counted up front from an estimate of the prompt, then corrected once the real usage is
known: a request that used more goes into debt that the next ones wait out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.errors import GatewayError
from gateway.state.store import StateStore


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

    async def admit(self, limits: list[Limit], *, estimated_tokens: int) -> Admission:
        admission = Admission(estimated_tokens=estimated_tokens)
        for limit in limits:
            amount = 1 if limit.unit == "requests" else max(1, estimated_tokens)
            capacity = float(limit.per_minute)
            rate = capacity / 60.0
            result = await self._store.take(
                limit.key, capacity=capacity, refill_per_second=rate, amount=amount
            )
            _describe(admission.headers, limit, result.remaining, rate)
            if not result.allowed:
                await self._refund(admission)
                wait = result.retry_after if result.retry_after != float("inf") else 60.0
                admission.headers["retry-after"] = str(max(1, round(wait + 0.5)))
                raise RateLimited(
                    f"rate limit reached for {limit.scope}: {limit.per_minute} {limit.unit} per minute",
                    headers=admission.headers,
                )
            admission.taken.append((limit, amount))
        return admission

    async def correct(self, admission: Admission, *, actual_tokens: int) -> None:
        """Charge (or give back) the difference between the estimate and what was really used."""
        difference = actual_tokens - admission.estimated_tokens
        if difference == 0:
            return
        for limit, _ in admission.taken:
            if limit.unit == "tokens":
                await self._force(limit, difference)

    async def _refund(self, admission: Admission) -> None:
        """A later bucket said no: what earlier buckets gave goes back, so a refused request is free."""
        for limit, amount in admission.taken:
            await self._force(limit, -amount)

    async def _force(self, limit: Limit, amount: int) -> None:
        capacity = float(limit.per_minute)
        await self._store.take(
            limit.key, capacity=capacity, refill_per_second=capacity / 60.0, amount=amount, force=True
        )


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

"""Budgets under concurrency: reserve a request's largest possible cost before calling upstream,
settle the real cost after, release on failure. Reservations are atomic in the `StateStore` (a Lua
script on Redis), so 200 concurrent requests cannot together pass a budget: each one either fits
in what is left, its worst case counted, or is refused.

Counters start from the ledger's rollups the first time a period is seen (a restart or a new
replica does not forget what was spent today), and expire two periods later.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from gateway.errors import GatewayError
from gateway.state.store import StateStore

DAY = "day"
MONTH = "month"
_DAY_TTL = 3 * 86_400.0
_MONTH_TTL = 62 * 86_400.0
_RECHECK_SECONDS = 60.0


class BudgetExceeded(GatewayError):
    """Refused: another call would pass a hard budget. Not retryable, so the SDKs must not retry."""

    status = 429
    type = "insufficient_quota"
    code = "budget_exceeded"
    headers = {"x-should-retry": "false"}


@dataclass(frozen=True, slots=True)
class Budget:
    """One limit: whose (`team:x` or `key:k`), per day or month, how much, and hard or soft."""

    owner: str
    period: str
    limit_nano: int
    hard: bool = True


@dataclass(slots=True)
class Reservation:
    amount: int
    held: list[tuple[str, Budget]] = field(default_factory=list)
    # Soft budgets this request went past: the ledger row is flagged, the request still runs.
    exceeded_soft: list[str] = field(default_factory=list)


SpendLookup = Callable[[str, date, date], Awaitable[int]]


class Budgets:
    def __init__(
        self, store: StateStore, spent: SpendLookup, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._spent = spent
        self._clock = clock
        self._seeded: set[str] = set()
        self._rechecked: dict[str, float] = {}

    async def reserve(self, budgets: list[Budget], amount: int) -> Reservation:
        reservation = Reservation(amount=amount)
        for budget in budgets:
            key, ttl, fresh = await self._counter(budget)
            granted, total = await self._store.reserve(key, amount, limit=budget.limit_nano, ttl=ttl)
            if granted and total <= amount and not fresh:
                granted, total = await self._recount(budget, key, ttl, amount, total)
            if granted:
                reservation.held.append((key, budget))
                continue
            if not budget.hard:
                # Over a soft budget: count the spend anyway so reports are right, and flag it.
                await self._store.incr(key, amount, ttl=ttl)
                reservation.held.append((key, budget))
                reservation.exceeded_soft.append(f"{budget.owner}:{budget.period}")
                continue
            await self.release(reservation)
            raise BudgetExceeded(
                f"the {'daily' if budget.period == DAY else 'monthly'} budget of {budget.owner} is spent "
                f"({total / 1e9:.4f} of {budget.limit_nano / 1e9:.4f} USD, this request may cost up to "
                f"{amount / 1e9:.4f} USD)"
            )
        return reservation

    async def settle(self, reservation: Reservation, actual: int) -> None:
        """Replace the worst case with what the request really cost."""
        difference = actual - reservation.amount
        if difference:
            for key, _ in reservation.held:
                await self._store.incr(key, difference)
        reservation.held = []

    async def release(self, reservation: Reservation) -> None:
        """The request failed before it cost anything: give the whole reservation back."""
        for key, _ in reservation.held:
            await self._store.incr(key, -reservation.amount)
        reservation.held = []

    async def _recount(
        self, budget: Budget, key: str, ttl: float, amount: int, total: int
    ) -> tuple[bool, int]:
        """The counter was empty before this reservation although it was seeded: either nothing has
        been spent yet, or the store lost it (Redis restarted without persistence), which would
        otherwise hand the team its whole budget again. The ledger says which; asked at most once a
        minute per counter, so a team that only ever spends nothing costs no query per request."""
        now = self._clock()
        if now - self._rechecked.get(key, float("-inf")) < _RECHECK_SECONDS:
            return True, total
        self._rechecked[key] = now
        if len(self._rechecked) > 100_000:
            self._rechecked = {key: now}
        first, last = self._period(budget)
        spent = await self._spent(budget.owner, first, last)
        if spent <= 0:
            return True, total
        total = await self._store.incr(key, spent, ttl=ttl)
        if total <= budget.limit_nano:
            return True, total
        await self._store.incr(key, -amount)  # over the limit after all: this reservation is not held
        return False, total - amount

    def _period(self, budget: Budget) -> tuple[date, date]:
        today = datetime.fromtimestamp(self._clock(), UTC).date()
        return (today, today) if budget.period == DAY else (today.replace(day=1), today)

    async def _counter(self, budget: Budget) -> tuple[str, float, bool]:
        """The counter's key and TTL, seeded from the ledger the first time this process uses it
        (and whether that happened now)."""
        first, last = self._period(budget)
        if budget.period == DAY:
            key, ttl = f"budget:{budget.owner}:d:{first.isoformat()}", _DAY_TTL
        else:
            key, ttl = f"budget:{budget.owner}:m:{first:%Y-%m}", _MONTH_TTL
        if key in self._seeded:
            return key, ttl, False
        if await self._store.get(key) is None:
            spent = await self._spent(budget.owner, first, last)
            await self._store.set_if_absent(key, str(spent).encode(), ttl=ttl)
        self._seeded.add(key)
        if len(self._seeded) > 100_000:  # periods roll over; forget old ones
            self._seeded = {key}
        return key, ttl, True

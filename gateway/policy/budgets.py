"""Budgets under concurrency: reserve a request's largest possible cost before calling upstream,
settle the real cost after, release on failure. Reservations are atomic in the `StateStore` (a Lua
script on Redis), so 200 concurrent requests cannot together pass a budget: each one either fits
in what is left, its worst case counted, or is refused.

Counters start from the ledger's rollups the first time a period is seen (a restart or a new
replica does not forget what was spent today), and expire two periods later. When the shared store
comes back after an outage, or is found to have lost its data, every counter this replica uses is
raised to at least the ledger's spend (`resync`): what was spent meanwhile, counted only in each
replica's own memory, is not handed out again, whether Redis came back empty or with its data.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from gateway.errors import GatewayError
from gateway.state.store import GateResult, Hold, Settle, StateStore, Take

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
        # The counters this process has used, by key: what `resync` raises after an outage.
        self._known: dict[str, Budget] = {}
        # What this process holds on each counter right now (reserved, not yet settled).
        self._inflight: dict[str, int] = {}
        register = getattr(store, "on_recovery", None)  # a FallbackStateStore over Redis
        if callable(register):
            register(self.resync)

    async def resync(self, store: StateStore, lost: bool) -> None:
        """The shared store answers again (`store`), or lost its data: each current counter this
        replica knows goes up to the ledger's spend if it is below (never down). After a loss the
        rest are seeded again on first use. This replica's holds there are then set to what it has
        in flight: a hold made there whose settlement went to the fallback would stay counted for as
        long as this replica lives."""
        if lost:
            self._seeded.clear()
            self._rechecked.clear()
        for key, budget in list(self._known.items()):
            current, ttl = self._key(budget)
            if current != key:  # the period rolled over
                del self._known[key]
                continue
            first, last = self._period(budget)
            await store.raise_to(key, await self._spent(budget.owner, first, last), ttl=ttl)
        holds = dict.fromkeys(self._known, 0)
        holds.update(self._inflight)
        await store.set_holds(holds)

    async def reserve(self, budgets: list[Budget], amount: int) -> Reservation:
        reservation, _ = await self.admit(budgets, amount, [])
        assert reservation is not None  # no buckets asked: only a budget can refuse, and it raises
        return reservation

    async def admit(
        self, budgets: list[Budget], amount: int, takes: list[Take]
    ) -> tuple[Reservation | None, GateResult]:
        """Reserve `amount` on every budget and take the rate-limit `takes`, in one store call.
        None when a bucket was short (the caller says so; nothing was taken or held);
        `BudgetExceeded` when a hard budget is spent."""
        holds: list[Hold] = []
        fresh: list[bool] = []
        for budget in budgets:
            key, ttl, new = await self._counter(budget)
            holds.append(Hold(key, amount, budget.limit_nano, ttl, budget.hard))
            fresh.append(new)
        result = await self._store.admit(takes, holds)
        if not result.allowed:
            if not all(bucket.allowed for bucket in result.buckets):
                return None, result
            for budget, fits, total in zip(budgets, result.fits, result.totals, strict=True):
                if not fits and budget.hard:
                    raise _exceeded(budget, total, amount)
        reservation = Reservation(amount=amount)
        for i, (budget, hold) in enumerate(zip(budgets, holds, strict=True)):
            reservation.held.append((hold.key, budget))
            self._inflight[hold.key] = self._inflight.get(hold.key, 0) + amount
            fits, total = result.fits[i], result.totals[i]
            if fits and total == 0 and not fresh[i]:
                fits, total = await self._recount(budget, hold.key, hold.ttl or 0.0, amount)
                if not fits and budget.hard:
                    await self.release(reservation, refunds(takes))
                    raise _exceeded(budget, total, amount)
            if not fits:
                # Over a soft budget: held (so reports count it) and flagged; the request still runs.
                reservation.exceeded_soft.append(f"{budget.owner}:{budget.period}")
        return reservation, result

    async def settle(
        self, reservation: Reservation, actual: int, corrections: list[Take] | None = None
    ) -> None:
        """Replace the worst case with what the request really cost (and correct the token buckets,
        in the same store call)."""
        await self._store.settle(self._settles(reservation, actual), corrections or [])

    async def release(self, reservation: Reservation, corrections: list[Take] | None = None) -> None:
        """The request failed before it cost anything: give the whole reservation back."""
        await self._store.settle(self._settles(reservation, 0), corrections or [])

    def _settles(self, reservation: Reservation, actual: int) -> list[Settle]:
        amount = reservation.amount
        settles = []
        for key, budget in reservation.held:
            settles.append(Settle(key, amount, actual, _DAY_TTL if budget.period == DAY else _MONTH_TTL))
            left = self._inflight.pop(key, 0) - amount
            if left > 0:
                self._inflight[key] = left
        reservation.held = []
        return settles

    async def _recount(self, budget: Budget, key: str, ttl: float, amount: int) -> tuple[bool, int]:
        """Nothing was counted on the counter before this reservation although it was seeded:
        either nothing has been spent yet, or the store lost it (Redis restarted without
        persistence), which would otherwise hand the team its whole budget again. The ledger says
        which; asked at most once a minute per counter, so a team that only ever spends nothing
        costs no query per request. Returns whether the reservation fits, and the spend before it."""
        now = self._clock()
        if now - self._rechecked.get(key, float("-inf")) < _RECHECK_SECONDS:
            return True, 0
        self._rechecked[key] = now
        if len(self._rechecked) > 100_000:
            self._rechecked = {key: now}
        first, last = self._period(budget)
        spent = await self._spent(budget.owner, first, last)
        if spent <= 0:
            return True, 0
        settled = await self._store.incr(key, spent, ttl=ttl)
        return settled + amount <= budget.limit_nano, settled

    def _period(self, budget: Budget) -> tuple[date, date]:
        today = datetime.fromtimestamp(self._clock(), UTC).date()
        return (today, today) if budget.period == DAY else (today.replace(day=1), today)

    async def _counter(self, budget: Budget) -> tuple[str, float, bool]:
        """The counter's key and TTL, seeded from the ledger the first time this process uses it
        (and whether that happened now)."""
        key, ttl = self._key(budget)
        if key in self._seeded:
            return key, ttl, False
        if await self._store.get(key) is None:
            first, last = self._period(budget)
            spent = await self._spent(budget.owner, first, last)
            await self._store.set_if_absent(key, str(spent).encode(), ttl=ttl)
        self._seeded.add(key)
        self._known[key] = budget
        if len(self._seeded) > 100_000:  # periods roll over; forget old ones
            self._seeded = {key}
            self._known = {key: budget}
        return key, ttl, True

    def _key(self, budget: Budget) -> tuple[str, float]:
        first, _ = self._period(budget)
        if budget.period == DAY:
            return f"budget:{budget.owner}:d:{first.isoformat()}", _DAY_TTL
        return f"budget:{budget.owner}:m:{first:%Y-%m}", _MONTH_TTL


def _exceeded(budget: Budget, total: int, amount: int) -> BudgetExceeded:
    return BudgetExceeded(
        f"the {'daily' if budget.period == DAY else 'monthly'} budget of {budget.owner} is spent "
        f"({total / 1e9:.4f} of {budget.limit_nano / 1e9:.4f} USD, this request may cost up to "
        f"{amount / 1e9:.4f} USD)"
    )


def refunds(takes: list[Take]) -> list[Take]:
    """The takes given back: a request refused after its buckets were charged is free."""
    return [Take(t.key, t.capacity, t.refill_per_second, -t.amount) for t in takes]

"""The `StateStore` protocol: the few atomic operations that rate limits, budgets, circuit breakers,
idempotency keys and the response cache are built from.

Every operation is atomic on its own (a Lua script on Redis), so replicas sharing a store never
race each other into overshooting a limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class BucketResult:
    """The outcome of taking tokens from a token bucket."""

    allowed: bool
    remaining: float
    # Seconds until `amount` tokens will be available (0 when allowed).
    retry_after: float


@dataclass(frozen=True, slots=True)
class Take:
    """One token-bucket take of a gate call (or, in a settlement, a forced correction)."""

    key: str
    capacity: float
    refill_per_second: float
    amount: float


@dataclass(frozen=True, slots=True)
class Hold:
    """One budget reservation of a gate call: `amount` held against `limit` on the counter `key`
    (the counter holds settled spend; holds live beside it, per replica, and lapse with it)."""

    key: str
    amount: int
    limit: int
    ttl: float | None
    hard: bool = True


@dataclass(frozen=True, slots=True)
class Settle:
    """Give back a hold of `held` and count `cost` on the counter instead."""

    key: str
    held: int
    cost: int
    ttl: float | None


@dataclass(frozen=True, slots=True)
class GateResult:
    """What one `admit` found. `allowed`: every bucket had its tokens and every hard budget its
    room, and all were taken and held; otherwise nothing at all was changed."""

    allowed: bool
    buckets: list[BucketResult]
    # Per hold: whether it fits, and the spend counted before it (settled plus live holds).
    fits: list[bool]
    totals: list[int]


class StateStore(Protocol):
    async def get(self, key: str) -> bytes | None: ...

    async def get_many(self, keys: list[str]) -> list[bytes | None]: ...

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None: ...

    async def set_if_absent(self, key: str, value: bytes, *, ttl: float | None = None) -> bool:
        """Claim a key; True when this caller created it."""
        ...

    async def delete(self, key: str) -> None: ...

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        """Add to an integer counter (created at 0); `ttl` is set only when the key is created."""
        ...

    async def reserve(
        self, key: str, amount: int, *, limit: int, ttl: float | None = None
    ) -> tuple[bool, int]:
        """Add `amount` only if the total stays within `limit`; returns (reserved, total after)."""
        ...

    async def raise_to(self, key: str, floor: int, *, ttl: float | None = None) -> int:
        """Raise an integer counter to at least `floor` (created at `floor`, `ttl` then); returns
        the value after. Never lowers it: the recount after an outage can only add what was missed."""
        ...

    async def take(
        self, key: str, *, capacity: float, refill_per_second: float, amount: float = 1.0, force: bool = False
    ) -> BucketResult:
        """Take `amount` tokens from a bucket that refills continuously up to `capacity`.

        `force` takes them even if that leaves the bucket in debt (a correction after the fact:
        a request used more tokens than estimated); a negative amount gives tokens back.
        """
        ...

    async def admit(self, takes: list[Take], holds: list[Hold]) -> GateResult:
        """Every rate-limit take and budget hold of one request, atomically, in one round trip:
        all of them, or (a bucket short, a hard budget full) none. A soft budget past its limit is
        held anyway (the caller flags it). Holds are this replica's: if it dies, they lapse within
        seconds instead of staying counted until the period rolls over."""
        ...

    async def settle(self, settles: list[Settle], corrections: list[Take]) -> None:
        """After the answer, in one round trip: each hold replaced by what the request cost, and
        each bucket corrected by force (`Take.amount` may be negative: tokens given back)."""
        ...

    async def set_holds(self, holds: dict[str, int]) -> None:
        """Set this replica's holds on these counters to what it knows is in flight (after an
        outage, holds made or settled on the fallback are squared with the shared store)."""
        ...

    async def ping(self) -> None: ...

    async def aclose(self) -> None: ...

"""The embedded default `StateStore`: one process, a dict with expiry, no I/O on the hot path."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from gateway.state.store import BucketResult, GateResult, Hold, Settle, Take


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


@dataclass(slots=True)
class _Entry:
    value: bytes | int | _Bucket
    expires: float | None  # time.monotonic() deadline


class MemoryStateStore:
    """Bounded: past `max_keys` the least recently written keys are dropped first."""

    def __init__(self, *, max_keys: int = 1_000_000) -> None:
        self._data: OrderedDict[str, _Entry] = OrderedDict()
        self._max_keys = max_keys
        # Budget holds in flight, by counter key (one process: they end with it, nothing to expire).
        self._holds: dict[str, int] = {}

    def _live(self, key: str) -> _Entry | None:
        entry = self._data.get(key)
        if entry is not None and entry.expires is not None and entry.expires <= time.monotonic():
            del self._data[key]
            return None
        return entry

    def _put(self, key: str, value: bytes | int | _Bucket, ttl: float | None) -> None:
        self._data[key] = _Entry(value, None if ttl is None else time.monotonic() + ttl)
        self._data.move_to_end(key)
        while len(self._data) > self._max_keys:
            self._data.popitem(last=False)

    def _int(self, key: str) -> tuple[int, _Entry | None]:
        entry = self._live(key)
        if entry is None:
            return 0, None
        value = entry.value
        return (value if isinstance(value, int) else int(value) if isinstance(value, bytes) else 0), entry

    async def get(self, key: str) -> bytes | None:
        entry = self._live(key)
        if entry is None or isinstance(entry.value, _Bucket):
            return None
        return entry.value if isinstance(entry.value, bytes) else str(entry.value).encode()

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        return [await self.get(key) for key in keys]

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        self._put(key, value, ttl)

    async def set_if_absent(self, key: str, value: bytes, *, ttl: float | None = None) -> bool:
        if self._live(key) is not None:
            return False
        self._put(key, value, ttl)
        return True

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        current, entry = self._int(key)
        if entry is None:
            self._put(key, amount, ttl)
        else:
            entry.value = current + amount
        return current + amount

    async def reserve(
        self, key: str, amount: int, *, limit: int, ttl: float | None = None
    ) -> tuple[bool, int]:
        current, entry = self._int(key)
        if current + amount > limit:
            return False, current
        if entry is None:
            self._put(key, amount, ttl)
        else:
            entry.value = current + amount
        return True, current + amount

    async def raise_to(self, key: str, floor: int, *, ttl: float | None = None) -> int:
        current, entry = self._int(key)
        if entry is None:
            self._put(key, floor, ttl)
            return floor
        if current < floor:
            entry.value = floor
        return max(current, floor)

    async def take(
        self, key: str, *, capacity: float, refill_per_second: float, amount: float = 1.0, force: bool = False
    ) -> BucketResult:
        now = time.monotonic()
        entry = self._live(key)
        bucket = (
            entry.value if entry is not None and isinstance(entry.value, _Bucket) else _Bucket(capacity, now)
        )
        bucket.tokens = min(capacity, bucket.tokens + (now - bucket.stamp) * refill_per_second)
        bucket.stamp = now
        allowed = bucket.tokens >= amount
        if allowed or force:
            bucket.tokens = min(capacity, bucket.tokens - amount)
        # An idle bucket is full again after capacity / rate seconds; keep it no longer than that.
        self._put(key, bucket, capacity / refill_per_second + 1.0 if refill_per_second > 0 else None)
        wait = 0.0
        if not allowed:
            wait = float("inf") if refill_per_second <= 0 else (amount - bucket.tokens) / refill_per_second
        return BucketResult(allowed=allowed, remaining=bucket.tokens, retry_after=wait)

    def _refilled(self, key: str, capacity: float, rate: float, now: float) -> _Bucket:
        entry = self._live(key)
        bucket = (
            entry.value if entry is not None and isinstance(entry.value, _Bucket) else _Bucket(capacity, now)
        )
        return _Bucket(min(capacity, bucket.tokens + (now - bucket.stamp) * rate), now)

    def _keep(self, key: str, bucket: _Bucket, capacity: float, rate: float) -> None:
        self._put(key, bucket, capacity / rate + 1.0 if rate > 0 else None)

    async def admit(self, takes: list[Take], holds: list[Hold]) -> GateResult:
        now = time.monotonic()
        buckets = [self._refilled(t.key, t.capacity, t.refill_per_second, now) for t in takes]
        allowed = all(b.tokens >= t.amount for b, t in zip(buckets, takes, strict=True))
        totals = [self._int(h.key)[0] + self._holds.get(h.key, 0) for h in holds]
        fits = [total + h.amount <= h.limit for total, h in zip(totals, holds, strict=True)]
        allowed = allowed and all(ok or not h.hard for ok, h in zip(fits, holds, strict=True))
        results = []
        for bucket, take in zip(buckets, takes, strict=True):
            if allowed:
                bucket.tokens = min(take.capacity, bucket.tokens - take.amount)
                self._keep(take.key, bucket, take.capacity, take.refill_per_second)
            results.append(_result(bucket.tokens, take, allowed or bucket.tokens >= take.amount))
        if allowed:
            for hold in holds:
                self._holds[hold.key] = self._holds.get(hold.key, 0) + hold.amount
        return GateResult(allowed=allowed, buckets=results, fits=fits, totals=totals)

    async def settle(self, settles: list[Settle], corrections: list[Take]) -> None:
        for s in settles:
            left = self._holds.pop(s.key, 0) - s.held
            if left > 0:
                self._holds[s.key] = left
            if s.cost:
                await self.incr(s.key, s.cost, ttl=s.ttl)
        for c in corrections:
            await self.take(
                c.key, capacity=c.capacity, refill_per_second=c.refill_per_second, amount=c.amount, force=True
            )

    async def set_holds(self, holds: dict[str, int]) -> None:
        for key, amount in holds.items():
            if amount > 0:
                self._holds[key] = amount
            else:
                self._holds.pop(key, None)

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        self._data.clear()
        self._holds.clear()


def _result(tokens: float, take: Take, allowed: bool) -> BucketResult:
    wait = 0.0
    if not allowed:
        rate = take.refill_per_second
        wait = float("inf") if rate <= 0 else (take.amount - tokens) / rate
    return BucketResult(allowed=allowed, remaining=tokens, retry_after=wait)

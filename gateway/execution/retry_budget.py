"""The gateway-wide retry budget: retries and fallbacks stay within a share of recent traffic, so a
failing upstream sees bounded extra load instead of a retry storm (Finagle's RetryBudget)."""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.config.schema import RetryConfig
from gateway.state.store import StateStore

_BUCKETS = 5
# Requests are counted here and added to the shared counter at most this often (and always before
# a retry is judged), not one store round trip per request: other replicas see this one's traffic up
# to this late, in a window of several seconds.
_FLUSH_SECONDS = 0.5


class RetryBudget:
    def __init__(
        self, store: StateStore, config: RetryConfig, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._ratio = config.budget_ratio
        self._floor = config.budget_min_per_second * config.budget_window_seconds
        self._bucket_seconds = config.budget_window_seconds / _BUCKETS
        self._ttl = config.budget_window_seconds * 2
        self._clock = clock
        self._pending = 0
        self._pending_bucket = 0
        self._flushed_at = 0.0

    def _bucket(self) -> int:
        return int(self._clock() / self._bucket_seconds)

    async def record_request(self) -> None:
        bucket = self._bucket()
        if bucket != self._pending_bucket:
            await self._flush()
            self._pending_bucket = bucket
        self._pending += 1
        if self._clock() - self._flushed_at >= _FLUSH_SECONDS:
            await self._flush()

    async def _flush(self) -> None:
        self._flushed_at = self._clock()
        if self._pending:
            count, self._pending = self._pending, 0
            await self._store.incr(f"rb:req:{self._pending_bucket}", count, ttl=self._ttl)

    async def try_spend(self) -> bool:
        """Take one retry from the budget; False when the window has used its share."""
        await self._flush()
        now = self._bucket()
        window = [now - i for i in range(_BUCKETS)]
        counts = await self._store.get_many([f"rb:req:{b}" for b in window])
        spent = await self._store.get_many([f"rb:retry:{b}" for b in window[1:]])
        requests = sum(int(c) for c in counts if c is not None)
        earlier = sum(int(c) for c in spent if c is not None)
        allowed = int(self._ratio * requests + self._floor) - earlier
        if allowed <= 0:
            return False
        granted, _ = await self._store.reserve(f"rb:retry:{now}", 1, limit=allowed, ttl=self._ttl)
        return granted

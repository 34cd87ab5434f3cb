"""The gateway-wide retry budget: retries and fallbacks stay within a share of recent traffic, so a
failing upstream sees bounded extra load instead of a retry storm (Finagle's RetryBudget)."""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.config import RetryConfig
from gateway.state.store import StateStore

_BUCKETS = 5


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

    def _bucket(self) -> int:
        return int(self._clock() / self._bucket_seconds)

    async def record_request(self) -> None:
        await self._store.incr(f"rb:req:{self._bucket()}", ttl=self._ttl)

    async def try_spend(self) -> bool:
        """Take one retry from the budget; False when the window has used its share."""
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

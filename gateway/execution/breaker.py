"""Circuit breakers per deployment, in the `StateStore` so replicas sharing Redis share them.

Closed → open after `consecutive_failures` in a row, or an error rate over `error_rate` with at
least `min_requests` in the window. Open → half-open after `cooldown_seconds`: one probe at a time
goes through; its success closes the breaker, its failure opens it for another cooldown.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.config.schema import BreakerConfig
from gateway.state.store import StateStore

_BUCKETS = 6
# A breaker this process has just seen closed is trusted closed for this long without asking the
# store again: with Redis that is one round trip (~0.2 ms of CPU) saved on nearly every request, for
# at most this much delay before a breaker another replica opened stops this one's traffic too.
_TRUST_CLOSED_SECONDS = 0.25
# Likewise successes on a breaker trusted closed are counted here and written at most this often
# (and at once before a failure is judged, and for a half-open probe).
_FLUSH_SECONDS = 0.5


class CircuitBreakers:
    def __init__(
        self, store: StateStore, config: BreakerConfig, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._config = config
        self._bucket_seconds = config.window_seconds / _BUCKETS
        self._clock = clock
        self._closed_until: dict[str, float] = {}
        self._successes: dict[str, tuple[int, int]] = {}  # key -> (bucket, count) not yet stored
        self._flushed_at: dict[str, float] = {}

    def _bucket(self) -> int:
        return int(self._clock() / self._bucket_seconds)

    async def allow(self, key: str) -> bool:
        now = self._clock()
        if self._closed_until.get(key, 0.0) > now:
            return True
        opened = await self._store.get(f"cb:{key}:open")
        if opened is None:
            self._closed_until[key] = now + _TRUST_CLOSED_SECONDS
            return True
        if float(opened) > self._clock():
            return False
        # Cooled down: half-open. Exactly one caller wins the probe until it reports back.
        return await self._store.set_if_absent(f"cb:{key}:probe", b"1", ttl=self._config.cooldown_seconds)

    async def is_open(self, key: str) -> bool:
        opened = await self._store.get(f"cb:{key}:open")
        return opened is not None and float(opened) > self._clock()

    async def record_success(self, key: str) -> None:
        bucket, now = self._bucket(), self._clock()
        pending_bucket, count = self._successes.get(key, (bucket, 0))
        if pending_bucket != bucket:
            await self._flush(key)
            count = 0
        self._successes[key] = (bucket, count + 1)
        trusted = self._closed_until.get(key, 0.0) > now
        if trusted and now - self._flushed_at.get(key, 0.0) < _FLUSH_SECONDS:
            return
        await self._flush(key)

    async def _flush(self, key: str) -> None:
        """Successes into the window's counts; and a success resets the failure streak and closes a
        half-open breaker."""
        self._flushed_at[key] = self._clock()
        bucket, count = self._successes.pop(key, (0, 0))
        if count:
            await self._store.incr(f"cb:{key}:req:{bucket}", count, ttl=self._config.window_seconds * 2)
        consecutive, opened = await self._store.get_many([f"cb:{key}:consec", f"cb:{key}:open"])
        if consecutive is not None:
            await self._store.delete(f"cb:{key}:consec")
        if opened is not None:
            await self._store.delete(f"cb:{key}:open")
            await self._store.delete(f"cb:{key}:probe")

    async def record_failure(self, key: str) -> None:
        self._closed_until.pop(key, None)
        if key in self._successes:
            await self._flush(key)  # the successes before this failure count in its error rate
        config = self._config
        ttl = config.window_seconds * 2
        bucket = self._bucket()
        consecutive = await self._store.incr(f"cb:{key}:consec", ttl=ttl)
        await self._store.incr(f"cb:{key}:req:{bucket}", ttl=ttl)
        await self._store.incr(f"cb:{key}:fail:{bucket}", ttl=ttl)
        half_open = await self._store.get(f"cb:{key}:probe") is not None
        if (
            half_open
            or consecutive >= config.consecutive_failures
            or await self._error_rate_tripped(key, bucket)
        ):
            await self._open(key)

    async def _error_rate_tripped(self, key: str, bucket: int) -> bool:
        window = [bucket - i for i in range(_BUCKETS)]
        requests = await self._store.get_many([f"cb:{key}:req:{b}" for b in window])
        failures = await self._store.get_many([f"cb:{key}:fail:{b}" for b in window])
        total = sum(int(v) for v in requests if v is not None)
        failed = sum(int(v) for v in failures if v is not None)
        return total >= self._config.min_requests and failed / total >= self._config.error_rate

    async def _open(self, key: str) -> None:
        until = self._clock() + self._config.cooldown_seconds
        # Kept well past the cooldown so the half-open state is remembered until a probe succeeds.
        await self._store.set(f"cb:{key}:open", repr(until).encode(), ttl=self._config.cooldown_seconds * 20)
        await self._store.delete(f"cb:{key}:probe")

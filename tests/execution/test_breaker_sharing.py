"""Breakers shared through the store: a replica that just saw a breaker closed trusts that for a
quarter of a second instead of asking the store on every request, and no longer."""

from __future__ import annotations

from gateway.config.schema import BreakerConfig
from gateway.execution.breaker import CircuitBreakers
from gateway.state.memory import MemoryStateStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class CountingStore(MemoryStateStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, key: str) -> bytes | None:
        self.gets += 1
        return await super().get(key)


async def test_a_breaker_another_replica_opened_stops_traffic_here_within_a_quarter_second() -> None:
    store, clock = CountingStore(), Clock()
    config = BreakerConfig(consecutive_failures=2)
    here = CircuitBreakers(store, config, clock=clock)
    there = CircuitBreakers(store, config, clock=clock)

    assert await here.allow("p/m")
    reads = store.gets
    assert await here.allow("p/m") and await here.allow("p/m")
    assert store.gets == reads, "a breaker just seen closed is not read again"

    await there.record_failure("p/m")
    await there.record_failure("p/m")
    assert not await there.allow("p/m"), "open where the failures were seen"
    assert await here.allow("p/m"), "still trusted closed here for a moment"
    clock.now += 0.3
    assert not await here.allow("p/m"), "and then open here too"


async def test_a_failure_seen_here_is_acted_on_at_once() -> None:
    store, clock = MemoryStateStore(), Clock()
    breakers = CircuitBreakers(store, BreakerConfig(consecutive_failures=1), clock=clock)
    assert await breakers.allow("p/m")
    await breakers.record_failure("p/m")
    assert not await breakers.allow("p/m")


class CountingIncrs(MemoryStateStore):
    def __init__(self) -> None:
        super().__init__()
        self.incrs = 0

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        self.incrs += 1
        return await super().incr(key, amount, ttl=ttl)


async def test_successes_are_counted_in_batches_yet_all_counted() -> None:
    store, clock = CountingIncrs(), Clock()
    config = BreakerConfig(consecutive_failures=3, min_requests=1000)
    breakers = CircuitBreakers(store, config, clock=clock)
    assert await breakers.allow("p/m")
    for _ in range(100):
        await breakers.record_success("p/m")
    assert store.incrs <= 2, "not one store write per success"
    await breakers.record_failure("p/m")  # flushes what was pending before judging the error rate
    bucket = int(clock.now / (config.window_seconds / 6))
    assert int(await store.get(f"cb:p/m:req:{bucket}") or 0) == 101


async def test_a_success_right_after_failures_ends_the_streak_at_once() -> None:
    store, clock = MemoryStateStore(), Clock()
    breakers = CircuitBreakers(store, BreakerConfig(consecutive_failures=3), clock=clock)
    assert await breakers.allow("p/m")
    await breakers.record_success("p/m")
    await breakers.record_failure("p/m")
    assert await breakers.allow("p/m")
    await breakers.record_success("p/m")
    await breakers.record_failure("p/m")
    await breakers.record_failure("p/m")
    assert await breakers.allow("p/m")
    await breakers.record_success("p/m")
    await breakers.record_failure("p/m")
    await breakers.record_failure("p/m")
    assert await breakers.allow("p/m"), "two in a row since the success, not four"

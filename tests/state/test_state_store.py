"""One conformance suite for every `StateStore`: in-process memory and the real Redis on this machine."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from gateway.state.memory import MemoryStateStore
from gateway.state.redis_store import RedisStateStore
from gateway.state.store import StateStore
from tests.services import require_redis


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[StateStore]:
    if request.param == "memory":
        memory = MemoryStateStore()
        yield memory
        return
    url = require_redis()
    redis_store = RedisStateStore.from_url(url, prefix=f"tollgate-test:{uuid.uuid4().hex}:")
    try:
        yield redis_store
    finally:
        await redis_store.aclose()


async def test_get_set_delete_and_ttl(store: StateStore) -> None:
    assert await store.get("a") is None
    await store.set("a", b"1")
    await store.set("b", b"2", ttl=0.05)
    assert await store.get_many(["a", "b", "c"]) == [b"1", b"2", None]
    await asyncio.sleep(0.08)
    assert await store.get("b") is None
    await store.delete("a")
    assert await store.get("a") is None


async def test_set_if_absent_claims_once(store: StateStore) -> None:
    results = await asyncio.gather(*(store.set_if_absent("claim", str(i).encode(), ttl=5) for i in range(20)))
    assert results.count(True) == 1


async def test_incr_counts_and_sets_ttl_only_on_creation(store: StateStore) -> None:
    assert await store.incr("n", 5, ttl=0.1) == 5
    assert await store.incr("n", -2, ttl=100) == 3
    assert await store.get("n") == b"3"
    await asyncio.sleep(0.15)
    assert await store.incr("n") == 1


async def test_reserve_never_overshoots_under_concurrency(store: StateStore) -> None:
    outcomes = await asyncio.gather(*(store.reserve("budget", 7, limit=100) for _ in range(50)))
    granted = [total for ok, total in outcomes if ok]
    assert len(granted) == 14  # 14 x 7 = 98 <= 100 < 105
    assert max(granted) == 98
    assert await store.incr("budget", -7) == 91  # releasing a reservation


async def test_token_bucket_limits_and_refills(store: StateStore) -> None:
    results = [await store.take("rpm", capacity=5, refill_per_second=10) for _ in range(7)]
    assert [r.allowed for r in results] == [True] * 5 + [False] * 2
    assert results[-1].retry_after == pytest.approx(0.1, abs=0.05)
    await asyncio.sleep(0.25)
    assert (await store.take("rpm", capacity=5, refill_per_second=10, amount=2)).allowed
    big = await store.take("rpm", capacity=5, refill_per_second=10, amount=50)
    assert not big.allowed and big.retry_after > 4


async def test_forced_take_goes_into_debt_and_refunds_give_back(store: StateStore) -> None:
    assert (await store.take("tpm", capacity=100, refill_per_second=0.001, amount=90)).allowed
    forced = await store.take("tpm", capacity=100, refill_per_second=0.001, amount=50, force=True)
    assert not forced.allowed and forced.remaining == pytest.approx(-40, abs=0.5)
    assert not (await store.take("tpm", capacity=100, refill_per_second=0.001, amount=1)).allowed
    refund = await store.take("tpm", capacity=100, refill_per_second=0.001, amount=-60, force=True)
    assert refund.remaining == pytest.approx(20, abs=0.5)


async def test_raise_to_only_ever_raises(store: StateStore) -> None:
    assert await store.raise_to("spent", 50, ttl=0.1) == 50  # created at the floor
    assert await store.raise_to("spent", 30) == 50  # never lowered
    assert await store.incr("spent", 5) == 55
    assert await store.raise_to("spent", 80) == 80
    await asyncio.sleep(0.15)
    assert await store.get("spent") is None, "raising it kept the TTL it was created with"

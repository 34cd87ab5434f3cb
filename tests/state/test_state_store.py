"""One conformance suite for every `StateStore`: in-process memory and the real Redis on this machine."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from gateway.state.memory import MemoryStateStore
from gateway.state.redis_store import RedisStateStore
from gateway.state.store import Hold, Settle, StateStore, Take
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


RPM = Take("rl:team:a:requests", capacity=3, refill_per_second=0.001, amount=1)


def hold(amount: int, *, limit: int = 100, hard: bool = True) -> Hold:
    return Hold("budget:a", amount, limit, ttl=60, hard=hard)


async def test_admit_takes_and_holds_all_or_nothing(store: StateStore) -> None:
    first = await store.admit([RPM], [hold(60)])
    assert first.allowed and first.fits == [True] and first.totals == [0]
    assert first.buckets[0].remaining == pytest.approx(2, abs=0.01)
    # The budget is short: the bucket keeps its token, the counter its value.
    refused = await store.admit([RPM], [hold(50)])
    assert not refused.allowed and refused.fits == [False] and refused.totals == [60]
    assert refused.buckets[0].allowed
    again = await store.admit([RPM], [hold(40)])
    assert again.allowed and again.buckets[0].remaining == pytest.approx(1, abs=0.01)
    assert again.totals == [60]
    # Settled: the holds are replaced by the costs; the counter holds the settled spend only.
    await store.settle([Settle("budget:a", 60, 10, ttl=60), Settle("budget:a", 40, 5, ttl=60)], [])
    assert await store.get("budget:a") == b"15"
    settled = await store.admit([], [hold(85)])
    assert settled.allowed and settled.totals == [15]


async def test_a_short_bucket_holds_nothing(store: StateStore) -> None:
    for _ in range(3):
        assert (await store.admit([RPM], [])).allowed
    refused = await store.admit([RPM], [hold(10)])
    assert not refused.allowed and not refused.buckets[0].allowed and refused.fits == [True]
    assert refused.buckets[0].retry_after > 0
    assert (await store.admit([], [hold(100)])).allowed, "the refused request held no budget"


async def test_a_soft_budget_past_its_limit_is_held_and_reported(store: StateStore) -> None:
    assert (await store.admit([], [hold(90, hard=False)])).allowed
    over = await store.admit([], [hold(20, hard=False)])
    assert over.allowed and over.fits == [False] and over.totals == [90]
    assert (await store.admit([], [hold(1)])).totals == [110]


async def test_admit_never_overshoots_a_budget_or_a_bucket_under_concurrency(store: StateStore) -> None:
    bucket = Take("rl:c:requests", capacity=10, refill_per_second=0.001, amount=1)
    outcomes = await asyncio.gather(*(store.admit([bucket], [hold(7)]) for _ in range(50)))
    assert sum(o.allowed for o in outcomes) == 10  # the bucket's 10, not the budget's 14
    outcomes = await asyncio.gather(*(store.admit([], [hold(7)]) for _ in range(50)))
    assert sum(o.allowed for o in outcomes) == 4  # 14 x 7 <= 100 in all


async def test_settle_corrects_buckets_by_force(store: StateStore) -> None:
    tpm = Take("rl:t:tokens", capacity=100, refill_per_second=0.001, amount=60)
    assert (await store.admit([tpm], [])).allowed
    await store.settle([], [Take(tpm.key, 100, 0.001, 70)])  # used 70 more than estimated: in debt
    assert not (await store.admit([Take(tpm.key, 100, 0.001, 1)], [])).allowed
    await store.settle([], [Take(tpm.key, 100, 0.001, -80)])
    assert (await store.admit([Take(tpm.key, 100, 0.001, 50)], [])).allowed


async def test_set_holds_squares_this_replicas_holds(store: StateStore) -> None:
    assert (await store.admit([], [hold(70)])).allowed
    await store.set_holds({"budget:a": 0})  # its settlement went elsewhere meanwhile
    assert (await store.admit([], [hold(100)])).allowed


@pytest.mark.redis
async def test_a_dead_replicas_holds_lapse_and_a_live_ones_do_not() -> None:
    url = require_redis()
    prefix = f"tollgate-test:{uuid.uuid4().hex}:"
    doomed = RedisStateStore.from_url(url, prefix=prefix, hold_ttl=0.4)
    alive = RedisStateStore.from_url(url, prefix=prefix, hold_ttl=0.4)
    try:
        assert (await doomed.admit([], [hold(60)])).allowed
        assert (await alive.admit([], [hold(30)])).allowed
        assert not (await alive.admit([], [hold(20)])).allowed
        assert doomed._heart is not None
        doomed._heart.cancel()  # killed: it beats no more, and never settles
        await asyncio.sleep(0.8)
        # The live replica's hold (its heartbeat kept it) still counts; the dead one's does not.
        survivor = await alive.admit([], [hold(20)])
        assert survivor.allowed and survivor.totals == [30]
    finally:
        await doomed.aclose()
        await alive.aclose()


@pytest.mark.redis
async def test_two_replicas_hold_one_budget_and_one_rpm_exactly() -> None:
    url = require_redis()
    prefix = f"tollgate-test:{uuid.uuid4().hex}:"
    a, b = RedisStateStore.from_url(url, prefix=prefix), RedisStateStore.from_url(url, prefix=prefix)
    try:
        rpm = Take("rl:team:x:requests", capacity=30, refill_per_second=0.001, amount=1)
        calls = [s.admit([rpm], [Hold("budget:x", 7, 100, ttl=60)]) for s in (a, b) for _ in range(40)]
        outcomes = await asyncio.gather(*calls)
        assert sum(o.allowed for o in outcomes) == 14
        calls = [s.admit([rpm], []) for s in (a, b) for _ in range(20)]
        assert sum(o.allowed for o in await asyncio.gather(*calls)) == 30 - 14
    finally:
        await a.aclose()
        await b.aclose()

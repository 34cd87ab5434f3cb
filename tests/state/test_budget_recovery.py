"""[reliability-2] part 2: budgets across a Redis outage and its return, on a redis-server of the
test's own. Whether Redis comes back empty (no persistence) or with its data (a partition healing),
what was spent while it was away is not handed out again: on recovery every counter goes up to the
ledger's spend. Before, the empty counter was re-counted at most once a minute (and the outage's
request had used the minute), and a counter that survived never learned the outage's spend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.policy.budgets import DAY, Budget, BudgetExceeded, Budgets
from gateway.state.failover import FallbackStateStore
from gateway.state.redis_store import UNREACHABLE, RedisStateStore
from tests.policy.test_budget_recount import Ledger
from tests.state.own_redis import OwnRedis

USD = 1_000_000_000
BUDGET = Budget(owner="team:a", period=DAY, limit_nano=10 * USD)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def store(redis_server: OwnRedis) -> AsyncIterator[FallbackStateStore]:
    shared = RedisStateStore.from_url(redis_server.url, prefix="recovery-test:")
    fallback = FallbackStateStore(
        shared, fail_open=True, unreachable=UNREACHABLE, cooldown=0.05, watch_every=0.05
    )
    try:
        yield fallback
    finally:
        await fallback.aclose()


async def spend(budgets: Budgets, ledger: Ledger, usd: int) -> None:
    """One request that costs `usd`, its row in the ledger once it is settled."""
    held = await budgets.reserve([BUDGET], usd * USD)
    await budgets.settle(held, usd * USD)
    ledger.spent += usd * USD


async def back(store: FallbackStateStore) -> None:
    for _ in range(200):
        if not store.degraded:
            return
        await asyncio.sleep(0.05)
    pytest.fail("the store never came back")


async def test_redis_back_empty_is_reseeded_from_the_ledger(
    redis_server: OwnRedis, store: FallbackStateStore
) -> None:
    ledger = Ledger(spent=0)
    budgets = Budgets(store, ledger)
    await spend(budgets, ledger, 9)
    redis_server.stop()
    # During the outage: refused on this replica's own counter (re-counted from the ledger).
    with pytest.raises(BudgetExceeded):
        await budgets.reserve([BUDGET], 2 * USD)
    assert store.degraded
    redis_server.start()  # empty: no persistence
    await back(store)
    with pytest.raises(BudgetExceeded):
        await budgets.reserve([BUDGET], 2 * USD)
    assert await budgets.reserve([BUDGET], 1 * USD), "what is left of the budget is still usable"


async def test_redis_back_with_its_data_learns_what_was_spent_meanwhile(
    redis_server: OwnRedis, store: FallbackStateStore
) -> None:
    ledger = Ledger(spent=0)
    budgets = Budgets(store, ledger)
    await spend(budgets, ledger, 5)
    redis_server.pause()  # a partition: Redis keeps its counter at 5
    await spend(budgets, ledger, 4)  # counted on this replica alone (after one socket timeout)
    assert store.degraded
    redis_server.resume()
    await back(store)
    with pytest.raises(BudgetExceeded):
        await budgets.reserve([BUDGET], 2 * USD)
    assert await budgets.reserve([BUDGET], 1 * USD)


async def test_a_restart_no_request_noticed_is_found_by_the_marker(
    redis_server: OwnRedis, store: FallbackStateStore
) -> None:
    ledger = Ledger(spent=0)
    budgets = Budgets(store, ledger)
    for _ in range(2):  # a team spending nothing: the second one uses the minute's ledger recount
        await budgets.settle(await budgets.reserve([BUDGET], USD), 0)
    await spend(budgets, ledger, 9)
    await asyncio.sleep(0.2)  # the watch has seen the marker
    redis_server.restart()  # empty, and back before any call failed
    key, _ = budgets._key(BUDGET)
    for _ in range(100):  # the watch notices the marker changed and re-seeds the counter
        await asyncio.sleep(0.05)
        if await store.get(key) is not None:
            break
    assert await store.get(key) == str(9 * USD).encode()
    with pytest.raises(BudgetExceeded):
        await budgets.reserve([BUDGET], 2 * USD)

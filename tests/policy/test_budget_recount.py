"""A budget counter the state store lost (Redis restarted without persistence) is counted again
from the ledger, so a restart never hands a team its whole budget a second time."""

from __future__ import annotations

from datetime import date

import pytest

from gateway.policy.budgets import DAY, Budget, BudgetExceeded, Budgets
from gateway.state.memory import MemoryStateStore

USD = 1_000_000_000


class Ledger:
    """What the ledger's rollups say was spent; counts how often it was asked."""

    def __init__(self, spent: int) -> None:
        self.spent = spent
        self.asked = 0

    async def __call__(self, owner: str, first: date, last: date) -> int:
        self.asked += 1
        return self.spent


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_counter_lost_by_the_store_is_recounted_from_the_ledger() -> None:
    ledger, clock = Ledger(spent=0), Clock()
    budgets = Budgets(MemoryStateStore(), ledger, clock=clock)
    budget = Budget(owner="team:a", period=DAY, limit_nano=10 * USD)
    held = await budgets.reserve([budget], 4 * USD)
    await budgets.settle(held, 9 * USD)
    ledger.spent = 9 * USD  # the ledger has the row now

    budgets._store = MemoryStateStore()  # Redis restarted and kept nothing
    with pytest.raises(BudgetExceeded):
        await budgets.reserve([budget], 2 * USD)
    assert await budgets.reserve([budget], 1 * USD), "what is left of the budget is still usable"


async def test_a_team_that_spends_nothing_costs_one_ledger_query_a_minute() -> None:
    ledger, clock = Ledger(spent=0), Clock()
    budgets = Budgets(MemoryStateStore(), ledger, clock=clock)
    budget = Budget(owner="team:free", period=DAY, limit_nano=USD)
    for _ in range(50):
        await budgets.settle(await budgets.reserve([budget], USD // 10), 0)
    assert ledger.asked <= 2
    clock.now += 61
    await budgets.settle(await budgets.reserve([budget], USD // 10), 0)
    assert ledger.asked <= 3

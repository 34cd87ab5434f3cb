"""PostgreSQL restarted under load (the real server, pg_ctlcluster): the ledger writer spools while
it is away and replays when it is back. Every answered request has exactly one row."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import httpx
import pytest

from tests.chaos.conftest import ChaosConfig
from tests.chaos.outages import postgres_cluster, restart_postgres
from tests.chaos.scenario import HELLO, Answer, ChaosGateway, Tally, WellBehaved, answer_of, scaled

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


# asyncpg drops a connection the server cut without closing its socket object; only Python's wrapper
# warns when it is collected. Collected here, on purpose.
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_postgres_restart_under_load_loses_no_row_and_counts_none_twice(chaos_config: ChaosConfig) -> None:
    version = postgres_cluster()
    tally = Tally("PostgreSQL restarted under load")
    total, concurrency = scaled(600), 24
    config = chaos_config()
    with ChaosGateway(config) as gateway:
        before = {r["id"] for r in gateway.ledger_rows()}
        tasks = gateway.tasks()
        outage: list[float] = []

        async def load() -> list[Answer]:
            sent: list[Answer] = []
            queue = iter(range(total))

            async def worker(http: httpx.AsyncClient) -> None:
                for i in queue:
                    if i == total // 4:
                        outage.append(await asyncio.to_thread(restart_postgres, version))
                    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"n{i}"}]}
                    sent.append(answer_of(await http.post("/v1/chat/completions", json=body)))

            async with httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as http:
                await asyncio.gather(*(worker(http) for _ in range(concurrency)))
            return sent

        with WellBehaved(gateway.base_url) as probe:
            tally.answers = asyncio.run(load())
        tally.probe = probe.answers
        spooled = gateway.runtime.ledger.spooled
        gateway.call(gateway.runtime.ledger.settle(within=60), timeout=90)
        tally.check_ledger(gateway, before=before)
        after = httpx.post(
            gateway.base_url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": HELLO}
        )
        left_tasks, _ = gateway.settle(tasks=tasks)
        spool = Path(config.ledger.spool_dir)
    gc.collect()
    tally.note = f"restart took {outage[0]:.1f} s; {spooled} rows spooled, then replayed"
    tally.report()
    assert not list(spool.glob("*.rejected")), "rows were set aside instead of written"
    assert tally.successes == tally.sent, {a.status for a in tally.every}
    assert tally.ledger_rows == tally.sent and tally.lost == 0 and tally.duplicates == 0, tally.line()
    assert after.status_code == 200
    assert left_tasks <= tasks

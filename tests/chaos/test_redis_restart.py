"""Redis restarted under load (the real server, its data gone): while it is away, rate limits and
budgets behave as configured (`on_failure: open` keeps serving and keeps limiting per replica,
`closed` refuses with a clean 503), and once it is back the shared limits are enforced again."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest

from tests.chaos.conftest import ChaosConfig
from tests.chaos.outages import redis_client, redis_stopped
from tests.chaos.scenario import Answer, ChaosGateway, Tally, WellBehaved, answer_of

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

RPM = 20
SLACK = 2  # the bucket refills at RPM/60 per second while a burst runs
SHORT = [{"role": "user", "content": "hi"}]


async def burst(base_url: str, key: str, count: int) -> list[Answer]:
    headers = {"authorization": f"Bearer {key}"}
    body = {"model": "gpt-4o-mini", "messages": SHORT, "max_tokens": 16}
    async with httpx.AsyncClient(base_url=base_url, timeout=30, headers=headers) as http:
        return [
            answer_of(r)
            for r in await asyncio.gather(
                *(http.post("/v1/chat/completions", json=body) for _ in range(count))
            )
        ]


def codes(answers: list[Answer]) -> dict[int, int]:
    return {s: sum(a.status == s for a in answers) for s in sorted({a.status for a in answers})}


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_redis_restart_under_load_keeps_the_configured_behaviour_and_limits_recover(
    chaos_config: ChaosConfig, mode: str
) -> None:
    tally = Tally(f"Redis restarted under load (fail-{mode})")
    prefix = f"chaos:{uuid.uuid4().hex}:"
    state = {
        "backend": "redis",
        "redis_url": "redis://127.0.0.1:6379/0",
        "prefix": prefix,
        "on_failure": mode,
    }
    teams = {"limited": {"rpm": RPM, "budget_daily_usd": "100"}, "steady": {"rpm": 100_000}}
    with ChaosGateway(chaos_config(state=state, teams=teams)) as gateway:
        before = {r["id"] for r in gateway.ledger_rows()}
        limited, _ = gateway.call(gateway.runtime.keys.create("limited", "burst"))
        steady, _ = gateway.call(gateway.runtime.keys.create("steady", "probe"))
        with WellBehaved(gateway.base_url, key=steady) as probe:
            shared = asyncio.run(burst(gateway.base_url, limited, RPM + 10))
            with redis_stopped():
                time.sleep(0.3)  # the probe meets the outage too
                outage = asyncio.run(burst(gateway.base_url, limited, RPM + 10))
                ready_during = httpx.get(gateway.base_url + "/readyz", timeout=10)
                probe_during = len(probe.answers)
            # Back: the first calls may still meet a dead pooled connection; then the shared store rules.
            deadline = time.monotonic() + 10
            while httpx.get(gateway.base_url + "/readyz", timeout=10).json().get("state") != "shared":
                assert time.monotonic() < deadline, "the gateway never went back to the shared store"
                time.sleep(0.1)
            recovered = asyncio.run(burst(gateway.base_url, limited, RPM + 10))
        tally.probe = probe.answers
        tally.answers = shared + outage + recovered
        tally.check_ledger(gateway, before=before)
        client = redis_client()
        try:
            shared_keys = len(client.keys(prefix + "*"))
        finally:
            client.close()
    tally.note = f"before {codes(shared)}, during {codes(outage)}, after {codes(recovered)}"
    tally.report()
    assert not tally.unclean and tally.lost == 0 and tally.duplicates == 0, tally.line()
    for phase in (shared, recovered):
        assert RPM <= sum(a.status == 200 for a in phase) <= RPM + SLACK, codes(phase)
        assert 429 in codes(phase)
    assert {a.status for a in shared} == {200, 429}
    # Pooled connections that died with the server are replaced on first use, not failed.
    assert {a.status for a in recovered} == {200, 429}, codes(recovered)
    if mode == "open":
        # Limits still hold while Redis is away, per replica, from a fresh bucket.
        assert RPM <= sum(a.status == 200 for a in outage) <= RPM + SLACK, codes(outage)
        assert ready_during.json()["state"] == "per-replica fallback (shared store unreachable)"
        assert all(a.status == 200 for a in tally.probe)
    else:
        assert {a.status for a in outage} == {503}, codes(outage)
        assert ready_during.status_code == 503
        assert any(a.status == 503 for a in tally.probe[probe_during // 2 :])
    assert shared_keys > 0, "after the restart nothing was written to Redis: limits are not shared"

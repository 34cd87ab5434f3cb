"""[reliability-2] part 3: a team's budget across Redis faults, on two replicas sharing a redis-server
of the test's own (the shared one on 6379 is never touched) and the real PostgreSQL ledger.

The team's $0.30 daily budget is spent to its last request through both replicas; then Redis is
killed (and comes back empty, or with its data), or hangs (SIGSTOP), and both replicas keep being
asked. Bounds: while Redis is away each replica's local counter starts from the ledger, so the
overshoot is at most one largest request per replica; once it is back, none at all (recovery raises
every counter to the ledger's spend); a hung Redis costs the request that meets it one socket
timeout, not one per call."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.config.loader import build_config
from sandbox.server import SandboxServer
from tests.chaos.conftest import ChaosSettings
from tests.chaos.scenario import Answer, ChaosGateway, Tally, answer_of, wait_until
from tests.state.own_redis import OwnRedis

pytestmark = [pytest.mark.postgres]

LIMIT_USD = 0.30
# About $0.04 a request: the budget holds seven or so.
DEAR = {
    "provider": "openai",
    "upstream_model": "gpt-4o-mini",
    "price": {"input_per_mtok": "1000", "output_per_mtok": "2000"},
}
SOCKET_TIMEOUT = 2.0  # the Redis client's (gateway/state/redis_store.py)


class Pair:
    """Two replicas on one config (own Redis, the real ledger) and the team's key."""

    def __init__(self, settings: tuple[dict[str, Any], str]) -> None:
        raw, self.team = settings
        config = build_config(raw, source="test", environ={})
        self.a, self.b = ChaosGateway(config), ChaosGateway(config)
        self.key = ""

    def __enter__(self) -> Pair:
        self.a.__enter__()
        self.b.__enter__()
        self.key, _ = self.a.call(self.a.runtime.keys.create(self.team, "chaos"))
        return self

    def __exit__(self, *exc: object) -> None:
        self.b.__exit__(*exc)
        self.a.__exit__(*exc)

    def ask(self, gateway: ChaosGateway, n: int = 1, *, timeout: float = 30) -> list[Answer]:
        """`n` requests one after another; a client timeout (httpx error) fails the test."""
        answers = []
        body = {"model": "dear", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
        with httpx.Client(base_url=gateway.base_url, timeout=timeout) as http:
            for _ in range(n):
                started = time.perf_counter()
                response = http.post(
                    "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {self.key}"}
                )
                answers.append(answer_of(response, time.perf_counter() - started))
        return answers

    def spend_down(self) -> list[Answer]:
        """Both replicas in turn until each refuses: the budget is spent to its last request."""
        answers: list[Answer] = []
        for _ in range(40):
            round_ = self.ask(self.a) + self.ask(self.b)
            answers += round_
            if all(a.status == 429 for a in round_):
                return answers
        pytest.fail("the budget never ran out")

    def rows(self) -> list[dict[str, Any]]:
        self.b.call(self.b.runtime.ledger.flush())
        return [r for r in self.a.ledger_rows() if r["team"] == self.team]

    def shared(self, within: float = 15.0) -> bool:
        def both() -> bool:
            return all(
                httpx.get(g.base_url + "/readyz", timeout=10).json().get("state") == "shared"
                for g in (self.a, self.b)
            )

        return wait_until(both, within=within)


@pytest.fixture
def settings(chaos_settings: ChaosSettings) -> Iterator[Any]:
    def make(redis: OwnRedis, vllm_url: str | None = None, **state: Any) -> tuple[dict[str, Any], str]:
        team = f"finance-{uuid.uuid4().hex[:8]}"  # the module's ledger is shared: a team each
        raw = chaos_settings(
            vllm_url=vllm_url,
            state={
                "backend": "redis",
                "redis_url": redis.url,
                "prefix": f"chaos:{uuid.uuid4().hex}:",
                **state,
            },
            teams={team: {"budget_daily_usd": str(LIMIT_USD)}},
        )
        raw["models"]["dear"] = DEAR
        return raw, team

    yield make


def spent(rows: list[dict[str, Any]]) -> int:
    return sum(r["cost_nano"] for r in rows)


@pytest.mark.parametrize("back", ["empty", "with its data"])
def test_redis_killed_with_the_budget_nearly_spent(settings: Any, tmp_path: Path, back: str) -> None:
    tally = Tally(f"Redis killed, budget spent, back {back}")
    redis = OwnRedis(tmp_path, persist=back == "with its data").start()
    limit = int(LIMIT_USD * 1e9)
    try:
        with Pair(settings(redis)) as pair:
            before = pair.spend_down()
            redis.stop()
            during = []
            for _ in range(3):  # requests during the outage, on both replicas
                during += pair.ask(pair.a) + pair.ask(pair.b)
            at_return = spent(pair.rows())
            redis.start()
            returned = time.monotonic()
            back_in_time = pair.shared()
            recovered = time.monotonic() - returned
            after = []
            for _ in range(3):
                after += pair.ask(pair.a) + pair.ask(pair.b)
            rows = pair.rows()
    finally:
        redis.stop()
    largest = max(r["cost_nano"] for r in rows)
    final = spent(rows)
    over_during = max(0, at_return - limit) / largest
    over_after = max(0, final - max(limit, at_return)) / largest
    tally.answers = before + during + after
    tally.count(rows)
    tally.overshoot = f"{over_during:.1f}/{over_after:.1f}"
    tally.recover_s = recovered
    ok = lambda answers: sum(a.status == 200 for a in answers)  # noqa: E731
    tally.note = (
        f"${final / 1e9:.3f} of ${LIMIT_USD:.2f}; served during {ok(during)}, after {ok(after)}"
        " (overshoot in largest requests, during/after)"
    )
    tally.report()
    assert back_in_time, "the replicas never went back to the shared store"
    assert not tally.unclean and tally.lost == 0 and tally.duplicates == 0, tally.line()
    assert over_during <= 2, tally.note  # one largest request per replica
    assert over_after == 0 and ok(after) == 0, tally.note
    assert {a.status for a in after} == {429}


def test_redis_hung_costs_one_socket_timeout(settings: Any, tmp_path: Path) -> None:
    tally = Tally("Redis hung (SIGSTOP), budget spent")
    redis = OwnRedis(tmp_path).start()
    limit = int(LIMIT_USD * 1e9)
    try:
        with Pair(settings(redis)) as pair:
            before = pair.spend_down()
            usual = max(a.seconds for a in before)
            redis.pause()
            try:
                # Bounds as client timeouts: the request that meets the hang within a few socket
                # timeouts (before: ~21 of them, 48-56 s), the next ones before a single one would.
                first = pair.ask(pair.a, timeout=3 * SOCKET_TIMEOUT)
                rest = pair.ask(pair.a, 3, timeout=0.75 * SOCKET_TIMEOUT)
                rest += pair.ask(pair.b, timeout=3 * SOCKET_TIMEOUT)
                rest += pair.ask(pair.b, 2, timeout=0.75 * SOCKET_TIMEOUT)
                ready = httpx.get(pair.a.base_url + "/readyz", timeout=10).json().get("state")
                at_return = spent(pair.rows())
            finally:
                redis.resume()
            returned = time.monotonic()
            back_in_time = pair.shared()
            recovered = time.monotonic() - returned
            after = pair.ask(pair.a, 2) + pair.ask(pair.b, 2)
            rows = pair.rows()
    finally:
        redis.stop()
    largest = max(r["cost_nano"] for r in rows)
    final = spent(rows)
    tally.answers = before + first + rest + after
    tally.count(rows)
    over_during = max(0, at_return - limit) / largest
    over_after = max(0, final - max(limit, at_return)) / largest
    tally.overshoot = f"{over_during:.1f}/{over_after:.1f}"
    tally.recover_s = recovered
    slowest = max(a.seconds for a in first + rest)
    tally.note = (
        f"first request in the hang {first[0].seconds:.2f} s, slowest {slowest:.2f} s "
        f"(usual {usual:.2f} s); /readyz during: {ready}"
    )
    tally.report()
    assert back_in_time
    assert not tally.unclean and tally.lost == 0 and tally.duplicates == 0, tally.line()
    assert ready != "shared", "readiness said all was well while Redis hung"
    assert over_during <= 2 and over_after == 0, tally.overshoot


def test_a_replica_killed_holding_reservations_does_not_leak_the_budget(
    settings: Any, tmp_path: Path
) -> None:
    from tests.chaos.serving import ServeProcess

    tally = Tally("replica killed holding reservations")
    redis = OwnRedis(tmp_path).start()
    try:
        paced = SandboxServer(dialect="vllm", profile="managed").__enter__()  # 50 tokens/s
        raw, team = settings(redis, vllm_url=paced.base_url)
        # A slow answer whose worst case (~$0.28) nearly fills the budget: the replica is killed while
        # it holds that reservation, and no row will ever settle it.
        raw["models"]["dear-slow"] = {
            **DEAR,
            "provider": "local",
            "upstream_model": "meta-llama/Llama-3.1-8B-Instruct",
        }
        with ServeProcess(raw, tmp_path, name="doomed") as doomed:
            doomed.start()
            config = build_config(raw, source="test", environ={})
            with ChaosGateway(config) as survivor:
                key, _ = survivor.call(survivor.runtime.keys.create(team, "chaos"))
                body = {
                    "model": "dear-slow",
                    "messages": [{"role": "user", "content": "x"}],
                    "max_tokens": 125,
                }
                auth = {"authorization": f"Bearer {key}"}
                with httpx.Client(base_url=doomed.base_url, timeout=30, headers=auth) as http:
                    with http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as held:
                        first_line = next(held.iter_lines())  # generating: its reservation is held
                        assert held.status_code == 200, first_line
                        doomed.kill()
                killed = time.monotonic()
                small = {**body, "model": "dear", "max_tokens": 16}
                # The ledger has nothing for the team: the survivor must grant what the budget allows.
                granted = wait_until(
                    lambda: (
                        httpx.post(
                            survivor.base_url + "/v1/chat/completions", json=small, headers=auth, timeout=10
                        ).status_code
                        == 200
                    ),
                    within=10,
                )
                tally.recover_s = time.monotonic() - killed
                tally.note = "the dead replica's reservation " + ("expired" if granted else "still counted")
    finally:
        redis.stop()
        paced.__exit__(None, None, None)
    tally.report()
    assert granted, tally.note

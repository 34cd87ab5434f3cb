"""Dependencies that fail under load: an upstream that hangs forever, a provider host that does not
resolve, the config file deleted under a running gateway. Each time, every request gets a clean
answer and one ledger row, the polite client keeps its latency, and the gateway is left as the user
would want to find it afterwards (no connection held to the hung upstream, the fallback used, the
last good policy serving and /readyz saying the file could not be reloaded)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from gateway.config.loader import build_config, load_config
from sandbox.server import SandboxServer
from tests.chaos.conftest import ChaosSettings
from tests.chaos.scenario import (
    HELLO,
    Answer,
    ChaosGateway,
    Tally,
    WellBehaved,
    answer_of,
    in_waves,
    scaled,
    wait_until,
)
from tests.chaos.test_mid_stream import upstream_sockets
from tests.chaos.test_slow_clients import settle_and_check
from tests.conftest import PRICE

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

DEADLINE = 1.0


@pytest.fixture(scope="module")
def hanging() -> Iterator[SandboxServer]:
    """An OpenAI emulator that accepts every request and never answers it."""
    with SandboxServer(dialect="openai", profile="instant") as server:
        httpx.post(
            server.base_url + "/_sandbox/faults", json=[{"kind": "timeout", "seconds": 3600, "count": -1}]
        ).raise_for_status()
        yield server


async def fire(base_url: str, bodies: list[dict[str, Any]]) -> list[tuple[Answer, httpx.Response]]:
    """Send `bodies` at once; each answer with its response (headers and error bodies are checked)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:

        async def one(body: dict[str, Any]) -> tuple[Answer, httpx.Response]:
            started = time.perf_counter()
            response = await http.post("/v1/chat/completions", json=body)
            return answer_of(response, time.perf_counter() - started), response

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def in_waves_beside_a_polite_client(
    gateway: ChaosGateway, tally: Tally, bodies: list[dict[str, Any]], *, seconds: float
) -> tuple[list[tuple[Answer, httpx.Response]], dict[str, dict[str, Any]]]:
    """`bodies` sent at once, again and again for `seconds`, while the polite client measures; the
    answers and the new ledger rows by id, after the checks every scenario makes."""
    before = {r["id"] for r in gateway.ledger_rows()}
    tasks = gateway.tasks()
    with WellBehaved(gateway.base_url) as probe:
        got = asyncio.run(in_waves(seconds, lambda: fire(gateway.base_url, bodies)))
    tally.answers, tally.probe = [a for a, _ in got], probe.answers
    rows = {r["id"]: r for r in gateway.ledger_rows() if r["id"] not in before}
    settle_and_check(gateway, tally, before=before, tasks=tasks)
    return got, rows


def failed_then_circuit_open(
    got: list[tuple[Answer, httpx.Response]], rows: dict[str, dict[str, Any]], *, status: int
) -> list[dict[str, Any]]:
    """Each answer is the failure itself (`status`), or a 503 once the breaker opened on those
    failures (refused at once, without waiting on the upstream again), and its row says the same;
    returns the failures' error objects."""
    failures = []
    for answer, response in got:
        error = response.json()["error"]
        if answer.status == status:
            failures.append(error)
        else:
            assert answer.status == 503 and error["code"] == "no_deployment", error
        assert rows[answer.request_id]["status"] == answer.status
    return failures


def test_an_upstream_that_hangs_forever_is_cut_at_the_deadline(
    chaos_settings: ChaosSettings, hanging: SandboxServer
) -> None:
    tally = Tally("upstream hangs forever")
    settings = chaos_settings()
    settings["providers"]["hanging"] = {"type": "openai", "base_url": hanging.base_url + "/v1"}
    settings["models"]["stuck"] = {"provider": "hanging", "price": PRICE, "deadline_seconds": DEADLINE}
    bodies = [{"model": "stuck", "messages": HELLO, "stream": i % 2 == 1} for i in range(scaled(24))]
    with ChaosGateway(build_config(settings, source="test", environ={})) as gateway:
        got, rows = in_waves_beside_a_polite_client(gateway, tally, bodies, seconds=2.5)
        left_open = upstream_sockets(hanging.port)
    slowest = max(a.seconds for a in tally.answers)
    cut = failed_then_circuit_open(got, rows, status=504)
    tally.note = f"{len(cut)} cut at the {DEADLINE:g} s deadline (slowest {slowest:.2f} s), the rest 503"
    tally.note += f" circuit open; {left_open} connections left to the hung upstream"
    tally.report()
    assert cut, "no request waited for the hung upstream"
    assert all(error["code"] == "deadline_exceeded" for error in cut), cut
    assert all(rows[a.request_id]["cost_nano"] == 0 for a, _ in got)
    # The deadline holds for every request, streamed or not, however many wait on the hung upstream.
    assert slowest < DEADLINE + 2.0
    assert left_open == 0, "connections to the hung upstream were kept after their requests gave up"


def test_a_provider_host_that_does_not_resolve_fails_cleanly_or_falls_back(
    chaos_settings: ChaosSettings,
) -> None:
    tally = Tally("provider host does not resolve (DNS)")
    settings = chaos_settings()
    # .invalid never resolves (RFC 2606): a DNS failure, every time.
    settings["providers"]["nowhere"] = {"type": "openai", "base_url": "http://api.tollgate-test.invalid/v1"}
    settings["models"]["lost"] = {"provider": "nowhere", "price": PRICE}
    settings["models"]["rescued"] = {"provider": "nowhere", "price": PRICE, "fallbacks": ["gpt-4o-mini"]}
    bodies = [{"model": ("lost", "rescued")[i % 2], "messages": HELLO} for i in range(scaled(32))]
    with ChaosGateway(build_config(settings, source="test", environ={})) as gateway:
        got, rows = in_waves_beside_a_polite_client(gateway, tally, bodies, seconds=2.0)
    lost = [(a, r) for a, r in got if orjson.loads(r.request.content)["model"] == "lost"]
    rescued = [(a, r) for a, r in got if orjson.loads(r.request.content)["model"] == "rescued"]
    unreachable = failed_then_circuit_open(lost, rows, status=502)
    tally.note = f"{len(lost)} failed ({len(unreachable)} 502 naming the provider, the rest 503 circuit open)"
    tally.note += f", {len(rescued)} answered by the fallback"
    tally.report()
    assert unreachable, "no request reported the DNS failure itself"
    assert all(e["type"] == "upstream_unreachable" and "nowhere" in e["message"] for e in unreachable), (
        unreachable
    )
    for answer, response in rescued:
        assert answer.status == 200 and response.headers["x-tollgate-model"] == "gpt-4o-mini"
        row = rows[answer.request_id]
        assert row["status"] == 200 and row["fallback_used"] and row["cost_nano"] > 0


def test_the_config_file_deleted_under_load_keeps_the_last_policy_and_says_so(
    chaos_settings: ChaosSettings, tmp_path: Path
) -> None:
    tally = Tally("config file deleted while running")
    settings = chaos_settings()
    path = tmp_path / "tollgate.yaml"
    path.write_text(yaml.safe_dump(settings))
    with ChaosGateway(load_config(path), config_path=path) as gateway:
        before = {r["id"] for r in gateway.ledger_rows()}
        tasks = gateway.tasks()
        watcher = gateway.app.state.config_watcher
        with WellBehaved(gateway.base_url) as probe, WellBehaved(gateway.base_url, pause=0) as load:
            time.sleep(0.5)
            path.unlink()
            assert wait_until(lambda: watcher.last_error is not None, within=10), (
                "the deletion went unnoticed"
            )
            stale = httpx.get(gateway.base_url + "/readyz")
            time.sleep(0.5)
            # Put it back with one change: the watcher loads it, and the change is in force.
            settings["aliases"]["restored"] = "gpt-4o-mini"
            path.write_text(yaml.safe_dump(settings))
            assert wait_until(lambda: watcher.reloads > 0, within=10), "the restored file was not loaded"
            restored = httpx.post(
                gateway.base_url + "/v1/chat/completions", json={"model": "restored", "messages": HELLO}
            )
            time.sleep(0.3)
        current = httpx.get(gateway.base_url + "/readyz")
        tally.answers, tally.probe = [*load.answers, answer_of(restored)], probe.answers
        settle_and_check(gateway, tally, before=before, tasks=tasks)
    tally.note = f"{tally.successes} answered under the old policy and the restored one; /readyz said stale"
    tally.report()
    assert stale.status_code == 200 and stale.json()["config"].startswith("stale")
    assert str(tmp_path) not in stale.text, "an unauthenticated route quoted the file's path"
    assert restored.status_code == 200 and current.json()["config"] == "current"
    assert all(a.status == 200 for a in tally.every) and not load.failures and not probe.failures

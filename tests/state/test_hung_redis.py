"""[reliability-2] part 2: a hung Redis (SIGSTOP) costs the request that finds it one socket timeout
(2 s), not one per Redis call (~21 per chat request with a budget and a rate limit: 48-56 s before);
later requests do not touch it at all, `/readyz` says so while it hangs and recovers once probed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer
from tests.state.own_redis import OwnRedis

FALLBACK = "per-replica fallback (shared store unreachable)"
BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
SOCKET_TIMEOUT = 2.0  # RedisStateStore.from_url


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gateway_on_redis(
    redis_server: OwnRedis, openai_upstream: SandboxServer, vllm_upstream: SandboxServer, sqlite_url: str
) -> Iterator[tuple[GatewayServer, str]]:
    state = {"backend": "redis", "redis_url": redis_server.url, "prefix": "hung-test:"}
    teams = {"t": {"rpm": 1000, "budget_daily_usd": "10"}}
    config = gateway_config(
        sqlite_url, openai_upstream.base_url, vllm_upstream.base_url, state=state, teams=teams
    )
    with GatewayServer(config) as server:
        key, _ = server.call(server.runtime.keys.create("t", "k"))
        yield server, key


def chat(server: GatewayServer, key: str, *, timeout: float) -> httpx.Response:
    return httpx.post(
        server.base_url + "/v1/chat/completions",
        json=BODY,
        headers={"authorization": f"Bearer {key}"},
        timeout=timeout,
    )


def state(server: GatewayServer) -> str:
    ready = httpx.get(server.base_url + "/readyz", timeout=10)
    assert ready.status_code == 200  # fail-open: still serving
    value: str = ready.json()["state"]
    return value


def test_a_hung_redis_costs_one_socket_timeout_then_none(
    redis_server: OwnRedis, gateway_on_redis: tuple[GatewayServer, str]
) -> None:
    server, key = gateway_on_redis
    assert chat(server, key, timeout=10).status_code == 200
    assert state(server) == "shared"
    redis_server.pause()
    # The first request waits out one socket timeout, not two (a retried timeout) nor one per call:
    # the client's timeout, 1.75 socket timeouts, is the bound.
    first = chat(server, key, timeout=1.75 * SOCKET_TIMEOUT)
    assert first.status_code == 200
    # Now the gateway knows: the next request touches Redis not once (its timeout is under one
    # socket timeout), and /readyz says what is in force.
    assert chat(server, key, timeout=SOCKET_TIMEOUT * 0.75).status_code == 200
    assert state(server) == FALLBACK
    redis_server.resume()
    # The background probe finds it back without any request touching the store.
    assert wait_for_state(server, "shared") == "shared"
    rows = server.ledger_rows()
    assert [r["status"] for r in rows[-3:]] == [200, 200, 200]


def test_readyz_sees_a_hung_redis_before_any_request_does(
    redis_server: OwnRedis, gateway_on_redis: tuple[GatewayServer, str]
) -> None:
    server, _ = gateway_on_redis
    assert state(server) == "shared"
    redis_server.pause()
    time.sleep(1.1)  # past the freshness of the last contact, so /readyz pings for itself
    assert state(server) == FALLBACK
    redis_server.resume()
    assert wait_for_state(server, "shared") == "shared"


def wait_for_state(server: GatewayServer, wanted: str, within: float = 15.0) -> str:
    """Polls /readyz (the probe runs every second); returns the last state seen."""
    seen = state(server)
    end = time.monotonic() + within
    while seen != wanted and time.monotonic() < end:
        time.sleep(0.2)
        seen = state(server)
    return seen

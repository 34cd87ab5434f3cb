"""Liveness and readiness probes, as a load balancer or Kubernetes would call them."""

from __future__ import annotations

import httpx
import pytest

from gateway.cli.sandbox_launcher import free_port
from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer


def test_healthz_and_readyz(gateway: GatewayServer) -> None:
    alive = httpx.get(gateway.base_url + "/healthz")
    assert alive.status_code == 200 and alive.json() == {"status": "ok"}
    assert alive.headers["x-request-id"]
    ready = httpx.get(gateway.base_url + "/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "auth": "open (no keys configured: anyone can call)",
        "state": "in-memory",
        "ledger": "writing",
        "config": "current",
    }


def test_readyz_is_503_when_the_database_is_unreachable(
    openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    nowhere = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/test"
    config = gateway_config(nowhere, openai_upstream.base_url, vllm_upstream.base_url)
    with GatewayServer(config) as server:
        response = httpx.get(server.base_url + "/readyz", timeout=10)
        alive = httpx.get(server.base_url + "/healthz")
    assert response.status_code == 503
    assert response.json()["status"] == "not_ready"
    assert response.json()["reason"].startswith("database unreachable")
    assert alive.status_code == 200


@pytest.mark.parametrize(("mode", "status"), [("open", 200), ("closed", 503)])
def test_redis_unreachable_fails_open_or_closed_as_configured(
    openai_upstream: SandboxServer, vllm_upstream: SandboxServer, sqlite_url: str, mode: str, status: int
) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    state = {"backend": "redis", "redis_url": nowhere, "on_failure": mode}
    # A rate limit makes every request touch the shared store.
    teams = {"t": {"rpm": 1000}}
    config = gateway_config(
        sqlite_url, openai_upstream.base_url, vllm_upstream.base_url, state=state, teams=teams
    )
    with GatewayServer(config) as server:
        key, _ = server.call(server.runtime.keys.create("t", "k"))
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
        answer = httpx.post(
            server.base_url + "/v1/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {key}"},
            timeout=20,
        )
        ready = httpx.get(server.base_url + "/readyz", timeout=10)
    assert answer.status_code == status
    if mode == "open":
        assert ready.json()["state"] == "per-replica fallback (shared store unreachable)"
    else:
        assert answer.json()["error"]["code"] == "state_unavailable"
        assert ready.status_code == 503

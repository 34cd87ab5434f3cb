"""Liveness and readiness probes, as a load balancer or Kubernetes would call them."""

from __future__ import annotations

import httpx

from gateway.sandbox_launcher import free_port
from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer


def test_healthz_and_readyz(gateway: GatewayServer) -> None:
    alive = httpx.get(gateway.base_url + "/healthz")
    assert alive.status_code == 200 and alive.json() == {"status": "ok"}
    assert alive.headers["x-request-id"]
    ready = httpx.get(gateway.base_url + "/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}


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

"""Liveness and readiness probes, as a load balancer or Kubernetes would call them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from gateway.cli.sandbox_launcher import free_port
from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer
from tests.tcp_proxy import TcpProxy

HELLO = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def test_healthz_and_readyz(gateway: GatewayServer) -> None:
    alive = httpx.get(gateway.base_url + "/healthz")
    assert alive.status_code == 200 and alive.json() == {"status": "ok"}
    assert alive.headers["x-request-id"]
    ready = httpx.get(gateway.base_url + "/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {"database": "ok", "state": "ok (in-memory)"},
        "auth": "open (no keys configured: anyone can call)",
        "state": "in-memory",
        "ledger": "writing",
        "config": "current",
    }


@pytest.mark.parametrize("admin_key", [None, "admin-secret"])
def test_a_database_unreachable_from_the_start_is_degraded_unless_no_request_can_be_served(
    openai_upstream: SandboxServer, vllm_upstream: SandboxServer, admin_key: str | None
) -> None:
    """Nothing listens on the database port. With an admin key the gateway serves (ready, degraded);
    in open mode it cannot tell whether keys exist, refuses every request, and so is not ready."""
    nowhere = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/test"
    auth = {"admin_key": admin_key} if admin_key else {}
    config = gateway_config(nowhere, openai_upstream.base_url, vllm_upstream.base_url, auth=auth)
    headers = {"authorization": f"Bearer {admin_key}"} if admin_key else {}
    with GatewayServer(config) as server:
        response = httpx.get(server.base_url + "/readyz", timeout=10)
        answer = httpx.post(server.base_url + "/v1/chat/completions", json=HELLO, headers=headers, timeout=20)
        alive = httpx.get(server.base_url + "/healthz")
    body = response.json()
    assert body["checks"]["database"].startswith("unreachable (")
    assert body["checks"]["database"].endswith("spooling ledger rows")
    assert body["checks"]["state"] == "ok (in-memory)"
    assert body["ledger"] == "spooling (database unavailable)"
    assert alive.status_code == 200
    if admin_key:
        assert response.status_code == 200 and body["status"] == "degraded", response.text
        assert body["auth"] == "keys required"
        assert answer.status_code == 200 and answer.json()["choices"]
    else:
        assert response.status_code == 503 and body["status"] == "not_ready", response.text
        assert body["auth"].startswith("unknown: the key store is unreachable")
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "auth_unavailable"


@pytest.mark.postgres
# A connection the proxy cuts mid-query is dropped by asyncpg without closing its socket object.
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_postgres_outage_keeps_readyz_200_while_rows_spool_and_come_back(
    postgres_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer, tmp_path: Path
) -> None:
    """The real PostgreSQL behind a TCP proxy; cutting the proxy is the outage (the server itself is
    never restarted, so other tests using it are not disturbed)."""
    real = make_url(postgres_url)
    with TcpProxy(real.host or "127.0.0.1", real.port or 5432) as proxy:
        through_proxy = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        ledger = {"flush_interval_ms": 5, "spool_dir": str(tmp_path), "probe_interval_seconds": 0.2}
        config = gateway_config(
            through_proxy, openai_upstream.base_url, vllm_upstream.base_url, ledger=ledger
        )
        with GatewayServer(config) as server:
            before = httpx.get(server.base_url + "/readyz", timeout=10)
            rows_before = len(server.ledger_rows())
            proxy.cut()
            answers = [
                httpx.post(server.base_url + "/v1/chat/completions", json=HELLO, timeout=20) for _ in range(5)
            ]
            server.call(server.runtime.ledger.flush())
            during = httpx.get(server.base_url + "/readyz", timeout=10)
            metrics = httpx.get(server.base_url + "/metrics", timeout=10).text
            spooled = server.runtime.ledger.spooled
            proxy.restore()
            server.call(server.runtime.ledger.settle(within=30), timeout=40)
            after = httpx.get(server.base_url + "/readyz", timeout=10)
            rows_after = len(server.ledger_rows())
    assert before.status_code == 200 and before.json()["status"] == "ready"
    assert before.json()["checks"]["database"] == "ok"
    assert [a.status_code for a in answers] == [200] * 5
    assert during.status_code == 200, during.text
    assert during.json()["status"] == "degraded"
    assert during.json()["checks"]["database"].startswith("unreachable")
    assert 'tollgate_dependency_up{dependency="database"} 0.0' in metrics
    assert "tollgate_ledger_database_down 1.0" in metrics
    assert spooled == 5, "the rows written during the outage did not go to the spool"
    assert after.status_code == 200 and after.json()["status"] == "ready"
    assert rows_after == rows_before + 5, "the spooled rows were not replayed into PostgreSQL"


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
        assert ready.status_code == 200 and ready.json()["status"] == "degraded"
        assert ready.json()["state"] == "per-replica fallback (shared store unreachable)"
        assert ready.json()["checks"]["state"].startswith("unreachable, per-replica fallback")
    else:
        assert answer.json()["error"]["code"] == "state_unavailable"
        assert ready.status_code == 503 and ready.json()["status"] == "not_ready"
        assert ready.json()["checks"]["state"] == "unreachable, unavailable (fail-closed)"

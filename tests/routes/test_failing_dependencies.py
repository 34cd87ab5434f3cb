"""Dependencies that fail while the gateway runs: the config file vanishes, a provider's host does
not resolve, an upstream hangs forever. Each time the gateway keeps answering, and says why."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import yaml

from gateway.config.loader import load_config
from sandbox.server import SandboxServer
from tests.harness import GatewayServer

HELLO = [{"role": "user", "content": "hello"}]


def write(path: Path, openai_url: str, database_url: str, spool: str) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "database": {"url": database_url},
                "ledger": {"flush_interval_ms": 5, "spool_dir": spool},
                "resilience": {"retry": {"max_attempts": 1}},
                "providers": {
                    "openai": {"type": "openai", "base_url": openai_url + "/v1"},
                    # .invalid never resolves (RFC 2606): a DNS failure, every time.
                    "nowhere": {
                        "type": "openai",
                        "base_url": "http://api.tollgate-test.invalid/v1",
                        "timeout_seconds": 5,
                    },
                },
                "models": {
                    "mini": {"provider": "openai"},
                    "unresolvable": {"provider": "nowhere", "fallbacks": ["mini"]},
                    "lost": {"provider": "nowhere"},
                },
            }
        )
    )


def test_config_deleted_dns_failure_and_a_hang(
    tmp_path: Path, openai_upstream: SandboxServer, sqlite_url: str
) -> None:
    path = tmp_path / "tollgate.yaml"
    write(path, openai_upstream.base_url, sqlite_url, str(tmp_path / "spool"))
    with GatewayServer(load_config(path), config_path=path) as server:
        chat = server.base_url + "/v1/chat/completions"
        # DNS failure: a clean 502 naming the provider; with a fallback, the fallback answers.
        lost = httpx.post(chat, json={"model": "lost", "messages": HELLO}, timeout=20)
        assert lost.status_code == 502 and lost.json()["error"]["type"] == "upstream_unreachable"
        assert "nowhere" in lost.json()["error"]["message"]
        rescued = httpx.post(chat, json={"model": "unresolvable", "messages": HELLO}, timeout=20)
        assert rescued.status_code == 200 and rescued.headers["x-tollgate-model"] == "mini"
        # The config file deleted under a running gateway: it keeps serving the last good policy.
        path.unlink()
        watcher = server.app.state.config_watcher
        deadline = time.monotonic() + 6
        while watcher.last_error is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.last_error is not None and "gone" in watcher.last_error
        assert httpx.post(chat, json={"model": "mini", "messages": HELLO}).status_code == 200
        # An upstream that hangs forever: the request's deadline holds.
        httpx.post(
            openai_upstream.base_url + "/_sandbox/faults",
            json=[{"kind": "timeout", "seconds": 60, "count": -1}],
        )
        started = time.monotonic()
        hung = httpx.post(
            chat,
            json={"model": "mini", "messages": HELLO},
            headers={"x-tollgate-timeout-ms": "700"},
            timeout=20,
        )
        assert hung.status_code == 504 and time.monotonic() - started < 3
        rows = server.ledger_rows()
    assert {r["status"] for r in rows} >= {200, 502, 504}

"""Policy as config: a changed file takes effect without a restart, a broken one is refused and the
old policy keeps serving, and requests in flight during a reload finish."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.cli.sandbox_launcher import free_port
from gateway.config.loader import load_config
from sandbox.server import SandboxServer
from tests.harness import GatewayServer


def policy(openai_url: str, database_url: str, spool: str, models: dict[str, Any]) -> dict[str, Any]:
    return {
        "database": {"url": database_url, "auto_migrate": True},
        "ledger": {"flush_interval_ms": 5, "spool_dir": spool},
        "providers": {"openai": {"type": "openai", "base_url": openai_url + "/v1"}},
        "models": models,
    }


def model_ids(base_url: str) -> set[str]:
    return {m["id"] for m in httpx.get(base_url + "/v1/models").json()["data"]}


def wait_for(predicate: Any, timeout: float = 6.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def config_file(tmp_path: Path, openai_upstream: SandboxServer, sqlite_url: str) -> Iterator[Path]:
    path = tmp_path / "tollgate.yaml"
    path.write_text(
        yaml.safe_dump(
            policy(
                openai_upstream.base_url,
                sqlite_url,
                str(tmp_path / "spool"),
                {"alpha": {"provider": "openai"}},
            )
        )
    )
    yield path


def test_a_changed_file_takes_effect_and_a_broken_one_is_refused(
    config_file: Path,
    openai_upstream: SandboxServer,
    sqlite_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with GatewayServer(load_config(config_file), config_path=config_file) as server:
        assert model_ids(server.base_url) == {"alpha"}
        good = policy(
            openai_upstream.base_url,
            sqlite_url,
            str(tmp_path / "spool"),
            {"alpha": {"provider": "openai"}, "beta": {"provider": "openai"}},
        )
        config_file.write_text(yaml.safe_dump(good))
        assert wait_for(lambda: model_ids(server.base_url) == {"alpha", "beta"}), (
            "the new model never appeared"
        )
        broken = dict(good, models={"alpha": {"provider": "nowhere"}})
        config_file.write_text(yaml.safe_dump(broken))
        watcher = server.app.state.config_watcher
        assert wait_for(lambda: watcher.last_error is not None)
        assert "models.alpha.provider: unknown provider 'nowhere'" in watcher.last_error
        assert model_ids(server.base_url) == {"alpha", "beta"}, "the old policy must keep serving"
        ok = httpx.post(
            server.base_url + "/v1/chat/completions",
            json={"model": "beta", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert ok.status_code == 200
    assert any("config reload refused" in r.message for r in caplog.records)


def test_in_flight_stream_survives_a_reload(config_file: Path, sqlite_url: str, tmp_path: Path) -> None:
    with SandboxServer(dialect="openai", profile="managed") as slow:
        config_file.write_text(
            yaml.safe_dump(
                policy(slow.base_url, sqlite_url, str(tmp_path / "spool"), {"alpha": {"provider": "openai"}})
            )
        )
        with GatewayServer(load_config(config_file), config_path=config_file) as server:
            body = {"model": "alpha", "stream": True, "messages": [{"role": "user", "content": "tell me"}]}
            with httpx.stream(
                "POST", server.base_url + "/v1/chat/completions", json=body, timeout=20
            ) as response:
                lines = response.iter_lines()
                first = next(line for line in lines if line.startswith("data: "))
                assert server.app.state.config_watcher.reload()  # a good reload, mid-stream
                rest = [line for line in lines if line.startswith("data: ")]
            assert first and rest[-1] == "data: [DONE]"


def test_sighup_reloads_a_running_server(tmp_path: Path, openai_upstream: SandboxServer) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}"
    path = tmp_path / "tollgate.yaml"
    path.write_text(
        yaml.safe_dump(
            policy(openai_upstream.base_url, url, str(tmp_path / "spool"), {"alpha": {"provider": "openai"}})
        )
    )
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(path), "--port", str(port)],
        env={**os.environ, "TOLLGATE_CONFIG": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: _ready(base), timeout=30)
        # Same mtime granularity is no obstacle: SIGHUP forces a reload whatever the file looks like.
        path.write_text(
            yaml.safe_dump(
                policy(
                    openai_upstream.base_url, url, str(tmp_path / "spool"), {"gamma": {"provider": "openai"}}
                )
            )
        )
        process.send_signal(signal.SIGHUP)
        assert wait_for(lambda: model_ids(base) == {"gamma"})
        assert process.poll() is None, "SIGHUP must reload, not stop, the gateway"
    finally:
        process.terminate()
        process.wait(timeout=15)


def _ready(base: str) -> bool:
    try:
        return httpx.get(base + "/readyz").status_code == 200
    except httpx.TransportError:
        return False

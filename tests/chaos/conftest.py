"""Chaos fixtures: the gateway config every scenario starts from (real PostgreSQL ledger, real Redis
state, short deadlines so faults resolve in seconds), and the table printed at the end of the run."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from gateway.config.loader import build_config
from gateway.config.schema import Config
from sandbox.server import SandboxServer
from tests.chaos.scenario import HEADER, RESULTS
from tests.conftest import gateway_settings
from tests.services import require_redis

# Short enough that a slow client is cut within the test, long enough that a polite one never is.
SERVER = {
    "max_body_bytes": 256 * 1024,
    "header_timeout_seconds": 2.0,
    "body_timeout_seconds": 2.0,
    "keep_alive_seconds": 5.0,
}

ChaosConfig = Callable[..., Config]
ChaosSettings = Callable[..., dict[str, Any]]


@pytest.fixture
def chaos_settings(
    postgres_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer, tmp_path: Any
) -> ChaosSettings:
    """The config's raw sections (what a YAML file would hold) on the real PostgreSQL and Redis;
    keyword overrides replace whole sections, and `vllm_url` points the `local` provider (model
    `llama`) at another emulator."""
    redis_url = require_redis()

    def make(*, vllm_url: str | None = None, **overrides: Any) -> dict[str, Any]:
        sections: dict[str, Any] = {
            "server": SERVER,
            "state": {"backend": "redis", "redis_url": redis_url, "prefix": f"chaos:{uuid.uuid4().hex}:"},
            "ledger": {
                "flush_interval_ms": 10,
                "spool_dir": str(tmp_path / "spool"),
                "probe_interval_seconds": 0.2,
            },
        }
        sections.update(overrides)
        vllm = vllm_url or vllm_upstream.base_url
        return gateway_settings(postgres_url, openai_upstream.base_url, vllm, **sections)

    return make


@pytest.fixture
def chaos_config(chaos_settings: ChaosSettings) -> ChaosConfig:
    """`chaos_settings`, built into a Config."""

    def make(**overrides: Any) -> Config:
        return build_config(chaos_settings(**overrides), source="test", environ={})

    return make


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if RESULTS:
        terminalreporter.section("chaos scenarios")
        terminalreporter.write_line(HEADER)
        for tally in RESULTS:
            terminalreporter.write_line(tally.line())

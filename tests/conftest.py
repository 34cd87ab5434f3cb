"""Shared fixtures: sandbox upstreams, a gateway in front of them, and SDK clients pointed at it."""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.accounting.database import run_migrations
from gateway.cli.sandbox_launcher import free_port
from gateway.config.loader import build_config
from gateway.config.schema import Config
from sandbox.server import SandboxServer
from tests.harness import GatewayServer
from tests.services import scratch_postgres_database

# `sandbox_settings(**overrides)`: the test config as a dict, ready for `build_config`.
SettingsFactory = Callable[..., dict[str, Any]]
# $3 / $15 per million tokens: the worked example every user can check by hand.
PRICE = {"input_per_mtok": "3", "output_per_mtok": "15", "cached_input_per_mtok": "0.30"}


@pytest.fixture(scope="session")
def openai_upstream() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="openai", profile="instant") as server:
        yield server


@pytest.fixture(scope="session")
def vllm_upstream() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="vllm", profile="instant") as server:
        yield server


@pytest.fixture(autouse=True)
def _clean_upstreams(request: pytest.FixtureRequest) -> None:
    """Faults, request logs and breaker state never leak from one test into the next."""
    for name in ("openai_upstream", "vllm_upstream"):
        if name in request.fixturenames:
            server: SandboxServer = request.getfixturevalue(name)
            httpx.post(server.base_url + "/_sandbox/reset").raise_for_status()
    if "gateway" in request.fixturenames:
        gateway: GatewayServer = request.getfixturevalue("gateway")
        gateway.reset_state()


def gateway_config(database_url: str, openai_url: str, vllm_url: str, **overrides: Any) -> Config:
    return build_config(
        gateway_settings(database_url, openai_url, vllm_url, **overrides), source="test", environ={}
    )


def gateway_settings(database_url: str, openai_url: str, vllm_url: str, **overrides: Any) -> dict[str, Any]:
    """The test config as the YAML file would hold it (every override replaces a whole section)."""
    raw: dict[str, Any] = {
        "database": {"url": database_url, "auto_migrate": False},
        "ledger": {"flush_interval_ms": 5, "spool_dir": tempfile.mkdtemp(prefix="tollgate-spool-")},
        "server": {"max_body_bytes": 256 * 1024},
        # Short backoff so fault tests run fast; the jitter bounds are asserted against these.
        "resilience": {"retry": {"backoff_base_seconds": 0.05, "backoff_cap_seconds": 0.4}},
        "providers": {
            "openai": {"type": "openai", "base_url": openai_url + "/v1", "api_key": "sk-upstream"},
            "local": {"type": "vllm", "base_url": vllm_url + "/v1"},
            "dead": {"type": "openai", "base_url": f"http://127.0.0.1:{free_port()}/v1"},
            "slow": {"type": "openai", "base_url": openai_url + "/v1", "timeout_seconds": 0.5},
        },
        "models": {
            "gpt-4o-mini": {"provider": "openai", "price": PRICE},
            "renamed": {"provider": "openai", "upstream_model": "gpt-4o-mini-2024-07-18", "price": PRICE},
            "llama": {
                "provider": "local",
                "upstream_model": "meta-llama/Llama-3.1-8B-Instruct",
                "tier": "local",
                "price": {"input_per_mtok": "0.06", "output_per_mtok": "0.06"},
            },
            "ghost": {"provider": "dead", "price": PRICE},
            "sluggish": {"provider": "slow", "price": PRICE},
            "unpriced": {"provider": "openai"},
            "catalog-priced": {"provider": "openai", "upstream_model": "gpt-4o"},
            # Fallback chains for the resilience tests.
            "resilient": {
                "provider": "openai",
                "upstream_model": "resilient-upstream",
                "price": PRICE,
                "fallbacks": ["llama"],
            },
            "ghost-with-fallback": {"provider": "dead", "price": PRICE, "fallbacks": ["gpt-4o-mini"]},
            "small-window": {
                "provider": "openai",
                "context_window": 8_000,
                "price": PRICE,
                "fallbacks": ["same-window", "big-window"],
            },
            "same-window": {"provider": "openai", "context_window": 8_000, "price": PRICE},
            "big-window": {
                "provider": "local",
                "upstream_model": "long-context",
                "context_window": 200_000,
                "price": PRICE,
            },
        },
        "aliases": {"smart": "gpt-4o-mini"},
    }
    raw.update(overrides)
    return raw


@pytest.fixture(scope="module")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("ledger") / "tollgate.db"
    url = f"sqlite+aiosqlite:///{path}"
    run_migrations(url)
    return url


@pytest.fixture(scope="module")
def sandbox_settings(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> SettingsFactory:
    """`gateway_settings` for this module's database and the sandbox upstreams: pass the overrides."""
    return functools.partial(gateway_settings, sqlite_url, openai_upstream.base_url, vllm_upstream.base_url)


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with scratch_postgres_database() as url:
        run_migrations(url)
        yield url


@pytest.fixture(scope="module")
def gateway(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[GatewayServer]:
    config = gateway_config(sqlite_url, openai_upstream.base_url, vllm_upstream.base_url)
    with GatewayServer(config) as server:
        yield server


@pytest.fixture
def client(gateway: GatewayServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url + "/v1", api_key="tollgate-test", max_retries=0) as sdk:
        yield sdk

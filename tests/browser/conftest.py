"""A gateway with real traffic behind it (two teams, several models, errors, fallbacks, cache hits)
and Debian's Chromium driven by Playwright, for the dashboard's browser tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway import dashboard
from sandbox.server import SandboxServer
from tests.conftest import PRICE, gateway_config
from tests.harness import GatewayServer

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps dialling Google on this closed network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ADMIN = "dashboard-admin-secret"
ALPHA, BETA = "team-alpha", "team-beta"
# A team that never streams (so has no TTFT at all) and keeps its request and response bodies.
GAMMA = "team-gamma"
GAMMA_TAGS = ["nightly", "export"]
BETA_TAG = "beta-only-tag"
SHORT = [{"role": "user", "content": "Say hello to the dashboard."}]


def missing(reason: str) -> None:
    """Under CI=true a browser test that cannot run is a failure, not a skip."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("the playwright package is missing: pip install -e '.[dev]'")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


def chat(base_url: str, key: str, model: str, **extra: Any) -> httpx.Response:
    body = {"model": model, "messages": SHORT, "max_tokens": 40, "stream": True, **extra}
    headers = {"authorization": f"Bearer {key}"}
    if "tags" in extra:
        headers["x-tollgate-tags"] = ",".join(body.pop("tags"))
    return httpx.post(base_url + "/v1/chat/completions", json=body, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def traffic(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[dict[str, Any]]:
    with busy_gateway(sqlite_url, openai_upstream, vllm_upstream) as running:
        yield running


@contextmanager
def busy_gateway(
    database_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[dict[str, Any]]:
    """The gateway, after real requests from two teams; yields it with the keys it made."""
    gpu = {"gpu_hour_usd": "2.50", "input_tokens_per_second": "20000", "output_tokens_per_second": "2000"}
    config = gateway_config(
        database_url,
        openai_upstream.base_url,
        vllm_upstream.base_url,
        auth={"admin_key": ADMIN},
        teams={
            ALPHA: {"budget_monthly_usd": Decimal("0.05")},
            BETA: {"budget_monthly_usd": Decimal("0.02")},
            GAMMA: {"store_bodies": True},
        },
        pricing={"baseline_model": "premium"},
        models={
            "gpt-4o-mini": {"provider": "openai", "price": PRICE},
            "premium": {"provider": "openai", "price": {"input_per_mtok": "10", "output_per_mtok": "30"}},
            "llama": {
                "tier": "local",
                "deployments": [
                    {"provider": "local", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": gpu},
                ],
            },
            "ghost": {"provider": "dead", "price": PRICE},
            "ghost-with-fallback": {"provider": "dead", "price": PRICE, "fallbacks": ["gpt-4o-mini"]},
        },
    )
    server = GatewayServer(config)
    if not any(getattr(route, "path", None) == "/dashboard" for route in server.app.routes):
        server.app.include_router(dashboard.router)  # until gateway/app.py includes it itself
    with server:
        alpha, _ = server.call(server.runtime.keys.create(ALPHA, "alpha-service"))
        beta, _ = server.call(server.runtime.keys.create(BETA, "beta-service"))
        gamma, _ = server.call(server.runtime.keys.create(GAMMA, "gamma-batch"))
        url = server.base_url
        statuses = [
            *(chat(url, alpha, "gpt-4o-mini", tags=["search"]).status_code for _ in range(5)),
            *(chat(url, alpha, "llama", tags=["batch"]).status_code for _ in range(3)),
            chat(url, alpha, "premium").status_code,
            chat(url, alpha, "ghost").status_code,
            chat(url, alpha, "ghost-with-fallback").status_code,
            # The same deterministic request twice: a miss, then a response-cache hit.
            *(chat(url, alpha, "gpt-4o-mini", temperature=0, stream=False).status_code for _ in range(2)),
            *(chat(url, beta, "gpt-4o-mini", tags=[BETA_TAG]).status_code for _ in range(4)),
            *(chat(url, beta, "llama").status_code for _ in range(2)),
            chat(url, beta, "ghost").status_code,
            # Every gamma request has both tags: its tags add up to twice what it spent.
            *(
                chat(url, gamma, model, stream=False, tags=GAMMA_TAGS).status_code
                for model in ("gpt-4o-mini", "llama", "gpt-4o-mini")
            ),
        ]
        assert statuses.count(200) == len(statuses) - 2, statuses
        server.call(server.runtime.ledger.flush())
        yield {
            "server": server,
            "alpha": alpha,
            "beta": beta,
            "gamma": gamma,
            "since": datetime.now(UTC).date().isoformat(),
        }


def spend(server: GatewayServer, key: str, **params: str) -> dict[str, Any]:
    response = httpx.get(
        server.base_url + "/v1/spend", params=params, headers={"authorization": f"Bearer {key}"}, timeout=10
    )
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def shown_usd(nano: int) -> str:
    """What the page shows for an amount: the same integer rounding as frontend/src/format.ts."""
    n = abs(nano)
    decimals = 2 if n == 0 or len(str(n)) >= 10 else min(6, 12 - len(str(n)))
    unit = 10 ** (9 - decimals)
    rounded = (n + unit // 2) // unit
    sign = "-" if nano < 0 and rounded else ""
    return f"{sign}${rounded // 10**decimals:,}.{rounded % 10**decimals:0{decimals}d}"


def shown_percent(rate: float) -> str:
    return f"{rate * 100:.1f}%"


def shown_ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 10 else f"{round(ms)} ms"


def open_dashboard(browser: Any, base_url: str, key: str, *, range_days: str = "1") -> Any:
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # The first call, before signing in, is refused (401) by design; nothing else may fail.
    page.on(
        "console",
        lambda msg: errors.append(msg.text) if msg.type == "error" and "401" not in msg.text else None,
    )
    page.goto(base_url + "/dashboard")
    page.wait_for_selector("body[data-state='signed-out']")
    page.fill("#key", key)
    page.click("#sign-in-button")
    page.wait_for_selector("body[data-state='ready']", timeout=15_000)
    page.select_option("#f-range", range_days)
    page.wait_for_selector("body[data-state='ready']", timeout=15_000)
    page.errors = errors
    return page

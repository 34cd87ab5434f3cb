"""Open mode (no admin key, no teams): the dashboard shows the ledger without asking for a key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway import dashboard
from sandbox.server import SandboxServer
from tests.browser.conftest import SHORT, shown_usd
from tests.conftest import gateway_config
from tests.harness import GatewayServer


@pytest.fixture(scope="module")
def open_gateway(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[GatewayServer]:
    server = GatewayServer(gateway_config(sqlite_url, openai_upstream.base_url, vllm_upstream.base_url))
    if not any(getattr(route, "path", None) == "/dashboard" for route in server.app.routes):
        server.app.include_router(dashboard.router)
    with server:
        for model in ("gpt-4o-mini", "llama", "gpt-4o-mini"):
            body = {"model": model, "messages": SHORT, "max_tokens": 20}
            httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=30).raise_for_status()
        server.call(server.runtime.ledger.flush())
        yield server


def test_open_mode_needs_no_key(open_gateway: GatewayServer, browser: Any) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(open_gateway.base_url + "/dashboard")
        page.wait_for_selector("body[data-state='ready']", timeout=15_000)
        assert page.locator("#sign-in").is_hidden()
        assert "open mode" in page.inner_text("#who")
        totals = httpx.get(open_gateway.base_url + "/v1/spend").json()["totals"]
        assert totals["requests"] == 3
        page.select_option("#f-range", "30")
        page.wait_for_selector("body[data-state='ready']")
        assert page.locator("#kpi-cost .value").inner_text() == shown_usd(totals["cost_nano"])
        assert int(page.locator("#chart-spend").get_attribute("data-points") or 0) > 0
    finally:
        page.close()

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


def test_without_a_baseline_savings_are_not_configured_never_a_loss(
    open_gateway: GatewayServer, browser: Any
) -> None:
    assert open_gateway.runtime.config.pricing.baseline_model is None
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(open_gateway.base_url + "/dashboard")
        page.wait_for_selector("body[data-state='ready']", timeout=15_000)
        for name in ("baseline", "saved-routing"):
            assert page.locator(f"#kpi-{name} .value").inner_text() == "not configured", name
        labels = page.evaluate(
            "() => window.tollgate.charts['chart-savings'].data.datasets.map((d) => d.label)"
        )
        assert "Baseline" not in labels and "Saved by routing" not in labels
        assert "-$" not in page.inner_text("main")
        page.click("#tabs button[data-view='tables']")
        page.wait_for_selector("body[data-view='tables'][data-state='ready']")
        header = page.eval_on_selector_all("#grid-spend thead th", "(ths) => ths.map((t) => t.innerText)")
        cells = page.eval_on_selector_all(
            "#grid-spend tbody tr", "(trs) => trs.map((tr) => [...tr.cells].map((c) => c.innerText))"
        )
        assert cells
        for row in cells:
            shown = dict(zip(header, row, strict=True))
            assert shown["Baseline (USD)"] == shown["Saved (USD)"] == "not configured"
        assert "-$" not in page.inner_text("main")
    finally:
        page.close()

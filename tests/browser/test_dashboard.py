"""The dashboard in headless Chromium after real traffic: every chart renders with data, the totals
on the page are the spend API's, and a team key never sees another team's data."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx

from gateway.accounting.insights import percentile
from tests.browser.conftest import (
    ADMIN,
    ALPHA,
    BETA,
    BETA_TAG,
    open_dashboard,
    shown_ms,
    shown_percent,
    shown_usd,
    spend,
)

CHARTS = ("chart-spend", "chart-savings", "chart-ttft", "chart-speed", "chart-budget", "chart-fleet")
RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def tile(page: Any, name: str) -> tuple[str, str]:
    element = page.locator(f"#kpi-{name}")
    return element.locator(".value").inner_text(), element.get_attribute("data-raw")


def test_admin_sees_every_chart_with_the_spend_api_totals(
    traffic: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    server, since = traffic["server"], traffic["since"]
    page = open_dashboard(browser, server.base_url, ADMIN)
    try:
        api = spend(server, ADMIN, since=since)["totals"]
        assert api["requests"] >= 20 and api["errors"] == 2 and api["cost_nano"] > 0

        # The numbers the page drew from are the spend API's, to the nano-dollar.
        summary = page.evaluate(
            "async (since) => (await fetch(`/dashboard/api/summary?since=${since}`, "
            "{headers: {authorization: `Bearer ${sessionStorage.getItem('tollgate.dashboard.key')}`}})).json()",
            since,
        )
        assert summary["totals"] == api
        assert tile(page, "cost") == (shown_usd(api["cost_nano"]), str(api["cost_nano"]))
        assert tile(page, "baseline") == (
            shown_usd(api["baseline_cost_nano"]),
            str(api["baseline_cost_nano"]),
        )
        routing = api["savings_nano"] - api["cache_saving_nano"]
        assert tile(page, "saved-routing") == (shown_usd(routing), str(routing))
        assert tile(page, "saved-caching") == (
            shown_usd(api["cache_saving_nano"]),
            str(api["cache_saving_nano"]),
        )
        assert tile(page, "requests") == (f"{api['requests']:,}", str(api["requests"]))
        tokens = api["prompt_tokens"] + api["completion_tokens"]
        assert tile(page, "tokens") == (f"{tokens:,}", str(tokens))
        assert tile(page, "error-rate")[0] == shown_percent(api["error_rate"])

        # Rates and latency from the raw rows, recomputed here from the ledger.
        rows = [r for r in server.ledger_rows() if r["created_at"].date().isoformat() >= since]
        assert tile(page, "fallback-rate")[0] == shown_percent(
            sum(r["fallback_used"] for r in rows) / len(rows)
        )
        lookups = [r for r in rows if r["cache_status"] in ("hit", "miss")]
        hits = sum(r["cache_status"] == "hit" for r in lookups)
        assert hits >= 1
        assert tile(page, "cache-hit")[0] == shown_percent(hits / len(lookups))
        ttfts = [
            r["ttft_ms"]
            for r in rows
            if r["status"] < 400 and r["model"] and r["cache_status"] != "hit" and r["ttft_ms"] is not None
        ]
        assert tile(page, "ttft-p95")[0] == shown_ms(percentile(ttfts, 0.95) or 0.0)

        for chart in CHARTS:
            canvas = page.locator(f"#{chart}")
            assert canvas.get_attribute("data-rendered") == "true", chart
            assert int(canvas.get_attribute("data-points") or 0) > 0, chart
            datasets = page.evaluate(
                "(id) => window.tollgate.charts[id].data.datasets.map((d) => d.data.filter((v) => v).length)",
                chart,
            )
            assert datasets and sum(datasets) > 0, chart

        # The stacked spend chart adds up to the spend API's total, by team and by model.
        for stack in ("team", "model", "provider"):
            page.click(f"#stack button[data-stack='{stack}']")
            page.wait_for_selector("body[data-state='ready']")
            drawn = page.evaluate(
                "() => window.tollgate.charts['chart-spend'].data.datasets"
                ".flatMap((d) => d.data).reduce((a, b) => a + b, 0)"
            )
            assert abs(drawn - api["cost_nano"] / 1e9) < 1e-9, stack
            labels = page.evaluate(
                "() => window.tollgate.charts['chart-spend'].data.datasets.map((d) => d.label)"
            )
            groups = spend(server, ADMIN, since=since, group_by=stack)["data"]
            by = {row[stack] or "(none)" for row in groups if row["cost_nano"]}
            assert set(labels) == by

        # Everyone's data is there for the admin: both teams, both teams' keys and tags.
        text = page.inner_text("main")
        assert ALPHA in text and BETA in text and BETA_TAG in text and "alpha-service" in text
        assert page.errors == []

        screenshot = tmp_path / "dashboard.png"
        page.screenshot(path=str(screenshot), full_page=True)
        RESULTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(screenshot, RESULTS / "dashboard.png")
    finally:
        page.close()


def test_a_team_key_sees_only_its_own_team(traffic: dict[str, Any], browser: Any) -> None:
    server, since = traffic["server"], traffic["since"]
    received: list[Any] = []
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.on(
        "response", lambda response: received.append(response) if "/dashboard/api/" in response.url else None
    )
    try:
        page.goto(server.base_url + "/dashboard")
        page.wait_for_selector("body[data-state='signed-out']")
        page.fill("#key", traffic["alpha"])
        page.click("#sign-in-button")
        page.wait_for_selector("body[data-state='ready']", timeout=15_000)
        page.select_option("#f-range", "1")
        page.wait_for_selector("body[data-state='ready']", timeout=15_000)

        own = spend(server, traffic["alpha"], since=since)["totals"]
        assert own == spend(server, ADMIN, since=since, team=ALPHA)["totals"]
        assert own["requests"] < spend(server, ADMIN, since=since)["totals"]["requests"]
        assert tile(page, "cost") == (shown_usd(own["cost_nano"]), str(own["cost_nano"]))
        assert tile(page, "requests")[1] == str(own["requests"])

        assert page.locator("#f-team").is_disabled()
        assert page.eval_on_selector_all("#f-team option", "(os) => os.map((o) => o.value)") == [ALPHA]
        labels = page.evaluate(
            "() => window.tollgate.charts['chart-spend'].data.datasets.map((d) => d.label)"
        )
        assert labels == [ALPHA]

        # Team B's name, key and tags appear nowhere: not on the page, not in anything it was sent.
        everything = page.content() + page.inner_text("body")
        bodies = "".join(response.text() for response in received)
        for secret in (BETA, BETA_TAG, "beta-service"):
            assert secret not in everything, secret
            assert secret not in bodies, secret

        # Asking for team B with team A's key is refused, from the page's own session too.
        status = page.evaluate(
            "async (team) => (await fetch(`/dashboard/api/summary?team=${team}`, "
            "{headers: {authorization: `Bearer ${sessionStorage.getItem('tollgate.dashboard.key')}`}})).status",
            BETA,
        )
        assert status == 403
        for path in ("summary", "spend-over-time", "budgets", "top", "fleet"):
            response = httpx.get(
                f"{server.base_url}/dashboard/api/{path}",
                params={"team": BETA},
                headers={"authorization": f"Bearer {traffic['alpha']}"},
            )
            assert response.status_code == 403, path
        assert httpx.get(server.base_url + "/dashboard/api/summary").status_code == 401
    finally:
        page.close()

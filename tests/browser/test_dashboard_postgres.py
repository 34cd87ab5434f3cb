"""The dashboard's queries on PostgreSQL: the same totals as the spend API, and the same
percentiles as computed here from the raw rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.accounting.insights import percentile
from sandbox.server import SandboxServer
from tests.browser.conftest import ADMIN, ALPHA, BETA, GAMMA, busy_gateway, spend

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def pg_traffic(
    postgres_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[dict[str, Any]]:
    with busy_gateway(postgres_url, openai_upstream, vllm_upstream) as running:
        yield running


def api(server: Any, key: str, path: str, **params: str) -> dict[str, Any]:
    response = httpx.get(
        f"{server.base_url}/dashboard/api/{path}", params=params, headers={"authorization": f"Bearer {key}"}
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_postgres_figures_match_the_spend_api(pg_traffic: dict[str, Any]) -> None:
    server, since = pg_traffic["server"], pg_traffic["since"]
    assert server.runtime.engine.dialect.name == "postgresql"
    for key, team in ((ADMIN, None), (pg_traffic["alpha"], ALPHA)):
        params = {"since": since} if team is None else {"since": since, "team": team}
        expected = spend(server, key, **params)["totals"]
        assert api(server, key, "summary", since=since)["totals"] == expected
        for stack in ("team", "model", "provider"):
            series = api(server, key, "spend-over-time", since=since, stack=stack)
            assert series["totals"] == expected
            assert sum(sum(s["cost_nano"]) for s in series["series"]) == expected["cost_nano"]
    by_model = {row["model"]: row for row in spend(server, ADMIN, since=since, group_by="model")["data"]}
    narrowed = api(server, ADMIN, "summary", since=since, model="llama")["totals"]
    assert narrowed == {name: value for name, value in by_model["llama"].items() if name != "model"}

    rows = [
        r for r in server.ledger_rows() if r["status"] < 400 and r["model"] and r["cache_status"] != "hit"
    ]
    latency = api(server, ADMIN, "summary", since=since)["latency"]
    ttfts = [r["ttft_ms"] for r in rows if r["ttft_ms"] is not None]
    assert latency["overall"]["ttft_p95_ms"] == pytest.approx(percentile(ttfts, 0.95))
    assert latency["overall"]["ttft_p50_ms"] == pytest.approx(percentile(ttfts, 0.5))
    # End to end covers every successful request, streamed or not (TTFT only the streams).
    totals = [r["latency_ms"] for r in rows]
    assert latency["overall"]["requests"] == len(totals) > len(ttfts)
    assert latency["overall"]["latency_p95_ms"] == pytest.approx(percentile(totals, 0.95))
    llama = next(m for m in latency["models"] if m["name"] == "llama")
    speeds = [
        r["output_tokens_per_second"] for r in rows if r["model"] == "llama" and r["output_tokens_per_second"]
    ]
    assert llama["tokens_per_second_p50"] == pytest.approx(percentile(speeds, 0.5))

    top = api(server, pg_traffic["alpha"], "top", since=since)
    assert {row["team"] for row in top["keys"]} == {ALPHA}
    tagged = api(server, ADMIN, "summary", since=since, tag="search")
    assert tagged["rates"]["requests"] == 5
    budgets = api(server, ADMIN, "budgets", since=since)
    assert {t["team"] for t in budgets["teams"]} == {ALPHA, BETA, GAMMA}
    refused = httpx.get(
        f"{server.base_url}/dashboard/api/budgets",
        params={"team": BETA},
        headers={"authorization": f"Bearer {pg_traffic['alpha']}"},
    )
    assert refused.status_code == 403


def test_postgres_explorer_errors_and_tables_match_the_ledger(pg_traffic: dict[str, Any]) -> None:
    server, since = pg_traffic["server"], pg_traffic["since"]
    rows = [r for r in server.ledger_rows() if r["created_at"].date().isoformat() >= since]
    admin = {"authorization": f"Bearer {ADMIN}"}
    # Pages of 5 follow the (created_at, id) cursor on timestamptz: every row once, newest first.
    seen: list[str] = []
    params: dict[str, Any] = {"since": since, "limit": 5}
    while True:
        page = httpx.get(f"{server.base_url}/v1/spend/requests", params=params, headers=admin).json()
        assert page["matched"] == len(rows)
        seen += [r["id"] for r in page["data"]]
        if page["next_before"] is None:
            break
        params["before"] = page["next_before"]
    assert seen == [r["id"] for r in sorted(rows, key=lambda r: (r["created_at"], r["id"]), reverse=True)]
    kept = next(r for r in rows if r["team"] == GAMMA)
    detail = httpx.get(f"{server.base_url}/v1/spend/requests/{kept['id']}", headers=admin).json()
    assert detail["cost_nano"] == kept["cost_nano"] and detail["bodies"]["request"]
    as_alpha = {"authorization": f"Bearer {pg_traffic['alpha']}"}
    assert httpx.get(f"{server.base_url}/v1/spend/requests/{kept['id']}", headers=as_alpha).status_code == 404

    failed = [r for r in rows if r["status"] >= 400]
    for by in ("status", "error_type", "provider", "model"):
        report = api(server, ADMIN, "errors", since=since, by=by)
        assert sum(sum(s["errors"]) for s in report["series"]) == report["total"] == len(failed)
        assert all(len(label) == 19 for label in report["labels"])  # hourly, spelled like the spend API
    kinds = api(server, ADMIN, "errors", since=since)["kinds"]
    assert sum(k["errors"] for k in kinds) == len(failed)
    for by in ("team", "model", "provider", "route", "key"):
        table = api(server, ADMIN, "table", since=since, by=by)["rows"]
        assert table == spend(server, ADMIN, since=since, group_by=by)["data"] or by == "key"
        assert sum(row["cost_nano"] for row in table) == sum(r["cost_nano"] for r in rows)

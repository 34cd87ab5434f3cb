"""The shipped Grafana dashboards as an operator imports them: the data source is a variable (so
they import into an existing Grafana), the team filter narrows every panel of the overview, errors
are split server/upstream versus client, and every series a panel asks for is one a real gateway
exposes, with the team label the filter matches on."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer
from tests.ops.scrape import exposed_names, samples

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy/grafana/dashboards"
OVERVIEW, HEALTH = DASHBOARDS / "tollgate.json", DASHBOARDS / "tollgate-health.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
SELECTOR = re.compile(r"\b(tollgate_[a-z0-9_]+|vllm:[a-z0-9_:]+)(\{[^}]*\})?")
TEAM = "search"


def load(path: Path) -> dict[str, Any]:
    loaded = json.loads(path.read_text())
    assert isinstance(loaded, dict)
    return loaded


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def exprs(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for panel in panels(dashboard):
        for target in panel["targets"]:
            yield panel["title"], target["expr"]


@pytest.mark.parametrize("path", [OVERVIEW, HEALTH], ids=["overview", "health"])
def test_every_query_reads_the_data_source_variable(path: Path) -> None:
    dashboard = load(path)
    (variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert variable["name"] == "DS_PROMETHEUS" and variable["query"] == "prometheus"
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    assert panels(dashboard)
    for panel in panels(dashboard):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
    for query_variable in (v for v in dashboard["templating"]["list"] if v["type"] == "query"):
        assert query_variable["datasource"] == DATASOURCE
    # No hard-wired data source anywhere (an import would point panels at a uid that is not there).
    assert '"uid": "prometheus"' not in path.read_text()


def test_the_team_filter_narrows_every_series_of_every_overview_panel() -> None:
    dashboard = load(OVERVIEW)
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert names == ["DS_PROMETHEUS", "team", "model"]
    for title, expr in exprs(dashboard):
        selectors = SELECTOR.findall(expr)
        assert selectors, f"{title}: no metric"
        for name, matchers in selectors:
            assert 'team=~"$team"' in matchers, f"{title}: {name} is not filtered by team"


def test_the_health_dashboard_shows_no_team_filter_it_could_not_apply() -> None:
    dashboard = load(HEALTH)
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["DS_PROMETHEUS"]
    assert "$team" not in HEALTH.read_text()


def test_error_rate_counts_server_and_upstream_failures_apart_from_client_errors() -> None:
    by_title = {p["title"]: p for p in panels(load(OVERVIEW))}
    (rates,) = [p for title, p in by_title.items() if title.startswith("Server errors (5xx)")]
    legends = {t["legendFormat"]: t["expr"] for t in rates["targets"]}
    assert 'status=~"5.."' in legends["server errors (5xx)"]
    assert 'error_type=~"upstream_.*"' in legends["upstream failures"]
    assert not any("4.." in expr or 'status!="200"' in expr for expr in legends.values())
    (client,) = by_title["Client errors (4xx) by status"]["targets"]
    assert 'status=~"4.."' in client["expr"]


@pytest.fixture(scope="module")
def team_gateway(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[tuple[GatewayServer, str]]:
    teams = {TEAM: {"budget_daily_usd": "100"}}
    config = gateway_config(
        sqlite_url,
        openai_upstream.base_url,
        vllm_upstream.base_url,
        teams=teams,
        observability={"metrics_token": "scrape"},
    )
    with GatewayServer(config) as server:
        key, _ = server.call(server.runtime.keys.create(TEAM, "dashboards"))
        yield server, key


def test_every_metric_a_panel_queries_is_exposed_with_the_team_label(
    team_gateway: tuple[GatewayServer, str], vllm_upstream: SandboxServer
) -> None:
    server, key = team_gateway
    headers = {"authorization": f"Bearer {key}"}

    def chat(model: str, **extra: Any) -> int:
        body = {"model": model, "messages": [{"role": "user", "content": "2+2?"}], **extra}
        url = server.base_url + "/v1/chat/completions"
        return httpx.post(url, json=body, headers=headers, timeout=30).status_code

    # An answer, a cache miss then hit, an unknown model (4xx), a dead upstream (5xx) and a fallback.
    statuses = [
        chat("gpt-4o-mini", temperature=0),
        chat("gpt-4o-mini", temperature=0),
        chat("no-such-model"),
        chat("ghost"),
        chat("ghost-with-fallback"),
    ]
    assert statuses[:3] == [200, 200, 404] and statuses[3] >= 500 and statuses[4] == 200
    server.ledger_rows()  # every request closed (and counted) before the scrape
    text = httpx.get(
        server.base_url + "/metrics", headers={"authorization": "Bearer scrape"}, timeout=10
    ).text
    exposed = exposed_names(text) | exposed_names(httpx.get(vllm_upstream.base_url + "/metrics").text)
    series = samples(text)
    for path in (OVERVIEW, HEALTH):
        for title, expr in exprs(load(path)):
            for name, matchers in SELECTOR.findall(expr):
                assert name in exposed, f"{path.name}: {title}: {name} is not exposed"
                if "$team" in matchers:
                    teams = {labels.get("team") for labels, _ in series[name]}
                    assert TEAM in teams, f"{title}: {name} has no sample for team {TEAM}: {teams}"

"""`GET /v1/spend/requests` and `/v1/spend/requests/{id}` over HTTP after real traffic: the rows are
the ledger's, pages never repeat or skip a row, the scope is the spend API's, and bad input is an
OpenAI-style 400 (or 404 for an id the caller may not see), never a stack trace."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sandbox.server import SandboxServer
from tests.browser.conftest import ADMIN, ALPHA, BETA, GAMMA, busy_gateway


@pytest.fixture(scope="module")
def traffic(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[dict[str, Any]]:
    with busy_gateway(sqlite_url, openai_upstream, vllm_upstream) as running:
        running["rows"] = running["server"].ledger_rows()
        yield running


def get(traffic: dict[str, Any], path: str, auth: str | None = ADMIN, **params: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {auth}"} if auth else {}
    return httpx.get(traffic["server"].base_url + path, params=params, headers=headers, timeout=10)


def test_pages_cover_every_ledger_row_once_newest_first(traffic: dict[str, Any]) -> None:
    rows = traffic["rows"]
    seen: list[str] = []
    before = None
    while True:
        page = get(traffic, "/v1/spend/requests", limit=4, **({"before": before} if before else {})).json()
        assert page["matched"] == len(rows)
        assert page["cost_nano"] == sum(r["cost_nano"] for r in rows)
        seen += [r["id"] for r in page["data"]]
        before = page["next_before"]
        if before is None:
            break
    newest = sorted(rows, key=lambda r: (r["created_at"], r["id"]), reverse=True)
    assert seen == [r["id"] for r in newest]


@pytest.mark.parametrize(
    ("params", "keep"),
    [
        ({"team": BETA}, lambda r: r["team"] == BETA),
        ({"model": "llama"}, lambda r: r["model"] == "llama"),
        ({"provider": "dead"}, lambda r: r["provider"] == "dead"),
        ({"status": "error"}, lambda r: r["status"] >= 400),
        ({"status": "5xx"}, lambda r: 500 <= r["status"] < 600),
        ({"status": "200"}, lambda r: r["status"] == 200),
        ({"tag": "nightly"}, lambda r: r["tags"] and "nightly" in r["tags"]),
        ({"min_cost_usd": "0.0001"}, lambda r: r["cost_nano"] > 100_000),
        ({"error_type": "upstream_unreachable"}, lambda r: r["error_type"] == "upstream_unreachable"),
        ({"cache_status": "hit"}, lambda r: r["cache_status"] == "hit"),
    ],
)
def test_each_filter_matches_the_ledger(traffic: dict[str, Any], params: dict[str, str], keep: Any) -> None:
    expected = {r["id"] for r in traffic["rows"] if keep(r)}
    assert expected, params
    body = get(traffic, "/v1/spend/requests", limit=500, **params).json()
    assert {r["id"] for r in body["data"]} == expected
    assert body["matched"] == len(expected)


def test_the_key_filter_is_a_key_id(traffic: dict[str, Any]) -> None:
    key_id = next(r["key_id"] for r in traffic["rows"] if r["team"] == GAMMA)
    body = get(traffic, "/v1/spend/requests", key=key_id, limit=500).json()
    assert body["matched"] == sum(1 for r in traffic["rows"] if r["key_id"] == key_id) == 3


def test_one_request_in_full(traffic: dict[str, Any]) -> None:
    row = next(r for r in traffic["rows"] if r["team"] == GAMMA and r["model"] == "gpt-4o-mini")
    shown = get(traffic, f"/v1/spend/requests/{row['id']}").json()
    for name in ("attempts", "status", "prompt_tokens", "completion_tokens", "cost_nano", "route_reason"):
        assert shown[name] == row[name], name
    assert shown["deployments_tried"] == row["deployments_tried"].split(",")
    cost = shown["cost"]
    assert cost["priced"] == "as_billed"
    assert cost["billed"]["total_nano"] == row["cost_nano"]
    classes = {c["class"]: c for c in cost["classes"]}
    inputs = sum(classes[name]["cost_nano"] for name in ("input", "cached", "cache_write"))
    outputs = sum(classes[name]["cost_nano"] for name in ("output", "reasoning"))
    assert (inputs, outputs) == (row["input_cost_nano"], row["output_cost_nano"])
    assert sum(c["tokens"] for c in cost["classes"]) == row["prompt_tokens"] + row["completion_tokens"]
    split = shown["latency_split"]
    assert split["total_ms"] == row["latency_ms"] and split["first_token_ms"] is None
    assert split["gateway_ms"] + split["upstream_ms"] == pytest.approx(row["latency_ms"])
    assert shown["bodies"]["request"].startswith("{") and "Say hello" in shown["bodies"]["request"]
    assert shown["created_at"].endswith("+00:00")
    # Teams that do not keep bodies have none to show.
    other = next(r for r in traffic["rows"] if r["team"] == ALPHA)
    assert get(traffic, f"/v1/spend/requests/{other['id']}").json()["bodies"] is None


def test_a_team_key_sees_its_own_team_only(traffic: dict[str, Any]) -> None:
    alpha = traffic["alpha"]
    theirs = next(r for r in traffic["rows"] if r["team"] == BETA)
    mine = next(r for r in traffic["rows"] if r["team"] == ALPHA)
    missing = get(traffic, f"/v1/spend/requests/{theirs['id']}", auth=alpha)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "request_not_found"
    # Exactly what an id that exists nowhere answers: nothing tells the two apart.
    nowhere = get(traffic, "/v1/spend/requests/00000000-0000-0000-0000-000000000000", auth=alpha)
    assert (nowhere.status_code, nowhere.json()["error"]["code"]) == (404, "request_not_found")
    assert get(traffic, f"/v1/spend/requests/{mine['id']}", auth=alpha).status_code == 200
    refused = get(traffic, "/v1/spend/requests", auth=alpha, team=BETA)
    assert refused.status_code == 403 and refused.json()["error"]["type"]
    own = get(traffic, "/v1/spend/requests", auth=alpha, limit=500).json()
    assert {r["team"] for r in own["data"]} == {ALPHA}
    assert own["matched"] == sum(1 for r in traffic["rows"] if r["team"] == ALPHA)
    assert get(traffic, "/v1/spend/requests", auth=None).status_code == 401
    assert get(traffic, f"/v1/spend/requests/{mine['id']}", auth=None).status_code == 401


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"status": "oops"}, "status"),
        ({"status": "1234"}, "status"),
        ({"min_cost_usd": "abc"}, "min_cost_usd"),
        ({"min_cost_usd": "-1"}, "min_cost_usd"),
        ({"min_cost_usd": "NaN"}, "min_cost_usd"),
        ({"before": "not-a-cursor"}, "before"),
        ({"since": "yesterday-ish"}, None),
    ],
)
def test_bad_filters_are_a_400_with_an_openai_error(
    traffic: dict[str, Any], params: dict[str, str], param: str | None
) -> None:
    response = get(traffic, "/v1/spend/requests", **params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    if param:
        assert error["param"] == param


def test_dashboard_groupings_refuse_what_they_do_not_know(traffic: dict[str, Any]) -> None:
    for path in ("table", "latency", "errors"):
        response = get(traffic, f"/dashboard/api/{path}", by="nope")
        assert response.status_code == 400, path
        assert "choose from" in response.json()["error"]["message"]
    tagged = get(traffic, "/dashboard/api/table", by="model", tag="nightly").json()
    assert tagged["rows"] is None and "tag" in tagged["reason"]


def test_every_equality_filter_reads_the_query_string(traffic: dict[str, Any]) -> None:
    local = {r["id"] for r in traffic["rows"] if r["tier"] == "local"}
    assert local
    body = get(traffic, "/v1/spend/requests", tier="local", limit=500).json()
    assert {r["id"] for r in body["data"]} == local
    refused = get(traffic, "/v1/spend/requests", cache_status="hit\x00")
    assert refused.status_code in (400, 422) and "error" in refused.json()

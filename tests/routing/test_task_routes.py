"""Routes by task through the real app, with the official OpenAI SDK as the client: the route that
matched is on the wire (`x-tollgate-route`) and in the ledger (`route`), the reason says why, and a
route's difficulty thresholds move a request one tier."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import openai
import pytest

from gateway.config.loader import build_config
from tests.conftest import SettingsFactory
from tests.harness import GatewayServer

TIERS = [
    {"name": "local", "models": ["llama"]},
    {"name": "standard", "models": ["gpt-4o-mini"]},
    {"name": "frontier", "models": ["big-window"]},
]
CODE = (
    "Write a Python function `parse_duration(text)` that turns strings like '1h30m' or '45s' into "
    "seconds, raising ValueError on bad input. Return only the code."
)
GREETING = "hi, how are you today?"


def serve(settings: dict[str, Any]) -> GatewayServer:
    return GatewayServer(build_config(settings, source="test", environ={}))


def sdk(server: GatewayServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="anything", max_retries=0)


def ask(server: GatewayServer, text: str) -> tuple[dict[str, str], dict[str, Any]]:
    raw = sdk(server).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": text}]
    )
    assert raw.parse().choices[0].message.content
    return dict(raw.headers), server.ledger_row(raw.headers["x-request-id"])


@pytest.fixture(scope="module")
def defaults(sandbox_settings: SettingsFactory) -> Iterator[GatewayServer]:
    """No `routing.routes`: the shipped default set, mapped onto three tiers."""
    with serve(sandbox_settings(routing={"tiers": TIERS})) as server:
        yield server


def test_a_code_writing_request_matches_the_code_route(defaults: GatewayServer) -> None:
    headers, row = ask(defaults, CODE)
    assert headers["x-tollgate-route"] == "code"
    assert row["route"] == "code"
    assert row["route_reason"].startswith("route code 0.")
    assert "like '" in row["route_reason"]
    assert row["route_reason"].endswith(f"-> {headers['x-tollgate-tier']}")
    assert 0 <= row["route_score"] <= 1  # the difficulty within the route
    assert headers["x-tollgate-tier"] != "local"  # code is a strong route: never the cheapest tier


def test_a_streamed_request_says_its_route_too(defaults: GatewayServer) -> None:
    with sdk(defaults).chat.completions.with_streaming_response.create(
        model="auto", messages=[{"role": "user", "content": CODE}], stream=True
    ) as response:
        assert response.headers["x-tollgate-route"] == "code"
        assert "".join(c.choices[0].delta.content or "" for c in response.parse() if c.choices)
        request_id = response.headers["x-request-id"]
    assert defaults.ledger_row(request_id)["route"] == "code"


def test_small_talk_stays_on_the_cheapest_tier(defaults: GatewayServer) -> None:
    headers, row = ask(defaults, GREETING)
    assert headers["x-tollgate-tier"] == "local"
    assert row["route"] == headers["x-tollgate-route"] != "code"


def test_a_named_model_has_no_route(defaults: GatewayServer) -> None:
    raw = sdk(defaults).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": CODE}]
    )
    assert "x-tollgate-route" not in raw.headers
    assert defaults.ledger_row(raw.headers["x-request-id"])["route"] is None


ROUTES = [
    # Every difficulty is above 0 and below 1, so these thresholds always move a request.
    {"name": "parsers", "description": "writing parsers", "examples": [CODE], "tier": "standard"},
    {"name": "greetings", "description": "greetings", "examples": [GREETING], "tier": "standard"},
]


def test_route_thresholds_move_a_request_one_tier(sandbox_settings: SettingsFactory) -> None:
    plain = sandbox_settings(routing={"tiers": TIERS, "routes": ROUTES})
    with serve(plain) as server:
        assert ask(server, CODE)[0]["x-tollgate-tier"] == "standard"
        assert ask(server, GREETING)[0]["x-tollgate-tier"] == "standard"
    moved = [{**ROUTES[0], "raise_above": 0.0}, {**ROUTES[1], "lower_below": 1.0}]
    with serve(sandbox_settings(routing={"tiers": TIERS, "routes": moved})) as server:
        up, up_row = ask(server, CODE)
        down, down_row = ask(server, GREETING)
    assert (up["x-tollgate-route"], up["x-tollgate-tier"], up["x-tollgate-model"]) == (
        "parsers",
        "frontier",
        "big-window",
    )
    assert (down["x-tollgate-route"], down["x-tollgate-tier"], down["x-tollgate-model"]) == (
        "greetings",
        "local",
        "llama",
    )
    assert "> 0, one tier up -> frontier" in up_row["route_reason"]
    assert "< 1, one tier down -> local" in down_row["route_reason"]


def test_a_route_may_name_its_own_models(sandbox_settings: SettingsFactory) -> None:
    routes = [{**ROUTES[0], "tier": None, "models": ["big-window", "gpt-4o-mini"]}, ROUTES[1]]
    with serve(sandbox_settings(routing={"tiers": TIERS, "routes": routes})) as server:
        headers, row = ask(server, CODE)
    assert (headers["x-tollgate-route"], headers["x-tollgate-model"]) == ("parsers", "big-window")
    assert row["deployments_tried"].startswith("local/")


def test_no_routes_is_the_old_score_only_routing(sandbox_settings: SettingsFactory) -> None:
    routing = {"tiers": TIERS, "routes": [], "thresholds": [0.17, 0.6]}
    with serve(sandbox_settings(routing=routing)) as server:
        headers, row = ask(server, GREETING)
    assert "x-tollgate-route" not in headers
    assert row["route"] is None
    assert row["route_reason"].startswith(f"score {row['route_score']:.2f} -> local")


def test_the_spend_api_breaks_spend_down_by_route(sandbox_settings: SettingsFactory) -> None:
    routes = [{**ROUTES[0], "tier": "frontier"}, {**ROUTES[1], "tier": "local"}]
    started = datetime.now(UTC).isoformat()  # the module's other tests share this ledger
    with serve(sandbox_settings(routing={"tiers": TIERS, "routes": routes})) as server:
        rows = [ask(server, text)[1] for text in (CODE, GREETING, GREETING)]
        answer = httpx.get(server.base_url + "/v1/spend/routes", params={"since": started}, timeout=10)
    assert answer.status_code == 200
    by_route = {row["route"]: row for row in answer.json()["data"]}
    assert set(by_route) == {"parsers", "greetings"}
    parsers, greetings = by_route["parsers"], by_route["greetings"]
    assert (parsers["requests"], parsers["cheapest_share"], parsers["cheapest_tier"]) == (1, 0.0, "local")
    assert (greetings["requests"], greetings["cheapest_share"]) == (2, 1.0)
    assert parsers["cost_nano"] == rows[0]["cost_nano"] > 0
    assert greetings["cost_nano"] == rows[1]["cost_nano"] + rows[2]["cost_nano"]


def test_spend_and_the_dashboard_table_group_by_route(sandbox_settings: SettingsFactory) -> None:
    """`/v1/spend?group_by=route` (from the raw ledger: the daily rollups keep no route) and the
    dashboard's table by route agree with the rows."""
    routes = [{**ROUTES[0], "tier": "frontier"}, {**ROUTES[1], "tier": "local"}]
    started = datetime.now(UTC).isoformat()
    with serve(sandbox_settings(routing={"tiers": TIERS, "routes": routes})) as server:
        rows = [ask(server, text)[1] for text in (CODE, GREETING)]
        params = {"group_by": "route", "since": started}
        spend = httpx.get(server.base_url + "/v1/spend", params=params, timeout=10).json()
        table = httpx.get(
            server.base_url + "/dashboard/api/table", params={"by": "route", "since": started}, timeout=10
        ).json()
    by_route = {row["route"]: row for row in spend["data"]}
    assert by_route["parsers"]["cost_nano"] == rows[0]["cost_nano"] > 0
    assert by_route["greetings"]["requests"] == 1
    assert {row["route"]: row["cost_nano"] for row in table["rows"]} == {
        name: row["cost_nano"] for name, row in by_route.items()
    }

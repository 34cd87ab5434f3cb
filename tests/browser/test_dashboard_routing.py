"""The dashboard's routing table after real `auto` traffic: per task route, the share answered below
the top tier, the savings, the escalations and the shadow agreement, as `/v1/spend/routing` has them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway import dashboard
from sandbox.server import SandboxServer
from tests.browser.conftest import shown_percent, shown_usd
from tests.conftest import gateway_config
from tests.harness import GatewayServer
from tests.routing.test_escalation import LOCAL_UPSTREAM, fault
from tests.routing.test_shadow import shadow_row

NONE = "\u2013"  # what the table shows where there is no figure
QUIZ = "Which letter? A, B, C or D."
PARSER = "Write a Rust function that parses ISO 8601 durations; return only the code."
ROUTING = {
    "tiers": [{"name": "local", "models": ["llama"]}, {"name": "frontier", "models": ["gpt-4o-mini"]}],
    "routes": [
        {"name": "quiz", "description": "multiple-choice questions", "examples": [QUIZ], "tier": "local"},
        {"name": "code", "description": "writing code", "examples": [PARSER], "tier": "frontier"},
    ],
    "shadow": {"sample_rate": 1.0},
}


def ask(server: GatewayServer, text: str, **body: Any) -> httpx.Response:
    messages = [{"role": "user", "content": text}]
    answer = httpx.post(
        server.base_url + "/v1/chat/completions",
        json={"model": "auto", "messages": messages, **body},
        timeout=30,
    )
    answer.raise_for_status()
    return answer


@pytest.fixture(scope="module")
def routed(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[GatewayServer]:
    config = gateway_config(
        sqlite_url,
        openai_upstream.base_url,
        vllm_upstream.base_url,
        routing=ROUTING,
        pricing={"baseline_model": "gpt-4o-mini"},
    )
    server = GatewayServer(config)
    if not any(getattr(route, "path", None) == "/dashboard" for route in server.app.routes):
        server.app.include_router(dashboard.router)
    with server:
        for local, frontier in (("B", "B"), ("B", "C")):  # one shadow check agrees, one does not
            fault(vllm_upstream, content=local, model=LOCAL_UPSTREAM)
            fault(openai_upstream, content=frontier)
            shadow_row(server, ask(server, QUIZ).headers["x-request-id"])
        fault(vllm_upstream, content="not json", model=LOCAL_UPSTREAM)
        fault(openai_upstream, content='{"answer": "D"}')
        escalated = ask(server, QUIZ, response_format={"type": "json_object"})
        assert escalated.headers["x-tollgate-escalated"] == "json"
        assert ask(server, PARSER).headers["x-tollgate-route"] == "code"
        server.call(server.runtime.ledger.flush())
        yield server


def test_the_routing_table_shows_each_route_as_the_spend_api_does(
    routed: GatewayServer, browser: Any
) -> None:
    report = {row["route"]: row for row in httpx.get(routed.base_url + "/v1/spend/routing").json()["data"]}
    quiz, code = report["quiz"], report["code"]
    # The escalated quiz request keeps its route; it was answered on the frontier, so not low.
    assert (quiz["requests"], quiz["answered_low"], quiz["escalated"]) == (3, 2, 1)
    assert (quiz["shadow_verdicts"], quiz["shadow_agreed"]) == (2, 1)
    assert (code["requests"], code["answered_low"], code["escalated"]) == (1, 0, 0)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(routed.base_url + "/dashboard")
        page.wait_for_selector("body[data-state='ready']", timeout=15_000)
        rows = page.locator("#table-routing tbody tr")
        shown = {}
        for i in range(rows.count()):
            cells = [c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
            shown[cells[0]] = cells[1:]
        assert shown["quiz"] == [
            "3",
            shown_percent(2 / 3),
            shown_usd(quiz["savings_nano"]),
            "1",
            shown_percent(0.5),
        ]
        assert shown["code"] == ["1", shown_percent(0.0), shown_usd(code["savings_nano"]), "0", NONE]
        assert errors == []
    finally:
        page.close()

"""Shadow checks end to end: with sample_rate 1.0 every local `auto` answer is also asked of the
frontier in the background; its own ledger row (tag `shadow`) says whether the two agreed, it is in
no team's budget, and nothing it does reaches the client."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import openai
import pytest

from gateway.accounting.database import run_migrations
from gateway.accounting.spend import period_spend
from gateway.config.loader import build_config
from sandbox.server import SandboxServer
from tests.conftest import SettingsFactory, gateway_settings
from tests.harness import GatewayServer
from tests.routing.test_escalation import LOCAL_UPSTREAM, MESSAGES, ROUTING, fault

TEAM = "research"


def shadow_routing(**shadow: Any) -> dict[str, Any]:
    return {**ROUTING, "shadow": {"sample_rate": 1.0, **shadow}}


@pytest.fixture(scope="module")
def shadowed(sandbox_settings: SettingsFactory) -> Iterator[tuple[GatewayServer, str]]:
    settings = sandbox_settings(
        routing=shadow_routing(),
        teams={TEAM: {"budget_daily_usd": 100}},
        auth={"admin_key": "adm"},
    )
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        key, _ = server.call(server.runtime.keys.create(TEAM, "shadow-test"))
        yield server, key


@pytest.fixture
def open_settings(
    tmp_path_factory: pytest.TempPathFactory, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> SettingsFactory:
    """Settings on a ledger of its own: the module's has keys, which end open mode."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('shadow') / 'ledger.db'}"
    run_migrations(url)

    def settings(**overrides: Any) -> dict[str, Any]:
        return gateway_settings(url, openai_upstream.base_url, vllm_upstream.base_url, **overrides)

    return settings


def ask(server: GatewayServer, key: str, **body: Any) -> openai.types.chat.ChatCompletion:
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0) as sdk:
        raw = sdk.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES, **body)
        ask.last_id = raw.headers["x-request-id"]  # type: ignore[attr-defined]
        return raw.parse()


def shadow_row(server: GatewayServer, request_id: str) -> dict[str, Any]:
    """The shadow row of `request_id`, once the background check has written it."""
    done = threading.Event()
    for _ in range(500):
        rows = [r for r in server.ledger_rows() if r["shadow_of"] == request_id and "judge" not in r["tags"]]
        if rows:
            assert len(rows) == 1
            return rows[0]
        done.wait(0.02)
    raise AssertionError(f"no shadow row for {request_id}")


def test_a_sampled_answer_is_checked_on_the_tier_above_outside_the_teams_budget(
    shadowed: tuple[GatewayServer, str], openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    server, key = shadowed
    fault(vllm_upstream, content="B", model=LOCAL_UPSTREAM)
    fault(openai_upstream, content="b.")
    answer = ask(server, key)
    request_id = ask.last_id  # type: ignore[attr-defined]
    assert answer.choices[0].message.content == "B"  # the client's answer is the local one
    row = shadow_row(server, request_id)
    original = server.ledger_row(request_id)
    assert (original["tier"], original["team"], original["tags"]) == ("local", TEAM, None)
    assert (row["tags"], row["shadow_agreement"], row["status"]) == ('["shadow"]', True, 200)
    assert (row["model"], row["tier"], row["team"], row["key_id"]) == ("gpt-4o-mini", "frontier", None, None)
    assert row["cost_nano"] > 0
    # The team's budget counter and its ledger spend hold the client's request only.
    today = datetime.now(UTC).date()
    counter = server.call(server.runtime.store.get(f"budget:team:{TEAM}:d:{today.isoformat()}"))
    assert counter is not None and int(counter) == original["cost_nano"]
    spent = server.call(period_spend(server.runtime.engine, first_day=today, last_day=today, team=TEAM))
    assert spent == original["cost_nano"]


def test_a_different_answer_is_recorded_as_disagreement(
    shadowed: tuple[GatewayServer, str], openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    server, key = shadowed
    fault(vllm_upstream, content='{"answer": "B", "sure": true}', model=LOCAL_UPSTREAM)
    fault(openai_upstream, content='{"sure": true, "answer": "C"}')
    ask(server, key)
    assert shadow_row(server, ask.last_id)["shadow_agreement"] is False  # type: ignore[attr-defined]


def test_a_failing_shadow_never_reaches_the_client(
    shadowed: tuple[GatewayServer, str], openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    server, key = shadowed
    fault(vllm_upstream, content="B", model=LOCAL_UPSTREAM)
    rule = {"kind": "status", "status": 400, "count": -1}
    httpx.post(openai_upstream.base_url + "/_sandbox/faults", json=[rule]).raise_for_status()
    assert ask(server, key).choices[0].message.content == "B"
    row = shadow_row(server, ask.last_id)  # type: ignore[attr-defined]
    assert (row["error_type"], row["shadow_agreement"], row["cost_nano"]) == ("shadow_failed", None, 0)
    assert row["status"] >= 400


def test_streams_and_frontier_answers_are_not_shadowed(
    shadowed: tuple[GatewayServer, str], openai_upstream: SandboxServer
) -> None:
    server, key = shadowed
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0) as sdk:
        with sdk.chat.completions.with_streaming_response.create(
            model="auto", messages=MESSAGES, stream=True
        ) as streamed:
            list(streamed.parse())
        forced = sdk.chat.completions.with_raw_response.create(
            model="auto", messages=MESSAGES, extra_headers={"x-tollgate-tier": "frontier"}
        )
    server.call(server.runtime.ledger.flush())
    ids = {streamed.headers["x-request-id"], forced.headers["x-request-id"]}
    assert not [r for r in server.ledger_rows() if r["shadow_of"] in ids]


def test_a_saturated_shadow_pool_drops_samples_and_counts_them(
    open_settings: SettingsFactory, openai_upstream: SandboxServer
) -> None:
    settings = open_settings(routing=shadow_routing(max_in_flight=1))
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        # The frontier hangs: the first shadow check holds the only slot.
        hang = {"kind": "timeout", "seconds": 30, "count": -1}
        httpx.post(openai_upstream.base_url + "/_sandbox/faults", json=[hang]).raise_for_status()
        for _ in range(3):
            answer = httpx.post(
                server.base_url + "/v1/chat/completions", json={"model": "auto", "messages": MESSAGES}
            )
            assert answer.status_code == 200 and answer.headers["x-tollgate-tier"] == "local"
        metrics = httpx.get(server.base_url + "/metrics").text
        assert 'tollgate_shadow_checks_total{from_tier="local",outcome="dropped_saturated"} 2.0' in metrics
        assert server.runtime.shadow.in_flight == 1


def test_a_judge_model_decides_long_answers(
    open_settings: SettingsFactory, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    settings = open_settings(routing=shadow_routing(judge_model="gpt-4o-mini"))
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        fault(vllm_upstream, content="Oslo is the capital and largest city of Norway.", model=LOCAL_UPSTREAM)
        fault(openai_upstream, content="Norway's seat of government is in Oslo, its biggest city.")
        fault(openai_upstream, content="Yes")  # the judge's turn comes after the shadow answer
        answer = httpx.post(
            server.base_url + "/v1/chat/completions", json={"model": "auto", "messages": MESSAGES}
        )
        request_id = answer.headers["x-request-id"]
        row = shadow_row(server, request_id)
        assert row["shadow_agreement"] is True
        judge = [r for r in server.ledger_rows() if r["shadow_of"] == request_id and "judge" in r["tags"]]
        assert len(judge) == 1 and judge[0]["tags"] == '["shadow","shadow_judge"]'


def test_the_routing_report_shows_share_low_escalations_and_agreement(
    open_settings: SettingsFactory, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    settings = open_settings(routing=shadow_routing())
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        ids = []
        for local, frontier in (("B", "B"), ("B", "C"), ("A", "a")):
            fault(vllm_upstream, content=local, model=LOCAL_UPSTREAM)
            fault(openai_upstream, content=frontier)
            answer = httpx.post(
                server.base_url + "/v1/chat/completions", json={"model": "auto", "messages": MESSAGES}
            )
            ids.append(answer.headers["x-request-id"])
            shadow_row(server, ids[-1])  # one at a time: the frontier's faults are taken in order
        fault(vllm_upstream, content="not json", model=LOCAL_UPSTREAM)
        fault(openai_upstream, content='{"answer": "D"}')
        escalated = httpx.post(
            server.base_url + "/v1/chat/completions",
            json={"model": "auto", "messages": MESSAGES, "response_format": {"type": "json_object"}},
        )
        assert escalated.headers["x-tollgate-escalated"] == "json"
        server.call(server.runtime.ledger.flush())
        report = httpx.get(server.base_url + "/v1/spend/routing").json()["data"]
        by_route = {row["route"]: row for row in report}
        local, frontier = by_route["local"], by_route["frontier"]
        assert (local["requests"], local["answered_low"], local["share_low"]) == (3, 3, 1.0)
        assert (local["shadow_checks"], local["shadow_agreed"], local["agreement"]) == (3, 2, 2 / 3)
        assert local["shadow_cost_nano"] == sum(
            r["cost_nano"] for r in server.ledger_rows() if r["shadow_of"] in ids
        )
        assert (frontier["requests"], frontier["answered_low"], frontier["escalated"]) == (1, 0, 1)
        assert (
            frontier["escalation_cost_nano"]
            == server.ledger_row(escalated.headers["x-request-id"])["escalation_cost_nano"]
            > 0
        )

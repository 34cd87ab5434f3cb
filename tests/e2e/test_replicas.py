"""Two gateway processes sharing the real Redis and PostgreSQL, with clients spread round robin:
budgets, rate limits, circuit state and the response cache behave as one gateway, and the ledger
has exactly one row per request."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer
from tests.services import require_redis

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
def pair(
    postgres_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[tuple[GatewayServer, GatewayServer]]:
    state = {"backend": "redis", "redis_url": require_redis(), "prefix": f"tollgate-test:{uuid.uuid4().hex}:"}
    teams = {"shared": {"budget_daily_usd": "0.01", "rpm": 40}}
    resilience = {
        "retry": {"max_attempts": 1},
        "breaker": {"consecutive_failures": 4, "cooldown_seconds": 30},
    }
    config = gateway_config(
        postgres_url,
        openai_upstream.base_url,
        vllm_upstream.base_url,
        state=state,
        teams=teams,
        auth={"admin_key": "adm"},
        resilience=resilience,
    )
    with GatewayServer(config) as a, GatewayServer(config) as b:
        yield a, b


def test_two_replicas_behave_as_one(
    pair: tuple[GatewayServer, GatewayServer], openai_upstream: SandboxServer
) -> None:
    a, b = pair
    key, _ = a.call(a.runtime.keys.create("shared", "rr"))
    auth = {"authorization": f"Bearer {key}"}
    turns = itertools.cycle([a, b])
    sent: list[httpx.Response] = []

    started = time.monotonic()  # the team's bucket fills from its first request on

    def post(body: dict[str, Any], **headers: str) -> httpx.Response:
        server = next(turns)
        response = httpx.post(
            server.base_url + "/v1/chat/completions", json=body, headers={**auth, **headers}, timeout=20
        )
        sent.append(response)
        return response

    # The response cache: stored by one replica, served by the other. (max_tokens bounds each
    # request's worst case, which is what the budget reserves.)
    question = {
        "model": "gpt-4o-mini",
        "temperature": 0,
        "max_tokens": 50,
        "messages": [{"role": "user", "content": f"q{uuid.uuid4().hex}"}],
    }
    first = post(question)
    assert first.headers["x-tollgate-cache"] == "miss", first.text
    assert post(question).headers["x-tollgate-cache"] == "hit"

    # Circuit state: failures on either replica add up; then neither sends upstream.
    httpx.post(
        openai_upstream.base_url + "/_sandbox/faults",
        json=[{"kind": "status", "status": 500, "count": -1, "model": "gpt-4o-mini"}],
    )
    failing = {"model": "gpt-4o-mini", "max_tokens": 50, "messages": [{"role": "user", "content": "x"}]}
    for _ in range(4):
        assert post(failing).status_code == 502
    upstream_before = len(httpx.get(openai_upstream.base_url + "/_sandbox/requests").json())
    assert [post(failing).status_code for _ in range(2)] == [503, 503], "open on both replicas"
    assert len(httpx.get(openai_upstream.base_url + "/_sandbox/requests").json()) == upstream_before
    httpx.delete(openai_upstream.base_url + "/_sandbox/faults")

    # Rate limit (40 rpm for the team, 8 used above) and budget ($0.01) shared across replicas.
    results = [
        post(
            {"model": "llama", "max_tokens": 30, "messages": [{"role": "user", "content": f"n{i}"}]}
        ).status_code
        for i in range(50)
    ]
    # The bucket refills at 40/60 a second meanwhile: a slow machine rightly admits a few more.
    refilled = int((time.monotonic() - started) * 40 / 60)
    assert 30 <= results.count(200) <= 34 + refilled, results
    assert set(results) <= {200, 429}

    b.ledger_rows()  # both replicas write to the same ledger: flush the second one too
    rows = a.ledger_rows()
    ours = [r for r in rows if r["team"] == "shared"]
    assert len(ours) == len(sent), "exactly one ledger row per request, whichever replica served it"
    assert {r["id"] for r in ours} == {r.headers["x-request-id"] for r in sent}
    assert sum(r["cost_nano"] for r in ours) <= 10_000_000 + max(r["cost_nano"] for r in ours)

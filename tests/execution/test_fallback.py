"""Fallback chains and circuit breakers: the next deployment answers, an open breaker is skipped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.execution.test_retries import HELLO, create, fault, upstream_calls
from tests.harness import GatewayServer


def test_overloaded_provider_falls_back_to_the_next_model(
    client: openai.OpenAI,
    gateway: GatewayServer,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
) -> None:
    fault(openai_upstream, {"kind": "status", "status": 529, "count": -1})
    raw = create(client, "resilient")
    assert raw.headers["x-tollgate-model"] == "llama"
    assert raw.headers["x-tollgate-attempts"] == "4"
    assert len(upstream_calls(openai_upstream, "resilient-upstream")) == 3
    assert len(upstream_calls(vllm_upstream)) == 1
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert row["fallback_used"] is True and row["status"] == 200
    assert row["deployments_tried"] == "openai/resilient-upstream,local/meta-llama/Llama-3.1-8B-Instruct"
    assert (row["model"], row["provider"], row["requested_model"]) == ("llama", "local", "resilient")


def test_connection_refused_falls_back(client: openai.OpenAI, gateway: GatewayServer) -> None:
    raw = create(client, "ghost-with-fallback")
    assert raw.headers["x-tollgate-model"] == "gpt-4o-mini"
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert row["fallback_used"] is True and row["deployments_tried"].startswith("dead/ghost-with-fallback,")


def test_context_window_error_skips_to_a_larger_window(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(
        openai_upstream,
        {"kind": "status", "status": 400, "code": "context_length_exceeded", "model": "small-window"},
    )
    raw = create(client, "small-window")
    assert raw.headers["x-tollgate-model"] == "big-window"
    row = gateway.ledger_row(raw.headers["x-request-id"])
    # same-window (8k, like the model that overflowed) is never tried.
    assert row["deployments_tried"] == "openai/small-window,local/long-context"
    assert row["attempts"] == 2


def test_streams_fall_back_before_the_first_byte(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "status", "status": 503, "count": -1})
    with client.chat.completions.with_streaming_response.create(
        model="resilient", messages=HELLO, stream=True, stream_options={"include_usage": True}
    ) as response:
        assert response.headers["x-tollgate-model"] == "llama"
        chunks = list(response.parse())
    assert chunks[-1].usage is not None
    row = gateway.ledger_row(response.headers["x-request-id"])
    assert (row["fallback_used"], row["attempts"], row["status"]) == (True, 4, 200)


def test_breaker_opens_after_consecutive_failures_and_is_skipped(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "status", "status": 500, "count": -1})
    create(client, "resilient")  # 3 failures
    create(client, "resilient")  # 2 more: 5 in a row opens the breaker
    assert len(upstream_calls(openai_upstream)) == 5
    raw = create(client, "resilient")
    assert len(upstream_calls(openai_upstream)) == 5, "an open breaker sends nothing upstream"
    assert raw.headers["x-tollgate-attempts"] == "1"
    assert gateway.ledger_row(raw.headers["x-request-id"])["deployments_tried"].startswith("local/")
    with pytest.raises(openai.APIStatusError) as caught:
        create(client, "gpt-4o-mini")  # resilient-upstream is open, gpt-4o-mini's own breaker is not
    assert caught.value.status_code == 502


def test_half_open_probe_closes_the_breaker(
    openai_upstream: SandboxServer, vllm_upstream: SandboxServer, sqlite_url: str
) -> None:
    config = gateway_config(
        sqlite_url,
        openai_upstream.base_url,
        vllm_upstream.base_url,
        resilience={
            "retry": {"max_attempts": 1},
            "breaker": {"consecutive_failures": 2, "cooldown_seconds": 0.3},
        },
    )
    with (
        GatewayServer(config) as server,
        openai.OpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0) as sdk,
    ):
        fault(openai_upstream, {"kind": "status", "status": 500, "count": 2})
        for _ in range(2):
            create(sdk, "resilient")
        skipped = create(sdk, "resilient")
        assert skipped.headers["x-tollgate-model"] == "llama"
        asyncio.run(asyncio.sleep(0.35))
        probe = create(sdk, "resilient")
        assert probe.headers["x-tollgate-model"] == "resilient"
        assert create(sdk, "resilient").headers["x-tollgate-model"] == "resilient"


@pytest.fixture
def flaky_upstream() -> Iterator[SandboxServer]:
    with SandboxServer(SandboxConfig(dialect="openai", profile="instant", fault_rate=0.5, seed=3)) as server:
        yield server


def test_storm_retries_stay_within_the_budget(
    flaky_upstream: SandboxServer, vllm_upstream: SandboxServer, sqlite_url: str
) -> None:
    """200 concurrent clients, half of all upstream calls failing: bounded extra load, clean answers."""
    # Breakers out of the way, so the retry budget alone has to hold the line.
    config = gateway_config(
        sqlite_url,
        flaky_upstream.base_url,
        vllm_upstream.base_url,
        resilience={
            "retry": {"backoff_base_seconds": 0.01, "backoff_cap_seconds": 0.05},
            "breaker": {"consecutive_failures": 10_000, "error_rate": 1.0, "min_requests": 100_000},
        },
    )
    requests = 200
    with GatewayServer(config) as server:

        async def storm() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=requests)
            async with httpx.AsyncClient(base_url=server.base_url, limits=limits, timeout=30) as http:
                body: dict[str, Any] = {"model": "gpt-4o-mini", "messages": HELLO}
                return list(
                    await asyncio.gather(
                        *(http.post("/v1/chat/completions", json=body) for _ in range(requests))
                    )
                )

        responses = asyncio.run(storm())
        rows = server.ledger_rows()
    attempts = len(upstream_calls(flaky_upstream))
    # Budget: 20% of requests plus a floor of 2/s over the 10 s window. Without it, three attempts
    # at 50% failure would send about 350.
    assert requests <= attempts <= requests * 1.2 + 20, attempts
    statuses = {r.status_code for r in responses}
    assert statuses <= {200, 502}, statuses
    for response in responses:
        if response.status_code != 200:
            assert set(response.json()["error"]) == {"message", "type", "code", "param"}
    assert sum(r.status_code == 200 for r in responses) >= requests * 0.5
    assert len([r for r in rows if r["requested_model"] == "gpt-4o-mini"]) >= requests


# [reliability-2] part 4: a hanging upstream whose own timeout (600 s by default) outlasts the
# request's deadline gets a share of it, and the fallback answers in the rest.
HANG = {"kind": "timeout", "seconds": 30, "model": "resilient-upstream"}
DEADLINE = {"x-tollgate-timeout-ms": "8000"}
BOTH = "openai/resilient-upstream,local/meta-llama/Llama-3.1-8B-Instruct"


def test_a_hanging_primary_leaves_the_fallback_its_share_of_the_deadline(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, HANG)
    raw = create(client, "resilient", extra_headers=DEADLINE)
    assert raw.http_response.status_code == 200
    assert raw.headers["x-tollgate-model"] == "llama"
    # Timed out on its share, the hanging deployment is not retried: the fallback is next.
    assert len(upstream_calls(openai_upstream, "resilient-upstream")) == 1
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert (row["status"], row["fallback_used"], row["attempts"]) == (200, True, 2)
    assert row["deployments_tried"] == BOTH


def test_a_stream_whose_primary_hangs_is_answered_by_the_fallback(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, HANG)
    with client.chat.completions.with_streaming_response.create(
        model="resilient", messages=HELLO, stream=True, extra_headers=DEADLINE
    ) as response:
        assert response.headers["x-tollgate-model"] == "llama"
        assert list(response.parse())
    row = gateway.ledger_row(response.headers["x-request-id"])
    assert (row["status"], row["deployments_tried"]) == (200, BOTH)


def test_the_last_deployment_still_gets_the_whole_deadline(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    """Without a fallback the hang ends at the deadline as before: a 504 that says so."""
    fault(openai_upstream, {"kind": "timeout", "seconds": 30, "model": "gpt-4o-mini"})
    with pytest.raises(openai.APIStatusError) as caught:
        create(client, "gpt-4o-mini", extra_headers={"x-tollgate-timeout-ms": "1500"})
    assert caught.value.status_code == 504
    assert caught.value.body["code"] == "deadline_exceeded"  # type: ignore[index]
    assert len(upstream_calls(openai_upstream, "gpt-4o-mini")) == 1

"""Scripted upstream faults: how many attempts reach the upstream, how long between them, what the
client gets and what the ledger says. Backoff in these tests: base 0.05 s, cap 0.4 s, 3 attempts."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import openai
import pytest

from sandbox.server import SandboxServer
from tests.harness import GatewayServer

HELLO = [{"role": "user", "content": "hello"}]
JITTER_SLACK = 0.08  # scheduling noise on a shared 2-core machine


def fault(upstream: SandboxServer, *rules: dict[str, Any]) -> None:
    httpx.post(upstream.base_url + "/_sandbox/faults", json=list(rules)).raise_for_status()


def upstream_calls(upstream: SandboxServer, model: str | None = None) -> list[dict[str, Any]]:
    calls = [
        r
        for r in httpx.get(upstream.base_url + "/_sandbox/requests").json()
        if r["path"] == "/v1/chat/completions"
    ]
    return [c for c in calls if model is None or f'"model":"{model}"' in c["body"].replace(" ", "")]


def gaps(calls: list[dict[str, Any]]) -> list[float]:
    return [b["time"] - a["time"] for a, b in itertools.pairwise(calls)]


def create(client: openai.OpenAI, model: str, **kwargs: Any) -> Any:
    return client.chat.completions.with_raw_response.create(model=model, messages=HELLO, **kwargs)


def test_429_with_retry_after_is_honoured_then_succeeds(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "status", "status": 429, "retry_after": 1})
    raw = create(client, "gpt-4o-mini")
    assert raw.http_response.status_code == 200
    assert raw.headers["x-tollgate-attempts"] == "2"
    calls = upstream_calls(openai_upstream)
    assert len(calls) == 2
    assert 1.0 <= gaps(calls)[0] < 1.0 + JITTER_SLACK * 3
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert (row["status"], row["attempts"], row["fallback_used"]) == (200, 2, False)
    assert row["deployments_tried"] == "openai/gpt-4o-mini"


def test_500s_back_off_with_full_jitter_inside_the_bounds(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "status", "status": 500, "count": 2})
    raw = create(client, "gpt-4o-mini")
    assert raw.headers["x-tollgate-attempts"] == "3"
    first, second = gaps(upstream_calls(openai_upstream))
    assert first <= 0.05 + JITTER_SLACK  # uniform(0, 0.05)
    assert second <= 0.10 + JITTER_SLACK  # uniform(0, 0.10)
    assert gateway.ledger_row(raw.headers["x-request-id"])["attempts"] == 3


@pytest.mark.parametrize(
    ("rule", "model"),
    [
        ({"kind": "reset"}, "gpt-4o-mini"),
        ({"kind": "timeout", "seconds": 3}, "sluggish"),
        ({"kind": "status", "status": 502}, "gpt-4o-mini"),
        ({"kind": "status", "status": 408}, "gpt-4o-mini"),
    ],
)
def test_transient_faults_are_retried_once_and_answered(
    client: openai.OpenAI,
    gateway: GatewayServer,
    openai_upstream: SandboxServer,
    rule: dict[str, Any],
    model: str,
) -> None:
    fault(openai_upstream, rule)
    raw = create(client, model)
    assert raw.http_response.status_code == 200
    assert raw.headers["x-tollgate-attempts"] == "2"
    assert len(upstream_calls(openai_upstream)) == 2
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert (row["status"], row["attempts"]) == (200, 2) and row["cost_nano"] > 0


@pytest.mark.parametrize(
    ("status", "code", "client_status"),
    [
        (400, "invalid_value", 400),
        (400, "content_policy_violation", 400),
        (422, None, 422),
        (404, "model_not_found", 404),
    ],
)
def test_client_errors_are_never_retried(
    client: openai.OpenAI,
    gateway: GatewayServer,
    openai_upstream: SandboxServer,
    status: int,
    code: str | None,
    client_status: int,
) -> None:
    fault(openai_upstream, {"kind": "status", "status": status, "code": code, "count": -1})
    with pytest.raises(openai.APIStatusError) as caught:
        create(client, "gpt-4o-mini")
    assert caught.value.status_code == client_status
    assert len(upstream_calls(openai_upstream)) == 1
    assert gateway.ledger_row(caught.value.response.headers["x-request-id"])["attempts"] == 1


def test_client_deadline_header_cuts_the_wait(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "timeout", "seconds": 5, "count": -1})
    with pytest.raises(openai.APIStatusError) as caught:
        create(client, "gpt-4o-mini", extra_headers={"x-tollgate-timeout-ms": "300"})
    assert caught.value.status_code == 504
    assert caught.value.code == "deadline_exceeded"
    row = gateway.ledger_row(caught.value.response.headers["x-request-id"])
    assert 290 <= row["latency_ms"] < 1500
    assert row["attempts"] == 1


def test_retry_after_longer_than_the_deadline_falls_back_at_once(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "status", "status": 429, "retry_after": 20, "count": -1})
    raw = create(client, "resilient", extra_headers={"x-tollgate-timeout-ms": "5000"})
    assert raw.headers["x-tollgate-model"] == "llama"
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert (row["attempts"], row["fallback_used"], row["model"]) == (2, True, "llama")
    assert row["latency_ms"] < 1000

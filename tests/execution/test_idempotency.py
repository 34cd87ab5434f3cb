"""Idempotency keys: a repeat is answered from the store, charged once, and never reaches upstream twice."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import openai
import pytest

from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.execution.test_retries import HELLO, fault, upstream_calls
from tests.harness import GatewayServer
from tests.services import require_redis


def charged(server: GatewayServer, key: str) -> list[int]:
    return [r["cost_nano"] for r in server.ledger_rows() if r["idempotency_key"] == key]


def test_repeat_gets_the_stored_answer_and_is_charged_once(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    key = uuid.uuid4().hex
    first = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=HELLO, extra_headers={"Idempotency-Key": key}
    )
    again = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=HELLO, extra_headers={"Idempotency-Key": key}
    )
    assert again.http_response.content == first.http_response.content
    assert again.headers["x-tollgate-idempotent-replay"] == "true"
    assert again.headers["x-tollgate-model"] == "gpt-4o-mini"
    assert len(upstream_calls(openai_upstream)) == 1
    costs = charged(gateway, key)
    assert len(costs) == 2 and sorted(costs)[0] == 0 and sorted(costs)[1] > 0
    replay = gateway.ledger_row(again.headers["x-request-id"])
    assert replay["cache_status"] == "idempotent_replay"


def test_same_key_different_body_is_422(client: openai.OpenAI, openai_upstream: SandboxServer) -> None:
    key = uuid.uuid4().hex
    client.chat.completions.create(
        model="gpt-4o-mini", messages=HELLO, extra_headers={"Idempotency-Key": key}
    )
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "other"}],
            extra_headers={"Idempotency-Key": key},
        )
    assert caught.value.code == "idempotency_key_reused"
    assert len(upstream_calls(openai_upstream)) == 1


def test_concurrent_duplicate_waits_for_the_first(
    gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "timeout", "seconds": 0.4})  # the first call is slow
    key = uuid.uuid4().hex
    body = {"model": "gpt-4o-mini", "messages": HELLO}

    async def both() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=gateway.base_url, timeout=10) as http:
            headers = {"Idempotency-Key": key}
            return list(
                await asyncio.gather(
                    *(http.post("/v1/chat/completions", json=body, headers=headers) for _ in range(2))
                )
            )

    a, b = asyncio.run(both())
    assert a.status_code == b.status_code == 200
    assert a.content == b.content
    assert len(upstream_calls(openai_upstream)) == 1
    assert sorted(charged(gateway, key))[0] == 0


def test_a_failed_first_attempt_releases_the_key(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    fault(openai_upstream, {"kind": "status", "status": 400, "code": "invalid_value"})
    key = uuid.uuid4().hex
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="gpt-4o-mini", messages=HELLO, extra_headers={"Idempotency-Key": key}
        )
    retried = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=HELLO, extra_headers={"Idempotency-Key": key}
    )
    assert retried.http_response.status_code == 200
    assert "x-tollgate-idempotent-replay" not in retried.headers


def test_streamed_answer_is_replayed_identically(
    client: openai.OpenAI, openai_upstream: SandboxServer
) -> None:
    key = uuid.uuid4().hex

    def stream() -> list[str]:
        with client.chat.completions.with_streaming_response.create(
            model="gpt-4o-mini", messages=HELLO, stream=True, extra_headers={"Idempotency-Key": key}
        ) as response:
            return list(response.iter_lines())

    assert stream() == stream()
    assert len(upstream_calls(openai_upstream)) == 1


@pytest.fixture
def two_gateways_sharing_redis(
    openai_upstream: SandboxServer, vllm_upstream: SandboxServer, sqlite_url: str
) -> Iterator[tuple[GatewayServer, GatewayServer]]:
    url = require_redis()
    state = {"backend": "redis", "redis_url": url, "prefix": f"tollgate-test:{uuid.uuid4().hex}:"}
    config = gateway_config(sqlite_url, openai_upstream.base_url, vllm_upstream.base_url, state=state)
    with GatewayServer(config) as a, GatewayServer(config) as b:
        yield a, b


@pytest.mark.redis
def test_duplicate_at_a_second_replica_is_charged_once(
    two_gateways_sharing_redis: tuple[GatewayServer, GatewayServer], openai_upstream: SandboxServer
) -> None:
    a, b = two_gateways_sharing_redis
    key = uuid.uuid4().hex
    headers = {"Idempotency-Key": key}
    body = {"model": "gpt-4o-mini", "messages": HELLO}
    first = httpx.post(a.base_url + "/v1/chat/completions", json=body, headers=headers)
    second = httpx.post(b.base_url + "/v1/chat/completions", json=body, headers=headers)
    assert first.status_code == second.status_code == 200
    assert second.content == first.content
    assert second.headers["x-tollgate-idempotent-replay"] == "true"
    assert len(upstream_calls(openai_upstream)) == 1
    b.ledger_rows()  # flush the second replica too: both write to the same ledger
    costs = charged(a, key)
    assert len(costs) == 2 and costs.count(0) == 1

"""The same ledger rows on the production database: the real PostgreSQL server on this machine."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def pg_gateway(
    postgres_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[GatewayServer]:
    config = gateway_config(postgres_url, openai_upstream.base_url, vllm_upstream.base_url)
    with GatewayServer(config) as server:
        yield server


@pytest.fixture
def pg_client(pg_gateway: GatewayServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=pg_gateway.base_url + "/v1", api_key="t", max_retries=0) as sdk:
        yield sdk


def test_success_row_on_postgres(pg_client: openai.OpenAI, pg_gateway: GatewayServer) -> None:
    raw = pg_client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "1800 tokens of context, please"}]
    )
    usage = raw.parse().usage
    assert usage is not None
    row = pg_gateway.ledger_row(raw.headers["x-request-id"])
    assert row["status"] == 200
    assert (row["prompt_tokens"], row["completion_tokens"]) == (usage.prompt_tokens, usage.completion_tokens)
    assert (
        row["cost_nano"]
        == (usage.prompt_tokens * 3000 * 10**6 + usage.completion_tokens * 15000 * 10**6 + 500_000) // 10**6
    )
    assert row["created_at"].tzinfo is not None


def test_failure_row_on_postgres(pg_client: openai.OpenAI, pg_gateway: GatewayServer) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        pg_client.chat.completions.create(model="ghost", messages=[{"role": "user", "content": "x"}])
    row = pg_gateway.ledger_row(caught.value.response.headers["x-request-id"])
    assert (row["status"], row["error_type"], row["cost_nano"]) == (502, "upstream_unreachable", 0)


def test_streamed_row_on_postgres(pg_client: openai.OpenAI, pg_gateway: GatewayServer) -> None:
    with pg_client.chat.completions.with_streaming_response.create(
        model="llama", messages=[{"role": "user", "content": "stream"}], stream=True
    ) as response:
        request_id = response.headers["x-request-id"]
        list(response.parse())
    row = pg_gateway.ledger_row(request_id)
    assert row["stream"] is True and row["ttft_ms"] is not None and row["completion_tokens"] > 0

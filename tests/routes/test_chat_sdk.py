"""The official OpenAI SDK as the client: what a user sees on the wire and what lands in the ledger."""

from __future__ import annotations

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from sandbox.server import SandboxServer
from tests.harness import GatewayServer

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three prime numbers."},
]


def test_non_streaming_answer_validates_against_sdk_types(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
    completion = raw.parse()
    ChatCompletion.model_validate_json(raw.http_response.content)
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert raw.headers["x-tollgate-model"] == "gpt-4o-mini"
    assert raw.headers["x-tollgate-tier"] == "managed"
    assert len(raw.headers["x-request-id"]) == 32


def test_ledger_row_after_success_carries_tokens_latency_and_exact_cost(
    client: openai.OpenAI, gateway: GatewayServer
) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=MESSAGES, extra_headers={"x-request-id": "order-42"}
    )
    completion = raw.parse()
    assert raw.headers["x-request-id"] == "order-42"
    row = gateway.ledger_row("order-42")
    usage = completion.usage
    assert usage is not None
    assert row["status"] == 200 and row["error_type"] is None
    assert row["requested_model"] == "gpt-4o-mini"
    assert (row["model"], row["provider"], row["upstream_model"]) == ("gpt-4o-mini", "openai", "gpt-4o-mini")
    assert row["prompt_tokens"] == usage.prompt_tokens
    assert row["completion_tokens"] == usage.completion_tokens
    # $3 / $15 per MTok, rounded once to whole nano-USD (half up).
    expected = (
        usage.prompt_tokens * 3_000_000_000 + usage.completion_tokens * 15_000_000_000 + 500_000
    ) // 10**6
    assert row["cost_nano"] == expected
    assert raw.headers["x-tollgate-cost-usd"] == format(expected / 10**9, ".9f").rstrip("0").rstrip(".")
    assert row["latency_ms"] > 0 and row["stream"] is False and row["attempts"] == 1
    assert row["finished_at"] >= row["created_at"]


def test_streaming_with_usage_chunk(client: openai.OpenAI, gateway: GatewayServer) -> None:
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    ) as response:
        request_id = response.headers["x-request-id"]
        assert response.headers["content-type"].startswith("text/event-stream")
        chunks = list(response.parse())
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk.model_dump())
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    text = "".join(c.choices[0].delta.content or "" for c in chunks[:-1] if c.choices)
    assert text
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)
    row = gateway.ledger_row(request_id)
    assert row["stream"] is True and row["status"] == 200
    assert row["completion_tokens"] == chunks[-1].usage.completion_tokens
    assert row["ttft_ms"] is not None and 0 < row["ttft_ms"] <= row["latency_ms"]


def test_streaming_without_usage_hides_the_usage_chunk_but_still_bills(
    client: openai.OpenAI, gateway: GatewayServer
) -> None:
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True
    ) as response:
        request_id = response.headers["x-request-id"]
        chunks = list(response.parse())
    assert chunks and all(c.choices for c in chunks), "client did not ask for the usage chunk"
    row = gateway.ledger_row(request_id)
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["cost_nano"] > 0


def test_streaming_and_non_streaming_bill_the_same_tokens(client: openai.OpenAI) -> None:
    plain = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, seed=7)
    streamed = list(
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=MESSAGES,
            seed=7,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert plain.usage is not None and streamed[-1].usage is not None
    assert plain.usage.prompt_tokens == streamed[-1].usage.prompt_tokens
    assert plain.usage.completion_tokens == streamed[-1].usage.completion_tokens


def test_client_bytes_are_forwarded_untouched(gateway: GatewayServer, openai_upstream: SandboxServer) -> None:
    body = b'{"model": "gpt-4o-mini",  "messages": [{"role": "user", "content": "hi"}], "x_custom": 1}'
    response = httpx.post(
        gateway.base_url + "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    seen = httpx.get(openai_upstream.base_url + "/_sandbox/requests").json()
    chat = [r for r in seen if r["path"] == "/v1/chat/completions"]
    assert chat[-1]["body"] == body.decode()
    assert chat[-1]["headers"]["authorization"] == "Bearer sk-upstream"


def test_alias_and_upstream_model_id_are_rewritten(
    client: openai.OpenAI, gateway: GatewayServer, vllm_upstream: SandboxServer
) -> None:
    raw = client.chat.completions.with_raw_response.create(model="llama", messages=MESSAGES)
    assert raw.headers["x-tollgate-model"] == "llama" and raw.headers["x-tollgate-tier"] == "local"
    seen = httpx.get(vllm_upstream.base_url + "/_sandbox/requests").json()
    assert '"model":"meta-llama/Llama-3.1-8B-Instruct"' in seen[-1]["body"]
    alias = client.chat.completions.with_raw_response.create(model="smart", messages=MESSAGES)
    assert alias.headers["x-tollgate-model"] == "gpt-4o-mini"
    row = gateway.ledger_row(alias.headers["x-request-id"])
    assert (row["requested_model"], row["model"]) == ("smart", "gpt-4o-mini")


def test_streaming_through_vllm_reports_cached_prefix(client: openai.OpenAI, gateway: GatewayServer) -> None:
    long_context = "The quick brown fox jumps over the lazy dog. " * 200
    messages = [{"role": "system", "content": long_context}, {"role": "user", "content": "Summarise."}]
    client.chat.completions.create(model="llama", messages=messages)
    with client.chat.completions.with_streaming_response.create(
        model="llama", messages=messages, stream=True
    ) as response:
        request_id = response.headers["x-request-id"]
        list(response.parse())
    row = gateway.ledger_row(request_id)
    assert row["cached_tokens"] > 0
    assert row["cached_tokens"] <= row["prompt_tokens"]


def test_models_endpoint_lists_models_and_aliases(client: openai.OpenAI) -> None:
    ids = {m.id for m in client.models.list()}
    assert {"gpt-4o-mini", "llama", "smart"} <= ids

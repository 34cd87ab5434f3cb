"""AnthropicBatchAPI against the sandbox's Message Batches API, over the gateway's own HTTP client:
items translated as the chat adapter translates them, and results back as OpenAI completions the
official SDK parses, with Anthropic's usage (cache reads, writes, the 1h split) carried over."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import orjson
import pytest
from openai.types.chat import ChatCompletion

from gateway.batches.remote.anthropic import (
    AnthropicBatchAPI,
    from_anthropic_batch,
    from_result_line,
    to_batch_params,
    to_batch_requests,
)
from gateway.batches.remote.types import RemoteItem, RemoteResult, RemoteStatus
from gateway.execution.upstreams import create_http_client
from providers.errors import UpstreamRejected
from providers.types import ChatRequest
from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer

MODEL = "claude-sonnet-4-5"


def _item(i: int, *, bad: bool = False, **extra: object) -> RemoteItem:
    body = {"model": MODEL, "messages": [{"role": "user", "content": f"n {i}"}], **extra}
    if bad:
        body["top_p"] = 7  # passes translation (top_p is passed through), refused by Anthropic
    return RemoteItem(f"item-{i}", ChatRequest(body=body, raw=orjson.dumps(body), model=MODEL))


async def _api(config: SandboxConfig) -> AsyncIterator[AnthropicBatchAPI]:
    client = create_http_client({})
    with SandboxServer(config) as server:
        yield AnthropicBatchAPI(name="anthropic", client=client, base_url=server.base_url, api_key="sk-ant")
    await client.aclose()


async def _until(
    api: AnthropicBatchAPI, upstream_id: str, states: set[str], seconds: float = 20
) -> RemoteStatus:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = await api.poll(upstream_id)
        if status.state in states:
            return status
        await asyncio.sleep(0.02)
    raise AssertionError(f"batch never reached {states}")


def _check(results: list[RemoteResult], ids: list[str]) -> None:
    assert sorted(r.custom_id for r in results) == sorted(ids)
    assert len(results) == len(ids)
    for r in results:
        assert (r.completion is None) != (r.error is None)
        if r.completion is not None:
            parsed = ChatCompletion.model_validate_json(r.completion.body)
            assert parsed.usage is not None and parsed.model == MODEL
            assert r.completion.usage.prompt_tokens == parsed.usage.prompt_tokens > 0
            assert r.completion.usage.completion_tokens == parsed.usage.completion_tokens > 0


@pytest.fixture
async def quick() -> AsyncIterator[AnthropicBatchAPI]:
    async for api in _api(SandboxConfig(dialect="anthropic", profile="instant", batch_delay_seconds=0.02)):
        yield api


async def test_a_batch_ends_with_every_item_once_and_the_bad_one_as_an_error(
    quick: AnthropicBatchAPI,
) -> None:
    items = [_item(i) for i in range(5)] + [_item(5, bad=True)]
    upstream_id = await quick.submit(items, metadata={"tollgate_batch": "b1"})
    assert upstream_id.startswith("msgbatch_")
    status = await _until(quick, upstream_id, {"ended"})
    assert status.done == 6
    results = await quick.results(upstream_id)
    _check(results, [i.custom_id for i in items])
    by_id = {r.custom_id: r for r in results}
    bad = by_id["item-5"].error
    assert bad is not None and bad.code == "invalid_request_error" and bad.status == 400
    assert all(by_id[f"item-{i}"].completion is not None for i in range(5))


async def test_a_thousand_items(quick: AnthropicBatchAPI) -> None:
    items = [_item(i) for i in range(1000)]
    upstream_id = await quick.submit(items, metadata={})
    await _until(quick, upstream_id, {"ended"}, seconds=60)
    results = await quick.results(upstream_id)
    _check(results, [i.custom_id for i in items])
    assert sum(r.completion is not None for r in results) == 1000


async def test_cancel_gives_cancelled_errors_for_what_never_ran() -> None:
    async for api in _api(SandboxConfig(dialect="anthropic", profile="instant", batch_delay_seconds=5)):
        upstream_id = await api.submit([_item(i) for i in range(3)], metadata={})
        await api.cancel(upstream_id)
        assert (await api.poll(upstream_id)).state in ("cancelling", "cancelled")
        await _until(api, upstream_id, {"cancelled"})
        results = await api.results(upstream_id)
        assert [r.error.code if r.error else None for r in results] == ["cancelled"] * 3


async def test_expiry_gives_expired_errors() -> None:
    config = SandboxConfig(
        dialect="anthropic", profile="local", batch_delay_seconds=0, batch_window_seconds=0.01
    )
    async for api in _api(config):
        upstream_id = await api.submit([_item(i) for i in range(3)], metadata={})
        await _until(api, upstream_id, {"expired"})
        results = await api.results(upstream_id)
        _check(results, ["item-0", "item-1", "item-2"])
        assert {r.error.code for r in results if r.error} == {"expired"}


# --- pure translation ---


def test_params_are_the_chat_adapters_translation() -> None:
    body = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}
    item = RemoteItem("a", ChatRequest(body={"model": MODEL, **body}, raw=b"", model=MODEL))
    params = to_batch_params(item, default_max_tokens=321)
    assert params["max_tokens"] == 321 and params["model"] == MODEL
    assert params["system"] == [{"type": "text", "text": "be brief"}]
    assert "stream" not in params


def test_cache_breakpoints_are_placed_as_for_chat() -> None:
    long = "word " * 3000
    body = {
        "model": MODEL,
        "messages": [{"role": "system", "content": long}, {"role": "user", "content": "q"}],
    }
    item = RemoteItem("a", ChatRequest(body=body, raw=b"", model=MODEL, cache_ttl="1h"))
    params = to_batch_params(item, default_max_tokens=10)
    assert params["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_an_untranslatable_item_fails_the_submit_naming_it() -> None:
    with pytest.raises(UpstreamRejected, match="item-7"):
        to_batch_requests([_item(7, n=2)], default_max_tokens=10)


def test_status_mapping() -> None:
    assert from_anthropic_batch({"processing_status": "in_progress"}).state == "in_progress"
    assert from_anthropic_batch({"processing_status": "canceling"}).state == "cancelling"
    counts = {"succeeded": 2, "errored": 1, "canceled": 0, "expired": 0, "processing": 0}
    ended = from_anthropic_batch({"processing_status": "ended", "request_counts": counts})
    assert (ended.state, ended.done) == ("ended", 3)
    cancelled = {"processing_status": "ended", "cancel_initiated_at": "2026-01-01T00:00:00Z"}
    assert from_anthropic_batch(cancelled).state == "cancelled"


def test_a_succeeded_line_keeps_cache_usage_and_the_1h_split() -> None:
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 50,
        "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 30},
    }
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": usage,
    }
    result = from_result_line(
        {"custom_id": "a", "result": {"type": "succeeded", "message": message}}, created=1
    )
    assert result.completion is not None
    got = result.completion.usage
    assert (got.prompt_tokens, got.cached_tokens, got.cache_write_tokens, got.cache_write_1h_tokens) == (
        160,
        100,
        50,
        30,
    )
    parsed = ChatCompletion.model_validate_json(result.completion.body)
    assert parsed.choices[0].message.content == "hi" and parsed.choices[0].finish_reason == "stop"


def test_errored_canceled_expired_lines() -> None:
    errored = {
        "type": "errored",
        "error": {"type": "error", "error": {"type": "overloaded_error", "message": "x"}},
    }
    error = from_result_line({"custom_id": "a", "result": errored}, created=1).error
    assert error is not None and (error.code, error.status) == ("overloaded_error", 529)
    for kind, code in (("canceled", "cancelled"), ("expired", "expired")):
        got = from_result_line({"custom_id": "a", "result": {"type": kind}}, created=1).error
        assert got is not None and got.code == code


async def test_the_emulators_batches_and_every_result_type_match_the_sdks_types() -> None:
    """Fidelity of sandbox/anthropic/batches.py: the raw objects the adapter reads, in every state
    and result type (succeeded, errored, canceled, expired), validate against the SDK's types."""
    import httpx
    from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse

    headers = {"x-api-key": "sk-ant", "anthropic-version": "2023-06-01"}
    kinds: set[str] = set()
    configs = (
        SandboxConfig(dialect="anthropic", profile="instant", batch_delay_seconds=0.02),
        SandboxConfig(dialect="anthropic", profile="instant", batch_delay_seconds=5),
        SandboxConfig(dialect="anthropic", profile="local", batch_delay_seconds=0, batch_window_seconds=0.01),
    )
    for number, config in enumerate(configs):
        client = create_http_client({})
        with SandboxServer(config) as server:
            api = AnthropicBatchAPI(
                name="anthropic", client=client, base_url=server.base_url, api_key="sk-ant"
            )
            upstream_id = await api.submit([_item(0), _item(1, bad=True)], metadata={})
            if number == 1:
                await api.cancel(upstream_id)
            await _until(api, upstream_id, {"ended", "cancelled", "expired"})
            async with httpx.AsyncClient(base_url=server.base_url, headers=headers) as raw:
                batch = (await raw.get(f"/v1/messages/batches/{upstream_id}")).json()
                MessageBatch.model_validate(batch)
                lines = (await raw.get(batch["results_url"])).content.splitlines()
            for line in lines:
                kinds.add(MessageBatchIndividualResponse.model_validate_json(line).result.type)
        await client.aclose()
    assert kinds == {"succeeded", "errored", "canceled", "expired"}

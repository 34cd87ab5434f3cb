"""OpenAIBatchAPI against the sandbox's OpenAI Batch API, over the gateway's own HTTP client: the
JSONL it uploads, the states it reads, and every item back exactly once as a completion the
official SDK parses, with the usage the emulator reported."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import orjson
import pytest
from openai.types.chat import ChatCompletion

from gateway.batches.remote.openai import (
    OpenAIBatchAPI,
    from_batch_line,
    from_openai_batch,
    to_batch_line,
    to_multipart,
    with_missing,
)
from gateway.batches.remote.types import RemoteItem, RemoteResult, RemoteStatus
from gateway.execution.upstreams import create_http_client
from providers.types import ChatRequest
from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer


def _item(i: int, *, model: str = "gpt-4o-mini", bad: bool = False) -> RemoteItem:
    messages = [] if bad else [{"role": "user", "content": f"n {i}"}]
    body = {"model": model, "messages": messages}
    return RemoteItem(f"item-{i}", ChatRequest(body=body, raw=orjson.dumps(body), model=model))


async def _api(config: SandboxConfig) -> AsyncIterator[tuple[OpenAIBatchAPI, SandboxServer]]:
    client = create_http_client({})
    with SandboxServer(config) as server:
        yield (
            OpenAIBatchAPI(name="openai", base_url=server.base_url + "/v1", client=client, api_key="sk"),
            server,
        )
    await client.aclose()


async def _until(
    api: OpenAIBatchAPI, upstream_id: str, states: set[str], seconds: float = 20
) -> RemoteStatus:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = await api.poll(upstream_id)
        if status.state in states:
            return status
        await asyncio.sleep(0.02)
    raise AssertionError(f"batch never reached {states}")


def _check(results: list[RemoteResult], ids: list[str]) -> None:
    assert [r.custom_id for r in results] == ids  # each once, in submission order
    for r in results:
        assert (r.completion is None) != (r.error is None)
        if r.completion is not None:
            parsed = ChatCompletion.model_validate_json(r.completion.body)
            assert parsed.usage is not None
            assert r.completion.usage.prompt_tokens == parsed.usage.prompt_tokens > 0
            assert r.completion.usage.completion_tokens == parsed.usage.completion_tokens > 0


@pytest.fixture
async def quick() -> AsyncIterator[tuple[OpenAIBatchAPI, SandboxServer]]:
    async for pair in _api(SandboxConfig(dialect="openai", profile="instant", batch_delay_seconds=0.02)):
        yield pair


async def test_a_batch_ends_with_every_item_once_and_the_bad_one_as_an_error(
    quick: tuple[OpenAIBatchAPI, SandboxServer],
) -> None:
    api, _ = quick
    items = [_item(i) for i in range(5)] + [_item(5, bad=True)]
    upstream_id = await api.submit(items, metadata={"tollgate_batch": "b1"})
    assert upstream_id.startswith("batch_")
    status = await _until(api, upstream_id, {"ended"})
    assert status.done == 6
    results = await api.results(upstream_id)
    _check(results, [i.custom_id for i in items])
    bad = results[-1].error
    assert bad is not None and bad.status == 400 and "messages" in bad.message
    assert all(r.completion is not None for r in results[:5])


async def test_a_thousand_items(quick: tuple[OpenAIBatchAPI, SandboxServer]) -> None:
    api, _ = quick
    items = [_item(i) for i in range(1000)]
    upstream_id = await api.submit(items, metadata={})
    await _until(api, upstream_id, {"ended"}, seconds=60)
    results = await api.results(upstream_id)
    _check(results, [i.custom_id for i in items])
    assert sum(r.completion is not None for r in results) == 1000


async def test_cancel_gives_cancelled_errors_for_what_never_ran() -> None:
    config = SandboxConfig(dialect="openai", profile="instant", batch_delay_seconds=5)
    async for api, _ in _api(config):
        upstream_id = await api.submit([_item(i) for i in range(3)], metadata={})
        await api.cancel(upstream_id)
        assert (await api.poll(upstream_id)).state in ("cancelling", "cancelled")
        await _until(api, upstream_id, {"cancelled"})
        results = await api.results(upstream_id)
        assert [r.error.code if r.error else None for r in results] == ["cancelled"] * 3


async def test_expiry_gives_expired_errors() -> None:
    config = SandboxConfig(
        dialect="openai", profile="local", batch_delay_seconds=0, batch_window_seconds=0.01
    )
    async for api, _ in _api(config):
        upstream_id = await api.submit([_item(i) for i in range(3)], metadata={})
        await _until(api, upstream_id, {"expired"})
        results = await api.results(upstream_id)
        _check(results, ["item-0", "item-1", "item-2"])
        assert {r.error.code for r in results if r.error} == {"expired"}


# --- pure translation ---


def test_a_line_carries_the_clients_bytes_when_nothing_changes() -> None:
    item = _item(1)
    line = to_batch_line(item, reasoning=False)
    assert line.endswith(b',"body":' + item.request.raw + b"}")
    assert orjson.loads(line)["url"] == "/v1/chat/completions"


def test_a_reasoning_model_line_is_rewritten_and_stream_dropped() -> None:
    body = {"model": "o3", "messages": [], "max_tokens": 9, "temperature": 0.2, "stream": True}
    raw = orjson.dumps(body, option=orjson.OPT_INDENT_2)  # spans lines: not valid as a JSONL body
    item = RemoteItem("r", ChatRequest(body=body, raw=raw, model="o3"))
    line = to_batch_line(item, reasoning=True)
    assert b"\n" not in line
    sent = orjson.loads(line)["body"]
    assert sent == {"model": "o3", "messages": [], "max_completion_tokens": 9}


def test_the_upstream_model_replaces_the_clients() -> None:
    body = {"model": "fast", "messages": []}
    item = RemoteItem("r", ChatRequest(body=body, raw=orjson.dumps(body), model="gpt-4o-mini"))
    assert orjson.loads(to_batch_line(item, reasoning=False))["body"]["model"] == "gpt-4o-mini"


def test_multipart_body() -> None:
    body, content_type = to_multipart(b'{"a":1}\n', filename="b.jsonl", purpose="batch", boundary="XYZ")
    assert content_type == "multipart/form-data; boundary=XYZ"
    assert body.startswith(b'--XYZ\r\ncontent-disposition: form-data; name="purpose"\r\n\r\nbatch\r\n')
    assert body.endswith(b'\r\n\r\n{"a":1}\n\r\n--XYZ--\r\n')


def test_status_mapping() -> None:
    def state(status: str) -> str:
        return from_openai_batch({"status": status}).state

    assert [state(s) for s in ("validating", "in_progress", "finalizing", "completed")] == [
        "in_progress",
        "in_progress",
        "in_progress",
        "ended",
    ]
    failed = from_openai_batch(
        {"status": "failed", "errors": {"data": [{"code": "invalid_json_line", "message": "bad", "line": 3}]}}
    )
    assert failed.state == "failed" and failed.message == "invalid_json_line: bad (line 3)"


def test_usage_is_parsed_as_the_chat_adapter_parses_it() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "o3",
        "choices": [],
        "usage": usage,
    }
    result = from_batch_line(
        {"custom_id": "a", "response": {"status_code": 200, "body": body}, "error": None}
    )
    assert result.completion is not None
    got = result.completion.usage
    assert (got.prompt_tokens, got.cached_tokens, got.reasoning_tokens) == (100, 64, 12)


def test_missing_items_are_errors_by_the_batch_state() -> None:
    found = [RemoteResult("b", error=None)]
    out = with_missing(["a", "b"], found, state="cancelled")
    assert [r.custom_id for r in out] == ["a", "b"]
    assert out[0].error is not None and out[0].error.code == "cancelled"
    expired = from_batch_line({"custom_id": "x", "response": None, "error": {"code": "batch_expired"}})
    assert expired.error is not None and expired.error.code == "expired"


async def test_the_factory_picks_the_providers_own_batch_api() -> None:
    from gateway.batches.remote.anthropic import AnthropicBatchAPI
    from gateway.batches.remote.factory import remote_batch_api
    from gateway.config.providers import AnthropicProvider, GeminiProvider, OpenAICompatibleProvider

    client = create_http_client({})
    openai_spec = OpenAICompatibleProvider(type="openai", base_url="https://api.openai.com/v1")
    vllm_spec = OpenAICompatibleProvider(type="vllm", base_url="http://127.0.0.1:8000/v1")
    assert isinstance(remote_batch_api("oa", openai_spec, client), OpenAIBatchAPI)
    assert isinstance(remote_batch_api("an", AnthropicProvider(type="anthropic"), client), AnthropicBatchAPI)
    assert remote_batch_api("local", vllm_spec, client) is None
    assert remote_batch_api("gem", GeminiProvider(type="gemini"), client) is None
    await client.aclose()


async def test_an_upstream_failure_is_a_provider_error_the_runner_can_act_on() -> None:
    from providers.errors import UpstreamRejected, UpstreamUnreachable

    async for api, _server in _api(SandboxConfig(dialect="openai", profile="instant")):
        with pytest.raises(UpstreamRejected) as caught:
            await api.poll("batch_unknown")
        assert caught.value.upstream_status == 404 and not caught.value.retryable
    client = create_http_client({})
    dead = OpenAIBatchAPI(name="openai", base_url="http://127.0.0.1:9/v1", client=client)
    with pytest.raises(UpstreamUnreachable) as unreachable:
        await dead.poll("batch_x")
    assert unreachable.value.retryable
    await client.aclose()


async def test_the_emulators_batches_and_files_match_the_sdks_types() -> None:
    """Fidelity of sandbox/openai/batches.py: the batch in each state and its files, as the adapter
    reads them, validate against the SDK's `Batch` and `FileObject`."""
    import httpx
    from openai.types import Batch, FileObject

    configs = (
        SandboxConfig(dialect="openai", profile="instant", batch_delay_seconds=0.02),
        SandboxConfig(dialect="openai", profile="instant", batch_delay_seconds=5),
        SandboxConfig(dialect="openai", profile="local", batch_delay_seconds=0, batch_window_seconds=0.01),
    )
    states: set[str] = set()
    for number, config in enumerate(configs):
        async for api, server in _api(config):
            upstream_id = await api.submit([_item(0), _item(1, bad=True)], metadata={"k": "v"})
            if number == 1:
                await api.cancel(upstream_id)
            await _until(api, upstream_id, {"ended", "cancelled", "expired"})
            async with httpx.AsyncClient(base_url=server.base_url + "/v1") as raw:
                batch = Batch.model_validate((await raw.get(f"/batches/{upstream_id}")).json())
                states.add(batch.status)
                assert batch.metadata == {"k": "v"} and batch.request_counts is not None
                for file_id in (batch.input_file_id, batch.output_file_id, batch.error_file_id):
                    if file_id:
                        FileObject.model_validate((await raw.get(f"/files/{file_id}")).json())
    assert states == {"completed", "cancelled", "expired"}


async def test_the_requests_on_the_wire() -> None:
    """What OpenAI receives: a multipart upload with purpose=batch and the JSONL, then the batch
    create body, each with the provider key; GETs for the batch and its files."""
    import httpx

    from providers.httpx_upstream import HttpxUpstream

    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/v1/files":
            return httpx.Response(200, json={"id": "file-1", "object": "file"})
        if request.url.path == "/v1/batches/batch_1":
            return httpx.Response(200, json={"id": "batch_1", "status": "in_progress"})
        return httpx.Response(200, json={"id": "batch_1", "object": "batch", "status": "validating"})

    client = HttpxUpstream(httpx.AsyncClient(transport=httpx.MockTransport(answer)))
    api = OpenAIBatchAPI(name="oa", base_url="https://api.example/v1", client=client, api_key="sk-up")
    assert await api.submit([_item(0), _item(1)], metadata={"tollgate_batch": "b"}) == "batch_1"
    upload, create = seen
    assert (upload.method, create.method) == ("POST", "POST")
    assert upload.headers["authorization"] == create.headers["authorization"] == "Bearer sk-up"
    assert upload.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert b'name="purpose"\r\n\r\nbatch\r\n' in upload.content
    assert to_batch_line(_item(1), reasoning=False) in upload.content
    assert orjson.loads(create.content) == {
        "input_file_id": "file-1",
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
        "metadata": {"tollgate_batch": "b"},
    }
    assert (await api.poll("batch_1")).state == "in_progress"
    assert (seen[-1].method, seen[-1].url.path) == ("GET", "/v1/batches/batch_1")
    from providers.errors import UpstreamBadResponse

    with pytest.raises(UpstreamBadResponse, match="no results yet"):
        await api.results("batch_1")
    await client.aclose()

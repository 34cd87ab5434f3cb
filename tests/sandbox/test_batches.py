"""The sandbox's OpenAI and Anthropic batch APIs, driven by the official SDKs and checked against
their types: submit, the states going by, results in each API's format, cancel and expiry."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anthropic
import openai
import orjson
import pytest
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
from openai.types import Batch, FileObject

from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer


def _lines(n: int) -> bytes:
    return b"\n".join(
        orjson.dumps(
            {
                "custom_id": f"item-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"n {i}"}]},
            }
        )
        for i in range(n)
    )


@pytest.fixture(scope="module")
def openai_batches() -> Iterator[SandboxServer]:
    config = SandboxConfig(dialect="openai", profile="instant", batch_delay_seconds=0.05)
    with SandboxServer(config) as server:
        yield server


@pytest.fixture(scope="module")
def anthropic_batches() -> Iterator[SandboxServer]:
    config = SandboxConfig(dialect="anthropic", profile="instant", batch_delay_seconds=0.05)
    with SandboxServer(config) as server:
        yield server


def _until(check, seconds: float = 10.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value is not None:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def test_openai_batch_runs_to_completed_with_an_output_file(openai_batches: SandboxServer) -> None:
    client = openai.OpenAI(base_url=openai_batches.base_url + "/v1", api_key="sk-test")
    file = client.files.create(file=("in.jsonl", _lines(5)), purpose="batch")
    FileObject.model_validate(file.model_dump())
    assert file.purpose == "batch" and file.bytes == len(_lines(5))
    batch = client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert batch.status == "validating"
    done = _until(lambda: ((b := client.batches.retrieve(batch.id)).status == "completed" and b) or None)
    Batch.model_validate(done.model_dump())
    assert done.request_counts is not None and done.request_counts.completed == 5
    assert done.output_file_id and done.error_file_id is None
    lines = [orjson.loads(line) for line in client.files.content(done.output_file_id).content.splitlines()]
    assert sorted(line["custom_id"] for line in lines) == [f"item-{i}" for i in range(5)]
    assert all(line["response"]["status_code"] == 200 for line in lines)
    assert all(line["response"]["body"]["object"] == "chat.completion" for line in lines)
    assert batch.id in [b.id for b in client.batches.list(limit=100)]


def test_openai_batch_with_a_bad_line_fails_validation(openai_batches: SandboxServer) -> None:
    client = openai.OpenAI(base_url=openai_batches.base_url + "/v1", api_key="sk-test")
    file = client.files.create(file=("in.jsonl", _lines(2) + b"\nnot json"), purpose="batch")
    batch = client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert batch.status == "failed" and batch.errors is not None
    assert batch.errors.data and batch.errors.data[0].line == 3


def test_openai_batch_cancel_and_expiry() -> None:
    config = SandboxConfig(
        dialect="openai", profile="instant", batch_delay_seconds=5, batch_window_seconds=60
    )
    with SandboxServer(config) as server:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-test")
        file = client.files.create(file=("in.jsonl", _lines(3)), purpose="batch")
        batch = client.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert client.batches.cancel(batch.id).status == "cancelling"
        done = _until(lambda: ((b := client.batches.retrieve(batch.id)).status == "cancelled" and b) or None)
        assert done.cancelled_at is not None and done.output_file_id is None
    config = SandboxConfig(
        dialect="openai", profile="local", batch_delay_seconds=0, batch_window_seconds=0.01
    )
    with SandboxServer(config) as server:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-test")
        file = client.files.create(file=("in.jsonl", _lines(3)), purpose="batch")
        batch = client.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = _until(lambda: ((b := client.batches.retrieve(batch.id)).status == "expired" and b) or None)
        assert done.error_file_id is not None
        errors = [orjson.loads(x) for x in client.files.content(done.error_file_id).content.splitlines()]
        assert {e["error"]["code"] for e in errors} == {"batch_expired"}


def test_anthropic_message_batch_results(anthropic_batches: SandboxServer) -> None:
    client = anthropic.Anthropic(base_url=anthropic_batches.base_url, api_key="sk-ant-test")
    params = {"model": "claude-sonnet-4-5", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
    batch = client.messages.batches.create(
        requests=[{"custom_id": f"r{i}", "params": params} for i in range(4)]  # type: ignore[misc]
    )
    MessageBatch.model_validate(batch.model_dump())
    assert batch.processing_status == "in_progress"
    done = _until(
        lambda: ((b := client.messages.batches.retrieve(batch.id)).processing_status == "ended" and b) or None
    )
    assert done.request_counts.succeeded == 4
    results = list(client.messages.batches.results(batch.id))
    for result in results:
        MessageBatchIndividualResponse.model_validate(result.model_dump())
    assert sorted(r.custom_id for r in results) == ["r0", "r1", "r2", "r3"]
    assert all(r.result.type == "succeeded" for r in results)
    assert batch.id in [b.id for b in client.messages.batches.list()]
    cancelled = client.messages.batches.cancel(batch.id)
    assert cancelled.processing_status == "ended"

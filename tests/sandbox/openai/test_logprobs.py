"""Chat logprobs on the openai dialect, whole and streamed, checked with the SDK's own types."""

from __future__ import annotations

import math
from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionFunctionToolParam

from sandbox.server import SandboxServer
from tests.sandbox.clients import user

USER = user("How do toll roads price a trip?")
LOW = orjson.dumps({"kind": "answer", "mean_logprob": -3.5}).decode()
TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


def raw_chunks(http: httpx.Client, server: SandboxServer, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``data:`` event of a streamed answer, parsed, each validated as a ChatCompletionChunk."""
    response = http.post(server.base_url + "/v1/chat/completions", json={**body, "stream": True})
    assert response.status_code == 200
    chunks = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            chunk = orjson.loads(line[6:])
            ChatCompletionChunk.model_validate(chunk)
            chunks.append(chunk)
    return chunks


def test_whole_answer_has_one_entry_per_token_with_ranked_runners_up(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=USER, logprobs=True, top_logprobs=5
    )
    body = orjson.loads(raw.content)
    completion = ChatCompletion.model_validate(body)
    assert body["choices"][0]["logprobs"]["refusal"] is None
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None
    assert completion.usage is not None
    assert len(logprobs.content) == completion.usage.completion_tokens
    assert "".join(t.token for t in logprobs.content) == completion.choices[0].message.content
    for entry in logprobs.content:
        assert entry.bytes == list(entry.token.encode())
        assert entry.logprob <= 0
        ranks = [t.logprob for t in entry.top_logprobs]
        assert len(ranks) == 5 and ranks == sorted(ranks, reverse=True)
        assert sum(math.exp(r) for r in ranks) <= 1 + 1e-9
    # A confident answer: its sampled tokens lead their positions.
    assert all(e.top_logprobs[0].token == e.token for e in logprobs.content)


def test_logprobs_are_deterministic_for_a_request(client: openai.OpenAI) -> None:
    def content(messages: Any, top: int) -> list[tuple[str, float]]:
        completion = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, logprobs=True, top_logprobs=top
        )
        logprobs = completion.choices[0].logprobs
        assert logprobs is not None and logprobs.content is not None
        return [(t.token, t.logprob) for t in logprobs.content]

    first = content(USER, 2)
    assert content(USER, 2) == first
    assert content(USER, 0) == first  # asking for runners-up changes no sampled logprob
    assert content(user("Something else entirely."), 2) != first


def test_without_logprobs_there_are_none(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert completion.choices[0].logprobs is None
    with_flag = client.chat.completions.create(model="gpt-4o-mini", messages=USER, logprobs=True)
    logprobs = with_flag.choices[0].logprobs
    assert logprobs is not None and logprobs.content
    assert all(entry.top_logprobs == [] for entry in logprobs.content)


def test_stream_chunks_carry_their_own_tokens(
    client: openai.OpenAI, http: httpx.Client, openai_sb: SandboxServer
) -> None:
    body = {"model": "gpt-4o-mini", "messages": USER, "logprobs": True, "top_logprobs": 3}
    whole = client.chat.completions.create(model="gpt-4o-mini", messages=USER, logprobs=True, top_logprobs=3)
    assert whole.choices[0].logprobs is not None
    expected = [entry.model_dump() for entry in whole.choices[0].logprobs.content or []]
    chunks = raw_chunks(http, openai_sb, body)
    streamed: list[dict[str, Any]] = []
    for chunk in chunks:
        choice = chunk["choices"][0]
        if choice["delta"].get("content"):
            assert choice["logprobs"]["refusal"] is None
            assert "".join(e["token"] for e in choice["logprobs"]["content"]) == choice["delta"]["content"]
            streamed.extend(choice["logprobs"]["content"])
        else:  # the role chunk and the finish chunk
            assert choice["logprobs"] is None
    assert streamed == expected
    # And through the SDK's own stream reader.
    tokens = []
    for event in client.chat.completions.create(
        model="gpt-4o-mini", messages=USER, logprobs=True, top_logprobs=3, stream=True
    ):
        if event.choices and event.choices[0].logprobs is not None:
            tokens += [t.token for t in event.choices[0].logprobs.content or []]
    assert tokens == [e["token"] for e in expected]


@pytest.mark.parametrize(
    ("extra", "message", "code"),
    [
        ({"top_logprobs": 2}, "The 'top_logprobs' parameter is only allowed when 'logprobs' is enabled.", None),
        ({"logprobs": False, "top_logprobs": 0},
         "The 'top_logprobs' parameter is only allowed when 'logprobs' is enabled.", None),
        ({"logprobs": True, "top_logprobs": 21},
         "Invalid 'top_logprobs': integer above maximum value. Expected a value <= 20, but got 21 instead.",
         "integer_above_max_value"),
        ({"logprobs": True, "top_logprobs": -1},
         "Invalid 'top_logprobs': integer below minimum value. Expected a value >= 0, but got -1 instead.",
         "integer_below_min_value"),
        ({"logprobs": "yes"}, "Invalid type for 'logprobs': expected a boolean, but got string instead.",
         "invalid_type"),
    ],
)  # fmt: skip
def test_bad_logprobs_options_are_rejected_as_openai_does(
    http: httpx.Client, openai_sb: SandboxServer, extra: dict[str, Any], message: str, code: str | None
) -> None:
    body = {"model": "gpt-4o-mini", "messages": USER, **extra}
    response = http.post(openai_sb.base_url + "/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == message
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    assert error["param"] == ("logprobs" if extra.get("logprobs") == "yes" else "top_logprobs")


def test_answer_fault_sets_the_mean_logprob(
    client: openai.OpenAI, http: httpx.Client, openai_sb: SandboxServer
) -> None:
    completion = client.chat.completions.create(
        model="gpt-4o-mini", messages=USER, logprobs=True, top_logprobs=2,
        extra_headers={"x-sandbox-fault": LOW},
    )  # fmt: skip
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None and logprobs.content
    mean = sum(t.logprob for t in logprobs.content) / len(logprobs.content)
    assert mean == pytest.approx(-3.5)
    # Low confidence has more likely rivals somewhere.
    assert any(t.top_logprobs[0].token != t.token for t in logprobs.content)
    body = {"model": "gpt-4o-mini", "messages": USER, "logprobs": True}
    response = http.post(
        openai_sb.base_url + "/v1/chat/completions",
        json={**body, "stream": True},
        headers={"x-sandbox-fault": "mean_logprob=-3.5"},
    )
    values = [
        entry["logprob"]
        for line in response.text.splitlines()
        if line.startswith("data: {")
        for entry in ((orjson.loads(line[6:])["choices"] or [{}])[0].get("logprobs") or {}).get("content", [])
    ]
    assert values and sum(values) / len(values) == pytest.approx(-3.5)


def test_answer_fault_replaces_content_and_finish_reason(
    client: openai.OpenAI, http: httpx.Client, openai_sb: SandboxServer
) -> None:
    fault = orjson.dumps({"kind": "answer", "content": "{not json", "finish_reason": "length"}).decode()
    completion = client.chat.completions.create(
        model="gpt-4o-mini", messages=USER, extra_headers={"x-sandbox-fault": fault}
    )
    assert completion.choices[0].message.content == "{not json"
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None and completion.usage.completion_tokens == 3
    response = http.post(
        openai_sb.base_url + "/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": USER, "stream": True},
        headers={"x-sandbox-fault": fault},
    )
    chunks = [orjson.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    reasons = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert (text, reasons[-1]) == ("{not json", "length")

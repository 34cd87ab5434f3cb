"""Chat logprobs in vLLM's flavour: no ``refusal``, the sampled token listed first, vLLM's 400s."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import orjson
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from sandbox.server import SandboxServer
from tests.sandbox.clients import user

USER = user("Summarise how a toll gateway routes requests.")


def test_whole_answer_in_vllm_shape(vllm_client: openai.OpenAI) -> None:
    raw = vllm_client.chat.completions.with_raw_response.create(
        model="llama", messages=USER, logprobs=True, top_logprobs=4,
        extra_headers={"x-sandbox-fault": '{"kind": "answer", "mean_logprob": -2.5}'},
    )  # fmt: skip
    body = orjson.loads(raw.content)
    ChatCompletion.model_validate(body)
    choice = body["choices"][0]
    assert set(choice["logprobs"]) == {"content"}
    assert choice["stop_reason"] is None
    entries = choice["logprobs"]["content"]
    assert len(entries) == body["usage"]["completion_tokens"]
    for entry in entries:
        tops = entry["top_logprobs"]
        assert len(tops) == 4 and tops[0] == {k: entry[k] for k in ("token", "logprob", "bytes")}
        rest = [t["logprob"] for t in tops[1:]]
        assert rest == sorted(rest, reverse=True)
    assert sum(e["logprob"] for e in entries) / len(entries) == pytest.approx(-2.5)
    # Even where a rival is more likely, vLLM lists the sampled token first.
    assert any(e["top_logprobs"][1]["logprob"] > e["logprob"] for e in entries)


def test_stream_chunks_in_vllm_shape(http: httpx.Client, vllm_sb: SandboxServer) -> None:
    body = {"model": "llama", "messages": USER, "logprobs": True, "top_logprobs": 1, "stream": True}
    response = http.post(vllm_sb.base_url + "/v1/chat/completions", json=body)
    chunks = [orjson.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    text, tokens = "", []
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
        choice = chunk["choices"][0]
        if choice["delta"].get("content"):
            assert set(choice["logprobs"]) == {"content"}
            tokens += [e["token"] for e in choice["logprobs"]["content"]]
            text += choice["delta"]["content"]
        elif "role" in choice["delta"]:
            assert choice["logprobs"] is None
    assert tokens and "".join(tokens) == text
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"top_logprobs": 2}, "when using `top_logprobs`, `logprobs` must be set to true."),
        ({"logprobs": True, "top_logprobs": -2}, "`top_logprobs` must be a positive value or -1."),
        ({"logprobs": True, "top_logprobs": 21},
         "Requested sample logprobs of 21, which is greater than max allowed: 20"),
    ],
)  # fmt: skip
def test_bad_logprobs_options_are_rejected_as_vllm_does(
    http: httpx.Client, vllm_sb: SandboxServer, extra: dict[str, Any], message: str
) -> None:
    body = {"model": "llama", "messages": USER, **extra}
    response = http.post(vllm_sb.base_url + "/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["message"], error["type"], error["code"]) == (message, "BadRequestError", 400)


def test_top_logprobs_zero_without_logprobs_is_fine_on_vllm(vllm_client: openai.OpenAI) -> None:
    completion = vllm_client.chat.completions.create(model="llama", messages=USER, top_logprobs=0)
    assert completion.choices[0].logprobs is None

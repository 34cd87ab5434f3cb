"""The vllm dialect: vLLM's response variant, its extra endpoints and its /metrics."""

from __future__ import annotations

import httpx
import openai
import orjson
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from prometheus_client.parser import text_string_to_metric_families

from sandbox.server import SandboxServer
from tests.sandbox.clients import long_prompt, sdk, user

USER = user("Summarise the ledger.")


def scrape(server: SandboxServer) -> dict[str, float]:
    """Every sample of /metrics as ``name{labels}`` -> value (labels sorted)."""
    response = httpx.get(server.base_url + "/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    return samples


def test_completion_has_vllm_fields(vllm_client: openai.OpenAI) -> None:
    response = vllm_client.chat.completions.with_raw_response.create(model="llama", messages=USER)
    data = orjson.loads(response.http_response.content)
    completion = ChatCompletion.model_validate(data)
    assert completion.model == "llama"
    assert data["choices"][0]["stop_reason"] is None
    assert data["choices"][0]["message"]["tool_calls"] == []
    assert data["usage"]["prompt_tokens_details"] is None  # nothing cached yet
    assert "completion_tokens_details" not in data["usage"]


def test_stream_puts_finish_reason_on_last_content_chunk(vllm_sb: SandboxServer) -> None:
    body = {"model": "llama", "messages": USER, "stream": True, "max_tokens": 9,
            "stream_options": {"include_usage": True}}  # fmt: skip
    text = httpx.post(vllm_sb.base_url + "/v1/chat/completions", json=body).text
    events = [e.removeprefix("data: ") for e in text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate_json(e) for e in events[:-1]]
    assert chunks[0].choices[0].delta.role == "assistant"
    last_choice = chunks[-2].choices[0]
    assert last_choice.finish_reason == "length" and last_choice.delta.content
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 9
    assert all("usage" not in orjson.loads(e) for e in events[:-2])


def test_prefix_cache_hits_are_reported_and_counted(
    vllm_client: openai.OpenAI, vllm_sb: SandboxServer
) -> None:
    before = scrape(vllm_sb)
    labels = "{engine=0,model_name=cached-model}"
    messages = user(long_prompt(1250))
    first = vllm_client.chat.completions.create(model="cached-model", messages=messages)
    second = vllm_client.chat.completions.create(model="cached-model", messages=messages)
    assert first.usage is not None and second.usage is not None
    assert second.usage.prompt_tokens_details is not None
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached is not None and cached % 16 == 0
    assert second.usage.prompt_tokens - 16 <= cached < second.usage.prompt_tokens
    after = scrape(vllm_sb)
    prompt = first.usage.prompt_tokens

    def moved(name: str) -> float:
        return after[name + labels] - before.get(name + labels, 0.0)

    assert moved("vllm:prefix_cache_queries_total") == 2 * prompt
    assert moved("vllm:prefix_cache_hits_total") == cached
    assert moved("vllm:prompt_tokens_total") == 2 * prompt
    assert moved("vllm:generation_tokens_total") == (
        first.usage.completion_tokens + second.usage.completion_tokens
    )
    success = "vllm:request_success_total{engine=0,finished_reason=stop,model_name=cached-model}"
    assert after[success] == 2
    assert after["vllm:time_to_first_token_seconds_count" + labels] == 2
    assert after["vllm:kv_cache_usage_perc" + labels] == 0  # idle: cached blocks are evictable, not used
    assert after["vllm:num_requests_running" + labels] == 0
    assert after["vllm:num_requests_waiting" + labels] == 0
    for name in ("vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                 "vllm:inter_token_latency_seconds"):  # fmt: skip
        assert after[f"{name}_count{labels}"] > 0
    assert "vllm:num_preemptions_total" + labels in after


def test_prompt_tokens_details_can_be_turned_off() -> None:
    from sandbox.config import SandboxConfig

    config = SandboxConfig(dialect="vllm", profile="instant", prompt_tokens_details=False)
    messages = user(long_prompt(300))
    with SandboxServer(config) as sb, sdk(sb) as client:
        for _ in range(2):
            usage = client.chat.completions.create(model="m", messages=messages).usage
            assert usage is not None and usage.prompt_tokens_details is None


def test_health_ping_version(vllm_sb: SandboxServer) -> None:
    health = httpx.get(vllm_sb.base_url + "/health")
    assert (health.status_code, health.content) == (200, b"")
    assert httpx.get(vllm_sb.base_url + "/ping").status_code == 200
    assert httpx.get(vllm_sb.base_url + "/version").json() == {"version": "0.11.0"}


def test_errors_use_vllm_types_and_integer_codes() -> None:
    with SandboxServer(dialect="vllm", profile="instant", models=["llama"]) as sb, sdk(sb) as c:
        assert [m.id for m in c.models.list().data] == ["llama"]
        with pytest.raises(openai.NotFoundError) as caught:
            c.chat.completions.create(model="mistral", messages=USER)
        assert caught.value.response.json() == {
            "error": {
                "message": "The model `mistral` does not exist.",
                "type": "NotFoundError",
                "param": None,
                "code": 404,
            }
        }
        bad = httpx.post(sb.base_url + "/v1/chat/completions", json={"model": "llama"})
        assert bad.json()["error"]["type"] == "BadRequestError"
        assert bad.json()["error"]["code"] == 400
        assert httpx.get(sb.base_url + "/nope").json() == {"detail": "Not Found"}


def test_two_sandboxes_keep_separate_metrics(vllm_sb: SandboxServer) -> None:
    with SandboxServer(dialect="vllm", profile="instant") as other, sdk(other) as client:
        client.chat.completions.create(model="only-here", messages=USER)
        assert any("only-here" in key for key in scrape(other))
    assert not any("only-here" in key for key in scrape(vllm_sb))


def test_ignore_eos_generates_up_to_max_tokens(vllm_client: openai.OpenAI) -> None:
    """vLLM's `ignore_eos` sampling parameter (what load generators use for long answers) runs past
    the natural end to `max_tokens` exactly; without it the answer ends on its own."""
    natural = vllm_client.chat.completions.create(model="llama", messages=USER, max_tokens=2_000)
    forced = vllm_client.chat.completions.create(
        model="llama", messages=USER, max_tokens=2_000, extra_body={"ignore_eos": True}
    )
    assert natural.usage is not None and natural.usage.completion_tokens < 2_000
    assert natural.choices[0].finish_reason == "stop"
    assert forced.usage is not None and forced.usage.completion_tokens == 2_000
    assert forced.choices[0].finish_reason == "length"
    content = forced.choices[0].message.content or ""
    assert content.startswith(natural.choices[0].message.content or "")

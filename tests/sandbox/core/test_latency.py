"""The latency model, loosely: prefill per uncached token, cache speed-ups, decode rate, per dialect."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import httpx
import openai

from sandbox.core.latency import PROFILES
from sandbox.server import SandboxServer
from tests.sandbox.clients import anthropic_sdk, long_prompt, sdk


def time_to_first_content(client: openai.OpenAI, content: str) -> float:
    started = time.monotonic()
    stream = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": content}], stream=True, max_tokens=2
    )
    with stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                return time.monotonic() - started
    raise AssertionError("no content")


def test_profiles_follow_the_documented_numbers() -> None:
    managed = PROFILES["managed"]
    assert abs(managed.time_to_first_token(1800) - 0.4) < 0.01
    assert managed.inter_token_s == 1 / 50
    assert PROFILES["local"].time_to_first_token(1800) < managed.time_to_first_token(1800)
    assert PROFILES["instant"].time_to_first_token(10**6) == 0.0


def test_managed_ttft_grows_with_uncached_prompt_and_shrinks_when_cached() -> None:
    prompt = long_prompt(1800)
    with SandboxServer(dialect="openai", profile="managed") as sb, sdk(sb) as client:
        cold = time_to_first_content(client, prompt)
        warm = time_to_first_content(client, prompt)
    assert 0.3 <= cold < 1.5
    assert warm < cold - 0.2


def test_managed_decode_rate_paces_the_answer() -> None:
    with SandboxServer(dialect="openai", profile="managed") as sb, sdk(sb) as client:
        started = time.monotonic()
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=11)
        elapsed = time.monotonic() - started
    # 40 ms base + 10 gaps of 20 ms between 11 tokens.
    assert 0.2 <= elapsed < 0.8


def test_instant_is_quick(client: openai.OpenAI) -> None:
    content = long_prompt(1800)
    started = time.monotonic()
    for _ in range(5):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
    assert time.monotonic() - started < 0.5


def test_anthropic_cache_reads_shorten_time_to_first_token() -> None:
    system: Any = [{"type": "text", "text": long_prompt(1500), "cache_control": {"type": "ephemeral"}}]

    def ttft(client: anthropic.Anthropic) -> float:
        started = time.monotonic()
        with client.messages.stream(model="claude-sonnet-4-6", max_tokens=2, system=system,
                                    messages=[{"role": "user", "content": "hi"}]) as stream:  # fmt: skip
            for event in stream:
                if event.type == "content_block_delta":
                    return time.monotonic() - started
        raise AssertionError("no content")

    with SandboxServer(dialect="anthropic", profile="managed") as sb, anthropic_sdk(sb) as client:
        cold, warm = ttft(client), ttft(client)
    assert 0.25 <= cold < 1.5  # 40 ms + 1,500 uncached tokens at 0.2 ms
    assert warm < cold - 0.15


def test_gemini_stream_frames_are_paced() -> None:
    body = {"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 17}}
    with SandboxServer(dialect="gemini", profile="managed") as sb, httpx.Client() as http:
        url = sb.base_url + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        started = time.monotonic()
        arrivals = []
        with http.stream("POST", url, json=body, headers={"x-goog-api-key": "k"}) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    arrivals.append(time.monotonic() - started)
    # 17 tokens in frames of 8: at tokens 0, 8 and 16; 20 ms a token after a 40 ms start.
    assert len(arrivals) == 3
    assert arrivals[0] < 0.2 and 0.25 <= arrivals[-1] < 1.0

"""The latency model, loosely: prefill per uncached token, prefix-cache speed-up, decode rate."""

from __future__ import annotations

import time

import openai

from sandbox.latency import PROFILES
from sandbox.server import SandboxServer
from tests.sandbox.clients import long_prompt, sdk


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

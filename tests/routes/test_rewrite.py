"""The one step that changes a request on its way upstream, and the ledger row that says so."""

from __future__ import annotations

import httpx
import orjson

from gateway.config.schema import TeamCacheConfig, TeamConfig
from gateway.routes.rewrite import rewrite_for_upstream
from providers.types import ChatRequest
from sandbox.server import SandboxServer
from tests.harness import GatewayServer
from tests.policy.test_gate import new_key, policy_config

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
LONG = "Please read this report carefully. " * 200  # ~7 KB: long enough for OpenAI prompt caching


def request(content: str, **body: object) -> ChatRequest:
    full = {"model": "m", "messages": [{"role": "user", "content": content}], **body}
    return ChatRequest(body=full, raw=orjson.dumps(full), model="m")


def test_a_capped_temperature_and_cache_marks_are_each_named() -> None:
    chat = request(LONG, tools=[TOOL], temperature=1.5)
    flags = rewrite_for_upstream(
        chat, team_name="t", team=TeamConfig(max_temperature_structured=0.2), cache=TeamCacheConfig()
    )
    assert flags == ["temperature_capped:0.2", "prompt_cache_key"]
    assert chat.body["temperature"] == 0.2 and chat.raw == b""  # the bytes upstream are rebuilt
    assert chat.facts.temperature == 1.5  # what the client asked stays known
    # The cap must not cost the prompt its cache key (the rebuilt body has no bytes yet).
    assert chat.prompt_cache_key is not None and chat.cache_ttl == "5m"


def test_nothing_changes_without_a_reason() -> None:
    short = request("hi", tools=[TOOL], temperature=0.1)
    assert (
        rewrite_for_upstream(
            short, team_name="t", team=TeamConfig(max_temperature_structured=0.2), cache=TeamCacheConfig()
        )
        == []
    )
    assert short.raw and short.prompt_cache_key is None  # under the cap, too short for a cache key
    unstructured = request(LONG, temperature=1.5)
    off = TeamCacheConfig(prompt_cache=False)
    assert (
        rewrite_for_upstream(
            unstructured, team_name="t", team=TeamConfig(max_temperature_structured=0.2), cache=off
        )
        == []
    )
    assert unstructured.body["temperature"] == 1.5 and unstructured.cache_ttl is None


def test_the_ledger_row_names_each_change(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    config = policy_config(
        sqlite_url, openai_upstream, vllm_upstream, {"careful": {"max_temperature_structured": 0.2}}
    )
    with GatewayServer(config) as server:
        key = new_key(server, "careful")
        body = {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": LONG}],
            "tools": [TOOL],
            "temperature": 1.5,
            "max_tokens": 20,
        }
        answer = httpx.post(
            server.base_url + "/v1/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert answer.status_code == 200
        seen = httpx.get(openai_upstream.base_url + "/_sandbox/requests").json()[-1]["body"]
        assert orjson.loads(seen)["temperature"] == 0.2
        row = server.ledger_row(answer.headers["x-request-id"])
        assert row["flags"] == "temperature_capped:0.2,prompt_cache_key"

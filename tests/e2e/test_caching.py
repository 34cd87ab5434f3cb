"""Caching that shows up in dollars: automatic Anthropic prompt caching across a conversation, and a
response cache shared by replicas through Redis but never across teams."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from gateway.accounting.database import run_migrations
from gateway.config.loader import build_config
from gateway.config.schema import Config
from sandbox.server import SandboxServer
from tests.e2e.test_providers import CLAUDE_PRICE
from tests.harness import GatewayServer
from tests.services import require_redis

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SYSTEM = "You are the support assistant of a toll-road operator. Policies follow. " + (
    "Refunds for double charges are issued within five working days after verification. " * 120
)


def caching_config(sqlite_url: str, anthropic_url: str, openai_url: str, spool: str, **extra: Any) -> Config:
    raw: dict[str, Any] = {
        "database": {"url": sqlite_url, "auto_migrate": False},
        "ledger": {"flush_interval_ms": 5, "spool_dir": spool},
        "providers": {
            "anthropic": {"type": "anthropic", "base_url": anthropic_url, "api_key": "sk-a"},
            "openai": {"type": "openai", "base_url": openai_url + "/v1"},
        },
        "models": {
            "claude": {"provider": "anthropic", "upstream_model": "claude-sonnet-4-6", "price": CLAUDE_PRICE},
            "gpt-4o-mini": {"provider": "openai", "price": {"input_per_mtok": "3", "output_per_mtok": "15"}},
        },
        "pricing": {"baseline_model": "claude"},
        **extra,
    }
    return build_config(raw, source="test", environ={})


@pytest.fixture(scope="module")
def anthropic_upstream() -> Iterator[SandboxServer]:
    with SandboxServer(dialect="anthropic", profile="instant") as server:
        yield server


@pytest.fixture
def gateway(
    sqlite_url: str,
    anthropic_upstream: SandboxServer,
    openai_upstream: SandboxServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayServer]:
    httpx.post(anthropic_upstream.base_url + "/_sandbox/reset")
    spool = str(tmp_path_factory.mktemp("spool"))
    with GatewayServer(
        caching_config(sqlite_url, anthropic_upstream.base_url, openai_upstream.base_url, spool)
    ) as server:
        yield server


def nano(tokens: int, usd_per_mtok: str) -> int:
    """Nano-USD for `tokens` at a per-million price: tokens x price x 1e9 / 1e6, exact here."""
    return int(tokens * Decimal(usd_per_mtok) * 1000)


def test_a_conversation_reads_its_prefix_from_cache_and_the_saving_is_reported(
    gateway: GatewayServer, anthropic_upstream: SandboxServer
) -> None:
    with openai.OpenAI(base_url=gateway.base_url + "/v1", api_key="k", max_retries=0) as client:
        conversation(client, gateway, anthropic_upstream)


def conversation(client: openai.OpenAI, gateway: GatewayServer, anthropic_upstream: SandboxServer) -> None:
    messages: list[Any] = [{"role": "system", "content": SYSTEM}]
    rows = []
    for question in ("Was I charged twice?", "How long does a refund take?", "Can I get it faster?"):
        messages.append({"role": "user", "content": question})
        raw = client.chat.completions.with_raw_response.create(model="claude", messages=messages)
        messages.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
        rows.append(gateway.ledger_row(raw.headers["x-request-id"]))
    sent = httpx.get(anthropic_upstream.base_url + "/_sandbox/requests").json()
    assert '"cache_control"' in sent[-1]["body"], "the gateway placed the breakpoints, not the client"
    first, *later = rows
    assert first["cache_write_tokens"] > 1000 and first["cached_tokens"] == 0
    for row in later:
        assert row["cached_tokens"] >= first["cache_write_tokens"], (
            "from turn 2 the prefix is read from cache"
        )
        uncached = row["prompt_tokens"] - row["cached_tokens"] - row["cache_write_tokens"]
        # Claude Sonnet: $3 input, $3.75 5-minute write, $0.30 read, $15 output per million tokens.
        exact = (
            nano(uncached, "3")
            + nano(row["cache_write_tokens"], "3.75")
            + nano(row["cached_tokens"], "0.30")
            + nano(row["completion_tokens"], "15")
        )
        assert row["cost_nano"] == exact
        full = nano(row["prompt_tokens"], "3") + nano(row["completion_tokens"], "15")
        assert row["cache_saving_nano"] == full - row["cost_nano"] > 0
    spend = httpx.get(gateway.base_url + "/v1/spend", params={"group_by": "model", "since": "1d"}).json()
    claude = next(d for d in spend["data"] if d["model"] == "claude")
    assert claude["cache_saving_nano"] >= sum(r["cache_saving_nano"] for r in rows)
    assert spend["totals"]["cache_saving_usd"]


def test_response_cache_hit_costs_nothing_and_replays_as_a_stream(
    gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    client = openai.OpenAI(base_url=gateway.base_url + "/v1", api_key="k", max_retries=0)
    question = [{"role": "user", "content": f"What is a toll road? ({uuid.uuid4().hex})"}]
    first = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=question, temperature=0
    )
    again = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=question, temperature=0
    )
    assert (first.headers["x-tollgate-cache"], again.headers["x-tollgate-cache"]) == ("miss", "hit")
    assert again.parse().choices[0].message.content == first.parse().choices[0].message.content
    calls = [
        r
        for r in httpx.get(openai_upstream.base_url + "/_sandbox/requests").json()
        if question[0]["content"] in r["body"]
    ]
    assert len(calls) == 1
    hit = gateway.ledger_row(again.headers["x-request-id"])
    assert (hit["cache_status"], hit["cost_nano"], hit["status"]) == ("hit", 0, 200)
    miss = gateway.ledger_row(first.headers["x-request-id"])
    assert hit["cache_saving_nano"] == miss["cost_nano"] > 0
    assert hit["baseline_cost_nano"] > 0
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini",
        messages=question,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        assert response.headers["x-tollgate-cache"] == "hit"
        chunks = list(response.parse())
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk.model_dump())
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        == first.parse().choices[0].message.content
    )
    assert chunks[-1].usage is not None
    bypass = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=question, temperature=0, extra_headers={"cache-control": "no-store"}
    )
    assert bypass.headers["x-tollgate-cache"] == "bypass"
    warm = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=question, temperature=0.7
    )
    assert warm.headers["x-tollgate-cache"] == "bypass", "only deterministic requests are cached"


@pytest.mark.redis
def test_replicas_share_the_cache_and_teams_never_see_each_other(
    sqlite_url: str,
    anthropic_upstream: SandboxServer,
    openai_upstream: SandboxServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    state = {"backend": "redis", "redis_url": require_redis(), "prefix": f"tollgate-test:{uuid.uuid4().hex}:"}
    config = caching_config(
        sqlite_url,
        anthropic_upstream.base_url,
        openai_upstream.base_url,
        str(tmp_path_factory.mktemp("spool")),
        state=state,
        teams={"red": {}, "blue": {}},
    )
    with GatewayServer(config) as a, GatewayServer(config) as b:
        red, _ = a.call(a.runtime.keys.create("red", "r"))
        blue, _ = a.call(a.runtime.keys.create("blue", "b"))
        body = {
            "model": "gpt-4o-mini",
            "temperature": 0,
            "messages": [{"role": "user", "content": f"q {uuid.uuid4().hex}"}],
        }

        def ask(server: GatewayServer, key: str) -> httpx.Response:
            return httpx.post(
                server.base_url + "/v1/chat/completions",
                json=body,
                headers={"authorization": f"Bearer {key}"},
            )

        assert ask(a, red).headers["x-tollgate-cache"] == "miss"
        assert ask(b, red).headers["x-tollgate-cache"] == "hit", (
            "the second replica reads what the first stored"
        )
        assert ask(b, blue).headers["x-tollgate-cache"] == "miss", "another team never gets red's answer"
        assert ask(a, blue).headers["x-tollgate-cache"] == "hit"


def test_semantic_cache_is_off_by_default_and_answers_near_duplicates_when_on(
    sqlite_url: str,
    anthropic_upstream: SandboxServer,
    openai_upstream: SandboxServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # A ledger of its own: keys other tests created would end open mode here.
    fresh = tmp_path_factory.mktemp("semantic") / "ledger.db"
    sqlite_url = f"sqlite+aiosqlite:///{fresh}"
    run_migrations(sqlite_url)
    base = caching_config(
        sqlite_url,
        anthropic_upstream.base_url,
        openai_upstream.base_url,
        str(tmp_path_factory.mktemp("spool")),
    )
    assert base.cache.semantic.enabled is False, "off by default"
    raw = base.model_dump(mode="json")
    raw["models"]["embedder"] = {
        "provider": "openai",
        "upstream_model": "text-embedding-3-small",
        "price": {"input_per_mtok": "0.02", "output_per_mtok": "0"},
    }
    raw["cache"]["semantic"] = {
        "enabled": True,
        "embedding_model": "embedder",
        "threshold": 0.99,
        "max_entries": 100,
    }

    with GatewayServer(build_config(raw, environ={})) as server:
        text = f"How do I get a refund? {uuid.uuid4().hex}"

        def ask(content: str, seed: int) -> httpx.Response:
            body = {
                "model": "gpt-4o-mini",
                "temperature": 0,
                "seed": seed,
                "messages": [{"role": "user", "content": content}],
            }
            return httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=20)

        first = ask(text, 1)
        # A different seed is a different exact key; the same question is a semantic neighbour.
        near = ask(text, 2)
        other = ask(f"Something else entirely {uuid.uuid4().hex}", 3)
        assert (first.headers["x-tollgate-cache"], near.headers["x-tollgate-cache"]) == (
            "miss",
            "semantic_hit",
        )
        assert (
            near.json()["choices"][0]["message"]["content"]
            == first.json()["choices"][0]["message"]["content"]
        )
        assert other.headers["x-tollgate-cache"] == "miss"
        rows = server.ledger_rows()
        embeddings = [r for r in rows if r["endpoint"] == "embeddings" and r["tags"] == '["semantic-cache"]']
        assert len(embeddings) == 3 and all(r["cost_nano"] > 0 for r in embeddings), (
            "the lookups are billed too"
        )
        assert server.ledger_row(near.headers["x-request-id"])["cache_status"] == "semantic_hit"


def test_a_cache_hit_still_carries_the_rate_limit_headers(
    sqlite_url: str,
    anthropic_upstream: SandboxServer,
    openai_upstream: SandboxServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A hit passed the gate like any request: the client sees where its limits stand."""
    config = caching_config(
        sqlite_url,
        anthropic_upstream.base_url,
        openai_upstream.base_url,
        str(tmp_path_factory.mktemp("spool")),
        teams={"limited": {"rpm": 30}},
    )
    with GatewayServer(config) as server:
        key, _ = server.call(server.runtime.keys.create("limited", "k"))
        body = {
            "model": "gpt-4o-mini",
            "temperature": 0,
            "messages": [{"role": "user", "content": f"q {uuid.uuid4().hex}"}],
        }
        answers = [
            httpx.post(
                server.base_url + "/v1/chat/completions",
                json=body,
                headers={"authorization": f"Bearer {key}"},
            )
            for _ in range(2)
        ]
    assert [a.headers["x-tollgate-cache"] for a in answers] == ["miss", "hit"]
    assert [a.headers["x-ratelimit-limit-requests"] for a in answers] == ["30", "30"]
    assert (
        answers[1].headers["x-ratelimit-remaining-requests"]
        < answers[0].headers["x-ratelimit-remaining-requests"]
    )

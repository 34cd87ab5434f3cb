"""Inside a tier: a request that uses tools, a JSON schema or images goes only to a model that
serves them, and the cheapest able model answers first (unless the tier says `order: listed`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.config.loader import build_config
from gateway.config.schema import TeamConfig
from gateway.execution.latency import LatencyBook
from gateway.models import ModelRegistry
from gateway.routing import ComplexityClassifier
from gateway.routing.capabilities import lacking, needs
from gateway.routing.router import Router
from pricing.book import PriceBook
from pricing.catalog import PriceCatalog
from providers.types import ChatRequest
from sandbox.server import SandboxServer
from tests.conftest import PRICE, SettingsFactory, gateway_config
from tests.harness import GatewayServer

CHEAP = {"input_per_mtok": "0.15", "output_per_mtok": "0.60"}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
LOOK = [{"role": "user", "content": [{"type": "text", "text": "hi, what is this?"}, IMAGE]}]
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
EASY = [{"role": "user", "content": "hi there"}]


def test_needs_reads_tools_schemas_and_images() -> None:
    assert needs({"messages": EASY}) == frozenset()
    assert needs({"messages": EASY, "tools": [TOOL]}) == {"tools"}
    assert needs({"messages": EASY, "tools": []}) == frozenset()
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
    assert needs({"messages": EASY, "response_format": schema}) == {"json_schema"}
    assert needs({"messages": EASY, "response_format": {"type": "json_object"}}) == frozenset()
    assert needs({"messages": LOOK}) == {"vision"}
    assert needs({"messages": [None, {"content": [None, "x"]}], "response_format": "json"}) == frozenset()


def test_lacking_comes_from_the_config_else_from_an_explicit_no_in_the_table() -> None:
    assert lacking(("tools", "json_schema"), [{"supports_vision": True}]) == {"vision"}
    assert lacking(None, [{"supports_vision": False, "supports_function_calling": True}]) == {"vision"}
    assert lacking(None, [None, {"litellm_provider": "x"}]) == frozenset()  # unknown: assumed able


def test_the_registry_reads_capabilities_from_litellms_table(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    config = gateway_config(sqlite_url, openai_upstream.base_url, vllm_upstream.base_url)
    table = {
        "gpt-4o-mini": {"supports_vision": True, "supports_function_calling": True},
        "meta-llama/Llama-3.1-8B-Instruct": {"supports_vision": False},
    }
    registry = ModelRegistry(config, prices=PriceBook(PriceCatalog(table, version="test")))
    assert registry.resolve("gpt-4o-mini").lacks == frozenset()  # type: ignore[union-attr]
    assert registry.resolve("llama").lacks == {"vision"}  # type: ignore[union-attr]
    assert registry.resolve("ghost").lacks == frozenset()  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def gateway(sandbox_settings: SettingsFactory) -> Iterator[GatewayServer]:
    settings = sandbox_settings(
        routing={
            "tiers": [
                {"name": "local", "models": ["llama"]},
                {"name": "standard", "models": ["pricey", "gpt-4o-mini"]},
                {"name": "listed", "models": ["pricey", "gpt-4o-mini"], "order": "listed"},
            ],
            "thresholds": [0.17, 0.6],
            "routes": [],  # by score, so the reason's wording is the score's
        },
    )
    models = settings["models"]
    models["llama"]["capabilities"] = ["tools", "json_schema"]  # a text-only model on vLLM
    models["gpt-4o-mini"]["price"] = CHEAP
    models["pricey"] = {"provider": "openai", "upstream_model": "gpt-4o-mini", "price": PRICE}
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        yield server


def ask(server: GatewayServer, messages: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    headers = extra.pop("headers", {})
    body = {"model": "auto", "messages": messages, **extra}
    return httpx.post(server.base_url + "/v1/chat/completions", json=body, headers=headers, timeout=20)


def test_an_image_skips_the_text_only_model_and_the_reason_says_why(gateway: GatewayServer) -> None:
    text, image = ask(gateway, EASY), ask(gateway, LOOK)
    assert text.status_code == image.status_code == 200
    assert text.headers["x-tollgate-model"] == "llama"
    assert image.headers["x-tollgate-model"] == "gpt-4o-mini"
    assert image.headers["x-tollgate-tier"] == "standard"  # the routing tier that answered
    row = gateway.ledger_row(image.headers["x-request-id"])
    assert row["model"] == "gpt-4o-mini" and row["route_reason"].startswith(
        f"score {row['route_score']:.2f} -> local; needs vision ("
    )
    # Tools it serves: an easy tool call stays local.
    tools = ask(gateway, EASY, tools=[TOOL])
    assert tools.status_code == 200 and tools.headers["x-tollgate-model"] == "llama"


def test_the_cheapest_able_model_of_the_tier_answers_unless_the_tier_is_listed(
    gateway: GatewayServer,
) -> None:
    priced = ask(gateway, EASY, headers={"x-tollgate-tier": "standard"})
    assert priced.status_code == 200 and priced.headers["x-tollgate-model"] == "gpt-4o-mini"
    listed = ask(gateway, EASY, headers={"x-tollgate-tier": "listed"})
    assert listed.status_code == 200 and listed.headers["x-tollgate-model"] == "pricey"


def test_no_able_model_is_a_clear_400(sandbox_settings: SettingsFactory) -> None:
    settings = sandbox_settings(
        routing={"tiers": [{"name": "local", "models": ["llama"]}], "thresholds": []},
    )
    settings["models"]["llama"]["capabilities"] = []
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        refused = ask(server, LOOK, tools=[TOOL])
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["code"] == "unsupported_capability" and "tools and vision" in error["message"]
        assert server.ledger_row(refused.headers["x-request-id"])["status"] == 400


def test_latency_book_keeps_a_recent_ewma() -> None:
    now = [0.0]
    book = LatencyBook(alpha=0.5, max_age_s=10, clock=lambda: now[0])
    assert book.ttft_ms("openai/gpt-4o-mini") is None
    book.observe("openai/gpt-4o-mini", 100)
    book.observe("openai/gpt-4o-mini", 200)
    assert book.ttft_ms("openai/gpt-4o-mini") == 150
    now[0] = 11
    assert book.ttft_ms("openai/gpt-4o-mini") is None  # stale: nobody streamed from it lately


def test_equally_priced_models_rank_the_faster_first(sandbox_settings: SettingsFactory) -> None:
    settings = sandbox_settings(
        routing={"tiers": [{"name": "standard", "models": ["gpt-4o-mini", "renamed"]}], "thresholds": []},
    )
    config = build_config(settings, source="test", environ={})
    registry = ModelRegistry(config)
    book = LatencyBook()
    router = Router(config.routing, registry, ComplexityClassifier.load(), book)
    body = {"model": "auto", "messages": EASY}
    chat = ChatRequest(body=body, raw=json.dumps(body).encode(), model="auto")
    assert router.route(chat, forced=None, team=None).model.name == "gpt-4o-mini"  # no figures: as listed
    book.observe("openai/gpt-4o-mini", 900)
    book.observe("openai/gpt-4o-mini-2024-07-18", 120)
    assert router.route(chat, forced=None, team=None).model.name == "renamed"


def test_streams_feed_the_latency_book_and_plain_answers_do_not(gateway: GatewayServer) -> None:
    book = gateway.runtime.latency
    plain = httpx.post(
        gateway.base_url + "/v1/chat/completions", json={"model": "llama", "messages": EASY}, timeout=20
    )
    assert plain.status_code == 200
    assert book.ttft_ms("local/meta-llama/Llama-3.1-8B-Instruct") is None
    with httpx.stream(
        "POST",
        gateway.base_url + "/v1/chat/completions",
        json={"model": "llama", "messages": EASY, "stream": True},
        timeout=20,
    ) as streamed:
        assert streamed.status_code == 200
        streamed.read()
    ttft = book.ttft_ms("local/meta-llama/Llama-3.1-8B-Instruct")
    assert ttft is not None and 0 < ttft < 20_000


def _router_for(settings: dict[str, Any], tier: list[str]) -> Router:
    settings["routing"] = {"tiers": [{"name": "only", "models": tier}], "thresholds": []}
    config = build_config(settings, source="test", environ={})
    return Router(config.routing, ModelRegistry(config), ComplexityClassifier.load())


def test_a_model_is_priced_by_the_deployment_that_will_answer(sandbox_settings: SettingsFactory) -> None:
    """The executor tries a model's deployments in order, so the first one the team may use is
    what the request costs; a self-hosted deployment without a price costs nothing more."""
    settings = sandbox_settings()
    dear = {"input_per_mtok": "5", "output_per_mtok": "15"}
    settings["models"].update(
        {
            # dear first, a cheap backup second: it costs what its first deployment costs
            "primary-dear": {
                "deployments": [
                    {"provider": "openai", "model": "x", "price": dear},
                    {
                        "provider": "dead",
                        "model": "x",
                        "price": {"input_per_mtok": "0.01", "output_per_mtok": "0"},
                    },
                ]
            },
            "flat": {"provider": "openai", "price": {"input_per_mtok": "1", "output_per_mtok": "1"}},
            # a managed copy at $0.01 first, self-hosted at $2 second: a local-only team pays $2
            "gpu-dear": {
                "deployments": [
                    {
                        "provider": "openai",
                        "model": "x",
                        "price": {"input_per_mtok": "0.01", "output_per_mtok": "0"},
                    },
                    {
                        "provider": "local",
                        "model": "x",
                        "price": {"input_per_mtok": "2", "output_per_mtok": "2"},
                    },
                ]
            },
            "gpu-cheap": {"provider": "local", "price": {"input_per_mtok": "0.1", "output_per_mtok": "0.1"}},
            "gpu-unpriced": {"provider": "local"},
        }
    )
    body = {"model": "auto", "messages": EASY}
    chat = ChatRequest(body=body, raw=json.dumps(body).encode(), model="auto")
    private = TeamConfig(data_policy="local-only")

    def pick(tier: list[str], team: TeamConfig | None = None) -> str:
        return _router_for(dict(settings), tier).route(chat, forced=None, team=team).model.name

    assert pick(["primary-dear", "flat"]) == "flat"
    assert pick(["gpu-dear", "gpu-cheap"]) == "gpu-dear"  # its managed copy answers for $0.01
    assert pick(["gpu-dear", "gpu-cheap"], private) == "gpu-cheap"  # local-only pays the GPU price
    assert pick(["flat", "gpu-unpriced"]) == "gpu-unpriced"

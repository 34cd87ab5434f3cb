"""Issue 27's done-when: a Responses-API agent loop (tool call, tool output, final answer; streamed;
chained by `previous_response_id`) through Tollgate to the OpenAI, Anthropic, Gemini and vLLM
sandboxes, driven by the openai SDK, every event checked against its types, and each request's
ledger row priced exactly from the usage the client was shown."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pydantic
import pytest
from openai.types.responses import Response, ResponseStreamEvent

from sandbox.server import SandboxServer
from tests.harness import GatewayServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

EVENTS: pydantic.TypeAdapter[ResponseStreamEvent] = pydantic.TypeAdapter(ResponseStreamEvent)
# Per million tokens, as strings (config); the expected costs below are worked from them in integers.
PRICES = {
    "gpt-4o-mini": {"input_per_mtok": "0.15", "output_per_mtok": "0.60", "cached_input_per_mtok": "0.075"},
    "claude": {"input_per_mtok": "3", "output_per_mtok": "15", "cached_input_per_mtok": "0.30"},
    "gemini": {"input_per_mtok": "0.30", "output_per_mtok": "2.50", "cached_input_per_mtok": "0.075"},
    "llama": {"input_per_mtok": "0.06", "output_per_mtok": "0.06"},
}
NANO_PER_MTOK = {  # nano-USD per million tokens: input, cached input, output
    "gpt-4o-mini": (150_000_000, 75_000_000, 600_000_000),
    "claude": (3_000_000_000, 300_000_000, 15_000_000_000),
    "gemini": (300_000_000, 75_000_000, 2_500_000_000),
    "llama": (60_000_000, 60_000_000, 60_000_000),  # no cached price: cached reads cost input
}
WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": True,
}


@pytest.fixture(scope="module")
def gateway(sqlite_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    from gateway.config.loader import build_config

    with (
        SandboxServer(dialect="openai", profile="instant") as openai_sb,
        SandboxServer(dialect="anthropic", profile="instant") as anthropic_sb,
        SandboxServer(dialect="gemini", profile="instant") as gemini_sb,
        SandboxServer(dialect="vllm", profile="instant") as vllm_sb,
    ):
        config = build_config(
            {
                "database": {"url": sqlite_url, "auto_migrate": False},
                "ledger": {"flush_interval_ms": 5, "spool_dir": str(tmp_path_factory.mktemp("spool"))},
                "providers": {
                    "openai": {"type": "openai", "base_url": openai_sb.base_url + "/v1", "api_key": "sk-o"},
                    "anthropic": {"type": "anthropic", "base_url": anthropic_sb.base_url, "api_key": "sk-a"},
                    "gemini": {"type": "gemini", "base_url": gemini_sb.base_url, "api_key": "g-k"},
                    "local": {"type": "vllm", "base_url": vllm_sb.base_url + "/v1"},
                },
                "models": {
                    "gpt-4o-mini": {"provider": "openai", "price": PRICES["gpt-4o-mini"]},
                    "claude": {
                        "provider": "anthropic",
                        "upstream_model": "claude-sonnet-4-6",
                        "price": PRICES["claude"],
                    },
                    "gemini": {
                        "provider": "gemini",
                        "upstream_model": "gemini-2.5-flash",
                        "price": PRICES["gemini"],
                    },
                    "llama": {
                        "provider": "local",
                        "upstream_model": "meta-llama/Llama-3.1-8B-Instruct",
                        "tier": "local",
                        "price": PRICES["llama"],
                    },
                },
            },
            environ={},
        )
        with GatewayServer(config) as server:
            yield server


@pytest.fixture
def oai(gateway: GatewayServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url + "/v1", api_key="k", max_retries=0) as client:
        yield client


def _streamed(oai: openai.OpenAI, **params: Any) -> tuple[Response, str, list[str]]:
    """One streamed response through the SDK's stream helper (which checks the events' order and
    ids), its request id, and the event types; every event validated as the SDK's own type."""
    request_id = uuid.uuid4().hex  # the gateway keeps a client's request id as the row's id
    with oai.responses.stream(**params, extra_headers={"x-request-id": request_id}) as stream:
        kinds = []
        for event in stream:
            EVENTS.validate_python(event.model_dump(exclude={"snapshot", "parsed"}, warnings=False))
            kinds.append(event.type)
        final = stream.get_final_response()
    Response.model_validate(final.model_dump(warnings=False))
    return final, request_id, kinds


def _priced_exactly(gateway: GatewayServer, request_id: str, response: Response, model: str) -> int:
    row = gateway.ledger_row(request_id)
    usage = response.usage
    assert usage is not None
    assert (row["endpoint"], row["status"], row["model"], row["usage_estimated"]) == (
        "responses",
        200,
        model,
        False,
    )
    assert (row["prompt_tokens"], row["cached_tokens"], row["completion_tokens"]) == (
        usage.input_tokens,
        usage.input_tokens_details.cached_tokens,
        usage.output_tokens,
    )
    per_in, per_cached, per_out = NANO_PER_MTOK[model]
    cached = usage.input_tokens_details.cached_tokens
    assert usage.input_tokens_details.cache_write_tokens == 0 == row["cache_write_tokens"]
    exact = (usage.input_tokens - cached) * per_in + cached * per_cached + usage.output_tokens * per_out
    expected = (exact + 500_000) // 10**6  # rounded once, half up
    assert row["cost_nano"] == expected
    cost: int = row["cost_nano"]
    return cost


@pytest.mark.parametrize("model", ["gpt-4o-mini", "claude", "gemini", "llama"])
def test_a_streamed_agent_loop_chained_by_previous_response_id(
    oai: openai.OpenAI, gateway: GatewayServer, model: str
) -> None:
    first, first_id, kinds = _streamed(
        oai,
        model=model,
        instructions="You are a weather assistant.",
        input="What is the weather in Paris? Use get_weather.",
        tools=[WEATHER],
        tool_choice="required",
    )
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    calls = [item for item in first.output if item.type == "function_call"]
    assert calls and calls[0].name == "get_weather"
    assert isinstance(json.loads(calls[0].arguments), dict)

    second, second_id, kinds = _streamed(
        oai,
        model=model,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"temp_c": 12}'}],
        tools=[WEATHER],
    )
    assert "response.output_text.delta" in kinds and second.output_text
    assert second.previous_response_id == first.id and second.status == "completed"
    # The second request carried the whole conversation upstream: more input than the first.
    assert second.usage is not None and first.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens

    spent = _priced_exactly(gateway, first_id, first, model) + _priced_exactly(
        gateway, second_id, second, model
    )
    assert spent > 0

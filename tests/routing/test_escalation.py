"""Escalation end to end: the real app in front of the sandbox emulators, the official `openai` SDK as
the client. The local model is made to answer badly with the sandbox's `answer` fault (filtered to its
upstream model), the frontier model to answer well; what the client and the ledger see is asserted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.config.loader import build_config
from gateway.config.schema import TeamConfig
from providers.types import ChatRequest
from sandbox.server import SandboxServer
from tests.conftest import SettingsFactory
from tests.harness import GatewayServer

LOCAL_UPSTREAM = "meta-llama/Llama-3.1-8B-Instruct"
ROUTING: dict[str, Any] = {
    "tiers": [{"name": "local", "models": ["llama"]}, {"name": "frontier", "models": ["gpt-4o-mini"]}],
    "thresholds": [0.95],  # everything these tests send is answered local first
    "routes": [],  # by score alone, so the thresholds above decide
}
MESSAGES: list[Any] = [{"role": "user", "content": "Which letter? A, B, C or D."}]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["A", "B", "C", "D"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
JSON_SCHEMA: Any = {
    "type": "json_schema",
    "json_schema": {"name": "choice", "schema": SCHEMA, "strict": True},
}
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def fault(server: SandboxServer, **rule: object) -> None:
    httpx.post(server.base_url + "/_sandbox/faults", json=[{"kind": "answer", **rule}]).raise_for_status()


def upstream_calls(server: SandboxServer) -> int:
    entries = httpx.get(server.base_url + "/_sandbox/requests").json()
    return sum(1 for e in entries if e["path"] == "/v1/chat/completions")


@pytest.fixture(scope="module")
def routed(sandbox_settings: SettingsFactory) -> Iterator[GatewayServer]:
    with GatewayServer(build_config(sandbox_settings(routing=ROUTING), source="test", environ={})) as server:
        yield server


@pytest.fixture
def sdk(routed: GatewayServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=routed.base_url + "/v1", api_key="tollgate-test", max_retries=0) as client:
        yield client


def test_an_invalid_local_answer_is_redone_on_the_frontier_and_billed_once_for_both(
    routed: GatewayServer, sdk: openai.OpenAI, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    fault(vllm_upstream, content="The answer is B.", model=LOCAL_UPSTREAM)
    fault(openai_upstream, content='{"answer": "B"}')
    raw = sdk.chat.completions.with_raw_response.create(
        model="auto", messages=MESSAGES, response_format=JSON_SCHEMA
    )
    completion = raw.parse()
    assert orjson.loads(completion.choices[0].message.content or "") == {"answer": "B"}
    assert raw.headers["x-tollgate-escalated"] == "json_schema"
    assert (raw.headers["x-tollgate-model"], raw.headers["x-tollgate-tier"]) == ("gpt-4o-mini", "frontier")
    assert raw.headers["x-tollgate-attempts"] == "2"
    assert (upstream_calls(vllm_upstream), upstream_calls(openai_upstream)) == (1, 1)
    row = routed.ledger_row(raw.headers["x-request-id"])  # exactly one row for the request
    assert (row["model"], row["tier"], row["status"]) == ("gpt-4o-mini", "frontier", 200)
    assert (row["escalated_from"], row["escalation_reason"]) == ("local/llama", "json_schema")
    # The local attempt ($0.06/Mtok) is in the total beside the frontier one ($3 / $15 per Mtok).
    assert row["escalation_cost_nano"] > 0
    assert row["cost_nano"] == row["input_cost_nano"] + row["output_cost_nano"] + row["escalation_cost_nano"]
    assert raw.headers["x-tollgate-cost-usd"] == f"{row['cost_nano'] / 1e9:.10f}".rstrip("0").rstrip(".")
    assert "escalation_failed:json_schema" not in (row["flags"] or "")


def test_a_valid_local_answer_stays_local(
    routed: GatewayServer, sdk: openai.OpenAI, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    fault(vllm_upstream, content='{"answer": "C"}', model=LOCAL_UPSTREAM)
    raw = sdk.chat.completions.with_raw_response.create(
        model="auto", messages=MESSAGES, response_format=JSON_SCHEMA
    )
    assert orjson.loads(raw.parse().choices[0].message.content or "") == {"answer": "C"}
    assert "x-tollgate-escalated" not in raw.headers and raw.headers["x-tollgate-tier"] == "local"
    assert upstream_calls(openai_upstream) == 0
    row = routed.ledger_row(raw.headers["x-request-id"])
    assert (row["escalated_from"], row["escalation_reason"], row["escalation_cost_nano"]) == (None, None, 0)


@pytest.mark.parametrize(
    ("rule", "body", "reason"),
    [
        ({"tool_arguments": "{bad", "tool_name": "weather"}, {"tools": TOOLS}, "tool_arguments"),
        ({"tool_arguments": '{"town": "Oslo"}', "tool_name": "weather"}, {"tools": TOOLS}, "tool_arguments"),
        ({"content": "", "finish_reason": "length"}, {}, "truncated"),
        ({"content": ""}, {}, "empty"),
        ({"content": "B"}, {"response_format": {"type": "json_object"}}, "json"),
    ],
)
def test_each_check_escalates_with_its_reason(
    routed: GatewayServer,
    sdk: openai.OpenAI,
    vllm_upstream: SandboxServer,
    rule: dict[str, Any],
    body: dict[str, Any],
    reason: str,
) -> None:
    fault(vllm_upstream, model=LOCAL_UPSTREAM, **rule)
    raw = sdk.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES, extra_body=body)
    assert raw.headers["x-tollgate-escalated"] == reason
    assert routed.ledger_row(raw.headers["x-request-id"])["escalation_reason"] == reason


def test_streamed_requests_are_never_escalated(
    sdk: openai.OpenAI, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    fault(vllm_upstream, content="not json", model=LOCAL_UPSTREAM)
    with sdk.chat.completions.with_streaming_response.create(
        model="auto", messages=MESSAGES, response_format=JSON_SCHEMA, stream=True
    ) as response:
        text = "".join(chunk.choices[0].delta.content or "" for chunk in response.parse() if chunk.choices)
        assert "x-tollgate-escalated" not in response.headers
    assert text == "not json"
    assert upstream_calls(openai_upstream) == 0


def test_a_forced_tier_is_never_escalated(
    sdk: openai.OpenAI, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    fault(vllm_upstream, content="not json", model=LOCAL_UPSTREAM)
    raw = sdk.chat.completions.with_raw_response.create(
        model="auto",
        messages=MESSAGES,
        response_format=JSON_SCHEMA,
        extra_headers={"x-tollgate-tier": "local"},
    )
    assert raw.parse().choices[0].message.content == "not json"
    assert "x-tollgate-escalated" not in raw.headers and upstream_calls(openai_upstream) == 0


def test_a_failed_retry_leaves_the_first_answer_and_says_so(
    routed: GatewayServer, sdk: openai.OpenAI, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    fault(vllm_upstream, content="not json", model=LOCAL_UPSTREAM)
    httpx.post(
        openai_upstream.base_url + "/_sandbox/faults", json=[{"kind": "status", "status": 400, "count": -1}]
    ).raise_for_status()
    raw = sdk.chat.completions.with_raw_response.create(
        model="auto", messages=MESSAGES, response_format=JSON_SCHEMA
    )
    assert raw.parse().choices[0].message.content == "not json"
    assert "x-tollgate-escalated" not in raw.headers and raw.headers["x-tollgate-model"] == "llama"
    row = routed.ledger_row(raw.headers["x-request-id"])
    assert (row["status"], row["model"], row["escalation_reason"]) == (200, "llama", None)
    assert "escalation_failed:json_schema" in row["flags"]


def test_escalation_can_be_turned_off(
    sandbox_settings: SettingsFactory, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    settings = sandbox_settings(routing={**ROUTING, "escalation": {"enabled": False}})
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        fault(vllm_upstream, content="not json", model=LOCAL_UPSTREAM)
        answer = httpx.post(
            server.base_url + "/v1/chat/completions",
            json={"model": "auto", "messages": MESSAGES, "response_format": JSON_SCHEMA},
        )
        assert answer.status_code == 200 and "x-tollgate-escalated" not in answer.headers
        assert upstream_calls(openai_upstream) == 0


def test_the_tier_above_honours_the_team(routed: GatewayServer) -> None:
    router = routed.runtime.router
    body = {"model": "auto", "messages": MESSAGES}
    chat = ChatRequest(body=body, raw=orjson.dumps(body), model="auto")
    above = router.tier_above("local", chat, None)
    assert above is not None and (above.name, above.tier) == ("gpt-4o-mini", "frontier")
    assert router.tier_above("frontier", chat, None) is None  # the top has nothing above
    assert router.tier_above("local", chat, TeamConfig(allowed_tiers=("local",))) is None
    assert router.tier_above("local", chat, TeamConfig(data_policy="local-only")) is None
    assert router.tier_above("local", chat, TeamConfig(allowed_models=("llama",))) is None


# --- the confidence floor: the vLLM emulator's logprobs, end to end ----------------------------


@pytest.fixture(scope="module")
def floored(sandbox_settings: SettingsFactory) -> Iterator[GatewayServer]:
    routing = {**ROUTING, "escalation": {"logprob_floor": -1.5}}
    with GatewayServer(build_config(sandbox_settings(routing=routing), source="test", environ={})) as server:
        yield server


def ask_plain(server: GatewayServer) -> Any:
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="tollgate-test", max_retries=0) as client:
        return client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)


def test_with_the_floor_an_unsure_local_answer_is_redone_on_the_frontier(
    floored: GatewayServer, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    fault(vllm_upstream, content="B, probably", mean_logprob=-3.5, model=LOCAL_UPSTREAM)
    fault(openai_upstream, content="B")
    raw = ask_plain(floored)
    assert raw.headers["x-tollgate-escalated"] == "low_confidence"
    assert (raw.headers["x-tollgate-tier"], raw.parse().choices[0].message.content) == ("frontier", "B")
    assert raw.parse().choices[0].logprobs is None  # the client did not ask for logprobs
    row = floored.ledger_row(raw.headers["x-request-id"])
    assert (row["escalated_from"], row["escalation_reason"]) == ("local/llama", "low_confidence")
    assert row["escalation_cost_nano"] > 0


def test_with_the_floor_a_confident_local_answer_stays_local(
    floored: GatewayServer, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    fault(vllm_upstream, content="B", mean_logprob=-0.2, model=LOCAL_UPSTREAM)
    raw = ask_plain(floored)
    assert "x-tollgate-escalated" not in raw.headers and raw.headers["x-tollgate-tier"] == "local"
    assert raw.parse().choices[0].logprobs is None
    assert upstream_calls(openai_upstream) == 0


def test_without_the_floor_an_unsure_answer_stands(
    routed: GatewayServer, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    fault(vllm_upstream, content="B, probably", mean_logprob=-3.5, model=LOCAL_UPSTREAM)
    raw = ask_plain(routed)
    assert "x-tollgate-escalated" not in raw.headers and raw.headers["x-tollgate-tier"] == "local"
    assert upstream_calls(openai_upstream) == 0


def test_a_route_that_turns_escalation_off_keeps_a_bad_answer(
    sandbox_settings: SettingsFactory, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    route = {"name": "quiz", "description": "multiple choice", "examples": ["Which letter?"], "tier": "local"}
    routing = {**ROUTING, "routes": [{**route, "escalate": False}]}
    with GatewayServer(build_config(sandbox_settings(routing=routing), source="test", environ={})) as server:
        fault(vllm_upstream, content="B", model=LOCAL_UPSTREAM)
        with openai.OpenAI(base_url=server.base_url + "/v1", api_key="t", max_retries=0) as client:
            raw = client.chat.completions.with_raw_response.create(
                model="auto", messages=MESSAGES, response_format={"type": "json_object"}
            )
    assert raw.headers["x-tollgate-route"] == "quiz"
    assert "x-tollgate-escalated" not in raw.headers and raw.headers["x-tollgate-tier"] == "local"
    assert upstream_calls(openai_upstream) == 0

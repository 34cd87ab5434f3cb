"""`/v1/responses` driven by the official openai SDK (`responses.create`, `responses.stream`,
`previous_response_id` chains, retrieve/delete/input_items), every answer checked against the
SDK's own types, every request against its ledger row; stored state scoped to the caller's team."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pydantic
import pytest
from openai.types.responses import Response, ResponseItemList, ResponseStreamEvent

from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer

ADMIN_KEY = "tollgate-admin-responses-7f3a"
EVENTS: pydantic.TypeAdapter[ResponseStreamEvent] = pydantic.TypeAdapter(ResponseStreamEvent)
WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": True,
}


@pytest.fixture(scope="module")
def gateway(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> Iterator[GatewayServer]:
    config = gateway_config(
        sqlite_url, openai_upstream.base_url, vllm_upstream.base_url, auth={"admin_key": ADMIN_KEY}
    )
    with GatewayServer(config) as server:
        yield server


def _team_key(gateway: GatewayServer, team: str) -> str:
    response = httpx.post(
        gateway.base_url + "/admin/keys",
        json={"team": team, "name": "responses-test"},
        headers={"authorization": f"Bearer {ADMIN_KEY}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


@pytest.fixture(scope="module")
def keys(gateway: GatewayServer) -> dict[str, str]:
    return {"red": _team_key(gateway, "red"), "blue": _team_key(gateway, "blue")}


@pytest.fixture
def client(gateway: GatewayServer, keys: dict[str, str]) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=keys["red"], max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def other_team(gateway: GatewayServer, keys: dict[str, str]) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=keys["blue"], max_retries=0) as sdk:
        yield sdk


def _exact_cost(prompt: int, completion: int) -> int:
    """$3 / $15 per million tokens (tests.conftest.PRICE), rounded once to whole nano-USD."""
    return (prompt * 3_000_000_000 + completion * 15_000_000_000 + 500_000) // 10**6


def test_create_answers_a_response_object_billed_like_chat(
    client: openai.OpenAI, gateway: GatewayServer
) -> None:
    raw = client.responses.with_raw_response.create(
        model="gpt-4o-mini", input="Name three prime numbers.", instructions="Be terse.", metadata={"k": "v"}
    )
    Response.model_validate_json(raw.http_response.content)
    response = raw.parse()
    assert response.id.startswith("resp_") and response.object == "response"
    assert response.status == "completed" and response.output_text
    assert response.instructions == "Be terse." and response.metadata == {"k": "v"}
    assert response.output[0].type == "message" and response.output[0].id.startswith("msg_")
    usage = response.usage
    assert usage is not None and usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    row = gateway.ledger_row(raw.headers["x-request-id"])
    assert (row["endpoint"], row["status"], row["model"]) == ("responses", 200, "gpt-4o-mini")
    assert (row["prompt_tokens"], row["completion_tokens"]) == (usage.input_tokens, usage.output_tokens)
    assert row["cost_nano"] == _exact_cost(usage.input_tokens, usage.output_tokens)


def test_stream_events_are_the_sdks_types_in_order(client: openai.OpenAI, gateway: GatewayServer) -> None:
    with client.responses.with_streaming_response.create(
        model="gpt-4o-mini", input="Say hello.", stream=True
    ) as raw:
        request_id = raw.headers["x-request-id"]
        frames = [line for line in raw.iter_lines() if line.startswith("data: ")]
    events = [EVENTS.validate_python(json.loads(line[6:])) for line in frames]
    kinds = [event.type for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1]
    assert final.type == "response.completed" and final.response.output_text == deltas and deltas
    assert final.response.usage is not None
    row = gateway.ledger_row(request_id)
    assert (row["endpoint"], row["stream"], row["usage_estimated"]) == ("responses", True, False)
    assert row["completion_tokens"] == final.response.usage.output_tokens
    assert row["cost_nano"] == _exact_cost(
        final.response.usage.input_tokens, final.response.usage.output_tokens
    )


def test_an_agent_loop_chained_by_previous_response_id(client: openai.OpenAI, gateway: GatewayServer) -> None:
    with client.responses.stream(
        model="gpt-4o-mini",
        input="What is the weather in Paris? Use get_weather.",
        tools=[WEATHER],
        tool_choice="required",
    ) as stream:
        first = stream.get_final_response()
    calls = [item for item in first.output if item.type == "function_call"]
    assert calls and calls[0].name == "get_weather" and isinstance(json.loads(calls[0].arguments), dict)
    with client.responses.stream(
        model="gpt-4o-mini",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"temp_c": 12}'}],
        tools=[WEATHER],
    ) as stream:
        text = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
        second = stream.get_final_response()
    assert text and second.output_text == text and second.previous_response_id == first.id
    kept = client.responses.retrieve(second.id)
    assert (kept.id, kept.output_text, kept.usage, kept.status) == (
        second.id,
        text,
        second.usage,
        "completed",
    )
    items = client.responses.input_items.list(second.id)
    ResponseItemList.model_validate(items.model_dump())
    assert [item.type for item in items.data] == ["function_call_output"]
    # The upstream saw the whole conversation: the question, the call and its output.
    sent = gateway.ledger_rows()
    assert [r["endpoint"] for r in sent[-2:]] == ["responses", "responses"]


def test_another_teams_response_is_not_found(client: openai.OpenAI, other_team: openai.OpenAI) -> None:
    mine = client.responses.create(model="gpt-4o-mini", input="Hi")
    with pytest.raises(openai.NotFoundError):
        other_team.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError) as caught:
        other_team.responses.create(model="gpt-4o-mini", input="Go on", previous_response_id=mine.id)
    assert caught.value.body["param"] == "previous_response_id"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        other_team.responses.delete(mine.id)
    client.responses.delete(mine.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(mine.id)


def test_store_false_keeps_nothing(client: openai.OpenAI) -> None:
    response = client.responses.create(model="gpt-4o-mini", input="Hi", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": [{"type": "mystery"}]}, "input[0].type"),
        ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, "input[0].type"),
        (
            {"input": [{"type": "function_call_output", "call_id": "call_none", "output": "x"}]},
            "input[0].call_id",
        ),
        ({"input": "hi", "max_output_tokens": 4}, "max_output_tokens"),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": "hi", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
        ({"input": 5}, "input"),
        ({}, "input"),
    ],
)
def test_bad_input_is_a_400_naming_the_parameter(
    gateway: GatewayServer, keys: dict[str, str], body: dict[str, Any], param: str
) -> None:
    response = httpx.post(
        gateway.base_url + "/v1/responses",
        json={"model": "gpt-4o-mini", **body},
        headers={"authorization": f"Bearer {keys['red']}"},
        timeout=10,
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["message"]
    row = gateway.ledger_row(response.headers["x-request-id"])
    assert (row["endpoint"], row["status"], row["cost_nano"]) == ("responses", 400, 0)


def test_an_upstream_that_breaks_mid_stream_ends_in_response_failed(
    client: openai.OpenAI, gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    httpx.post(
        openai_upstream.base_url + "/_sandbox/faults", json=[{"kind": "drop_after", "chunks": 2}]
    ).raise_for_status()
    with client.responses.with_streaming_response.create(
        model="gpt-4o-mini", input="Tell me a long story.", stream=True
    ) as raw:
        request_id = raw.headers["x-request-id"]
        frames = [line for line in raw.iter_lines() if line.startswith("data: ")]
    events = [EVENTS.validate_python(json.loads(line[6:])) for line in frames]
    assert [event.type for event in events[-2:]] == ["response.failed", "error"]
    failed = events[-2]
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error is not None and failed.response.error.code == "server_error"
    row = gateway.ledger_row(request_id)
    assert row["status"] == 502 and row["usage_estimated"] is True and row["cost_nano"] > 0
    with pytest.raises(openai.NotFoundError):  # a failed response is not kept to continue from
        client.responses.retrieve(failed.response.id)


@pytest.mark.parametrize("stream", [False, True])
def test_a_cache_hit_is_a_new_stored_response_at_no_cost(
    client: openai.OpenAI, gateway: GatewayServer, stream: bool
) -> None:
    ask: dict[str, Any] = {"model": "gpt-4o-mini", "input": f"Cache me ({stream}).", "temperature": 0}
    first = client.responses.create(**ask)
    if stream:
        with client.responses.with_streaming_response.create(**ask, stream=True) as raw:
            cache, request_id = raw.headers["x-tollgate-cache"], raw.headers["x-request-id"]
            lines = [line for line in raw.iter_lines() if line.startswith("data: ")]
        done = EVENTS.validate_python(json.loads(lines[-1][6:]))
        assert done.type == "response.completed"
        second = done.response
    else:
        raw_answer = client.responses.with_raw_response.create(**ask)
        cache, request_id = raw_answer.headers["x-tollgate-cache"], raw_answer.headers["x-request-id"]
        second = raw_answer.parse()
    assert cache == "hit" and second.id != first.id and second.output_text == first.output_text
    assert client.responses.retrieve(second.id).output_text == first.output_text
    row = gateway.ledger_row(request_id)
    assert (row["endpoint"], row["cache_status"], row["cost_nano"]) == ("responses", "hit", 0)


def test_an_idempotent_repeat_replays_the_same_response(
    client: openai.OpenAI, gateway: GatewayServer
) -> None:
    key = {"Idempotency-Key": "responses-once-1"}
    first = client.responses.with_raw_response.create(model="gpt-4o-mini", input="Once.", extra_headers=key)
    again = client.responses.with_raw_response.create(model="gpt-4o-mini", input="Once.", extra_headers=key)
    assert again.headers["x-tollgate-idempotent-replay"] == "true"
    assert again.parse().id == first.parse().id
    assert gateway.ledger_row(again.headers["x-request-id"])["cost_nano"] == 0

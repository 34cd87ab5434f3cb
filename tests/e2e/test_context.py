"""The context policy through the gateway: a cap refused before anything goes upstream (in both
dialects), a conversation trimmed middle-out and a repeated tool output deduped, each seen in the
bytes the sandbox received, the ledger row and the `x-tollgate-context` header."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from sandbox.server import SandboxServer
from tests.e2e.test_caching import caching_config
from tests.harness import GatewayServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TEAMS = {
    "capped": {"context": {"max_input_tokens": 200}},
    "trimmed": {"context": {"max_input_tokens": 400, "trim": "middle-out", "dedupe_tool_outputs": True}},
}


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
    spool = str(tmp_path_factory.mktemp("spool"))
    config = caching_config(
        sqlite_url, anthropic_upstream.base_url, openai_upstream.base_url, spool, teams=TEAMS
    )
    with GatewayServer(config) as server:
        yield server


def key(server: GatewayServer, team: str) -> str:
    plaintext, _ = server.call(server.runtime.keys.create(team, "context test"))
    return plaintext


def sent_to(upstream: SandboxServer, marker: str) -> list[dict[str, Any]]:
    return [
        orjson.loads(r["body"])
        for r in httpx.get(upstream.base_url + "/_sandbox/requests").json()
        if marker in r["body"]
    ]


def words(n: int, word: str = "toll") -> str:
    return " ".join([word] * n)


def test_over_the_cap_is_refused_before_any_upstream_call_in_both_dialects(
    gateway: GatewayServer, openai_upstream: SandboxServer, anthropic_upstream: SandboxServer
) -> None:
    marker = uuid.uuid4().hex
    headers = {"authorization": f"Bearer {key(gateway, 'capped')}"}
    long = f"{marker} " + words(400)
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": long}]}
    refused = httpx.post(gateway.base_url + "/v1/chat/completions", json=body, headers=headers)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["type"] == "invalid_request_error"
    assert "max_input_tokens of 200" in error["message"]
    assert sent_to(openai_upstream, marker) == [], "nothing went upstream"
    row = gateway.ledger_row(refused.headers["x-request-id"])
    assert row["status"] == 400 and "context_refused" in row["flags"] and row["cost_nano"] == 0
    messages = {"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": long}]}
    anthropic = httpx.post(gateway.base_url + "/v1/messages", json=messages, headers=headers)
    assert anthropic.status_code == 400
    assert anthropic.json()["type"] == "error"
    assert anthropic.json()["error"]["type"] == "invalid_request_error"
    assert "max_input_tokens of 200" in anthropic.json()["error"]["message"]
    assert sent_to(anthropic_upstream, marker) == []
    short = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"{marker} hi"}]}
    ok = httpx.post(gateway.base_url + "/v1/chat/completions", json=short, headers=headers)
    assert ok.status_code == 200 and "x-tollgate-context" not in ok.headers


def test_a_long_conversation_is_trimmed_middle_out_and_the_saving_recorded(
    gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    marker = uuid.uuid4().hex
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"{marker} answer briefly"},
        {"role": "user", "content": "first question " + words(20)},
    ]
    for turn in range(8):
        messages += [
            {"role": "assistant", "content": f"answer {turn} " + words(60, "road")},
            {"role": "user", "content": f"question {turn} " + words(60, "fee")},
        ]
    headers = {"authorization": f"Bearer {key(gateway, 'trimmed')}"}
    body = {"model": "gpt-4o-mini", "messages": messages, "max_tokens": 20}
    answer = httpx.post(gateway.base_url + "/v1/chat/completions", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    note = answer.headers["x-tollgate-context"]
    assert note.startswith("trimmed=") and "messages)" in note
    (upstream,) = sent_to(openai_upstream, marker)
    got = upstream["messages"]
    assert got[:2] == messages[:2], "the system prompt and the first user turn stay"
    assert got[-1] == messages[-1] and got[-2] == messages[-2], "the latest turns stay"
    assert messages[2] not in got, "the oldest middle turn went first"
    assert len(got) < len(messages)
    row = gateway.ledger_row(answer.headers["x-request-id"])
    trimmed = int(note.split("=")[1].split()[0])
    assert f"context_trimmed:{trimmed}" in row["flags"]
    assert row["context_tokens_removed"] == trimmed > 0
    # gpt-4o-mini is priced at $3 input per million tokens here: 3,000 nano-USD a thousand tokens.
    assert row["context_saving_nano"] == trimmed * 3000
    assert row["prompt_tokens"] <= 400, "the upstream billed what fits the cap"
    spend = httpx.get(
        gateway.base_url + "/v1/spend", params={"group_by": "team", "since": "1d"}, headers=headers
    ).json()
    team = next(d for d in spend["data"] if d["team"] == "trimmed")
    assert team["context_saving_nano"] >= row["context_saving_nano"] > 0
    assert team["context_tokens_removed"] >= trimmed


def test_a_repeated_tool_output_goes_upstream_once(
    gateway: GatewayServer, openai_upstream: SandboxServer
) -> None:
    marker = uuid.uuid4().hex
    output = f"{marker} " + words(80, "row")

    def call(call_id: str) -> dict[str, Any]:
        function = {"name": "lookup", "arguments": "{}"}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}],
        }

    messages = [
        {"role": "user", "content": "look it up twice"},
        call("call_1"),
        {"role": "tool", "tool_call_id": "call_1", "content": output},
        call("call_2"),
        {"role": "tool", "tool_call_id": "call_2", "content": output},
    ]
    headers = {"authorization": f"Bearer {key(gateway, 'trimmed')}"}
    body = {"model": "gpt-4o-mini", "messages": messages, "max_tokens": 20}
    answer = httpx.post(gateway.base_url + "/v1/chat/completions", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-tollgate-context"].startswith("deduped=1 (")
    (upstream,) = sent_to(openai_upstream, marker)
    contents = [m.get("content") for m in upstream["messages"]]
    assert contents.count(output) == 1
    assert "tool call call_1 above" in contents[-1]
    row = gateway.ledger_row(answer.headers["x-request-id"])
    assert "context_deduped:1" in row["flags"] and row["context_tokens_removed"] > 0

"""Prompts and answers are kept only for a team that opted in (`teams.<name>.store_bodies`): team
alpha did not, team beta did. Both send prompts no other test uses, on every endpoint and in every
shape (plain, streamed, failed), and the database is searched for them."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from gateway.accounting.schema import request_bodies
from sandbox.server import SandboxServer
from tests.harness import GatewayServer
from tests.security.conftest import bearer, create_key, every_value, fault, security_config


def marker(team: str) -> str:
    return f"prompt-of-{team}-{secrets.token_hex(6)}"


def drive(gateway: GatewayServer, upstreams: dict[str, SandboxServer], key: str, text: str) -> None:
    """The same traffic for either team: each request carries `text` in its prompt."""
    messages = [{"role": "user", "content": f"Please repeat: {text}"}]
    url = gateway.base_url
    with httpx.Client(base_url=url, headers=bearer(key), timeout=30) as http:
        for stream in (False, True):
            body = {"model": "gpt-4o-mini", "messages": messages, "max_tokens": 8, "stream": stream}
            assert http.post("/v1/chat/completions", json=body).status_code == 200
        anthropic = {"model": "claude", "max_tokens": 8, "messages": messages}
        assert http.post("/v1/messages", json=anthropic).status_code == 200
        assert (
            http.post("/v1/embeddings", json={"model": "text-embedding-3-small", "input": text}).status_code
            == 200
        )
        fault(upstreams["openai"], {"kind": "status", "status": 400, "message": "rejected"})
        body = {"model": "gpt-4o-mini", "messages": messages, "max_tokens": 8}
        assert http.post("/v1/chat/completions", json=body).status_code == 400
        assert http.post("/v1/chat/completions", json={**body, "model": "no-such-model"}).status_code == 404


@pytest.fixture(scope="module")
def stored(upstreams: dict[str, SandboxServer], fresh_sqlite_url: str) -> Iterator[dict[str, Any]]:
    config = security_config(upstreams, fresh_sqlite_url)
    assert config.ledger.store_bodies is False  # the gateway-wide switch stays at its default
    with GatewayServer(config) as gateway:
        texts = {team: marker(team) for team in ("alpha", "beta")}
        for team, text in texts.items():
            drive(gateway, upstreams, create_key(gateway.base_url, team)["key"], text)

        async def bodies() -> list[dict[str, Any]]:
            await gateway.runtime.ledger.flush()
            async with gateway.runtime.engine.connect() as conn:
                return [dict(r._mapping) for r in await conn.execute(select(request_bodies))]

        yield {
            "texts": texts,
            "bodies": gateway.call(bodies()),
            "rows": gateway.ledger_rows(),
            "everything": "\n".join(every_value(gateway)),
        }


def test_a_team_that_did_not_opt_in_leaves_no_prompt_anywhere(stored: dict[str, Any]) -> None:
    alpha_rows = [r for r in stored["rows"] if r["team"] == "alpha"]
    assert len(alpha_rows) == 6  # the traffic did reach the ledger
    assert not [b for b in stored["bodies"] if b["team"] == "alpha"]
    assert stored["texts"]["alpha"] not in stored["everything"]  # no table, no column


def test_a_team_that_opted_in_keeps_its_prompts_and_answers(stored: dict[str, Any]) -> None:
    text = stored["texts"]["beta"]
    beta = [b for b in stored["bodies"] if b["team"] == "beta"]
    # The chat, the stream and /v1/messages that succeeded; embeddings and failures keep no body.
    assert len(beta) == 3
    assert all(text in b["request_body"] and b["response_body"] for b in beta)
    beta_ids = {r["id"] for r in stored["rows"] if r["team"] == "beta"}
    assert {b["id"] for b in beta} <= beta_ids
    # Even for beta, the prompt lives in request_bodies only, never in the ledger's own columns.
    ledger_text = "\n".join(str(v) for r in stored["rows"] for v in r.values())
    assert text not in ledger_text

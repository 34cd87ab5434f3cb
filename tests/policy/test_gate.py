"""Teams, keys, budgets and rate limits, enforced exactly across replicas (real Redis, real ledger)."""

from __future__ import annotations

import asyncio
import time
import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest

from gateway.cli.sandbox_launcher import free_port
from gateway.config.loader import build_config
from gateway.config.schema import Config
from gateway.models import ModelRegistry
from gateway.policy.gate import Admitted, PolicyGate
from providers.types import ChatRequest
from sandbox.server import SandboxServer
from tests.conftest import PRICE, SettingsFactory, gateway_config
from tests.harness import GatewayServer
from tests.services import require_redis

ADMIN = "admin-secret-for-tests"
SHORT = [{"role": "user", "content": "hello"}]


def policy_config(
    sqlite_url: str, openai: SandboxServer, vllm: SandboxServer, teams: dict[str, Any], *, redis: bool = False
) -> Config:
    extra: dict[str, Any] = {"auth": {"admin_key": ADMIN}, "teams": teams}
    if redis:
        extra["state"] = {
            "backend": "redis",
            "redis_url": require_redis(),
            "prefix": f"tollgate-test:{uuid.uuid4().hex}:",
        }
    return gateway_config(sqlite_url, openai.base_url, vllm.base_url, **extra)


def new_key(server: GatewayServer, team: str, **limits: Any) -> str:
    plaintext, _ = server.call(server.runtime.keys.create(team, "test key", **limits))
    return plaintext


def chat(base_url: str, key: str | None, model: str = "gpt-4o-mini", **extra: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    body = {"model": model, "messages": SHORT, "max_tokens": 60, **extra}
    return httpx.post(base_url + "/v1/chat/completions", json=body, headers=headers, timeout=30)


async def burst(targets: list[tuple[str, str]], count: int) -> list[httpx.Response]:
    """`count` concurrent requests spread over the gateways, each with its key."""
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        body = {"model": "gpt-4o-mini", "messages": SHORT, "max_tokens": 60}

        async def one(i: int) -> httpx.Response:
            base, key = targets[i % len(targets)]
            return await http.post(
                base + "/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"}
            )

        return list(await asyncio.gather(*(one(i) for i in range(count))))


@pytest.fixture
def team_name() -> str:
    return f"team-{uuid.uuid4().hex[:8]}"


def test_keys_are_required_once_the_gateway_has_policy(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer, team_name: str
) -> None:
    config = policy_config(sqlite_url, openai_upstream, vllm_upstream, {team_name: {}})
    with GatewayServer(config) as server:
        missing = chat(server.base_url, None)
        assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"
        assert chat(server.base_url, "tg-bogus_key").status_code == 401
        key = new_key(server, team_name)
        ok = chat(server.base_url, key)
        assert ok.status_code == 200
        row = server.ledger_row(ok.headers["x-request-id"])
        assert row["team"] == team_name and row["key_id"].startswith("key_")
        denied = server.ledger_row(missing.headers["x-request-id"])
        assert denied["status"] == 401 and denied["cost_nano"] == 0


def test_models_tiers_and_data_policy(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    teams = {
        "narrow": {"allowed_models": ["gpt-4o-mini"]},
        "private": {"data_policy": "local-only"},
        "careful": {"max_temperature_structured": 0.2},
    }
    config = policy_config(sqlite_url, openai_upstream, vllm_upstream, teams)
    with GatewayServer(config) as server:
        narrow = new_key(server, "narrow")
        assert chat(server.base_url, narrow).status_code == 200
        refused = chat(server.base_url, narrow, model="llama")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "model_not_allowed"
        limited_key = new_key(server, "narrow", allowed_models=["llama"])
        assert chat(server.base_url, limited_key).status_code == 403  # the key narrows the team further
        private = new_key(server, "private")
        assert chat(server.base_url, private, model="llama").status_code == 200
        off_fleet = chat(server.base_url, private, model="gpt-4o-mini")
        assert off_fleet.status_code == 403 and off_fleet.json()["error"]["code"] == "data_policy"
        careful = new_key(server, "careful")
        tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        capped = chat(server.base_url, careful, tools=[tool], temperature=1.5)
        assert capped.status_code == 200
        seen = httpx.get(openai_upstream.base_url + "/_sandbox/requests").json()
        assert '"temperature":0.2' in seen[-1]["body"].replace(" ", "")
        assert server.ledger_row(capped.headers["x-request-id"])["flags"] == "temperature_capped:0.2"


def test_local_only_never_reaches_a_managed_deployment_of_a_local_model(
    openai_upstream: SandboxServer, vllm_upstream: SandboxServer, sandbox_settings: SettingsFactory
) -> None:
    """A `local`-tier model may also have a managed-cloud copy (tollgate.example.yaml's Llama on
    Together). Its self-hosted replica down, a local-only team gets an error; any other team gets
    the managed copy. What the managed upstream saw is the proof."""
    settings = sandbox_settings(
        auth={"admin_key": ADMIN},
        teams={"private": {"data_policy": "local-only"}, "open": {}},
    )
    settings["providers"]["down-vllm"] = {"type": "vllm", "base_url": f"http://127.0.0.1:{free_port()}/v1"}
    settings["providers"]["on-prem"] = {
        "type": "openai_compatible",
        "base_url": vllm_upstream.base_url + "/v1",
        "self_hosted": True,
    }
    settings["models"]["mixed"] = {
        "tier": "local",
        "price": PRICE,
        "deployments": [
            {"provider": "down-vllm", "model": "llama"},
            {"provider": "openai", "model": "gpt-4o-mini"},
        ],
    }
    settings["models"]["on-prem-llama"] = {"provider": "on-prem", "upstream_model": "llama", "price": PRICE}
    config = build_config(settings, source="test", environ={})
    with GatewayServer(config) as server:
        private, open_ = new_key(server, "private"), new_key(server, "open")
        secret = f"private-{uuid.uuid4().hex}"
        kept = httpx.post(
            server.base_url + "/v1/chat/completions",
            json={"model": "mixed", "messages": [{"role": "user", "content": secret}]},
            headers={"authorization": f"Bearer {private}"},
            timeout=30,
        )
        assert kept.status_code in (502, 503), kept.text
        assert set(kept.json()["error"]) >= {"message", "type", "code"}
        seen = httpx.get(openai_upstream.base_url + "/_sandbox/requests").json()
        assert not any(secret in call["body"] for call in seen)
        row = server.ledger_row(kept.headers["x-request-id"])
        assert row["status"] == kept.status_code and row["provider"] != "openai"

        served = chat(server.base_url, open_, model="mixed")
        assert served.status_code == 200
        assert server.ledger_row(served.headers["x-request-id"])["provider"] == "openai"
        # A provider marked self_hosted (an on-premises OpenAI-compatible server) is allowed.
        assert chat(server.base_url, private, model="on-prem-llama").status_code == 200


def test_the_semantic_cache_never_embeds_a_local_only_question_off_the_fleet(
    openai_upstream: SandboxServer, sandbox_settings: SettingsFactory
) -> None:
    """The semantic cache sends the question to its embedding model: for a local-only team that
    call must stay on the fleet too (here the embedding model is managed, so it is skipped)."""
    settings = sandbox_settings(
        auth={"admin_key": ADMIN},
        teams={"private": {"data_policy": "local-only"}, "open": {}},
        cache={"semantic": {"enabled": True, "embedding_model": "emb"}},
    )
    settings["models"]["emb"] = {
        "provider": "openai",
        "upstream_model": "text-embedding-3-small",
        "price": {"input_per_mtok": "0.02", "output_per_mtok": "0"},
    }
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        for team in ("private", "open"):
            secret = f"{team}-{uuid.uuid4().hex}"
            answer = httpx.post(
                server.base_url + "/v1/chat/completions",
                json={"model": "llama", "temperature": 0, "messages": [{"role": "user", "content": secret}]},
                headers={"authorization": f"Bearer {new_key(server, team)}"},
                timeout=20,
            )
            assert answer.status_code == 200
            seen = httpx.get(openai_upstream.base_url + "/_sandbox/requests").json()
            embedded = any(secret in call["body"] and call["path"] == "/v1/embeddings" for call in seen)
            assert embedded == (team == "open"), team  # the open team's question is embedded as usual


@pytest.mark.parametrize("replicas", [1, pytest.param(2, marks=pytest.mark.redis)])
def test_budget_holds_under_200_concurrent_requests(
    sqlite_url: str,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
    team_name: str,
    replicas: int,
) -> None:
    budget = Decimal("0.02")
    config = policy_config(
        sqlite_url,
        openai_upstream,
        vllm_upstream,
        {team_name: {"budget_daily_usd": str(budget)}},
        redis=replicas == 2,
    )
    with GatewayServer(config) as a, GatewayServer(config) as b:
        servers = [a, b][:replicas]
        key = new_key(a, team_name)
        responses = asyncio.run(burst([(s.base_url, key) for s in servers], 200))
        for server in servers:
            server.ledger_rows()  # every replica's writer flushed: they share one ledger
        rows = [r for r in a.ledger_rows() if r["team"] == team_name]
    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(ok) + len(refused) == 200 and ok and refused
    assert refused[0].json()["error"]["code"] == "budget_exceeded"
    assert refused[0].headers["x-should-retry"] == "false"
    billed = sum(r["cost_nano"] for r in rows)
    largest = max(r["cost_nano"] for r in rows)
    assert billed <= budget * 10**9 + largest, (billed, largest)
    # Each request reserves its worst case (~$0.001 here: max_tokens 60 at $15/MTok) and settles
    # for less, so at least budget / worst case (about 20) requests must get through.
    assert len(ok) >= 15, "the budget must stay usable, not be starved by reservations"
    assert len(rows) == 200 and sum(r["status"] == 200 for r in rows) == len(ok)


@pytest.mark.parametrize("replicas", [1, pytest.param(2, marks=pytest.mark.redis)])
def test_rate_limit_holds_across_replicas_with_openai_headers(
    sqlite_url: str,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
    team_name: str,
    replicas: int,
) -> None:
    config = policy_config(
        sqlite_url, openai_upstream, vllm_upstream, {team_name: {"rpm": 60}}, redis=replicas == 2
    )
    with GatewayServer(config) as a, GatewayServer(config) as b:
        servers = [a, b][:replicas]
        key = new_key(a, team_name)
        responses = asyncio.run(burst([(s.base_url, key) for s in servers], 100))
    ok = [r for r in responses if r.status_code == 200]
    limited = [r for r in responses if r.status_code == 429]
    # A full bucket of 60, plus what refills (1/s) while the burst runs.
    assert 60 <= len(ok) <= 64, len(ok)
    error = limited[0].json()["error"]
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "rate_limit_error"
    assert int(limited[0].headers["retry-after"]) >= 1
    assert limited[0].headers["x-ratelimit-limit-requests"] == "60"
    assert limited[0].headers["x-ratelimit-remaining-requests"] == "0"
    assert limited[0].headers["x-ratelimit-reset-requests"].endswith(("s", "ms"))
    assert ok[0].headers["x-ratelimit-limit-requests"] == "60"


@pytest.mark.redis
def test_revoked_key_is_refused_within_a_second_on_every_replica(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer, team_name: str
) -> None:
    config = policy_config(sqlite_url, openai_upstream, vllm_upstream, {team_name: {}}, redis=True)
    with GatewayServer(config) as a, GatewayServer(config) as b:
        plaintext, record = a.call(a.runtime.keys.create(team_name, "soon revoked"))
        assert chat(a.base_url, plaintext).status_code == 200
        assert chat(b.base_url, plaintext).status_code == 200
        assert a.call(a.runtime.keys.revoke(record.id))
        time.sleep(1.1)
        assert chat(a.base_url, plaintext).status_code == 401
        assert chat(b.base_url, plaintext).status_code == 401


def test_team_key_sees_only_its_own_spend(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer
) -> None:
    config = policy_config(sqlite_url, openai_upstream, vllm_upstream, {"red": {}, "blue": {}})
    with GatewayServer(config) as server:
        red, blue = new_key(server, "red"), new_key(server, "blue")
        assert chat(server.base_url, red).status_code == 200
        assert chat(server.base_url, blue).status_code == 200
        server.ledger_rows()
        auth = {"authorization": f"Bearer {red}"}
        own = httpx.get(server.base_url + "/v1/spend", params={"group_by": "team"}, headers=auth).json()
        assert {d["team"] for d in own["data"]} == {"red"}
        other = httpx.get(server.base_url + "/v1/spend", params={"team": "blue"}, headers=auth)
        assert other.status_code == 403
        admin = httpx.get(
            server.base_url + "/v1/spend",
            params={"group_by": "team"},
            headers={"authorization": f"Bearer {ADMIN}"},
        ).json()
        assert {"red", "blue"} <= {d["team"] for d in admin["data"]}
        assert httpx.get(server.base_url + "/v1/spend").status_code == 401


def test_admin_api_issues_and_revokes_keys_on_the_real_gateway(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer, team_name: str
) -> None:
    config = policy_config(sqlite_url, openai_upstream, vllm_upstream, {team_name: {}})
    admin = {"authorization": f"Bearer {ADMIN}"}
    with GatewayServer(config) as server:
        created = httpx.post(
            server.base_url + "/admin/keys", json={"team": team_name, "name": "ci", "rpm": 100}, headers=admin
        )
        assert created.status_code == 201
        key, key_id = created.json()["key"], created.json()["id"]
        listed = httpx.get(server.base_url + "/admin/keys", params={"team": team_name}, headers=admin).json()
        assert [k["id"] for k in listed["data"]] == [key_id] and key not in str(listed)
        assert chat(server.base_url, key).status_code == 200
        as_team = {"authorization": f"Bearer {key}"}
        assert httpx.get(server.base_url + "/admin/keys", headers=as_team).status_code == 403
        assert httpx.delete(server.base_url + f"/admin/keys/{key_id}", headers=admin).status_code == 200
        time.sleep(1.1)
        revoked = chat(server.base_url, key)
        assert revoked.status_code == 401 and "revoked" in revoked.json()["error"]["message"]


def test_soft_budget_allows_and_flags_and_key_budget_refuses(
    sqlite_url: str, openai_upstream: SandboxServer, vllm_upstream: SandboxServer, team_name: str
) -> None:
    teams = {team_name: {"budget_daily_usd": "0.001", "budget_mode": "soft"}}
    config = policy_config(sqlite_url, openai_upstream, vllm_upstream, teams)
    with GatewayServer(config) as server:
        key = new_key(server, team_name)
        answers = [chat(server.base_url, key) for _ in range(4)]
        assert all(a.status_code == 200 for a in answers), "a soft budget never refuses"
        flags = [server.ledger_row(a.headers["x-request-id"])["flags"] for a in answers]
        assert flags[0] is None and flags[-1] == f"budget_exceeded:team:{team_name}:day"
        tight = new_key(server, team_name, budget_daily_nano=1_000_000)  # $0.001 for this key alone
        results = [chat(server.base_url, tight).status_code for _ in range(4)]
        assert results[0] == 200 and 429 in results


def test_a_local_only_budget_reserves_what_its_deployments_can_cost(
    sandbox_settings: SettingsFactory,
) -> None:
    """A budget reserves the worst case a request could cost; for a local-only team that is the
    self-hosted price, never the managed copy's it cannot reach."""
    settings = sandbox_settings()
    settings["models"]["mixed"] = {
        "deployments": [
            {
                "provider": "local",
                "model": "llama",
                "price": {"input_per_mtok": "0.06", "output_per_mtok": "0.06"},
            },
            {"provider": "openai", "model": "gpt-4o-mini", "price": PRICE},
        ]
    }
    config = build_config(settings, source="test", environ={})
    registry = ModelRegistry(config)
    gate = PolicyGate(config, registry, budgets=None, limits=None)  # type: ignore[arg-type]
    body = {"model": "mixed", "messages": SHORT, "max_tokens": 1000}
    chat_request = ChatRequest(body=body, raw=b"", model="mixed")
    model = registry.resolve("mixed")
    assert model is not None
    private = Admitted(team="private", key_id=None, tags=(), local_only=True)
    anyone = gate.worst_case_cost(chat_request.facts, model, 1000)
    local = gate.worst_case_cost(chat_request.facts, model, 1000, allow=private.allows)
    assert anyone == 3_000_000 + 15_000_000  # 1,000 tokens each way at $3 and $15 per million, in nano-USD
    assert local == 60_000 + 60_000

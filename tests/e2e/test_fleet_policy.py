"""Spillover meets the data policy: when every replica's queue is deep, ordinary work overflows to
the managed fallback, but a `local-only` team's request waits its turn on the fleet, and so does a
request for a fleet model that has nowhere else to go."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from gateway.cli.sandbox_launcher import free_port
from gateway.config.loader import build_config
from gateway.config.schema import Config
from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer
from tests.conftest import PRICE, SettingsFactory
from tests.e2e.test_fleet import body, calls, queued
from tests.harness import GatewayServer

REPLICAS = ("gpu0", "gpu1")
# Spill as soon as anything waits: the sandbox finishes some of the busy requests early.
FLEET = {"scrape_interval_seconds": 0.05, "max_num_seqs": 2, "spillover": {"max_queue": 0}}


@pytest.fixture(scope="module")
def replicas() -> Iterator[dict[str, SandboxServer]]:
    with ExitStack() as stack:
        yield {
            name: stack.enter_context(
                SandboxServer(SandboxConfig(dialect="vllm", profile="local", max_num_seqs=2, seed=i))
            )
            for i, name in enumerate(REPLICAS)
        }


def test_a_full_fleet_spills_ordinary_work_but_not_local_only_work(
    replicas: dict[str, SandboxServer], openai_upstream: SandboxServer, sandbox_settings: SettingsFactory
) -> None:
    settings = sandbox_settings(
        auth={"admin_key": "adm"},
        teams={"private": {"data_policy": "local-only"}, "open": {}},
    )
    settings["providers"].update(
        {name: {"type": "vllm", "base_url": server.base_url + "/v1"} for name, server in replicas.items()}
    )
    deployments = [{"provider": name, "model": "llama"} for name in REPLICAS]
    local_price = {"input_per_mtok": "0.06", "output_per_mtok": "0.06"}
    settings["models"]["llama-fleet"] = {
        "tier": "local",
        "deployments": deployments,
        "price": local_price,
        "fallbacks": ["gpt-4o-mini"],
        "fleet": FLEET,
    }
    settings["models"]["solo-fleet"] = {
        "tier": "local",
        "deployments": deployments,
        "price": local_price,
        "fleet": FLEET,
    }
    settings["models"]["gpt-4o-mini"]["price"] = PRICE
    slow = {"model": "llama", "max_tokens": 300, "messages": [{"role": "user", "content": "a long story"}]}

    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        private, _ = server.call(server.runtime.keys.create("private", "p"))
        open_, _ = server.call(server.runtime.keys.create("open", "o"))

        async def scenario() -> dict[str, httpx.Response]:
            async with httpx.AsyncClient(timeout=60) as direct:
                busy = [
                    asyncio.create_task(direct.post(s.base_url + "/v1/chat/completions", json=slow))
                    for s in replicas.values()
                    for _ in range(6)
                ]
                await queued(direct, list(replicas.values()), 4)
                async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as gw:

                    def ask(key: str, payload: dict[str, object]) -> asyncio.Task[httpx.Response]:
                        headers = {"authorization": f"Bearer {key}"}
                        return asyncio.create_task(
                            gw.post("/v1/chat/completions", json=payload, headers=headers)
                        )

                    answers = {
                        "open": ask(open_, body("open team", "hi")),
                        "private": ask(private, body("private team secret-7f3a", "hi")),
                        "solo": ask(open_, {**body("solo", "hi"), "model": "solo-fleet"}),
                    }
                    done = {name: await task for name, task in answers.items()}
                await asyncio.gather(*busy)
                return done

        answers = asyncio.run(scenario())
        assert answers["open"].status_code == 200
        assert answers["open"].headers["x-tollgate-model"] == "gpt-4o-mini", "ordinary work spills"
        private_answer, solo = answers["private"], answers["solo"]
        assert private_answer.status_code == 200, private_answer.text
        assert private_answer.headers["x-tollgate-model"] == "llama-fleet", (
            "local-only work waits on the fleet"
        )
        assert server.ledger_row(private_answer.headers["x-request-id"])["provider"] in REPLICAS
        assert not any("secret-7f3a" in c["body"] for c in calls(openai_upstream))
        assert solo.status_code == 200, solo.text
        assert solo.headers["x-tollgate-model"] == "solo-fleet", "no fallback: it queues instead of failing"


def test_a_fleet_with_no_healthy_replica_and_nowhere_to_go_answers_503(
    sandbox_settings: SettingsFactory,
) -> None:
    settings = sandbox_settings(
        auth={"admin_key": "adm"},
        teams={"t": {}},
    )
    settings["providers"]["gone"] = {"type": "vllm", "base_url": f"http://127.0.0.1:{free_port()}/v1"}
    settings["models"]["lonely-fleet"] = {
        "tier": "local",
        "deployments": [{"provider": "gone", "model": "llama"}],
        "price": {"input_per_mtok": "0.06", "output_per_mtok": "0.06"},
        "fleet": FLEET,
    }
    with GatewayServer(build_config(settings, source="test", environ={})) as server:
        key, _ = server.call(server.runtime.keys.create("t", "t"))
        answer = httpx.post(
            server.base_url + "/v1/chat/completions",
            json={"model": "lonely-fleet", "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": f"Bearer {key}"},
            timeout=20,
        )
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "no_deployment"
        assert server.ledger_row(answer.headers["x-request-id"])["status"] == 503


def test_a_reload_that_changes_a_fleets_replicas_asks_for_a_restart(
    vllm_upstream: SandboxServer, sandbox_settings: SettingsFactory
) -> None:
    """The fleets (their scrape loops, load and affinity state) are built once; a reload that adds,
    moves or un-self-hosts a replica says a restart is needed instead of half-applying it."""

    def settings(
        *, replicas: int = 1, self_hosted: bool = True, teams: dict[str, Any] | None = None
    ) -> Config:
        raw = sandbox_settings(teams=teams or {})
        raw["providers"]["gpu0"] = {
            "type": "vllm",
            "base_url": vllm_upstream.base_url + "/v1",
            "self_hosted": self_hosted,
        }
        raw["providers"]["gpu1"] = {"type": "vllm", "base_url": vllm_upstream.base_url + "/v1"}
        raw["models"]["llama-fleet"] = {
            "tier": "local",
            "deployments": [{"provider": f"gpu{i}", "model": "llama"} for i in range(replicas)],
            "fleet": FLEET,
        }
        return build_config(raw, source="test", environ={})

    with GatewayServer(settings()) as server:
        runtime = server.runtime
        assert "models.*.fleet" not in runtime.apply(settings(teams={"new": {}}))
        assert "models.*.fleet" in runtime.apply(settings(replicas=2))
        assert "models.*.fleet" in runtime.apply(settings(replicas=2, self_hosted=False))

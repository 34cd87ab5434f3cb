"""A self-hosted model on three vLLM replicas behind the gateway: new work goes to the least loaded,
prompts that share a prefix stay on one replica (so vLLM's prefix cache hits), and when every
queue is deep the work spills to the managed fallback until the queues drain. A stream counts
against its replica until it ends and feeds the TTFT and decode speed; a non-streamed answer feeds
neither (its latency is its whole decode)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from gateway.config.schema import Config
from local_backend.fleet import Fleet
from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer
from tests.conftest import PRICE, gateway_config
from tests.harness import GatewayServer

REPLICAS = ("gpu0", "gpu1", "gpu2")


@pytest.fixture(scope="module")
def replicas() -> Iterator[dict[str, SandboxServer]]:
    with ExitStack() as stack:
        servers = {
            name: stack.enter_context(
                SandboxServer(SandboxConfig(dialect="vllm", profile="local", max_num_seqs=2, seed=i))
            )
            for i, name in enumerate(REPLICAS)
        }
        yield servers


def fleet_config(
    replicas: dict[str, SandboxServer],
    sqlite_url: str,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
    spillover: dict[str, Any],
) -> Config:
    providers = {
        name: {"type": "vllm", "base_url": server.base_url + "/v1"} for name, server in replicas.items()
    }
    config = gateway_config(sqlite_url, openai_upstream.base_url, vllm_upstream.base_url)
    raw = config.model_dump(mode="json")
    raw["providers"].update(providers)
    raw["models"]["llama-fleet"] = {
        "tier": "local",
        "deployments": [{"provider": name, "model": "llama"} for name in REPLICAS],
        "price": {"input_per_mtok": "0.06", "output_per_mtok": "0.06"},
        "fallbacks": ["gpt-4o-mini"],
        "fleet": {"scrape_interval_seconds": 0.05, "max_num_seqs": 2, "spillover": spillover},
    }
    raw["models"]["gpt-4o-mini"]["price"] = PRICE
    return Config.model_validate(raw)


@pytest.fixture(scope="module")
def fleet_gateway(
    replicas: dict[str, SandboxServer],
    sqlite_url: str,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
) -> Iterator[GatewayServer]:
    config = fleet_config(replicas, sqlite_url, openai_upstream, vllm_upstream, {"max_queue": 2})
    with GatewayServer(config) as server:
        yield server


@pytest.fixture
def fresh_gateway(
    replicas: dict[str, SandboxServer],
    sqlite_url: str,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
) -> Iterator[GatewayServer]:
    """A gateway whose fleet has observed nothing yet, with the auditor's TTFT target (150 ms)."""
    reset(replicas)
    spillover = {"max_queue": 2, "ttft_target_ms": 150}
    with GatewayServer(
        fleet_config(replicas, sqlite_url, openai_upstream, vllm_upstream, spillover)
    ) as server:
        yield server


def calls(server: SandboxServer) -> list[dict[str, Any]]:
    return [
        r
        for r in httpx.get(server.base_url + "/_sandbox/requests").json()
        if r["path"] == "/v1/chat/completions"
    ]


def reset(replicas: dict[str, SandboxServer]) -> None:
    for server in replicas.values():
        httpx.post(server.base_url + "/_sandbox/reset")


async def queued(direct: httpx.AsyncClient, servers: list[SandboxServer], waiting: int) -> None:
    """Until each replica's own `/metrics` shows `waiting` queued requests, then long enough for
    the gateway to have scraped that (its interval is 0.05 s)."""
    for _ in range(100):
        pages = [(await direct.get(server.base_url + "/metrics")).text for server in servers]
        if all(_gauge(page, "vllm:num_requests_waiting") >= waiting for page in pages):
            await asyncio.sleep(0.2)
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the replicas never queued {waiting} requests each")


def _gauge(page: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in page.splitlines() if line.startswith(name + "{"))


def body(system: str, question: str, max_tokens: int = 8) -> dict[str, Any]:
    return {
        "model": "llama-fleet",
        "max_tokens": max_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
    }


def test_prompts_sharing_a_prefix_stay_on_one_replica(
    fleet_gateway: GatewayServer, replicas: dict[str, SandboxServer]
) -> None:
    reset(replicas)
    tenants = [
        f"Tenant {t} handbook. " + f"Rule {t}: answer in the house style of tenant {t}. " * 40
        for t in range(6)
    ]
    for round_ in range(3):
        for system in tenants:
            answer = httpx.post(
                fleet_gateway.base_url + "/v1/chat/completions", json=body(system, f"q{round_}"), timeout=20
            )
            assert answer.status_code == 200
    homes = {}
    for t in range(len(tenants)):
        marker = f"Tenant {t} handbook."
        homes[t] = {
            name for name, server in replicas.items() if any(marker in c["body"] for c in calls(server))
        }
    assert all(len(where) == 1 for where in homes.values()), homes
    assert len({next(iter(w)) for w in homes.values()}) >= 2, "tenants spread over the fleet"


def test_new_work_avoids_the_busy_replica_and_spills_when_all_are_busy(
    fleet_gateway: GatewayServer, replicas: dict[str, SandboxServer]
) -> None:
    reset(replicas)
    slow = {"model": "llama", "max_tokens": 400, "messages": [{"role": "user", "content": "a long story"}]}

    async def scenario() -> tuple[list[str], str, str]:
        async with httpx.AsyncClient(timeout=30) as direct:
            return await with_direct(direct)

    async def with_direct(direct: httpx.AsyncClient) -> tuple[list[str], str, str]:
        def occupy(names: list[str], per_replica: int) -> list[asyncio.Task[httpx.Response]]:
            url = "/v1/chat/completions"
            return [
                asyncio.create_task(direct.post(replicas[n].base_url + url, json=slow))
                for n in names
                for _ in range(per_replica)
            ]

        busy = occupy(["gpu0"], 6)  # 2 running, 4 waiting on gpu0 only
        await queued(direct, [replicas["gpu0"]], 4)
        async with httpx.AsyncClient(base_url=fleet_gateway.base_url, timeout=30) as gw:
            chosen = []
            for i in range(4):
                answer = await gw.post("/v1/chat/completions", json=body(f"short {i}", "hi"))
                chosen.append(answer.headers["x-tollgate-model"])
            seen = {name: len(calls(server)) for name, server in replicas.items()}
            everyone = occupy(list(REPLICAS), 6)
            await queued(direct, list(replicas.values()), 4)
            spilled = (await gw.post("/v1/chat/completions", json=body("another", "hi"))).headers[
                "x-tollgate-model"
            ]
            await asyncio.gather(*busy, *everyone)
            # Drained: within a few scrapes the fleet answers again (polled, not slept, so a busy
            # machine's slow scrape does not fail the test; the bound is what is asserted).
            back = ""
            for _ in range(40):
                await asyncio.sleep(0.1)
                answer = await gw.post("/v1/chat/completions", json=body("again", "hi"))
                back = answer.headers["x-tollgate-model"]
                if back == "llama-fleet":
                    break
        assert seen["gpu0"] == 6, f"nothing new went to the busy replica: {seen}"
        return chosen, spilled, back

    chosen, spilled, back = asyncio.run(scenario())
    assert chosen == ["llama-fleet"] * 4
    assert spilled == "gpt-4o-mini", "every queue deep: the managed fallback answers"
    assert back == "llama-fleet", "queues drained: the fleet answers again"


def fleet_of(server: GatewayServer) -> Fleet:
    fleet = server.runtime.fleets.fleet("llama-fleet")
    assert fleet is not None
    return fleet


def in_flight(fleet: Fleet) -> int:
    return sum(r.in_flight for r in fleet.replicas)


def released(fleet: Fleet, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while in_flight(fleet) and time.monotonic() < deadline:
        time.sleep(0.01)
    return in_flight(fleet) == 0


def streamed(system: str, max_tokens: int) -> dict[str, Any]:
    """A streamed request that decodes exactly `max_tokens` tokens (vLLM's ignore_eos)."""
    return {**body(system, "hi", max_tokens), "stream": True, "ignore_eos": True}


def test_only_streamed_requests_feed_the_ttft_ewmas(fresh_gateway: GatewayServer) -> None:
    fleet = fleet_of(fresh_gateway)
    with httpx.Client(base_url=fresh_gateway.base_url, timeout=20) as gw:
        for i in range(3):
            answer = gw.post("/v1/chat/completions", json=body(f"plain {i}", "hi", max_tokens=20))
            assert answer.headers["x-tollgate-model"] == "llama-fleet"
        # A non-streamed answer's latency is its whole decode: no TTFT, and no decode speed either.
        assert [(r.ttft_ms, r.ttft_per_slot_ms, r.tokens_per_s) for r in fleet.replicas] == [
            (None, None, None)
        ] * len(REPLICAS)
        with gw.stream("POST", "/v1/chat/completions", json=streamed("streamed", 8)) as response:
            assert response.status_code == 200
            response.read()
    timed = [r for r in fleet.replicas if r.ttft_ms is not None]
    assert len(timed) == 1 and timed[0].ttft_per_slot_ms is not None
    assert 0 < timed[0].ttft_ms < 1000


def test_a_stream_holds_its_replica_until_it_ends_or_the_client_leaves(fresh_gateway: GatewayServer) -> None:
    fleet = fleet_of(fresh_gateway)
    with httpx.Client(base_url=fresh_gateway.base_url, timeout=20) as gw:
        # 60 tokens at the sandbox's 120 tokens/s: half a second of decoding after the first chunk.
        with gw.stream("POST", "/v1/chat/completions", json=streamed("to the end", 60)) as response:
            lines = response.iter_lines()
            for _ in range(3):
                next(lines)
            assert in_flight(fleet) == 1, "still decoding: still in flight"
            for _ in lines:
                pass
        assert released(fleet, within_s=1.0), "the stream ended: released"
        # About 3.3 s of decoding; the client leaves after the first chunks.
        started = time.monotonic()
        with gw.stream("POST", "/v1/chat/completions", json=streamed("left early", 400)) as response:
            lines = response.iter_lines()
            for _ in range(3):
                next(lines)
            assert in_flight(fleet) == 1
        assert released(fleet, within_s=1.5), "the client left: released"
        assert time.monotonic() - started < 3.0, "released by the close, not by the stream's end"


def test_a_finished_stream_records_its_replicas_decode_speed(fresh_gateway: GatewayServer) -> None:
    fleet = fleet_of(fresh_gateway)
    with httpx.Client(base_url=fresh_gateway.base_url, timeout=20) as gw:
        with gw.stream("POST", "/v1/chat/completions", json=streamed("speed", 60)) as response:
            assert response.status_code == 200
            response.read()
    (timed,) = [r for r in fleet.replicas if r.tokens_per_s is not None]
    # The sandbox decodes at 120 tokens/s; the bounds leave room for a busy machine.
    assert 20 < timed.tokens_per_s < 600, timed.tokens_per_s


def test_slow_unstreamed_answers_do_not_make_an_idle_fleet_spill(fresh_gateway: GatewayServer) -> None:
    """The auditor's case: `ttft_target_ms: 150`, idle replicas, answers of ~350 ms each. Counted
    as TTFTs they put every replica over its target once each had answered one, and from then on
    every request went to the paid tier."""
    chosen, took = [], []
    with httpx.Client(base_url=fresh_gateway.base_url, timeout=20) as gw:
        for i in range(7):
            started = time.perf_counter()
            answer = gw.post(
                "/v1/chat/completions", json={**body(f"slow {i}", "hi", max_tokens=40), "ignore_eos": True}
            )
            took.append(time.perf_counter() - started)
            chosen.append(answer.headers["x-tollgate-model"])
    assert chosen == ["llama-fleet"] * 7
    assert min(took) > 0.15, f"each answer took longer than the TTFT target: {took}"
    assert in_flight(fleet_of(fresh_gateway)) == 0


def test_the_fleet_is_visible_in_prometheus(
    fleet_gateway: GatewayServer, replicas: dict[str, SandboxServer]
) -> None:
    """An operator sees each replica's health, queue, load and prefix-cache hit rate, and whether the
    fleet spills, on the gateway's own /metrics."""
    reset(replicas)
    system = "Shared handbook. " + "Answer in the house style. " * 60
    for i in range(4):
        answer = httpx.post(
            fleet_gateway.base_url + "/v1/chat/completions", json=body(system, f"q{i}"), timeout=20
        )
        assert answer.status_code == 200
    samples: dict[str, float] = {}
    for _ in range(40):  # until a scrape has seen two snapshots of the replica that served them
        page = httpx.get(fleet_gateway.base_url + "/metrics").text
        samples = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in page.splitlines()
            if line.startswith("tollgate_fleet_")
        }
        if any(
            k.startswith("tollgate_fleet_replica_prefix_cache_hit_ratio") and v > 0
            for k, v in samples.items()
        ):
            break
        time.sleep(0.05)
    for name in REPLICAS:
        labels = f'{{model="llama-fleet",replica="{name}"}}'
        assert samples[f"tollgate_fleet_replica_healthy{labels}"] == 1.0
        assert f"tollgate_fleet_replica_load{labels}" in samples
        assert f"tollgate_fleet_replica_requests_waiting{labels}" in samples
    assert samples['tollgate_fleet_spilling{model="llama-fleet"}'] == 0.0
    hits = [v for k, v in samples.items() if k.startswith("tollgate_fleet_replica_prefix_cache_hit_ratio")]
    assert max(hits) > 0, "the replica that served the shared prefix reports cache hits"

"""Choosing a replica and spilling over: pure tests on fabricated snapshots, then three sandbox vLLM
replicas under uneven load, watched by the real scrape loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest

from local_backend.affinity import AffinityPolicy, preference, prefix_key
from local_backend.choice import choose, rank
from local_backend.fleet import Fleet, Replica, load
from local_backend.metrics import ModelStats, Snapshot
from local_backend.spillover import queue_limit, should_spill
from sandbox.config import SandboxConfig
from sandbox.server import SandboxServer

MODEL = "llama-3.1-8b-instruct"
TENANT = "You answer questions about the Example Corp handbook. " * 30  # ~1,600 characters


def replica(
    name: str, *, running: float = 0, waiting: float = 0, kv: float = 0.0, capacity: int = 8
) -> Replica:
    r = Replica(name, f"http://{name}:8000", capacity=capacity, healthy=True)
    stats = ModelStats(requests_running=running, requests_waiting=waiting, kv_cache_usage=kv)
    r.record_snapshot(Snapshot(taken_at=0.0, models={MODEL: stats}))
    return r


def fleet(*replicas: Replica) -> Fleet:
    return Fleet(MODEL, replicas)


def home_of(prefix: str, names: list[str]) -> str:
    key = prefix_key(prefix)
    assert key is not None
    return preference(key, names)[0]


def test_choose_prefers_the_least_loaded_healthy_replica() -> None:
    busy, medium, idle = replica("busy", running=8, waiting=4), replica("medium", running=3), replica("idle")
    idle.healthy = False
    f = fleet(busy, medium, idle)
    assert choose(f, "hi", affinity=False) is medium
    assert rank(f, "hi", affinity=False) == [medium, busy]
    idle.healthy = True
    assert choose(f, "hi", affinity=False) is idle


def test_no_healthy_replica_means_no_choice() -> None:
    r = replica("a")
    r.healthy = False
    assert choose(fleet(r), TENANT, affinity=True) is None
    assert choose(fleet(), TENANT, affinity=False) is None


def test_ties_go_to_fewer_in_flight_then_to_the_name() -> None:
    a, b = replica("a"), replica("b")
    assert choose(fleet(b, a), "hi", affinity=False) is a
    # Same load score but more of the gateway's own requests in flight on a (b reports them busy).
    a.acquire()
    b.record_snapshot(Snapshot(0.0, {MODEL: ModelStats(requests_running=1)}))
    assert load(a) == load(b)
    assert choose(fleet(a, b), "hi", affinity=False) is b


def test_affinity_sends_one_prefix_to_one_replica_whatever_the_small_load_differences() -> None:
    replicas = [replica(name, running=running) for name, running in (("a", 0), ("b", 0.5), ("c", 0))]
    home = home_of(TENANT, ["a", "b", "c"])
    f = fleet(*replicas)
    for question in ("How many holidays?", "Who approves travel?", "Where is the VPN guide?"):
        chosen = choose(f, TENANT + question, affinity=True)
        assert chosen is not None
        assert chosen.name == home


def test_a_short_prompt_has_no_affinity_and_goes_to_the_least_loaded() -> None:
    a, b = replica("a", running=2), replica("b")
    assert choose(fleet(a, b), "What is 2 + 2?", affinity=True) is b


def test_an_overloaded_home_sends_the_prefix_to_its_next_preference() -> None:
    names = ["a", "b", "c"]
    home, second, third = preference(prefix_key(TENANT) or 0, names)
    f = fleet(replica(home, running=8, waiting=6), replica(second, running=2), replica(third))
    ranked = rank(f, TENANT, affinity=True)
    assert [r.name for r in ranked] == [second, third, home]
    assert [r.name for r in rank(f, TENANT, affinity=True, exclude={second})] == [third, home]


def test_the_fleets_affinity_policy_sets_the_hashed_span() -> None:
    # A 70-character prompt whose one-block key prefers b, the (slightly) busier replica.
    short = next(
        p
        for i in range(100)
        if preference(prefix_key(p := f"{i:02d}" + "x" * 68, blocks=1) or 0, "ab")[0] == "b"
    )
    replicas = [replica("a"), replica("b", running=0.4)]
    one_block = Fleet(MODEL, replicas, affinity_policy=AffinityPolicy(blocks=1))
    assert choose(one_block, short, affinity=True) is replicas[1]
    # Under the default 16 blocks the prompt has no key: least loaded.
    assert choose(Fleet(MODEL, replicas), short, affinity=True) is replicas[0]


# Spillover on fabricated snapshots.


def test_spills_only_when_every_healthy_queue_is_past_the_threshold() -> None:
    f = fleet(replica("a", running=8, waiting=5), replica("b", running=8, waiting=2))
    assert not should_spill(f, max_queue=4, ttft_target_ms=None)
    f.replica("b").record_snapshot(Snapshot(1.0, {MODEL: ModelStats(requests_running=8, requests_waiting=6)}))
    assert should_spill(f, max_queue=4, ttft_target_ms=None)


def test_spilling_stops_only_once_a_queue_has_drained_to_the_resume_level() -> None:
    a, b = replica("a", running=8, waiting=9), replica("b", running=8, waiting=9)
    f = fleet(a, b)
    assert should_spill(f, max_queue=8, ttft_target_ms=None)

    def queue(r: Replica, waiting: float) -> None:
        r.record_snapshot(Snapshot(1.0, {MODEL: ModelStats(requests_running=8, requests_waiting=waiting)}))

    queue(a, 6)  # under the threshold (8) but not under resume (0.5 x 8 = 4): keep spilling
    assert should_spill(f, max_queue=8, ttft_target_ms=None)
    queue(a, 4)
    assert not should_spill(f, max_queue=8, ttft_target_ms=None)
    queue(a, 7)  # back between the two levels: keep serving locally (no flapping)
    assert not should_spill(f, max_queue=8, ttft_target_ms=None)
    queue(a, 9)
    assert should_spill(f, max_queue=8, ttft_target_ms=None)


def test_a_predicted_ttft_over_the_target_spills_before_the_queue_limit() -> None:
    now = [0.0]
    replicas = []
    for name in ("a", "b"):
        r = Replica(name, f"http://{name}", capacity=8, healthy=True, clock=lambda: now[0])
        r.record_snapshot(Snapshot(0.0, {MODEL: ModelStats(requests_running=8, requests_waiting=5)}))
        r.observe_ttft(200.0)  # 200 ms a queue position: 5 waiting -> 1,200 ms predicted
        replicas.append(r)
    f = fleet(*replicas)
    assert replicas[0].predicted_ttft_ms() == pytest.approx(1200.0)
    assert queue_limit(replicas[0], max_queue=100, ttft_target_ms=1000.0) == pytest.approx(4.0)
    assert should_spill(f, max_queue=100, ttft_target_ms=1000.0)
    assert not should_spill(fleet(*replicas), max_queue=100, ttft_target_ms=2000.0)
    # Nobody sends local traffic while spilling: after 30 s the old latencies no longer count.
    now[0] = 31.0
    assert not should_spill(f, max_queue=100, ttft_target_ms=1000.0)


def test_the_gateways_own_dispatches_count_before_the_next_scrape() -> None:
    r = replica("a", capacity=2)
    f = fleet(r)
    for _ in range(5):
        r.acquire()  # 2 running, 3 waiting, as far as the gateway knows
    assert should_spill(f, max_queue=2, ttft_target_ms=None)


def test_no_healthy_replica_spills_until_one_recovers() -> None:
    r = replica("a")
    r.healthy = False
    f = fleet(r)
    assert should_spill(f, max_queue=4, ttft_target_ms=None)
    r.healthy = True
    assert not should_spill(f, max_queue=4, ttft_target_ms=None)


# Three sandbox vLLM replicas, 4 batch slots each, a scrape every 50 ms.

SLOTS = 4


@pytest.fixture(scope="module")
def sandboxes() -> Iterator[list[SandboxServer]]:
    # A cache big enough that the KV-usage gauge (the sandbox reports its fill) stays near zero.
    configs = [
        SandboxConfig(dialect="vllm", profile="local", seed=i, max_num_seqs=SLOTS, cache_blocks=1_000_000)
        for i in range(3)
    ]
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(SandboxServer(config)) for config in configs]


@pytest.fixture
async def live_fleet(sandboxes: list[SandboxServer]) -> AsyncIterator[tuple[Fleet, httpx.AsyncClient]]:
    replicas = [Replica(f"r{i}", s.base_url, capacity=SLOTS) for i, s in enumerate(sandboxes)]
    f = Fleet(MODEL, replicas)
    async with httpx.AsyncClient(timeout=30) as client:
        for server in sandboxes:
            (await client.post(server.base_url + "/_sandbox/reset")).raise_for_status()
        await f.start(client, interval_s=0.05)
        try:
            yield f, client
        finally:
            await f.stop()


async def chat(client: httpx.AsyncClient, base_url: str, tag: str) -> None:
    # ~6,000 unique prompt tokens: 0.3 s of prefill at the local profile's rate, then 20-60 tokens
    # at 120 tokens/s, so every request holds its batch slot for about half a second.
    prompt = f"{tag} " + "lorem " * 6000
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "max_tokens": 256}
    (await client.post(f"{base_url}/v1/chat/completions", json=body)).raise_for_status()


async def until(condition: Callable[[], bool]) -> None:
    """Wait up to 5 s for the scrape loop to show `condition`."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the fleet never showed the expected state")


async def test_new_work_goes_to_the_least_loaded_of_three_sandbox_replicas(
    live_fleet: tuple[Fleet, httpx.AsyncClient],
) -> None:
    f, client = live_fleet
    a, b, c = f.replicas
    assert f.healthy() == [a, b, c]
    # 8 slow requests on a (4 running, 4 queued), 2 on b, none on c - sent around the gateway,
    # so only the scrape loop can know.
    load_a = [asyncio.create_task(chat(client, a.base_url, f"busy-{i}")) for i in range(8)]
    load_b = [asyncio.create_task(chat(client, b.base_url, f"some-{i}")) for i in range(2)]
    await until(lambda: a.occupancy().waiting >= 4 and b.occupancy().running >= 2)

    assert load(a) > load(b) > load(c)
    assert choose(f, "What is the capital of France?", affinity=False) is c
    assert rank(f, "What is the capital of France?", affinity=False) == [c, b, a]
    # A prefix whose home is the busy replica goes elsewhere while a is over the load bound...
    prefix = next(p for i in range(100) if home_of(p := f"tenant {i}: " + TENANT, ["r0", "r1", "r2"]) == "r0")
    chosen = choose(f, prefix, affinity=True)
    assert chosen is not None and chosen is not a

    await asyncio.gather(*load_a, *load_b)
    await until(lambda: a.occupancy().running == 0 and a.occupancy().waiting == 0)
    # ...and comes back once a has drained.
    assert choose(f, prefix, affinity=True) is a


async def test_spillover_starts_when_every_queue_is_deep_and_stops_when_they_drain(
    live_fleet: tuple[Fleet, httpx.AsyncClient],
) -> None:
    f, client = live_fleet
    work = [
        asyncio.create_task(chat(client, r.base_url, f"{r.name}-{i}")) for r in f.replicas for i in range(7)
    ]
    await until(lambda: all(r.occupancy().waiting >= 3 for r in f.replicas))
    assert should_spill(f, max_queue=2, ttft_target_ms=None)
    await asyncio.gather(*work)
    await until(lambda: not should_spill(f, max_queue=2, ttft_target_ms=None))
    assert all(r.occupancy().waiting == 0 for r in f.replicas)

"""Replicas and fleets: the load score, in-flight corrections, latency EWMAs, health and scraping."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from local_backend.fleet import Fleet, LoadWeights, Replica, load
from local_backend.metrics import ModelStats, Snapshot

MODEL = "llama-3.1-8b-instruct"
METRICS = f"""\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="{MODEL}"}} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="{MODEL}"}} 0.5
"""


def snapshot(running: float = 0, waiting: float = 0, kv: float = 0.0, *, at: float = 0.0) -> Snapshot:
    stats = ModelStats(requests_running=running, requests_waiting=waiting, kv_cache_usage=kv)
    return Snapshot(taken_at=at, models={MODEL: stats})


def replica(name: str = "a", *, capacity: int = 8, **gauges: float) -> Replica:
    r = Replica(name, f"http://{name}:8000/", capacity=capacity, healthy=True)
    if gauges:
        r.record_snapshot(snapshot(**gauges))
    return r


def test_load_weighs_batch_slots_queue_and_kv_cache() -> None:
    # 4 of 8 slots busy (0.5 x 1), 2 waiting (2/8 x 2 = 0.5), KV cache 60% full (0.6 x 2 = 1.2).
    assert load(replica(running=4, waiting=2, kv=0.6)) == pytest.approx(2.2)
    assert load(replica()) == 0.0
    assert load(replica(running=4), LoadWeights(running=2, waiting=0, kv_cache=0)) == pytest.approx(1.0)


def test_a_queue_outweighs_the_same_number_running() -> None:
    assert load(replica(running=8, waiting=4)) > load(replica(running=8)) + load(replica(running=4))


def test_dispatches_since_the_scrape_fill_free_slots_then_the_queue() -> None:
    r = replica(running=6)
    for _ in range(3):
        r.acquire()
    occupancy = r.occupancy()
    assert (occupancy.running, occupancy.waiting) == (8, 1)
    # With a queue already there, a newcomer waits even if the gauges show free slots (KV-bound).
    r = replica(running=5, waiting=2)
    r.acquire()
    assert (r.occupancy().running, r.occupancy().waiting) == (5, 3)


def test_requests_finished_since_the_scrape_drain_the_queue_first() -> None:
    r = replica()
    for _ in range(5):
        r.acquire()
    r.record_snapshot(snapshot(running=8, waiting=3))
    for _ in range(4):
        r.release()
    occupancy = r.occupancy()
    assert (occupancy.running, occupancy.waiting) == (7, 0)


def test_a_request_that_finished_while_the_scrape_was_in_flight_is_not_left_running() -> None:
    # The scrape was sent with one request in flight; the replica rendered its gauges while that
    # request still ran; the request finished before the scrape's answer was recorded.
    r = replica(capacity=2)
    r.acquire()
    sent_with = r.in_flight
    r.release()
    r.record_snapshot(snapshot(running=1, waiting=0), in_flight_at_send=sent_with)
    assert (r.occupancy().running, r.occupancy().waiting) == (0, 0)
    assert load(r) == 0.0


def test_without_a_snapshot_the_gateways_own_count_is_the_load() -> None:
    r = replica(capacity=2)
    for _ in range(3):
        r.acquire()
    assert (r.occupancy().running, r.occupancy().waiting) == (2, 1)
    assert load(r) == pytest.approx(1 + 2 * 1 / 2)


def test_a_lease_counts_the_request_until_it_ends_even_on_error() -> None:
    r = replica()
    with pytest.raises(RuntimeError), r.lease():
        assert r.in_flight == 1
        raise RuntimeError("upstream failed")
    assert r.in_flight == 0
    r.release()
    assert r.in_flight == 0  # never negative


def test_observe_keeps_ewmas_and_normalises_ttft_by_the_queue_ahead() -> None:
    now = [100.0]
    r = Replica("a", "http://a", alpha=0.5, healthy=True, clock=lambda: now[0])
    r.observe_ttft(200.0)
    r.observe_decode(100, 2.0)
    assert (r.ttft_ms, r.tokens_per_s, r.ttft_per_slot_ms) == (200.0, 50.0, 200.0)
    r.observe_ttft(400.0, queued=3)
    assert r.ttft_ms == 300.0  # 200 + 0.5 x (400 - 200)
    assert r.ttft_per_slot_ms == 150.0  # 400 / (1 + 3) = 100, then 200 + 0.5 x (100 - 200)
    r.observe_decode(200, 2.0)
    assert r.tokens_per_s == 75.0  # 50 + 0.5 x (100 - 50)
    r.record_snapshot(snapshot(running=8, waiting=2))
    assert r.predicted_ttft_ms() == pytest.approx(450.0)  # 150 x (1 + 2)
    now[0] += 31
    assert r.predicted_ttft_ms() is None  # too old to judge by


def test_a_decode_speed_needs_two_tokens_and_does_not_refresh_the_ttft() -> None:
    now = [100.0]
    r = Replica("a", "http://a", healthy=True, clock=lambda: now[0])
    r.observe_decode(1, 0.5)
    r.observe_decode(5, 0.0)
    assert r.tokens_per_s is None  # one token, or no time between tokens: no speed
    r.observe_ttft(100.0)
    now[0] += 31
    r.observe_decode(10, 0.1)
    assert r.tokens_per_s == pytest.approx(100.0)
    assert r.recent_ttft_per_slot_ms() is None  # the TTFT is as old as it was


def test_a_lease_reports_the_queue_it_joined() -> None:
    r = replica(running=8, waiting=4)
    with r.lease() as lease:
        lease.observe_ttft(500.0)
    assert r.ttft_per_slot_ms == pytest.approx(100.0)


def test_a_lease_is_released_once_however_often_it_is_released() -> None:
    r = replica()
    held, ended = r.lease(), r.lease()
    assert r.in_flight == 2
    ended.release()
    ended.release()
    with ended:
        pass
    assert r.in_flight == 1  # `held` is still counted
    held.release()
    assert r.in_flight == 0


def test_prefix_cache_hit_rate_between_the_last_two_scrapes() -> None:
    r = replica()
    assert r.prefix_cache_hit_rate() is None
    r.record_snapshot(Snapshot(0.0, {MODEL: ModelStats(prefix_cache_queries=100, prefix_cache_hits=10)}))
    r.record_snapshot(Snapshot(1.0, {MODEL: ModelStats(prefix_cache_queries=300, prefix_cache_hits=160)}))
    assert r.prefix_cache_hit_rate() == pytest.approx(0.75)


class Upstream:
    """A vLLM server in a MockTransport: health and metrics answers can be switched."""

    def __init__(self) -> None:
        self.health = 200
        self.metrics = METRICS
        self.fail: Exception | None = None
        self.calls: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request.url.path)
        if self.fail is not None:
            raise self.fail
        if request.url.path == "/health":
            return httpx.Response(self.health)
        return httpx.Response(200, text=self.metrics)


async def test_probes_make_replicas_ready_and_scrapes_feed_their_load() -> None:
    upstream = Upstream()
    fleet = Fleet(MODEL, [Replica("a", "http://a:8000", capacity=8)])
    assert fleet.healthy() == []  # unready until /health answers
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as client:
        await fleet.refresh(client)
    (r,) = fleet.healthy()
    assert upstream.calls == ["/health", "/metrics"]
    assert (r.occupancy().running, r.occupancy().waiting, r.occupancy().kv_cache_usage) == (3, 1, 0.5)


async def test_a_replica_goes_unhealthy_after_n_failures_and_recovers_on_one_success() -> None:
    upstream = Upstream()
    fleet = Fleet(MODEL, [Replica("a", "http://a:8000")], unhealthy_after=2)
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as client:
        await fleet.refresh(client)
        upstream.health = 503
        await fleet.refresh(client)
        assert fleet.healthy() != []  # one failure is not enough
        upstream.health, upstream.fail = 200, httpx.ConnectError("refused")
        await fleet.refresh(client)
        assert fleet.healthy() == []
        upstream.fail = None
        await fleet.refresh(client)
        assert fleet.healthy() != []


async def test_an_unreadable_metrics_page_keeps_the_replica_but_drops_its_snapshot(
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream = Upstream()
    fleet = Fleet(MODEL, [Replica("a", "http://a:8000")])
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as client:
        await fleet.refresh(client)
        upstream.metrics = "vllm:num_requests_running{{{ not prometheus"
        with caplog.at_level(logging.WARNING, logger="tollgate.local_backend"):
            await fleet.refresh(client)
    (r,) = fleet.healthy()
    assert r.snapshot is None
    assert "load rests on in-flight counts" in caplog.text


async def test_unexpected_errors_never_escape_a_refresh() -> None:
    upstream = Upstream()
    upstream.fail = RuntimeError("a bug in a transport")
    fleet = Fleet(MODEL, [Replica("a", "http://a:8000", healthy=True)], unhealthy_after=1)
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as client:
        await fleet.refresh(client)
    assert fleet.healthy() == []


async def test_the_loop_scrapes_on_its_interval_until_stopped() -> None:
    upstream = Upstream()
    fleet = Fleet(MODEL, [Replica("a", "http://a:8000"), Replica("b", "http://b:8000")])
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as client:
        await fleet.start(client, interval_s=0.01)
        assert len(fleet.healthy()) == 2  # the first round ran before start returned
        with pytest.raises(RuntimeError):
            await fleet.start(client)
        await asyncio.sleep(0.1)
        await fleet.stop()
        rounds = upstream.calls.count("/health")
        await asyncio.sleep(0.03)
    assert rounds >= 6
    assert upstream.calls.count("/health") == rounds
    await fleet.stop()  # stopping twice is harmless


def test_replica_names_are_unique() -> None:
    with pytest.raises(ValueError):
        Fleet(MODEL, [Replica("a", "http://a"), Replica("a", "http://b")])

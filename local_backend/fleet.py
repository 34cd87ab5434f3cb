"""The replicas of one self-hosted model: what each one's `/metrics` and `/health` last said, what
the gateway has in flight there and how fast it answered, and the load score built from all that.

The load score (lower is better; 0 is an idle, empty replica):

    load = 1 * running / capacity + 2 * waiting / capacity + 2 * kv_cache_usage

`capacity` is the replica's `--max-num-seqs` (vLLM's batch slots), so a full batch costs 1, a
queue as long as a full batch costs 2 more, and a full KV cache 2 more. The queue and KV weights are
llm-d's defaults (queue 2, kv-util 2); its prefix weight (3) has no term here because prefix affinity
is its own step (`affinity.py`): it orders the replicas for a prefix and this score only bounds that
order (and ranks requests that have no long prefix). `running` and `waiting` are
the last scrape's gauges corrected by the gateway's own dispatches since that scrape (see
`Replica.occupancy`), so a burst between two scrapes does not all land on one replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from local_backend.affinity import DEFAULT_POLICY, AffinityPolicy
from local_backend.metrics import Snapshot, prefix_cache_hit_rate, scrape

if TYPE_CHECKING:  # the probe client is httpx; imported at run time only once a fleet starts
    import httpx

log = logging.getLogger("tollgate.local_backend")

DEFAULT_CAPACITY = 256  # vLLM's --max-num-seqs default on most GPUs


@dataclass(frozen=True, slots=True)
class LoadWeights:
    running: float = 1.0
    waiting: float = 2.0
    kv_cache: float = 2.0


DEFAULT_WEIGHTS = LoadWeights()


@dataclass(frozen=True, slots=True)
class Occupancy:
    """A replica's requests running and waiting (as floats: gauges) and its KV-cache use (0-1)."""

    running: float
    waiting: float
    kv_cache_usage: float


class Replica:
    """One `vllm serve` process. Health and snapshots come from the fleet's scrape loop; in-flight
    counts and latency EWMAs come from the gateway, around and after each request it sends here."""

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        capacity: int = DEFAULT_CAPACITY,
        alpha: float = 0.2,
        healthy: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 1 or not 0 < alpha <= 1:
            raise ValueError("capacity must be positive and alpha in (0, 1]")
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.capacity = capacity
        self.alpha = alpha
        # Unready until a /health probe answers: vLLM serves 200 there only once its engine is up.
        self.healthy = healthy
        self.failures = 0
        self.snapshot: Snapshot | None = None
        self.previous: Snapshot | None = None
        self.in_flight = 0
        self._in_flight_at_scrape = 0
        # EWMAs fed by streamed requests only (`observe_ttft`, `observe_decode`).
        self.ttft_ms: float | None = None
        self.tokens_per_s: float | None = None
        # TTFT divided by (1 + requests queued ahead at dispatch): what one queue position costs.
        self.ttft_per_slot_ms: float | None = None
        # When a TTFT was last observed (its EWMAs' age).
        self.observed_at: float | None = None
        self._clock = clock

    def __repr__(self) -> str:
        state = "healthy" if self.healthy else "unhealthy"
        return f"Replica({self.name!r}, {self.base_url!r}, {state}, in_flight={self.in_flight})"

    def acquire(self) -> None:
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight = max(self.in_flight - 1, 0)

    def lease(self) -> Lease:
        """Count one request in flight from now until `Lease.release()` (or the end of a `with
        replica.lease():` block); it remembers the queue it joined, for `observe_ttft`."""
        lease = Lease(self, queued=self.occupancy().waiting)
        self.acquire()
        return lease

    def observe_ttft(self, ttft_ms: float, *, queued: float = 0.0) -> None:
        """Feed one request's time to first token and how many requests were queued ahead of it
        when it was sent. Only a streamed request measures its TTFT: a non-streamed one's latency
        includes its whole decode, and fed here it would make an idle replica look queued (and a
        TTFT target spill everything)."""
        self.ttft_ms = self._ewma(self.ttft_ms, ttft_ms)
        self.ttft_per_slot_ms = self._ewma(self.ttft_per_slot_ms, ttft_ms / (1.0 + max(queued, 0.0)))
        self.observed_at = self._clock()

    def observe_decode(self, tokens: int, seconds: float) -> None:
        """Feed one stream's decode speed: `tokens` generated between its first chunk and its last,
        `seconds` apart. Fewer than 2 tokens (or no time between them) say nothing and are skipped."""
        if tokens >= 2 and seconds > 0:
            self.tokens_per_s = self._ewma(self.tokens_per_s, tokens / seconds)

    def record_snapshot(self, snapshot: Snapshot | None, *, in_flight_at_send: int | None = None) -> None:
        """A scrape's result; None when `/metrics` failed (load then rests on in-flight counts).

        `in_flight_at_send` is the gateway's in-flight count when the scrape was sent. The gauges
        were read at some point of the scrape's round trip; a request that finished during it must
        not stay counted as running until the next scrape (a sequential client would then see its
        prefix's replica as busy and be moved off it), so the correction counts from the send.
        """
        self.previous = self.snapshot if snapshot is not None else None
        self.snapshot = snapshot
        self._in_flight_at_scrape = self.in_flight if in_flight_at_send is None else in_flight_at_send

    def record_probe(self, ok: bool, *, unhealthy_after: int) -> None:
        """One `/health` result: a success makes the replica healthy at once; `unhealthy_after`
        failures in a row take it out."""
        if ok:
            if not self.healthy:
                log.info("replica %s (%s) is healthy", self.name, self.base_url)
            self.healthy, self.failures = True, 0
            return
        self.failures += 1
        if self.healthy and self.failures >= unhealthy_after:
            log.warning(
                "replica %s (%s) failed %d probes: unhealthy", self.name, self.base_url, self.failures
            )
            self.healthy = False

    def occupancy(self) -> Occupancy:
        """The last scrape's running/waiting gauges, moved by what the gateway did since.

        A request dispatched since the scrape takes a free batch slot when nothing is queued,
        else joins the queue; one finished since frees a slot that the queue's head takes first.
        Without a snapshot the gateway's own in-flight count is all there is.
        """
        snapshot = self.snapshot
        if snapshot is None:
            running = float(min(self.in_flight, self.capacity))
            return Occupancy(running, float(self.in_flight) - running, 0.0)
        stats = snapshot.stats()
        running, waiting = stats.requests_running, stats.requests_waiting
        delta = self.in_flight - self._in_flight_at_scrape
        if delta >= 0:
            free = max(self.capacity - running, 0.0) if waiting == 0 else 0.0
            admitted = min(delta, free)
            running, waiting = running + admitted, waiting + delta - admitted
        else:
            drained = min(-delta, waiting)
            running, waiting = max(running - (-delta - drained), 0.0), waiting - drained
        return Occupancy(running, waiting, stats.kv_cache_usage)

    def recent_ttft_per_slot_ms(self, *, max_age_s: float = 30.0) -> float | None:
        """The per-queue-position TTFT EWMA, or None without a TTFT observed in the last `max_age_s`:
        a replica nobody sends to (its fleet is spilling) must not be judged on old latencies."""
        if self.observed_at is None or self._clock() - self.observed_at > max_age_s:
            return None
        return self.ttft_per_slot_ms

    def predicted_ttft_ms(self, *, max_age_s: float = 30.0) -> float | None:
        """TTFT a request sent now should see: the per-queue-position EWMA times (1 + waiting).

        Each request waiting ahead is assumed to cost about one TTFT (vLLM admits its queue in
        order as prefill budget and batch slots free up). Normalising the observed TTFTs by the
        queue each request met keeps a steady queue from being counted twice.
        """
        per_slot = self.recent_ttft_per_slot_ms(max_age_s=max_age_s)
        return None if per_slot is None else per_slot * (1.0 + self.occupancy().waiting)

    def prefix_cache_hit_rate(self) -> float | None:
        """Share of prompt tokens served from vLLM's prefix cache between the last two scrapes."""
        if self.previous is None or self.snapshot is None:
            return None
        return prefix_cache_hit_rate(self.previous, self.snapshot)

    def _ewma(self, old: float | None, new: float) -> float:
        return new if old is None else old + self.alpha * (new - old)


class Lease:
    """One request in flight on a replica, from `Replica.lease()` until `release()`. A streamed
    request holds it until its stream ends (the replica decodes until then), not its first chunk."""

    __slots__ = ("_released", "queued", "replica")

    def __init__(self, replica: Replica, *, queued: float) -> None:
        self.replica = replica
        self.queued = queued
        self._released = False

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        """Idempotent: a stream can end several ways (done, failed, closed, collected), once."""
        if not self._released:
            self._released = True
            self.replica.release()

    def observe_ttft(self, ttft_ms: float) -> None:
        self.replica.observe_ttft(ttft_ms, queued=self.queued)

    def observe_decode(self, tokens: int, seconds: float) -> None:
        self.replica.observe_decode(tokens, seconds)


def load(replica: Replica, weights: LoadWeights = DEFAULT_WEIGHTS) -> float:
    """The replica's load score (module docstring); lower is better."""
    occupancy = replica.occupancy()
    return (
        weights.running * occupancy.running / replica.capacity
        + weights.waiting * occupancy.waiting / replica.capacity
        + weights.kv_cache * occupancy.kv_cache_usage
    )


class Fleet:
    """The replicas serving one model, kept current by an async scrape loop.

    `spilling` is the spillover state `spillover.should_spill` keeps between calls (hysteresis).
    """

    def __init__(
        self,
        model: str,
        replicas: Sequence[Replica],
        *,
        unhealthy_after: int = 3,
        probe_timeout_s: float = 2.0,
        weights: LoadWeights = DEFAULT_WEIGHTS,
        affinity_policy: AffinityPolicy = DEFAULT_POLICY,
    ) -> None:
        names = [r.name for r in replicas]
        if len(set(names)) != len(names):
            raise ValueError(f"replica names must be unique: {names}")
        if unhealthy_after < 1:
            raise ValueError("unhealthy_after must be at least 1")
        self.model = model
        self.replicas = tuple(replicas)
        self.unhealthy_after = unhealthy_after
        self.probe_timeout_s = probe_timeout_s
        self.weights = weights
        self.affinity_policy = affinity_policy
        self.spilling = False
        self._task: asyncio.Task[None] | None = None

    def healthy(self) -> list[Replica]:
        return [r for r in self.replicas if r.healthy]

    def replica(self, name: str) -> Replica:
        for replica in self.replicas:
            if replica.name == name:
                return replica
        raise KeyError(name)

    async def refresh(self, client: httpx.AsyncClient) -> None:
        """Probe and scrape every replica once, concurrently; failures are recorded, never raised."""
        await asyncio.gather(*(self._probe(client, r) for r in self.replicas))

    async def start(self, client: httpx.AsyncClient, interval_s: float = 1.0) -> None:
        """Run one round now (so ready replicas take traffic at once), then one every `interval_s`."""
        if self._task is not None:
            raise RuntimeError(f"the scrape loop of {self.model} is already running")
        await self.refresh(client)
        self._task = asyncio.create_task(self._loop(client, interval_s), name=f"fleet-scrape:{self.model}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self, client: httpx.AsyncClient, interval_s: float) -> None:
        due = time.monotonic() + interval_s
        while True:
            await asyncio.sleep(max(due - time.monotonic(), 0.0))
            due = time.monotonic() + interval_s
            try:
                await self.refresh(client)
            except Exception:  # a bug here must not end the loop: the fleet would freeze as it is
                log.exception("scraping the %s fleet failed", self.model)

    async def _probe(self, client: httpx.AsyncClient, replica: Replica) -> None:
        from httpx import HTTPError

        # vLLM's --api-key guards only /v1 paths, so /health and /metrics need no credentials.
        try:
            async with asyncio.timeout(self.probe_timeout_s):
                response = await client.get(f"{replica.base_url}/health")
            ok = response.is_success
        except (HTTPError, TimeoutError, OSError):
            ok = False
        except Exception:
            log.exception("probing %s failed unexpectedly", replica.base_url)
            ok = False
        replica.record_probe(ok, unhealthy_after=self.unhealthy_after)
        if not ok:
            return
        in_flight_at_send = replica.in_flight
        try:
            async with asyncio.timeout(self.probe_timeout_s):
                snapshot = await scrape(client, f"{replica.base_url}/metrics")
        except Exception as exc:  # an unreadable page must not take a healthy replica out
            if replica.snapshot is not None:
                log.warning(
                    "scraping %s/metrics failed (%r): load rests on in-flight counts", replica.base_url, exc
                )
            snapshot = None
        replica.record_snapshot(snapshot, in_flight_at_send=in_flight_at_send)


__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_WEIGHTS",
    "Fleet",
    "Lease",
    "LoadWeights",
    "Occupancy",
    "Replica",
    "load",
]

"""The self-hosted fleets as Prometheus gauges: what each vLLM replica last reported and what the
gateway makes of it (load score, TTFT and decode EWMAs, prefix-cache hit rate), read from memory at
scrape time, so an operator sees why the router prefers a replica or spills."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gateway.execution.fleets import Fleets
from local_backend.fleet import Fleet, Replica, load

# (name, help, a replica's value, None to leave its sample out)
_REPLICA_GAUGES: tuple[tuple[str, str, Callable[[Fleet, Replica], float | None]], ...] = (
    ("healthy", "1 while the replica answers /health.", lambda _, r: 1.0 if r.healthy else 0.0),
    (
        "requests_running",
        "Requests running (last scrape, moved by dispatches since).",
        lambda _, r: r.occupancy().running,
    ),
    (
        "requests_waiting",
        "Requests queued (last scrape, moved by dispatches since).",
        lambda _, r: r.occupancy().waiting,
    ),
    (
        "kv_cache_usage_ratio",
        "KV-cache use, 0 to 1, as the replica last reported.",
        lambda _, r: r.occupancy().kv_cache_usage,
    ),
    ("in_flight", "Requests the gateway has on this replica now.", lambda _, r: float(r.in_flight)),
    (
        "load",
        "The load score the router ranks replicas by (lower is better).",
        lambda f, r: load(r, f.weights),
    ),
    (
        "ttft_seconds",
        "EWMA of time to first token of streamed requests.",
        lambda _, r: None if r.ttft_ms is None else r.ttft_ms / 1000,
    ),
    ("decode_tokens_per_second", "EWMA of finished streams' decode speed.", lambda _, r: r.tokens_per_s),
    (
        "prefix_cache_hit_ratio",
        "Share of prompt tokens served from vLLM's prefix cache since the replica started.",
        lambda _, r: _hit_ratio(r),
    ),
)


class FleetCollector(Collector):
    def __init__(self, fleets: Fleets) -> None:
        self._fleets = fleets

    def describe(self) -> Iterable[Any]:
        return list(self._families(()))

    def collect(self) -> Iterable[Any]:
        return list(self._families(self._fleets.fleets()))

    @staticmethod
    def _families(fleets: Iterable[Fleet]) -> Iterator[GaugeMetricFamily]:
        fleets = list(fleets)
        spilling = GaugeMetricFamily(
            "tollgate_fleet_spilling", "1 while the fleet sends new work to the next tier.", labels=["model"]
        )
        for fleet in fleets:
            spilling.add_metric([fleet.model], 1.0 if fleet.spilling else 0.0)
        yield spilling
        for name, text, read in _REPLICA_GAUGES:
            family = GaugeMetricFamily(f"tollgate_fleet_replica_{name}", text, labels=["model", "replica"])
            for fleet in fleets:
                for replica in fleet.replicas:
                    value = read(fleet, replica)
                    if value is not None:
                        family.add_metric([fleet.model, replica.name], value)
            yield family


def _hit_ratio(replica: Replica) -> float | None:
    stats = replica.snapshot.stats() if replica.snapshot is not None else None
    if stats is None or stats.prefix_cache_queries <= 0:
        return None
    return stats.prefix_cache_hits / stats.prefix_cache_queries

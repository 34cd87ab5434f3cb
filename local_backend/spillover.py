"""Spillover: when the whole local fleet is too busy, send requests to the next (managed) tier
instead of queuing them, and come back once the queues drain.

Each healthy replica gets a queue limit: `max_queue`, lowered by the TTFT target when there is
one and a recent TTFT to predict from. Predicted TTFT is `ttft_per_slot * (1 + waiting)` (see
`Replica.predicted_ttft_ms`), so it breaks the target once `waiting > target / ttft_per_slot - 1`:

    limit = min(max_queue, ttft_target_ms / ttft_per_slot_ms - 1)

Hysteresis. Spilling starts when every healthy replica has `waiting > limit` (or none is
healthy) and stops only when some healthy replica is down to `waiting <= resume_ratio * limit`;
between the two the fleet keeps its state (`Fleet.spilling`). Without the band a fleet at its
limit would flip every request: local work fills the queue to just over the limit, spilling
drains it to just under, and so on. Latencies older than `ttft_max_age_s` are ignored: a spilling
fleet gets no traffic to refresh them, and a stale slow TTFT must not keep it spilling for ever.
TTFTs come from streamed requests only (a non-streamed answer's latency includes its decode), so
a fleet serving only non-streamed requests is held to `max_queue` alone.
"""

from __future__ import annotations

from local_backend.fleet import Fleet, Replica


def queue_limit(
    replica: Replica, *, max_queue: int, ttft_target_ms: float | None, ttft_max_age_s: float = 30.0
) -> float:
    """Requests that may wait on this replica before it counts as over (may be negative)."""
    limit = float(max_queue)
    per_slot = replica.recent_ttft_per_slot_ms(max_age_s=ttft_max_age_s)
    if ttft_target_ms is not None and per_slot:
        limit = min(limit, ttft_target_ms / per_slot - 1.0)
    return limit


def should_spill(
    fleet: Fleet,
    *,
    max_queue: int,
    ttft_target_ms: float | None,
    resume_ratio: float = 0.5,
    ttft_max_age_s: float = 30.0,
) -> bool:
    """True when this request should go to the next tier; updates `fleet.spilling`."""
    if max_queue < 0 or not 0 <= resume_ratio <= 1:
        raise ValueError("max_queue must not be negative and resume_ratio must be in [0, 1]")
    healthy = fleet.healthy()
    if not healthy:
        fleet.spilling = True
        return True
    pressure = [
        (
            replica.occupancy().waiting,
            queue_limit(
                replica, max_queue=max_queue, ttft_target_ms=ttft_target_ms, ttft_max_age_s=ttft_max_age_s
            ),
        )
        for replica in healthy
    ]
    if fleet.spilling:
        fleet.spilling = not any(waiting <= resume_ratio * limit for waiting, limit in pressure)
    else:
        fleet.spilling = all(waiting > limit for waiting, limit in pressure)
    return fleet.spilling


__all__ = ["queue_limit", "should_spill"]

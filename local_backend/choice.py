"""Choosing the replica of a fleet that serves one request: prefix affinity first (when on), with
bounded load, else the least loaded; unhealthy replicas never.

Ties in load (an idle fleet) go to the replica with fewer of the gateway's own requests in flight,
then the faster recent TTFT, then the name, so the choice is deterministic.
"""

from __future__ import annotations

from collections.abc import Collection

from local_backend.affinity import prefix_key, route
from local_backend.fleet import Fleet, Replica, load


def rank(
    fleet: Fleet, request_prefix: str, *, affinity: bool, exclude: Collection[str] = ()
) -> list[Replica]:
    """Every healthy replica not in `exclude` (e.g. circuit open, already tried), best first."""
    candidates = [r for r in fleet.healthy() if r.name not in exclude]
    loads = {r.name: load(r, fleet.weights) for r in candidates}
    policy = fleet.affinity_policy
    key = (
        prefix_key(request_prefix, block_chars=policy.block_chars, blocks=policy.blocks) if affinity else None
    )
    if key is None:
        return sorted(candidates, key=lambda r: (loads[r.name], r.in_flight, r.ttft_ms or 0.0, r.name))
    by_name = {r.name: r for r in candidates}
    return [by_name[name] for name in route(key, loads, policy=policy)]


def choose(fleet: Fleet, request_prefix: str, *, affinity: bool) -> Replica | None:
    """The replica to send to, or None when no replica is healthy (spill to the next tier)."""
    ranked = rank(fleet, request_prefix, affinity=affinity)
    return ranked[0] if ranked else None


__all__ = ["choose", "rank"]

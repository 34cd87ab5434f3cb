"""Readiness means "this replica can serve", not "every dependency is up".

A PostgreSQL blip must not take every replica out of a load balancer at once: while the database is
away the gateway keeps answering and spools ledger rows, so it stays ready and says "degraded" (in
`/readyz`'s body and in `tollgate_dependency_up`). It is not ready only when it would refuse the
request anyway: the runtime is not loaded, or the shared state store is away and the config fails
closed (every request would get `state_unavailable`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.database import ping
from gateway.state.failover import FallbackStateStore
from gateway.state.store import StateStore

_PING_TIMEOUT = 2.0

READY, DEGRADED, NOT_READY = "ready", "degraded", "not_ready"


class LedgerState(Protocol):
    @property
    def database_down(self) -> bool: ...


class Dependencies(Protocol):
    """What the checks read: the runtime satisfies it."""

    @property
    def engine(self) -> AsyncEngine: ...

    @property
    def store(self) -> StateStore: ...

    @property
    def ledger(self) -> LedgerState: ...


@dataclass(frozen=True, slots=True)
class Check:
    up: bool
    detail: str  # what an operator reads in /readyz: "ok", or what is missing and what happens instead
    blocks_serving: bool = False


async def check_database(deps: Dependencies) -> Check:
    try:
        await asyncio.wait_for(ping(deps.engine), timeout=_PING_TIMEOUT)
    except Exception as exc:  # any failure to answer SELECT 1 is "unreachable"; requests go on
        return Check(False, f"unreachable ({type(exc).__name__}), spooling ledger rows")
    if deps.ledger.database_down:
        return Check(True, "reachable, the ledger writer is reconnecting (rows spool meanwhile)")
    return Check(True, "ok")


async def check_state(deps: Dependencies) -> Check:
    store = deps.store
    if not isinstance(store, FallbackStateStore):
        return Check(True, "ok (in-memory)")
    # current(): pings a store not heard from within the last second, so a hung Redis shows here
    # before any request finds it: "per-replica fallback (...)" while failing open, "unavailable
    # (fail-closed)" otherwise.
    description = await store.current()
    if not store.degraded:
        return Check(True, "ok")
    return Check(False, f"unreachable, {description}", blocks_serving=description.startswith("unavailable"))


async def check_all(deps: Dependencies) -> dict[str, Check]:
    return {"database": await check_database(deps), "state": await check_state(deps)}


def overall(checks: dict[str, Check]) -> str:
    if any(c.blocks_serving for c in checks.values()):
        return NOT_READY
    return READY if all(c.up for c in checks.values()) else DEGRADED

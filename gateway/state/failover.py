"""What happens when Redis is unreachable: `fail_open` keeps serving on this replica's own memory
(limits and budgets become per-replica until Redis is back, and the log says so loudly), `fail_closed`
refuses requests rather than enforce nothing shared. `/readyz` reports which state is in force.

One failed call is enough: from then on every operation goes straight to local memory (or is
refused) without touching Redis, and a background probe pings it every `cooldown` seconds until it
answers. A hung Redis (SIGSTOP, a black-holed address) so costs the request that found it one socket
timeout, not one per call (~21 per chat request with a budget and a rate limit, 48-56 s measured).

While Redis answers, the same task looks every few seconds at a marker key holding a random token:
a marker gone or changed means Redis lost its data (restarted without persistence, and another
replica may have set a new marker already). After an outage, or such a loss, the recovery steps
(`on_recovery`: budgets raise their counters to the ledger's spend) run on Redis before the
replica uses it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from gateway.errors import GatewayError
from gateway.state.memory import MemoryStateStore
from gateway.state.store import BucketResult, GateResult, Hold, Settle, StateStore, Take

# The store's watch (its marker, probing while away): started on first use, alive until close.
WATCH_TASK = "tollgate-state-watch"
log = logging.getLogger("tollgate.state")

_UNREACHABLE: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError)
_LOG_EVERY_SECONDS = 10.0
# Between the probes of a store that is away; a probe waits at most `_PROBE_TIMEOUT_SECONDS`.
_COOLDOWN_SECONDS = 1.0
_PROBE_TIMEOUT_SECONDS = 2.0
# How recent a successful call must be for `/readyz` to trust it without a ping of its own.
_FRESH_SECONDS = 1.0
# How often a store that answers is checked for lost data.
_WATCH_SECONDS = 5.0
_MARKER = "state:marker"

# A recovery step: given the shared store (answering again) and whether it lost its data.
Recovery = Callable[[StateStore, bool], Awaitable[None]]


class StateUnavailable(GatewayError):
    status = 503
    type = "gateway_error"
    code = "state_unavailable"


class FallbackStateStore:
    """Wraps the shared store; every operation falls back to local memory (or fails) when it is away."""

    def __init__(
        self,
        shared: StateStore,
        *,
        fail_open: bool,
        unreachable: tuple[type[BaseException], ...] = (),
        cooldown: float = _COOLDOWN_SECONDS,
        probe_timeout: float = _PROBE_TIMEOUT_SECONDS,
        watch_every: float = _WATCH_SECONDS,
    ) -> None:
        """`unreachable`: the shared store's own errors that mean "away" (redis-py's are not
        builtin ConnectionError/TimeoutError); passed in so this module does not import its client."""
        self._shared = shared
        self._unreachable = (*unreachable, *_UNREACHABLE)
        self._local = MemoryStateStore()
        self._fail_open = fail_open
        self._cooldown = cooldown
        self._probe_timeout = probe_timeout
        self._watch_every = watch_every
        self._marker: bytes | None = None
        self._down_since: float | None = None
        self._last_log = 0.0
        self._last_ok = float("-inf")
        self._probe: asyncio.Task[None] | None = None
        self._closing = False
        self._on_recovery: list[Recovery] = []

    @property
    def degraded(self) -> bool:
        return self._down_since is not None

    def on_recovery(self, callback: Recovery) -> None:
        """Run `callback` on the shared store each time it answers again after being away, or is
        found to have lost its data (before operations go back to it)."""
        self._on_recovery.append(callback)

    def describe(self) -> str:
        if self._down_since is None:
            return "shared"
        return (
            "per-replica fallback (shared store unreachable)"
            if self._fail_open
            else "unavailable (fail-closed)"
        )

    async def current(self) -> str:
        """`describe()` as it is now: a store not heard from within the last second is pinged
        (at most one probe timeout), so a hung Redis shows even before a request finds it."""
        if self._down_since is None and time.monotonic() - self._last_ok > _FRESH_SECONDS:
            try:
                async with asyncio.timeout(self._probe_timeout):
                    await self._shared.ping()
            except self._unreachable as exc:
                self._mark_down(exc)
            else:
                self._last_ok = time.monotonic()
        return self.describe()

    def _mark_down(self, exc: BaseException) -> None:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        if now - self._last_log > _LOG_EVERY_SECONDS:
            self._last_log = now
            mode = (
                "falling back to per-replica limits" if self._fail_open else "refusing requests (fail-closed)"
            )
            log.error(
                "shared state store unreachable (%s): %s; probing it every %gs",
                type(exc).__name__,
                mode,
                self._cooldown,
            )
        self._watch()

    def _failed(self, exc: BaseException) -> StateStore:
        self._mark_down(exc)
        return self._fallback()

    def _fallback(self) -> StateStore:
        if not self._fail_open:
            raise StateUnavailable("the shared state store is unreachable and this gateway fails closed")
        return self._local

    def _watch(self) -> None:
        if self._closing:
            return
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._watch_loop(), name=WATCH_TASK)

    async def _watch_loop(self) -> None:
        # A cancel that lands as `asyncio.timeout` fires comes out as TimeoutError (Python 3.11),
        # which the loop would take for an unreachable store: the flag ends it whatever arrives.
        while not self._closing:
            await asyncio.sleep(self._cooldown if self._down_since is not None else self._watch_every)
            try:
                async with asyncio.timeout(self._probe_timeout):
                    await self._check()
            except self._unreachable as exc:
                if self._down_since is None:
                    self._mark_down(exc)
            except Exception:  # the watch must never die of a surprise and leave the store "away"
                log.exception("checking the shared state store failed")

    async def _check(self) -> None:
        """One look: the marker (set when missing), then the recovery steps if they are due."""
        marker = await self._shared.get(_MARKER)
        if marker is None:
            await self._shared.set_if_absent(_MARKER, uuid.uuid4().hex.encode())
            marker = await self._shared.get(_MARKER)
        lost = self._marker is not None and marker != self._marker
        if lost:
            log.warning("the shared state store lost its data (restarted empty?): re-seeding from the ledger")
        if lost or self._down_since is not None:
            for callback in self._on_recovery:
                await callback(self._shared, lost)
        self._marker = marker
        self._recovered()

    def _ok(self) -> None:
        self._last_ok = time.monotonic()
        if self._probe is None:
            self._watch()

    def _recovered(self) -> None:
        if self._down_since is not None:
            log.warning("shared state store is back after %.0fs", time.monotonic() - self._down_since)
            self._down_since = None
        self._last_ok = time.monotonic()

    async def get(self, key: str) -> bytes | None:
        if self._down_since is not None:
            return await self._fallback().get(key)
        try:
            value = await self._shared.get(key)
        except self._unreachable as exc:
            return await self._failed(exc).get(key)
        self._ok()
        return value

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        if self._down_since is not None:
            return await self._fallback().get_many(keys)
        try:
            values = await self._shared.get_many(keys)
        except self._unreachable as exc:
            return await self._failed(exc).get_many(keys)
        self._ok()
        return values

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        if self._down_since is not None:
            await self._fallback().set(key, value, ttl=ttl)
            return
        try:
            await self._shared.set(key, value, ttl=ttl)
        except self._unreachable as exc:
            await self._failed(exc).set(key, value, ttl=ttl)
            return
        self._ok()

    async def set_if_absent(self, key: str, value: bytes, *, ttl: float | None = None) -> bool:
        if self._down_since is not None:
            return await self._fallback().set_if_absent(key, value, ttl=ttl)
        try:
            claimed = await self._shared.set_if_absent(key, value, ttl=ttl)
        except self._unreachable as exc:
            return await self._failed(exc).set_if_absent(key, value, ttl=ttl)
        self._ok()
        return claimed

    async def delete(self, key: str) -> None:
        if self._down_since is not None:
            await self._fallback().delete(key)
            return
        try:
            await self._shared.delete(key)
        except self._unreachable as exc:
            await self._failed(exc).delete(key)
            return
        self._ok()

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        if self._down_since is not None:
            return await self._fallback().incr(key, amount, ttl=ttl)
        try:
            total = await self._shared.incr(key, amount, ttl=ttl)
        except self._unreachable as exc:
            return await self._failed(exc).incr(key, amount, ttl=ttl)
        self._ok()
        return total

    async def reserve(
        self, key: str, amount: int, *, limit: int, ttl: float | None = None
    ) -> tuple[bool, int]:
        if self._down_since is not None:
            return await self._fallback().reserve(key, amount, limit=limit, ttl=ttl)
        try:
            result = await self._shared.reserve(key, amount, limit=limit, ttl=ttl)
        except self._unreachable as exc:
            return await self._failed(exc).reserve(key, amount, limit=limit, ttl=ttl)
        self._ok()
        return result

    async def raise_to(self, key: str, floor: int, *, ttl: float | None = None) -> int:
        if self._down_since is not None:
            return await self._fallback().raise_to(key, floor, ttl=ttl)
        try:
            total = await self._shared.raise_to(key, floor, ttl=ttl)
        except self._unreachable as exc:
            return await self._failed(exc).raise_to(key, floor, ttl=ttl)
        self._ok()
        return total

    async def take(
        self, key: str, *, capacity: float, refill_per_second: float, amount: float = 1.0, force: bool = False
    ) -> BucketResult:
        if self._down_since is not None:
            return await self._fallback().take(
                key, capacity=capacity, refill_per_second=refill_per_second, amount=amount, force=force
            )
        try:
            result = await self._shared.take(
                key, capacity=capacity, refill_per_second=refill_per_second, amount=amount, force=force
            )
        except self._unreachable as exc:
            return await self._failed(exc).take(
                key, capacity=capacity, refill_per_second=refill_per_second, amount=amount, force=force
            )
        self._ok()
        return result

    async def admit(self, takes: list[Take], holds: list[Hold]) -> GateResult:
        if self._down_since is not None:
            return await self._fallback().admit(takes, holds)
        try:
            result = await self._shared.admit(takes, holds)
        except self._unreachable as exc:
            return await self._failed(exc).admit(takes, holds)
        self._ok()
        return result

    async def settle(self, settles: list[Settle], corrections: list[Take]) -> None:
        if self._down_since is not None:
            await self._fallback().settle(settles, corrections)
            return
        try:
            await self._shared.settle(settles, corrections)
        except self._unreachable as exc:
            await self._failed(exc).settle(settles, corrections)
            return
        self._ok()

    async def set_holds(self, holds: dict[str, int]) -> None:
        if self._down_since is not None:
            await self._fallback().set_holds(holds)
            return
        try:
            await self._shared.set_holds(holds)
        except self._unreachable as exc:
            await self._failed(exc).set_holds(holds)
            return
        self._ok()

    async def ping(self) -> None:
        await self._shared.ping()

    async def aclose(self) -> None:
        self._closing = True
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.wait({self._probe}, timeout=5)
        await self._shared.aclose()
        await self._local.aclose()

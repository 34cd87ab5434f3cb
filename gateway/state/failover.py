"""What happens when Redis is unreachable: `fail_open` keeps serving on this replica's own memory
(limits and budgets become per-replica until Redis is back, and the log says so loudly), `fail_closed`
refuses requests rather than enforce nothing shared. `/readyz` reports which state is in force."""

from __future__ import annotations

import logging
import time

from gateway.errors import GatewayError
from gateway.state.memory import MemoryStateStore
from gateway.state.store import BucketResult, StateStore

log = logging.getLogger("tollgate.state")

_UNREACHABLE: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError)
_LOG_EVERY_SECONDS = 10.0


class StateUnavailable(GatewayError):
    status = 503
    type = "gateway_error"
    code = "state_unavailable"


class FallbackStateStore:
    """Wraps the shared store; every operation falls back to local memory (or fails) when it is away."""

    def __init__(
        self, shared: StateStore, *, fail_open: bool, unreachable: tuple[type[BaseException], ...] = ()
    ) -> None:
        """`unreachable`: the shared store's own errors that mean "away" (redis-py's are not
        builtin ConnectionError/TimeoutError); passed in so this module does not import its client."""
        self._shared = shared
        self._unreachable = (*unreachable, *_UNREACHABLE)
        self._local = MemoryStateStore()
        self._fail_open = fail_open
        self._down_since: float | None = None
        self._last_log = 0.0

    @property
    def degraded(self) -> bool:
        return self._down_since is not None

    def describe(self) -> str:
        if self._down_since is None:
            return "shared"
        return (
            "per-replica fallback (shared store unreachable)"
            if self._fail_open
            else "unavailable (fail-closed)"
        )

    def _failed(self, exc: BaseException) -> StateStore:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        if now - self._last_log > _LOG_EVERY_SECONDS:
            self._last_log = now
            mode = (
                "falling back to per-replica limits" if self._fail_open else "refusing requests (fail-closed)"
            )
            log.error("shared state store unreachable (%s): %s", type(exc).__name__, mode)
        if not self._fail_open:
            raise StateUnavailable(
                "the shared state store is unreachable and this gateway fails closed"
            ) from exc
        return self._local

    def _recovered(self) -> None:
        if self._down_since is not None:
            log.warning("shared state store is back after %.0fs", time.monotonic() - self._down_since)
            self._down_since = None

    async def get(self, key: str) -> bytes | None:
        try:
            value = await self._shared.get(key)
        except self._unreachable as exc:
            return await self._failed(exc).get(key)
        self._recovered()
        return value

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        try:
            values = await self._shared.get_many(keys)
        except self._unreachable as exc:
            return await self._failed(exc).get_many(keys)
        self._recovered()
        return values

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        try:
            await self._shared.set(key, value, ttl=ttl)
        except self._unreachable as exc:
            await self._failed(exc).set(key, value, ttl=ttl)
            return
        self._recovered()

    async def set_if_absent(self, key: str, value: bytes, *, ttl: float | None = None) -> bool:
        try:
            claimed = await self._shared.set_if_absent(key, value, ttl=ttl)
        except self._unreachable as exc:
            return await self._failed(exc).set_if_absent(key, value, ttl=ttl)
        self._recovered()
        return claimed

    async def delete(self, key: str) -> None:
        try:
            await self._shared.delete(key)
        except self._unreachable as exc:
            await self._failed(exc).delete(key)
            return
        self._recovered()

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        try:
            total = await self._shared.incr(key, amount, ttl=ttl)
        except self._unreachable as exc:
            return await self._failed(exc).incr(key, amount, ttl=ttl)
        self._recovered()
        return total

    async def reserve(
        self, key: str, amount: int, *, limit: int, ttl: float | None = None
    ) -> tuple[bool, int]:
        try:
            result = await self._shared.reserve(key, amount, limit=limit, ttl=ttl)
        except self._unreachable as exc:
            return await self._failed(exc).reserve(key, amount, limit=limit, ttl=ttl)
        self._recovered()
        return result

    async def take(
        self, key: str, *, capacity: float, refill_per_second: float, amount: float = 1.0, force: bool = False
    ) -> BucketResult:
        try:
            result = await self._shared.take(
                key, capacity=capacity, refill_per_second=refill_per_second, amount=amount, force=force
            )
        except self._unreachable as exc:
            return await self._failed(exc).take(
                key, capacity=capacity, refill_per_second=refill_per_second, amount=amount, force=force
            )
        self._recovered()
        return result

    async def ping(self) -> None:
        await self._shared.ping()

    async def aclose(self) -> None:
        await self._shared.aclose()
        await self._local.aclose()

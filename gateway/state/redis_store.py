"""The production `StateStore`: Redis shared by every replica, each compound operation one Lua script."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.state.store import BucketResult

# What means "Redis is away" (not a bad command): the fallback store's cue to fail open or closed.
UNREACHABLE: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError)

_INCR = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1])
  if ARGV[2] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  return tonumber(ARGV[1])
end
return redis.call('INCRBY', KEYS[1], ARGV[1])
"""

_RESERVE = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local amount = tonumber(ARGV[1])
if current + amount > tonumber(ARGV[2]) then return {0, current} end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], amount)
  if ARGV[3] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
else
  redis.call('INCRBY', KEYS[1], amount)
end
return {1, current + amount}
"""

_RAISE_TO = """
local current = tonumber(redis.call('GET', KEYS[1]) or '')
local floor = tonumber(ARGV[1])
if current == nil then
  redis.call('SET', KEYS[1], floor)
  if ARGV[2] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  return floor
end
if current < floor then
  redis.call('SET', KEYS[1], floor, 'KEEPTTL')
  return floor
end
return current
"""

# Token bucket on the server's clock, so replicas with skewed clocks still agree.
_TAKE = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local amount = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(state[1]) or capacity
local stamp = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - stamp) * rate)
local allowed = 0
if tokens >= amount then allowed = 1 end
if allowed == 1 or ARGV[4] == '1' then tokens = math.min(capacity, tokens - amount) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(now))
if rate > 0 then redis.call('PEXPIRE', KEYS[1], math.ceil((capacity / rate + 1) * 1000)) end
return {allowed, tostring(tokens)}
"""


def _bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _ms(ttl: float | None) -> str:
    return "" if ttl is None else str(max(1, int(ttl * 1000)))


class RedisStateStore:
    def __init__(self, client: Redis, *, prefix: str = "tollgate:") -> None:
        self._redis = client
        self._prefix = prefix
        self._incr = client.register_script(_INCR)
        self._reserve = client.register_script(_RESERVE)
        self._take = client.register_script(_TAKE)
        self._raise_to = client.register_script(_RAISE_TO)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "tollgate:") -> RedisStateStore:
        # After a Redis restart every pooled connection is dead, and redis-py retries a command on a
        # dead connection only for errors listed in retry_on_error: without it a burst right after
        # the restart failed on each of them (29 of 30 scripts, measured), which fail-closed turns
        # into 503s. One immediate retry on a fresh connection; timeouts are not retried (Retry's
        # default errors include TimeoutError: a hung Redis then cost two socket timeouts a call).
        client = Redis.from_url(
            url,
            socket_connect_timeout=2.0,
            socket_timeout=2.0,
            health_check_interval=15,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            retry_on_error=[RedisConnectionError],
        )
        return cls(client, prefix=prefix)

    def _k(self, key: str) -> str:
        return self._prefix + key

    async def get(self, key: str) -> bytes | None:
        return _bytes(await self._redis.get(self._k(key)))

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        if not keys:
            return []
        return [_bytes(v) for v in await self._redis.mget([self._k(k) for k in keys])]

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        await self._redis.set(self._k(key), value, px=None if ttl is None else max(1, int(ttl * 1000)))

    async def set_if_absent(self, key: str, value: bytes, *, ttl: float | None = None) -> bool:
        px = None if ttl is None else max(1, int(ttl * 1000))
        return bool(await self._redis.set(self._k(key), value, nx=True, px=px))

    async def delete(self, key: str) -> None:
        await self._redis.delete(self._k(key))

    async def incr(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        return int(await self._incr(keys=[self._k(key)], args=[amount, _ms(ttl)]))

    async def reserve(
        self, key: str, amount: int, *, limit: int, ttl: float | None = None
    ) -> tuple[bool, int]:
        reserved, total = await self._reserve(keys=[self._k(key)], args=[amount, limit, _ms(ttl)])
        return bool(reserved), int(total)

    async def raise_to(self, key: str, floor: int, *, ttl: float | None = None) -> int:
        return int(await self._raise_to(keys=[self._k(key)], args=[floor, _ms(ttl)]))

    async def take(
        self, key: str, *, capacity: float, refill_per_second: float, amount: float = 1.0, force: bool = False
    ) -> BucketResult:
        args = [capacity, refill_per_second, amount, "1" if force else "0"]
        result: list[Any] = await self._take(keys=[self._k(key)], args=args)
        allowed, remaining = bool(result[0]), float(result[1])
        wait = 0.0
        if not allowed:
            wait = float("inf") if refill_per_second <= 0 else (amount - remaining) / refill_per_second
        return BucketResult(allowed=allowed, remaining=remaining, retry_after=wait)

    async def ping(self) -> None:
        await self._redis.ping()

    async def aclose(self) -> None:
        await self._redis.aclose()

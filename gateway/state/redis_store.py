"""The production `StateStore`: Redis shared by every replica, each compound operation one Lua script."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.state.store import BucketResult, GateResult, Hold, Settle, Take

log = logging.getLogger("tollgate.state")

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

# A request's rate-limit takes and budget holds in one script: every bucket refilled and checked,
# every budget summed (settled counter + the holds of replicas still alive), then all applied or
# none. KEYS: the buckets, then per budget its counter and its holds hash, then the live replicas
# (a zset: replica -> deadline in ms). ARGV: replica, hold TTL ms, #takes, #holds, then per take
# capacity, rate, amount, then per hold amount, limit, hard (1/0), counter TTL ms (or '').
_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local nowms = math.floor(now * 1000)
local me = ARGV[1]
local nt, nh = tonumber(ARGV[3]), tonumber(ARGV[4])
local live = KEYS[#KEYS]
local ok = 1
local out = {0}
local tokens = {}
for i = 1, nt do
  local a = 4 + (i - 1) * 3
  local capacity, rate, amount = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local state = redis.call('HMGET', KEYS[i], 'tokens', 'stamp')
  local tk = tonumber(state[1]) or capacity
  local stamp = tonumber(state[2]) or now
  tk = math.min(capacity, tk + math.max(0, now - stamp) * rate)
  tokens[i] = tk
  if tk < amount then ok = 0 end
  out[#out + 1] = tostring(tk)
end
if nh > 0 then redis.call('ZREMRANGEBYSCORE', live, '-inf', nowms) end
local hb = 4 + nt * 3
for j = 1, nh do
  local ck, hk = KEYS[nt + 2 * j - 1], KEYS[nt + 2 * j]
  local a = hb + (j - 1) * 4
  local amount, limit = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local total = tonumber(redis.call('GET', ck) or '0')
  local fields = redis.call('HGETALL', hk)
  for f = 1, #fields, 2 do
    if fields[f] == me or redis.call('ZSCORE', live, fields[f]) then
      total = total + tonumber(fields[f + 1])
    else
      redis.call('HDEL', hk, fields[f])
    end
  end
  if total + amount > limit and ARGV[a + 3] == '1' then ok = 0 end
  out[#out + 1] = total
end
if nh > 0 then redis.call('ZADD', live, nowms + tonumber(ARGV[2]), me) end
if ok == 1 then
  for i = 1, nt do
    local a = 4 + (i - 1) * 3
    local capacity, rate = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    local left = math.min(capacity, tokens[i] - tonumber(ARGV[a + 3]))
    redis.call('HSET', KEYS[i], 'tokens', tostring(left), 'stamp', tostring(now))
    if rate > 0 then redis.call('PEXPIRE', KEYS[i], math.ceil((capacity / rate + 1) * 1000)) end
    out[1 + i] = tostring(left)
  end
  for j = 1, nh do
    local hk = KEYS[nt + 2 * j]
    local a = hb + (j - 1) * 4
    redis.call('HINCRBY', hk, me, ARGV[a + 1])
    if ARGV[a + 4] ~= '' then redis.call('PEXPIRE', hk, ARGV[a + 4]) end
  end
end
out[1] = ok
return out
"""

# After the answer: this replica's holds given back (never below zero: a hold pruned while this
# replica looked dead is not taken twice), the costs counted, the buckets corrected by force.
# KEYS: per settle its counter and holds hash, then the correction buckets. ARGV: replica, #settles,
# #corrections, per settle held, cost, counter TTL ms (or ''), per correction capacity, rate, amount.
_SETTLE = """
local me = ARGV[1]
local ns, nc = tonumber(ARGV[2]), tonumber(ARGV[3])
for j = 1, ns do
  local ck, hk = KEYS[2 * j - 1], KEYS[2 * j]
  local a = 3 + (j - 1) * 3
  local left = tonumber(redis.call('HGET', hk, me) or '0') - tonumber(ARGV[a + 1])
  if left > 0 then redis.call('HSET', hk, me, left) else redis.call('HDEL', hk, me) end
  local cost = tonumber(ARGV[a + 2])
  if cost ~= 0 then
    if redis.call('EXISTS', ck) == 0 then
      redis.call('SET', ck, cost)
      if ARGV[a + 3] ~= '' then redis.call('PEXPIRE', ck, ARGV[a + 3]) end
    else
      redis.call('INCRBY', ck, cost)
    end
  end
end
if nc > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  local cb = 3 + ns * 3
  for i = 1, nc do
    local key = KEYS[2 * ns + i]
    local a = cb + (i - 1) * 3
    local capacity, rate, amount = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local state = redis.call('HMGET', key, 'tokens', 'stamp')
    local tokens = tonumber(state[1]) or capacity
    local stamp = tonumber(state[2]) or now
    tokens = math.min(capacity, math.min(capacity, tokens + math.max(0, now - stamp) * rate) - amount)
    redis.call('HSET', key, 'tokens', tostring(tokens), 'stamp', tostring(now))
    if rate > 0 then redis.call('PEXPIRE', key, math.ceil((capacity / rate + 1) * 1000)) end
  end
end
return 1
"""

# This replica is alive for another TTL: its holds count in every budget until then.
_ALIVE = """
local t = redis.call('TIME')
local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], nowms + tonumber(ARGV[2]), ARGV[1])
return 1
"""

# How long a replica's budget holds outlive its last sign of life, and how often it gives one.
HOLD_TTL_SECONDS = 5.0
_HEARTBEAT_SECONDS = 1.0
_HOLDS = ":holds"
_LIVE = "state:replicas"


def _bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _ms(ttl: float | None) -> str:
    return "" if ttl is None else str(max(1, int(ttl * 1000)))


class RedisStateStore:
    def __init__(
        self, client: Redis, *, prefix: str = "tollgate:", hold_ttl: float = HOLD_TTL_SECONDS
    ) -> None:
        self._redis = client
        self._prefix = prefix
        # Who this process is in the holds hashes: its holds lapse `hold_ttl` after it stops beating.
        self._replica = uuid.uuid4().hex
        self._hold_ttl_ms = str(max(1, int(hold_ttl * 1000)))
        self._heartbeat_every = min(_HEARTBEAT_SECONDS, hold_ttl / 4)
        self._live = prefix + _LIVE
        self._heart: asyncio.Task[None] | None = None
        self._admit = client.register_script(_ADMIT)
        self._settle = client.register_script(_SETTLE)
        self._alive = client.register_script(_ALIVE)
        self._incr = client.register_script(_INCR)
        self._reserve = client.register_script(_RESERVE)
        self._take = client.register_script(_TAKE)
        self._raise_to = client.register_script(_RAISE_TO)

    @classmethod
    def from_url(
        cls, url: str, *, prefix: str = "tollgate:", hold_ttl: float = HOLD_TTL_SECONDS
    ) -> RedisStateStore:
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
        return cls(client, prefix=prefix, hold_ttl=hold_ttl)

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

    async def admit(self, takes: list[Take], holds: list[Hold]) -> GateResult:
        prefix = self._prefix
        keys = [prefix + t.key for t in takes]
        args: list[Any] = [self._replica, self._hold_ttl_ms, len(takes), len(holds)]
        for t in takes:
            args += (t.capacity, t.refill_per_second, t.amount)
        for h in holds:
            counter = prefix + h.key
            keys += (counter, counter + _HOLDS)
            args += (h.amount, h.limit, "1" if h.hard else "0", _ms(h.ttl))
        keys.append(self._live)
        if holds and self._heart is None:
            self._heart = asyncio.get_running_loop().create_task(self._beat(), name="tollgate-state-holds")
        out: list[Any] = await self._admit(keys=keys, args=args)
        allowed = out[0] == 1
        buckets = []
        for i, t in enumerate(takes, 1):
            tokens = float(out[i])
            ok = allowed or tokens >= t.amount
            wait = 0.0
            if not ok:
                rate = t.refill_per_second
                wait = float("inf") if rate <= 0 else (t.amount - tokens) / rate
            buckets.append(BucketResult(allowed=ok, remaining=tokens, retry_after=wait))
        n = len(takes) + 1
        totals = [int(v) for v in out[n:]]
        fits = [total + h.amount <= h.limit for total, h in zip(totals, holds, strict=True)]
        return GateResult(allowed=allowed, buckets=buckets, fits=fits, totals=totals)

    async def settle(self, settles: list[Settle], corrections: list[Take]) -> None:
        if not settles and not corrections:
            return
        prefix = self._prefix
        keys: list[str] = []
        args: list[Any] = [self._replica, len(settles), len(corrections)]
        for s in settles:
            counter = prefix + s.key
            keys += (counter, counter + _HOLDS)
            args += (s.held, s.cost, _ms(s.ttl))
        for c in corrections:
            keys.append(prefix + c.key)
            args += (c.capacity, c.refill_per_second, c.amount)
        await self._settle(keys=keys, args=args)

    async def set_holds(self, holds: dict[str, int]) -> None:
        if not holds:
            return
        async with self._redis.pipeline(transaction=True) as pipe:
            for key, amount in holds.items():
                name = self._k(key) + _HOLDS
                if amount > 0:
                    pipe.hset(name, self._replica, amount)
                else:
                    pipe.hdel(name, self._replica)
            await pipe.execute()

    async def _beat(self) -> None:
        """While this process lives, it says so: a replica killed mid-request stops, and the holds
        it left lapse within the hold TTL (summed no more by any replica's next reservation)."""
        while True:
            await asyncio.sleep(self._heartbeat_every)
            try:
                await self._alive(keys=[self._live], args=[self._replica, self._hold_ttl_ms])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # away for now: the next beat tries again
                log.debug("holds heartbeat failed: %s", exc)

    async def ping(self) -> None:
        await self._redis.ping()

    async def aclose(self) -> None:
        if self._heart is not None:
            self._heart.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heart
            self._heart = None
            # Gone on purpose: say so now rather than in a hold TTL (not waited on if Redis is away).
            with contextlib.suppress(Exception):
                async with asyncio.timeout(0.5):
                    await self._redis.zrem(self._live, self._replica)
        await self._redis.aclose()

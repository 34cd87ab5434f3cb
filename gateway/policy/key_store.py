"""Virtual keys in the database, and the short-lived per-process cache that keeps lookups off it.

Every request looks its key up, so lookups are answered from a cache of recent results (found and
not found alike) that each replica trusts for `cache_ttl` seconds (default 1). No replica tells
another about a revocation: each simply stops trusting what it cached within a second, which bounds
how long a revoked key keeps working without any cross-replica messaging. Expiry is checked on every
lookup, so a cached key stops working the moment it expires. The cache is bounded, and keys that
were not found are kept apart from keys that were, so a flood of random keys can evict only other
misses, never the keys real clients are using. Concurrent misses for the same key share one query.

If the database fails, a lookup answers from a cached result up to `stale_if_error` seconds old
(logged), else raises `KeyStoreUnavailable` (503): an outage never turns an unknown key into a
valid one.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from sqlalchemy import RowMapping, delete, insert, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.keys_schema import virtual_keys
from gateway.errors import GatewayError, InvalidRequest
from gateway.policy.keys import generate_key, hash_key, is_well_formed

log = logging.getLogger("tollgate")

KeyStatus = Literal["active", "expired", "revoked"]
# $1bn: beyond any real budget, well inside a BIGINT of nano-USD; a typo'd "1e12" is refused.
MAX_BUDGET_NANO = 10**18
MAX_RATE_LIMIT = 2**31 - 1


class KeyStoreUnavailable(GatewayError):
    status = 503
    type = "gateway_error"
    code = "auth_unavailable"


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """Everything known about a key except the key itself (and its hash, which stays in the store)."""

    id: str
    prefix: str
    team: str
    name: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    allowed_models: tuple[str, ...] | None  # None: whatever the team allows
    budget_daily_nano: int | None
    budget_monthly_nano: int | None
    rpm: int | None
    tpm: int | None
    metadata: Mapping[str, str] = field(default_factory=dict, hash=False)

    def status(self, now: datetime) -> KeyStatus:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def allows_model(self, model: str) -> bool:
        return self.allowed_models is None or model in self.allowed_models


class LookupCache:
    """Recent lookup results by key hash, with the monotonic time each was fetched."""

    def __init__(self, *, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._max = max_entries
        self._clock = clock
        self._found: OrderedDict[str, tuple[float, KeyRecord]] = OrderedDict()
        self._missing: OrderedDict[str, float] = OrderedDict()

    def get(self, key_hash: str) -> tuple[float, KeyRecord | None] | None:
        """(fetched at, record or None for "no such key"), or None when nothing is cached."""
        found = self._found.get(key_hash)
        if found is not None:
            self._found.move_to_end(key_hash)
            return found
        fetched = self._missing.get(key_hash)
        return None if fetched is None else (fetched, None)

    def put(self, key_hash: str, record: KeyRecord | None) -> None:
        now = self._clock()
        if record is None:
            self._found.pop(key_hash, None)
            _bounded_put(self._missing, key_hash, now, self._max)
        else:
            self._missing.pop(key_hash, None)
            _bounded_put(self._found, key_hash, (now, record), self._max)

    def forget(self, key_id: str) -> None:
        for key_hash in [h for h, (_, record) in self._found.items() if record.id == key_id]:
            del self._found[key_hash]

    def clear(self) -> None:
        self._found.clear()
        self._missing.clear()

    def __len__(self) -> int:
        return len(self._found) + len(self._missing)


def _bounded_put(entries: OrderedDict[str, Any], key: str, value: Any, limit: int) -> None:
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > limit:
        entries.popitem(last=False)


class KeyStore:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        cache_ttl: float = 1.0,
        cache_entries: int = 10_000,
        stale_if_error: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._ttl = cache_ttl
        self._stale_if_error = max(stale_if_error, cache_ttl)
        self._clock = clock
        self.cache = LookupCache(max_entries=cache_entries, clock=clock)
        self._inflight: dict[str, asyncio.Future[KeyRecord | None]] = {}
        # Bumped by every revocation, so a lookup that raced one does not cache what it read before.
        self._generation = 0
        self._any_exist: bool | None = None
        self._any_checked_at = 0.0
        self._any_lock = asyncio.Lock()

    async def create(
        self,
        team: str,
        name: str,
        *,
        expires_at: datetime | None = None,
        allowed_models: Sequence[str] | None = None,
        budget_daily_nano: int | None = None,
        budget_monthly_nano: int | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> tuple[str, KeyRecord]:
        """A new key for `team`: the plaintext (to show once, never stored) and its record."""
        _check_limits(team, name, allowed_models, budget_daily_nano, budget_monthly_nano, rpm, tpm)
        texts = (team, name, *(allowed_models or ()), *(metadata or {}).keys(), *(metadata or {}).values())
        if any("\x00" in text for text in texts):
            # PostgreSQL text cannot hold NUL: refuse it here rather than fail the insert.
            raise InvalidRequest("a key's team, name, models and metadata cannot contain NUL characters")
        plaintext, prefix, key_hash = generate_key()
        record = KeyRecord(
            id=f"key_{secrets.token_hex(12)}",
            prefix=prefix,
            team=team,
            name=name,
            created_at=datetime.now(UTC),
            expires_at=None if expires_at is None else _utc(expires_at),
            revoked_at=None,
            allowed_models=None if allowed_models is None else tuple(allowed_models),
            budget_daily_nano=budget_daily_nano,
            budget_monthly_nano=budget_monthly_nano,
            rpm=rpm,
            tpm=tpm,
            metadata=dict(metadata or {}),
        )
        async with self._engine.begin() as conn:
            await conn.execute(insert(virtual_keys).values(key_hash=key_hash, **to_row(record)))
        self._any_exist = True
        return plaintext, record

    async def list(self, team: str | None = None) -> builtins.list[KeyRecord]:
        """Every key (revoked and expired included, for the audit trail), oldest first."""
        if team is not None and "\x00" in team:
            return []  # no team has one (see `create`), and PostgreSQL would refuse the query
        query = select(*_RECORD_COLUMNS).order_by(virtual_keys.c.created_at, virtual_keys.c.id)
        if team is not None:
            query = query.where(virtual_keys.c.team == team)
        async with self._engine.connect() as conn:
            return [from_row(row._mapping) for row in await conn.execute(query)]

    async def get(self, key_id: str) -> KeyRecord | None:
        query = select(*_RECORD_COLUMNS).where(virtual_keys.c.id == key_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else from_row(row._mapping)

    async def delete_all(self) -> int:
        """Delete every key, revoked ones too: how a gateway with no admin key and no teams goes
        back to open mode (on its next start). Ledger rows keep the ids of the keys they name."""
        async with self._engine.begin() as conn:
            deleted = (await conn.execute(delete(virtual_keys))).rowcount
        self._generation += 1
        self.cache.clear()
        self._any_exist = None
        return int(deleted or 0)

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key for good; False when there is no such key. Revoking twice is harmless."""
        if "\x00" in key_id:
            return False  # ids are generated hex, and PostgreSQL would refuse the query
        column = virtual_keys.c
        async with self._engine.begin() as conn:
            result = await conn.execute(
                update(virtual_keys)
                .where(column.id == key_id, column.revoked_at.is_(None))
                .values(revoked_at=datetime.now(UTC))
            )
            exists = result.rowcount > 0 or (
                (await conn.execute(select(column.id).where(column.id == key_id))).first() is not None
            )
        self._generation += 1
        self.cache.forget(key_id)
        return exists

    async def lookup(self, plaintext: str) -> KeyRecord | None:
        """The record of an active key; None for unknown, expired or revoked keys."""
        record = await self.find(plaintext)
        if record is None or record.status(datetime.now(UTC)) != "active":
            return None
        return record

    async def find(self, plaintext: str) -> KeyRecord | None:
        """The record of a key whatever its status (to say *why* it is refused), else None."""
        if not is_well_formed(plaintext):
            return None
        key_hash = hash_key(plaintext)
        cached = self.cache.get(key_hash)
        age = None if cached is None else self._clock() - cached[0]
        if cached is not None and age is not None and age <= self._ttl:
            return cached[1]
        try:
            return await self._fetch_once(key_hash)
        except (SQLAlchemyError, OSError) as exc:
            if cached is not None and age is not None and age <= self._stale_if_error:
                log.warning("key store unreachable (%s); using a lookup %.1fs old", type(exc).__name__, age)
                return cached[1]
            raise KeyStoreUnavailable("cannot check API keys: the key store is unreachable") from exc

    async def any_exist(self) -> bool:
        """Whether any key was ever created (revoked ones count: revoking every key must not silently
        reopen an open-mode gateway). Once true it stays true without asking the database again.
        One query at a time: under load, callers arriving while it runs use the last answer."""
        fresh = self._any_exist is not None and self._clock() - self._any_checked_at <= self._ttl
        if self._any_exist or fresh:
            return bool(self._any_exist)
        if self._any_lock.locked() and self._any_exist is not None:
            return self._any_exist
        async with self._any_lock:
            if self._any_exist is not None and self._clock() - self._any_checked_at <= self._ttl:
                return self._any_exist
            try:
                async with self._engine.connect() as conn:
                    row = (await conn.execute(select(virtual_keys.c.id).limit(1))).first()
            except (SQLAlchemyError, OSError) as exc:
                if self._any_exist is not None:
                    return self._any_exist
                raise KeyStoreUnavailable("cannot check API keys: the key store is unreachable") from exc
            self._any_exist, self._any_checked_at = row is not None, self._clock()
            return self._any_exist

    async def _fetch_once(self, key_hash: str) -> KeyRecord | None:
        flight = self._inflight.get(key_hash)
        if flight is None:
            flight = asyncio.ensure_future(self._fetch(key_hash))
            self._inflight[key_hash] = flight
            flight.add_done_callback(lambda done: self._landed(key_hash, done))
        return await asyncio.shield(flight)

    def _landed(self, key_hash: str, flight: asyncio.Future[KeyRecord | None]) -> None:
        self._inflight.pop(key_hash, None)
        if not flight.cancelled():
            flight.exception()  # retrieved here, so an unawaited failure is not reported twice

    async def _fetch(self, key_hash: str) -> KeyRecord | None:
        generation = self._generation
        query = select(*_RECORD_COLUMNS).where(virtual_keys.c.key_hash == key_hash)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        record = None if row is None else from_row(row._mapping)
        if generation == self._generation:
            self.cache.put(key_hash, record)
        return record


# Every column but the hash: nothing read back for a record can leak it.
_RECORD_COLUMNS = [c for c in virtual_keys.c if c.name != "key_hash"]


def to_row(record: KeyRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "prefix": record.prefix,
        "team": record.team,
        "name": record.name,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "revoked_at": record.revoked_at,
        "allowed_models": None
        if record.allowed_models is None
        else orjson.dumps(list(record.allowed_models)).decode(),
        "budget_daily_nano": record.budget_daily_nano,
        "budget_monthly_nano": record.budget_monthly_nano,
        "rpm": record.rpm,
        "tpm": record.tpm,
        "metadata": orjson.dumps(dict(record.metadata)).decode(),
    }


def from_row(row: RowMapping) -> KeyRecord:
    models = row["allowed_models"]
    return KeyRecord(
        id=row["id"],
        prefix=row["prefix"],
        team=row["team"],
        name=row["name"],
        created_at=_utc(row["created_at"]),
        expires_at=None if row["expires_at"] is None else _utc(row["expires_at"]),
        revoked_at=None if row["revoked_at"] is None else _utc(row["revoked_at"]),
        allowed_models=None if models is None else tuple(orjson.loads(models)),
        budget_daily_nano=row["budget_daily_nano"],
        budget_monthly_nano=row["budget_monthly_nano"],
        rpm=row["rpm"],
        tpm=row["tpm"],
        metadata=orjson.loads(row["metadata"]),
    )


def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _check_limits(
    team: str,
    name: str,
    allowed_models: Sequence[str] | None,
    budget_daily_nano: int | None,
    budget_monthly_nano: int | None,
    rpm: int | None,
    tpm: int | None,
) -> None:
    if not team.strip():
        raise InvalidRequest("a key needs a team", param="team")
    if not name.strip():
        raise InvalidRequest("a key needs a name", param="name")
    if isinstance(allowed_models, str) or (
        allowed_models is not None and (not allowed_models or not all(m.strip() for m in allowed_models))
    ):
        raise InvalidRequest(
            "allowed_models must name at least one model (omit it for all the team allows)",
            param="allowed_models",
        )
    for param, budget in (
        ("budget_daily_usd", budget_daily_nano),
        ("budget_monthly_usd", budget_monthly_nano),
    ):
        if budget is not None and not 0 <= budget <= MAX_BUDGET_NANO:
            raise InvalidRequest("a budget is between $0 and $1,000,000,000", param=param)
    for param, limit in (("rpm", rpm), ("tpm", tpm)):
        # The columns are 32-bit integers (PostgreSQL `integer`): a larger limit cannot be stored.
        if limit is not None and not 0 < limit <= MAX_RATE_LIMIT:
            raise InvalidRequest(f"{param} must be a whole number from 1 to {MAX_RATE_LIMIT}", param=param)

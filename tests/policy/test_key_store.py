"""The key store on SQLite and PostgreSQL: round trips, revocation and expiry through the cache,
bounded negative caching, one query per burst, and an outage that never validates a key."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.database import create_engine
from gateway.errors import InvalidRequest
from gateway.policy.key_store import KeyRecord, KeyStore, KeyStoreUnavailable
from gateway.policy.keys import generate_key, hash_key

TTL = 0.2


def count_key_queries(engine: AsyncEngine) -> list[str]:
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "FROM virtual_keys" in statement:
            seen.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    return seen


async def test_a_created_key_is_found_with_everything_it_was_given(engine: AsyncEngine, team: str) -> None:
    store = KeyStore(engine, cache_ttl=TTL)
    expires = datetime.now(UTC) + timedelta(days=30)
    plaintext, created = await store.create(
        team,
        "ci pipeline",
        expires_at=expires,
        allowed_models=["gpt-4o-mini", "llama"],
        budget_daily_nano=12_500_000_000,
        budget_monthly_nano=300_000_000_000,
        rpm=60,
        tpm=100_000,
        metadata={"owner": "ops@example.com"},
    )
    assert created.id.startswith("key_") and plaintext.startswith(created.prefix + "_")
    fresh = KeyStore(engine, cache_ttl=TTL)  # nothing cached: straight from the database
    found = await fresh.lookup(plaintext)
    assert found == created
    assert found is not None
    assert found.allowed_models == ("gpt-4o-mini", "llama") and found.allows_model("llama")
    assert not found.allows_model("gpt-4o")
    assert found.metadata == {"owner": "ops@example.com"}
    assert found.created_at.tzinfo is not None and found.expires_at is not None
    assert abs(found.expires_at - expires) < timedelta(milliseconds=1)
    assert found.status(datetime.now(UTC)) == "active"


async def test_listing_never_carries_a_key_or_its_hash(engine: AsyncEngine, team: str) -> None:
    store = KeyStore(engine)
    first, _ = await store.create(team, "one")
    await store.create(team, "two", allowed_models=None)
    await store.create(team + "-other", "elsewhere")
    listed = await store.list(team)
    assert [r.name for r in listed] == ["one", "two"]
    assert listed[1].allowed_models is None
    assert {f.name for f in dataclasses.fields(KeyRecord)}.isdisjoint(
        {"key", "key_hash", "hash", "plaintext"}
    )
    assert first not in repr(listed) and hash_key(first) not in repr(listed)
    assert {r.team for r in await store.list()} >= {team, team + "-other"}


async def test_revoking_refuses_the_key_at_once_here_and_within_the_ttl_elsewhere(
    engine: AsyncEngine, team: str
) -> None:
    here = KeyStore(engine, cache_ttl=TTL)
    elsewhere = KeyStore(engine, cache_ttl=TTL)  # another replica: no messages between them
    plaintext, record = await here.create(team, "soon revoked")
    assert await here.lookup(plaintext) == record
    assert await elsewhere.lookup(plaintext) == record

    assert await here.revoke(record.id) is True
    revoked_at = time.monotonic()
    assert await here.lookup(plaintext) is None  # the replica that revoked forgets at once
    found = await here.find(plaintext)
    assert found is not None and found.status(datetime.now(UTC)) == "revoked"

    while await elsewhere.lookup(plaintext) is not None:
        assert time.monotonic() - revoked_at < TTL + 0.15, "a revoked key outlived the cache TTL"
        await asyncio.sleep(0.02)
    assert await here.revoke(record.id) is True  # twice is harmless
    assert await here.revoke("key_does_not_exist") is False


async def test_an_expired_key_stops_working_even_while_cached(engine: AsyncEngine, team: str) -> None:
    store = KeyStore(engine, cache_ttl=60)
    plaintext, _ = await store.create(team, "short", expires_at=datetime.now(UTC) + timedelta(seconds=0.3))
    assert await store.lookup(plaintext) is not None
    await asyncio.sleep(0.35)
    assert await store.lookup(plaintext) is None
    found = await store.find(plaintext)
    assert found is not None and found.status(datetime.now(UTC)) == "expired"


async def test_unknown_and_malformed_keys_are_refused_and_junk_never_reaches_the_database(
    engine: AsyncEngine,
) -> None:
    store = KeyStore(engine, cache_ttl=TTL)
    queries = count_key_queries(engine)
    for junk in ("", "Bearer", "sk-proj-abc", "tg-short_x", "tg-ab12cd34_" + "!" * 43):
        assert await store.lookup(junk) is None
    assert queries == [] and len(store.cache) == 0
    unknown = generate_key()[0]
    assert await store.lookup(unknown) is None
    assert await store.lookup(unknown) is None  # the miss is cached too
    assert len(queries) == 1


async def test_a_flood_of_random_keys_cannot_grow_the_cache_or_evict_real_keys(
    engine: AsyncEngine, team: str
) -> None:
    store = KeyStore(engine, cache_ttl=60, cache_entries=8)
    plaintext, record = await store.create(team, "busy")
    assert await store.lookup(plaintext) == record
    for _ in range(100):
        assert await store.lookup(generate_key()[0]) is None
    assert len(store.cache) <= 8 + 1
    queries = count_key_queries(engine)
    assert await store.lookup(plaintext) == record
    assert queries == []  # still answered from the cache


async def test_a_burst_of_lookups_for_one_key_makes_one_query(engine: AsyncEngine, team: str) -> None:
    plaintext, record = await KeyStore(engine).create(team, "bursty")
    store = KeyStore(engine, cache_ttl=60)
    queries = count_key_queries(engine)
    results = await asyncio.gather(*(store.lookup(plaintext) for _ in range(50)))
    assert results == [record] * 50
    assert len(queries) == 1


async def test_an_outage_uses_recent_answers_and_never_admits_an_unchecked_key(
    engine: AsyncEngine, team: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = KeyStore(engine, cache_ttl=0.05, stale_if_error=30)
    plaintext, record = await store.create(team, "steady")
    assert await store.lookup(plaintext) == record
    await asyncio.sleep(0.1)

    async def unreachable(_key_hash: str) -> KeyRecord | None:
        raise OSError("connection refused")

    monkeypatch.setattr(store, "_fetch", unreachable)
    assert await store.lookup(plaintext) == record  # stale but recent: still served
    with pytest.raises(KeyStoreUnavailable) as refused:
        await store.lookup(generate_key()[0])
    assert refused.value.status == 503


async def test_open_mode_ends_with_the_first_key(empty_sqlite_url: str) -> None:
    engine = create_engine(empty_sqlite_url)
    try:
        store = KeyStore(engine, cache_ttl=TTL)
        other_replica = KeyStore(engine, cache_ttl=TTL)
        assert await store.any_exist() is False
        assert await other_replica.any_exist() is False
        _, record = await store.create("t", "first")
        assert await store.any_exist() is True
        await asyncio.sleep(TTL + 0.05)
        assert await other_replica.any_exist() is True
        await store.revoke(record.id)
        assert await KeyStore(engine).any_exist() is True  # revoking every key does not reopen
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("team", " "),
        ("name", ""),
        ("allowed_models", []),
        ("allowed_models", "gpt-4o"),
        ("budget_daily_nano", -1),
        ("budget_monthly_nano", 10**19),
        ("rpm", 0),
        ("tpm", -5),
    ],
)
async def test_nonsense_limits_are_refused(field: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"team": "t", "name": "n", field: value}
    engine = create_engine("sqlite+aiosqlite://")  # never reached: refused before any query
    try:
        with pytest.raises(InvalidRequest):
            await KeyStore(engine).create(kwargs.pop("team"), kwargs.pop("name"), **kwargs)
    finally:
        await engine.dispose()

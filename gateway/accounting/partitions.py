"""Daily partitions of `requests` on PostgreSQL: the writer makes them ahead, retention drops them whole.

A row whose day has no partition yet lands in `requests_default`. PostgreSQL then refuses to make
that day's partition ("updated partition constraint for default partition would be violated"), and
every later day would go to the default partition too; so a day with rows waiting there is made by
moving those rows into a new table and attaching it, in one transaction. Bounds are UTC midnights
written with their offset, so a server whose TimeZone is not UTC still cuts days where the names
(and the UTC rollups) say. DDL on the parent waits at most `LOCK_TIMEOUT` for its lock: a long
report on `requests` must not queue every insert behind a partition being made; it is retried on
the writer's next maintenance round, days ahead of need.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger("tollgate.ledger")

DAYS_AHEAD = 3
LOCK_TIMEOUT = "2s"
DEFAULT_PARTITION = "requests_default"
_PREFIX = "requests_p"
_ADVISORY_LOCK = 0x7011_6A7F  # replicas (and one process's own rounds) must not race on one table


def partition_name(day: date) -> str:
    return f"{_PREFIX}{day:%Y%m%d}"


def partition_day(name: str) -> date | None:
    """The day a daily partition holds; None for any other table (an archive someone attached)."""
    if not name.startswith(_PREFIX):
        return None
    try:
        return datetime.strptime(name.removeprefix(_PREFIX), "%Y%m%d").date()
    except ValueError:
        return None


def _bound(day: date) -> str:
    return f"{day.isoformat()} 00:00:00+00"


async def is_partitioned(conn: AsyncConnection) -> bool:
    """`requests` is a partitioned table (it is from migration 0001 on; a hand-made plain one is not)."""
    if conn.dialect.name != "postgresql":
        return False
    found = await conn.execute(
        text("SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('requests')")
    )
    return found.first() is not None


async def daily_partitions(conn: AsyncConnection) -> dict[date, str]:
    """The daily partitions attached to `requests` now, by day."""
    names = await conn.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass('requests')"
        )
    )
    return {day: name for name in names.scalars() if (day := partition_day(name)) is not None}


async def ensure_partitions(
    engine: AsyncEngine, *, today: date | None = None, days_ahead: int = DAYS_AHEAD
) -> list[str]:
    """Yesterday's, today's and the next `days_ahead` days' partitions exist; returns those made."""
    if engine.dialect.name != "postgresql":
        return []
    today = today or datetime.now(UTC).date()
    made: list[str] = []
    try:
        async with engine.begin() as conn:
            if not await is_partitioned(conn):
                return []
            await conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
            await conn.execute(text(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK})"))
            existing = await daily_partitions(conn)
            for offset in range(-1, days_ahead + 1):
                day = today + timedelta(days=offset)
                if day not in existing:
                    await _make_partition(conn, day)
                    made.append(partition_name(day))
    except DBAPIError as exc:
        if not _gave_way(exc):
            raise
        log.warning("ledger: partition upkeep gave way to a lock held on requests; retrying next round")
        return []
    if made:
        log.info("ledger: made daily partitions %s", ", ".join(made))
    return made


async def _make_partition(conn: AsyncConnection, day: date) -> None:
    name, low, high = partition_name(day), _bound(day), _bound(day + timedelta(days=1))
    bounds = f"FOR VALUES FROM ('{low}') TO ('{high}')"
    waiting = await conn.execute(
        text(f"SELECT 1 FROM {DEFAULT_PARTITION} WHERE created_at >= :low AND created_at < :high LIMIT 1"),
        {"low": datetime.fromisoformat(low), "high": datetime.fromisoformat(high)},
    )
    if waiting.first() is None:
        await conn.execute(text(f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF requests {bounds}"))
        return
    # Rows of this day are in the default partition: move them into the new table, then attach it
    # (which builds its primary key and indexes from the parent's).
    await conn.execute(text(f"CREATE TABLE {name} (LIKE requests INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"))
    moved = await conn.execute(
        text(
            f"WITH moved AS (DELETE FROM {DEFAULT_PARTITION} WHERE created_at >= :low AND created_at < :high "
            f"RETURNING *) INSERT INTO {name} SELECT * FROM moved"
        ),
        {"low": datetime.fromisoformat(low), "high": datetime.fromisoformat(high)},
    )
    await conn.execute(text(f"ALTER TABLE requests ATTACH PARTITION {name} {bounds}"))
    log.warning("ledger: moved %d rows of %s out of the default partition into %s", moved.rowcount, day, name)


async def drop_partitions_before(engine: AsyncEngine, cutoff: date) -> list[str]:
    """Drop whole daily partitions of days before `cutoff`, and delete the default partition's rows
    older than it; returns the partitions dropped."""
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
            await conn.execute(text(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK})"))
            old = sorted(name for day, name in (await daily_partitions(conn)).items() if day < cutoff)
            for name in old:
                await conn.execute(text(f"DROP TABLE {name}"))
            await conn.execute(
                text(f"DELETE FROM {DEFAULT_PARTITION} WHERE created_at < :cutoff"),
                {"cutoff": datetime.fromisoformat(_bound(cutoff))},
            )
    except DBAPIError as exc:
        if not _gave_way(exc):
            raise
        log.warning("ledger retention: gave way to a lock held on requests; retrying next round")
        return []
    if old:
        log.info("ledger retention: dropped %d daily partitions before %s", len(old), cutoff)
    return old


def _gave_way(exc: DBAPIError) -> bool:
    """The lock timeout ran out (55P03, lock_not_available): someone holds `requests`; try later."""
    return getattr(exc.orig, "sqlstate", None) == "55P03"

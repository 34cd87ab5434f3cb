"""Keeping the ledger from bloating: daily partitions on PostgreSQL (created ahead, dropped whole
past the retention), batched deletes on SQLite. Rollups are kept; they are small."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import Table, delete, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.schema import request_bodies, requests

log = logging.getLogger("tollgate.ledger")

_DAYS_AHEAD = 3
_PARTITION_LOCK = 0x7011_6A7F
_DELETE_BATCH = 5000


def partition_name(day: date) -> str:
    return f"requests_p{day:%Y%m%d}"


async def ensure_partitions(engine: AsyncEngine, *, today: date | None = None) -> None:
    """Create today's partition and the next few, so no row lands in the default partition."""
    if engine.dialect.name != "postgresql":
        return
    today = today or datetime.now(UTC).date()
    async with engine.begin() as conn:
        # Replicas (and this process's own maintenance task) must not race to create one table.
        await conn.execute(text(f"SELECT pg_advisory_xact_lock({_PARTITION_LOCK})"))
        for offset in range(-1, _DAYS_AHEAD + 1):
            day = today + timedelta(days=offset)
            await conn.execute(
                text(
                    f"CREATE TABLE IF NOT EXISTS {partition_name(day)} PARTITION OF requests "
                    f"FOR VALUES FROM ('{day.isoformat()}') TO ('{(day + timedelta(days=1)).isoformat()}')"
                )
            )


async def apply_retention(engine: AsyncEngine, *, retention_days: int, now: datetime | None = None) -> int:
    """Remove request rows (and stored bodies) older than the retention; returns rows or
    partitions removed."""
    cutoff = (now or datetime.now(UTC)) - timedelta(days=retention_days)
    removed = await _delete_in_batches(engine, request_bodies, cutoff)
    if engine.dialect.name == "postgresql":
        return removed + await _drop_old_partitions(engine, cutoff.date())
    return removed + await _delete_in_batches(engine, requests, cutoff)


async def _drop_old_partitions(engine: AsyncEngine, cutoff: date) -> int:
    async with engine.begin() as conn:
        names = (
            (
                await conn.execute(
                    text(
                        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                        "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'requests' "
                        "AND c.relname LIKE 'requests_p%'"
                    )
                )
            )
            .scalars()
            .all()
        )
        dropped = 0
        for name in names:
            day = datetime.strptime(name.removeprefix("requests_p"), "%Y%m%d").date()
            if day < cutoff:
                await conn.execute(text(f"DROP TABLE {name}"))
                dropped += 1
        # Stragglers in the default partition are deleted row by row.
        await conn.execute(
            text("DELETE FROM requests_default WHERE created_at < :cutoff"), {"cutoff": cutoff}
        )
    if dropped:
        log.info("ledger retention: dropped %d daily partitions before %s", dropped, cutoff)
    return dropped


async def _delete_in_batches(engine: AsyncEngine, table: Table, cutoff: datetime) -> int:
    removed = 0
    while True:
        async with engine.begin() as conn:
            ids = select(table.c.id).where(table.c.created_at < cutoff).limit(_DELETE_BATCH)
            result = await conn.execute(delete(table).where(table.c.id.in_(ids.scalar_subquery())))
        removed += result.rowcount
        if result.rowcount < _DELETE_BATCH:
            return removed

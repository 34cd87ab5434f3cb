"""Keeping the ledger from bloating: daily partitions dropped whole past the retention on
PostgreSQL (`gateway.accounting.partitions`), batched deletes on SQLite or an unpartitioned table.
Rollups are kept; they are small."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Table, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.partitions import (
    drop_partitions_before,
    ensure_partitions,
    is_partitioned,
    partition_name,
)
from gateway.accounting.schema import request_bodies, requests
from gateway.accounting.stored_responses import stored_responses

__all__ = ["apply_retention", "ensure_partitions", "partition_name"]  # the partition helpers' old home

_DELETE_BATCH = 5000


async def apply_retention(engine: AsyncEngine, *, retention_days: int, now: datetime | None = None) -> int:
    """Remove request rows (and stored bodies and responses) older than the retention; returns the
    rows deleted plus the daily partitions dropped."""
    cutoff = (now or datetime.now(UTC)) - timedelta(days=retention_days)
    removed = await _delete_in_batches(engine, request_bodies, cutoff)
    removed += await _delete_in_batches(engine, stored_responses, cutoff)  # `store: true` responses
    async with engine.connect() as conn:
        partitioned = await is_partitioned(conn)
    if partitioned:
        # Whole days only: a partition is dropped once its last row is past the retention.
        return removed + len(await drop_partitions_before(engine, cutoff.date()))
    return removed + await _delete_in_batches(engine, requests, cutoff)


async def _delete_in_batches(engine: AsyncEngine, table: Table, cutoff: datetime) -> int:
    removed = 0
    while True:
        async with engine.begin() as conn:
            ids = select(table.c.id).where(table.c.created_at < cutoff).limit(_DELETE_BATCH)
            result = await conn.execute(delete(table).where(table.c.id.in_(ids.scalar_subquery())))
        removed += result.rowcount
        if result.rowcount < _DELETE_BATCH:
            return removed

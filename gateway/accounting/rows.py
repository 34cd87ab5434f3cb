"""Writing ledger rows: insert what is new (a replayed row is skipped by its primary key) and add
exactly those rows to the daily rollups, in one transaction."""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from typing import Any

import orjson
from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from gateway.accounting.record import BODY_KEY
from gateway.accounting.schema import (
    ROLLUP_DIMENSIONS,
    ROLLUP_MEASURES,
    TAG_MEASURES,
    request_bodies,
    requests,
    spend_daily,
    spend_daily_tags,
)

# Statements are built once per dialect and reused: building the rollup upsert (an ON CONFLICT with
# a SET expression per measure) took milliseconds, on the event loop, for every batch; a statement
# object that is reused also keeps its memoized cache key, so SQLAlchemy's compiled cache hits at once.


def _insert(dialect: str, table: Table) -> Any:
    return (postgresql if dialect == "postgresql" else sqlite).insert(table)


@cache
def _insert_new(dialect: str) -> Any:
    """Rows that may be there already (a replay): skip those, and say which ids were new."""
    return (
        _insert(dialect, requests)
        .on_conflict_do_nothing(index_elements=["id", "created_at"])
        .returning(requests.c.id)
    )


@cache
def _upsert(dialect: str, table: Table, keys: tuple[str, ...], measures: tuple[str, ...]) -> Any:
    statement = _insert(dialect, table)
    return statement.on_conflict_do_update(
        index_elements=list(keys),
        set_={name: table.c[name] + statement.excluded[name] for name in measures},
    )


_PLAIN_INSERTS = {table: table.insert() for table in (requests, request_bodies)}


async def insert_rows(conn: AsyncConnection, rows: list[dict[str, Any]], *, first_write: bool = False) -> int:
    """Insert rows not already present; returns how many were new. Call inside a transaction.

    `first_write`: rows straight from the request path, which cannot be in the table yet, take a
    plain INSERT (a duplicate would raise IntegrityError; the caller then retries without the flag).
    Replayed rows may be there already: ON CONFLICT DO NOTHING RETURNING tells which were new, and
    only those reach the rollups.
    """
    if not rows:
        return 0
    bodies = {row["id"]: row.pop(BODY_KEY) for row in rows if BODY_KEY in row}
    if first_write:
        await conn.execute(_PLAIN_INSERTS[requests], rows)
        fresh = rows
    else:
        result = await conn.execute(_insert_new(conn.dialect.name), rows)
        new_ids = set(result.scalars().all())
        fresh = [row for row in rows if row["id"] in new_ids]
    await _add_to_rollups(conn, fresh)
    kept = [
        {"id": row["id"], "created_at": row["created_at"], "team": row["team"], **bodies[row["id"]]}
        for row in fresh
        if row["id"] in bodies
    ]
    if kept:
        await conn.execute(_PLAIN_INSERTS[request_bodies], kept)
    return len(fresh)


def _measures(row: dict[str, Any]) -> dict[str, int]:
    return {
        "requests": 1,
        "errors": 1 if row["status"] >= 400 else 0,
        "prompt_tokens": row["prompt_tokens"],
        "cached_tokens": row["cached_tokens"],
        "cache_write_tokens": row["cache_write_tokens"],
        "completion_tokens": row["completion_tokens"],
        "reasoning_tokens": row["reasoning_tokens"],
        "input_cost_nano": row["input_cost_nano"],
        "output_cost_nano": row["output_cost_nano"],
        "cost_nano": row["cost_nano"],
        "baseline_cost_nano": row["baseline_cost_nano"] or 0,
        "cache_saving_nano": row.get("cache_saving_nano") or 0,
        "context_tokens_removed": row.get("context_tokens_removed") or 0,
        "context_saving_nano": row.get("context_saving_nano") or 0,
    }


async def _add_to_rollups(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    daily: dict[tuple[Any, ...], dict[str, int]] = defaultdict(lambda: dict.fromkeys(ROLLUP_MEASURES, 0))
    tagged: dict[tuple[Any, ...], dict[str, int]] = defaultdict(lambda: dict.fromkeys(TAG_MEASURES, 0))
    for row in rows:
        day = row["created_at"].date()
        measures = _measures(row)
        totals = daily[(day, *(row[d] or "" for d in ROLLUP_DIMENSIONS))]
        for name, value in measures.items():
            totals[name] += value
        for tag in orjson.loads(row["tags"]) if row["tags"] else ():
            tag_totals = tagged[(day, str(tag), row["team"] or "")]
            for name in TAG_MEASURES:
                tag_totals[name] += measures[name]
    await upsert_totals(conn, spend_daily, ("day", *ROLLUP_DIMENSIONS), ROLLUP_MEASURES, daily)
    await upsert_totals(conn, spend_daily_tags, ("day", "tag", "team"), TAG_MEASURES, tagged)


async def upsert_totals(
    conn: AsyncConnection,
    table: Table,
    keys: tuple[str, ...],
    measures: tuple[str, ...],
    groups: dict[tuple[Any, ...], dict[str, int]],
) -> None:
    """Add each group's measures to its rollup row, creating the row if it is new."""
    if not groups:
        return
    # In key order: every writer (replica) then locks rollup rows in one order, so two batches adding
    # to the same rows wait for each other instead of deadlocking.
    values = [dict(zip(keys, key, strict=True)) | totals for key, totals in sorted(groups.items())]
    await conn.execute(_upsert(conn.dialect.name, table, keys, measures), values)

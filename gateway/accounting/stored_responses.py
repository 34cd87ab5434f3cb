"""Responses kept for `store: true` (the Responses API's default): the response object, its input
items and the conversation so far as chat messages, which a later `previous_response_id` continues.

Scoped to the team that created them: another team's id reads as absent (404), as does one past
`ledger.retention_days` (the ledger's retention deletes them; reads also refuse rows it has not
reached yet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Column, DateTime, Index, String, Table, Text, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from gateway.accounting.schema import metadata

stored_responses = Table(
    "stored_responses",
    metadata,
    Column("id", String(64), primary_key=True),  # `resp_…`, made by the gateway
    Column("team", String(128), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("model", String(256), nullable=False),
    Column("response", Text, nullable=False),  # the response object, JSON
    Column("input_items", Text, nullable=False),  # JSON array, each item with its id
    Column("context", Text, nullable=False),  # the conversation as chat messages, JSON array
    Index("ix_stored_responses_created_at", "created_at"),
)


# What the gateway's ids look like (`resp_` and hex); anything else is no stored response, and never
# reaches the database (PostgreSQL refuses a NUL in a query's text with an error, not an empty answer).
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    context: list[dict[str, Any]]


def _owned(response_id: str, team: str | None, *, retention_days: int | None) -> ColumnElement[bool]:
    """This team's response of that id, unless past the retention (None: kept for ever)."""
    same_team = stored_responses.c.team.is_(None) if team is None else stored_responses.c.team == team
    owned = (stored_responses.c.id == response_id) & same_team
    if retention_days is None:
        return owned
    return owned & (stored_responses.c.created_at >= datetime.now(UTC) - timedelta(days=retention_days))


async def put(
    engine: AsyncEngine,
    *,
    team: str | None,
    response: dict[str, Any],
    input_items: list[dict[str, Any]],
    context: list[dict[str, Any]],
) -> None:
    row = {
        "id": response["id"],
        "team": team,
        "created_at": datetime.fromtimestamp(response["created_at"], UTC),
        "model": str(response.get("model") or "")[:256],
        "response": orjson.dumps(response).decode(),
        "input_items": orjson.dumps(input_items).decode(),
        "context": orjson.dumps(context).decode(),
    }
    async with engine.begin() as conn:
        await conn.execute(stored_responses.insert().values(**row))


async def get(
    engine: AsyncEngine, response_id: str, *, team: str | None, retention_days: int | None
) -> StoredResponse | None:
    if not _ID.fullmatch(response_id):
        return None
    columns = (stored_responses.c.response, stored_responses.c.input_items, stored_responses.c.context)
    async with engine.connect() as conn:
        result = await conn.execute(
            select(*columns).where(_owned(response_id, team, retention_days=retention_days))
        )
        row = result.first()
    if row is None:
        return None
    return StoredResponse(response_id, orjson.loads(row[0]), orjson.loads(row[1]), orjson.loads(row[2]))


async def remove(
    engine: AsyncEngine, response_id: str, *, team: str | None, retention_days: int | None
) -> bool:
    if not _ID.fullmatch(response_id):
        return False
    async with engine.begin() as conn:
        result = await conn.execute(
            delete(stored_responses).where(_owned(response_id, team, retention_days=retention_days))
        )
    return bool(result.rowcount)

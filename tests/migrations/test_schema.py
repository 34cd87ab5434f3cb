"""Alembic's migrations produce exactly the schema the code writes to, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

import gateway.batches.schema  # noqa: F401 - the Batch API tables join the metadata
from gateway.accounting.database import create_engine, run_migrations
from gateway.accounting.schema import metadata
from migrations.env_filters import include_name


def schema_drift(url: str) -> tuple[list[Any], set[str]]:
    def compare(conn: Connection) -> tuple[list[Any], set[str]]:
        context = MigrationContext.configure(conn, opts={"include_name": include_name})
        diff = compare_metadata(context, metadata)
        return diff, set(inspect(conn).get_table_names())

    async def run() -> tuple[list[Any], set[str]]:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(compare)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_sqlite_schema_matches_code(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}"
    run_migrations(url)
    run_migrations(url)  # idempotent: a second start changes nothing
    diff, tables = schema_drift(url)
    assert diff == []
    assert {"requests", "alembic_version"} <= tables


@pytest.mark.postgres
def test_postgres_schema_matches_code(postgres_url: str) -> None:
    diff, tables = schema_drift(postgres_url)
    assert diff == []
    assert "requests" in tables

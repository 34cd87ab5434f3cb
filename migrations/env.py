"""Alembic runs here, online only, over the async engine Tollgate itself uses."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from gateway.accounting.schema import metadata
from migrations.env_filters import include_name

# Replicas starting together must not race each other through the same migration.
_PG_MIGRATION_LOCK = 0x7011_6A7E


def _migrate(connection: Connection) -> None:
    postgres = connection.dialect.name == "postgresql"
    if postgres:
        connection.execute(text(f"SELECT pg_advisory_lock({_PG_MIGRATION_LOCK})"))
    try:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            include_name=include_name,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
    finally:
        if postgres:
            connection.execute(text(f"SELECT pg_advisory_unlock({_PG_MIGRATION_LOCK})"))


async def _run() -> None:
    url = context.config.get_main_option("sqlalchemy.url")
    assert url, "sqlalchemy.url must be set by the caller"
    engine = create_async_engine(url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_migrate)
            await conn.commit()
    finally:
        await engine.dispose()


asyncio.run(_run())

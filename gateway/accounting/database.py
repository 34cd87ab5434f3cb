"""Database URLs, engines and migrations: SQLite (embedded default) or PostgreSQL (production)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

import migrations

DATABASE_URL_ENV = "TOLLGATE_DATABASE_URL"


def resolve_database_url(configured: str, environ: Mapping[str, str]) -> str:
    """The environment wins over the file; plain driver names get their async driver."""
    return normalize_url(environ.get(DATABASE_URL_ENV) or configured)


def normalize_url(url: str) -> str:
    for plain, driver in (
        ("postgresql://", "postgresql+asyncpg://"),
        ("postgres://", "postgresql+asyncpg://"),
        ("sqlite://", "sqlite+aiosqlite://"),
    ):
        if url.startswith(plain):
            return driver + url[len(plain) :]
    return url


def create_engine(url: str) -> AsyncEngine:
    # Fail fast when the database is away, so the ledger spools instead of hanging requests' rows.
    kwargs: dict[str, Any] = {"pool_pre_ping": True, "connect_args": {"timeout": 5, "command_timeout": 30}}
    if url.startswith("sqlite"):
        kwargs = {"connect_args": {"timeout": 30}}
    engine = create_async_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the dashboard read while the writer writes; NORMAL is durable across app crashes.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


async def ping(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))


def run_migrations(url: str, revision: str = "head") -> None:
    """Bring the schema to `revision` with Alembic; safe to run from several replicas at once."""
    from alembic import command
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    command.upgrade(cfg, revision)

"""Key stores on SQLite and the real PostgreSQL, one engine per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.database import create_engine, run_migrations


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def sqlite_engine(sqlite_url: str) -> AsyncIterator[AsyncEngine]:
    """For tests of what sits on the store (auth, routes): the store itself runs on both databases."""
    engine = create_engine(sqlite_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def empty_sqlite_url(tmp_path: Path) -> str:
    """A database with the schema and no keys at all (open mode's starting point)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}"
    run_migrations(url)
    return url


@pytest.fixture
def team() -> str:
    """A team of its own, so tests sharing a database never see each other's keys."""
    return f"team-{uuid.uuid4().hex[:8]}"

"""Real PostgreSQL and Redis for tests: present on developer machines and in CI.

Under CI=true a missing service fails the test; elsewhere it skips with the reason.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

POSTGRES_URL = os.environ.get(
    "TOLLGATE_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("TOLLGATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def unavailable(service: str, reason: str) -> None:
    message = f"{service} is not reachable ({reason}); start it or set TOLLGATE_TEST_{service.upper()}_URL"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true: {message}")
    pytest.skip(message)


@contextmanager
def scratch_postgres_database() -> Iterator[str]:
    """A throwaway database on the test server, dropped afterwards, so runs never see each other's rows."""
    import asyncpg
    from sqlalchemy.engine import make_url

    base = make_url(POSTGRES_URL)
    name = f"tollgate_test_{uuid.uuid4().hex[:12]}"
    dsn = base.set(drivername="postgresql").render_as_string(hide_password=False)

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(dsn, timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    try:
        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as exc:
        unavailable("postgres", f"{type(exc).__name__}: {exc}")
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def require_redis() -> str:
    """The test Redis URL, after checking the server answers."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        unavailable("redis", f"{type(exc).__name__}: {exc}")
    finally:
        client.close()
    return REDIS_URL

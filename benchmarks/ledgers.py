"""Throwaway ledger databases (a SQLite file or a fresh PostgreSQL database) and their row counts.

Every run gets an empty ledger so "one row per request" can be checked exactly: the bench counts
what it sent through the gateway and compares it with `SELECT count(*) FROM requests`.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # type: ignore[import-untyped]

DEFAULT_POSTGRES_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass
class Ledger:
    """One empty ledger: what the gateway config points at and how to count its rows."""

    kind: str  # "sqlite" or "postgresql"
    url: str  # SQLAlchemy URL for the gateway config
    sqlite_path: Path | None = None
    postgres_dsn: str | None = None  # plain asyncpg DSN of the throwaway database
    postgres_admin_dsn: str | None = None
    postgres_db: str | None = None

    @property
    def label(self) -> str:
        return "SQLite" if self.kind == "sqlite" else "PostgreSQL"

    async def count_rows(self) -> int:
        if self.sqlite_path is not None:
            return await asyncio.to_thread(_sqlite_count, self.sqlite_path)
        assert self.postgres_dsn is not None
        conn = await asyncpg.connect(self.postgres_dsn, timeout=10)
        try:
            count: int = await conn.fetchval("SELECT count(*) FROM requests")
            return count
        finally:
            await conn.close()

    async def wait_for_rows(self, expected: int, timeout_s: float = 10.0) -> tuple[int, float]:
        """Poll until the batched writer caught up (or the timeout); returns (rows, seconds waited)."""
        start = time.monotonic()
        rows = -1
        while True:
            with contextlib.suppress(sqlite3.Error, asyncpg.PostgresError, OSError):
                rows = await self.count_rows()
            waited = time.monotonic() - start
            if rows >= expected or waited >= timeout_s:
                return rows, waited
            await asyncio.sleep(0.05)

    async def drop(self) -> None:
        """Remove a throwaway PostgreSQL database (the SQLite file goes with the temp directory)."""
        if self.postgres_admin_dsn is None or self.postgres_db is None:
            return
        conn = await asyncpg.connect(self.postgres_admin_dsn, timeout=10)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{self.postgres_db}" WITH (FORCE)')
        finally:
            await conn.close()
        self.postgres_db = None


def sqlite_ledger(workdir: Path) -> Ledger:
    path = workdir / "ledger.db"
    return Ledger(kind="sqlite", url=f"sqlite+aiosqlite:///{path}", sqlite_path=path)


async def postgres_reachable(admin_dsn: str) -> str | None:
    """None when PostgreSQL answers, else why not (shown in the report)."""
    try:
        conn = await asyncpg.connect(admin_dsn, timeout=3)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


async def postgres_ledger(admin_dsn: str) -> Ledger:
    """CREATE DATABASE tollgate_bench_<random>; the caller drops it with `Ledger.drop`."""
    name = f"tollgate_bench_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(admin_dsn, timeout=10)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    parts = urlsplit(admin_dsn)
    dsn = urlunsplit(parts._replace(path=f"/{name}"))
    url = "postgresql+asyncpg://" + dsn.split("://", 1)[1]
    return Ledger(
        kind="postgresql",
        url=url,
        postgres_dsn=dsn,
        postgres_admin_dsn=admin_dsn,
        postgres_db=name,
    )


def _sqlite_count(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        (count,) = conn.execute("SELECT count(*) FROM requests").fetchone()
        return int(count)
    finally:
        conn.close()

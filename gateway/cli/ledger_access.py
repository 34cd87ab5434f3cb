"""The ledger as the command line opens it: a database that is missing, unreachable or not migrated
is one line saying which and how to fix it, never a traceback; and a SQLite file that does not
exist is never created (aiosqlite creates an empty one on connect, which then hides the mistake)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import pool
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import create_async_engine

import migrations

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

POINT_ELSEWHERE = "point --config or TOLLGATE_DATABASE_URL at your gateway's database"
# What a failed connect can raise, besides SQLAlchemy's own wrappers: refused sockets, unknown hosts,
# asyncpg's timeout, and a URL whose parts do not parse (a port that is not a number).
OPEN_ERRORS = (SQLAlchemyError, OSError, asyncio.TimeoutError, ValueError)


class LedgerUnavailable(Exception):
    """The database cannot serve a ledger command; the message is the whole answer (one line)."""


def parsed_url(url: str) -> URL:
    """The URL, or LedgerUnavailable saying it is malformed (without echoing it: it may hold a password)."""
    try:
        return make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise LedgerUnavailable(
            f"the database URL does not parse ({exc}): fix database.url or TOLLGATE_DATABASE_URL"
        ) from None


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; None for other databases and in-memory SQLite."""
    parsed = parsed_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    if parsed.query.get("uri") == "true":  # file: URIs say for themselves whether they create
        return None
    return Path(parsed.database)


def shown(url: str) -> str:
    """The database as the user named it: the SQLite path (with where a relative one was looked
    for), else the URL without its password."""
    path = sqlite_file(url)
    if path is None:
        return parsed_url(url).render_as_string(hide_password=True)
    named = parsed_url(url).database or ""
    return named if path.is_absolute() else f"{named} (in {Path.cwd()})"


def require_file(url: str) -> None:
    """Refuse a SQLite database that does not exist yet: it is a typo or the wrong directory, and
    opening it would leave an empty file behind."""
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise LedgerUnavailable(
            f"no database at {shown(url)}: run tollgate in the directory your gateway runs in, "
            f"{POINT_ELSEWHERE}, or create a new one with `tollgate migrate`"
        )


def require_ledger(url: str) -> None:
    """The database exists, answers and is at this Tollgate's schema; else LedgerUnavailable."""
    require_file(url)
    head = _head_revision()
    try:
        current = asyncio.run(_current_revision(url))
    except OPEN_ERRORS as exc:
        raise LedgerUnavailable(
            f"cannot open the database {shown(url)}: {reason(exc)}; {POINT_ELSEWHERE}"
        ) from None
    if current == head:
        return
    if current is None:
        raise LedgerUnavailable(
            f"{shown(url)} has no Tollgate ledger (not migrated): run `tollgate migrate`, "
            f"or {POINT_ELSEWHERE}"
        )
    if current in _known_revisions():
        raise LedgerUnavailable(
            f"{shown(url)} has ledger schema {current}, this Tollgate needs {head}: run `tollgate migrate`"
        )
    raise LedgerUnavailable(
        f"{shown(url)} has ledger schema {current}, newer than this Tollgate knows ({head}): "
        "upgrade Tollgate to the gateway's version"
    )


def migrate(url: str) -> None:
    """Bring the database to this Tollgate's schema (creating a SQLite file is the point here, but
    not its directory); LedgerUnavailable when it cannot be reached or its schema is unknown."""
    from alembic.util import CommandError

    from gateway.accounting.database import run_migrations

    path = sqlite_file(url)
    if path is not None and not path.parent.is_dir():
        raise LedgerUnavailable(f"cannot create {shown(url)}: there is no directory {path.parent}")
    try:
        run_migrations(url)
    except CommandError as exc:  # a revision this Tollgate does not have: the database is newer
        raise LedgerUnavailable(f"cannot migrate {shown(url)}: {reason(exc)}; upgrade Tollgate") from None
    except OPEN_ERRORS as exc:
        raise LedgerUnavailable(f"cannot migrate {shown(url)}: {reason(exc)}") from None


def reason(exc: BaseException) -> str:
    """The first line of what went wrong, without SQLAlchemy's SQL echo and background link."""
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip().splitlines()[0] if str(original).strip() else type(original).__name__
    return text


async def _current_revision(url: str) -> str | None:
    # A plain engine: the gateway's adds SQLite pragmas that would switch a stranger's file to WAL.
    engine = create_async_engine(url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_revision_of)
    finally:
        await engine.dispose()


def _revision_of(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def _script() -> ScriptDirectory:
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    return ScriptDirectory.from_config(cfg)


def _head_revision() -> str | None:
    return _script().get_current_head()


def _known_revisions() -> set[str]:
    return {revision.revision for revision in _script().walk_revisions()}

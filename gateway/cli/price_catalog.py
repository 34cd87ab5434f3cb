"""`tollgate prices update` and `tollgate prices list`: newer prices stored in the database as a catalog
version, which every replica picks up, and the versions there are; and which catalog the other
commands (`prices MODEL`, `reprice`) price with."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

import httpx
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from gateway.accounting import catalogs
from gateway.accounting.database import create_engine, resolve_database_url, run_migrations
from gateway.config.schema import DatabaseConfig, PricingConfig
from pricing.catalog import PriceCatalog
from pricing.table import PriceTable, TableError, parse_table

COMMANDS = frozenset({"update", "list"})
MAX_TABLE_BYTES = 64 * 1024 * 1024  # LiteLLM's whole table is 3.4 MB
Fetch = Callable[[str], bytes]


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], config_help: str) -> None:
    update = commands.add_parser("update", help="store a newer price table; every replica picks it up")
    update.add_argument(
        "--from", dest="source", required=True, metavar="FILE_OR_URL", help="LiteLLM's or Tollgate's table"
    )
    update.add_argument("--date", help="the day the prices were taken, YYYY-MM-DD (default: today)")
    update.add_argument(
        "--force", action="store_true", help="store a table far smaller than the one in force"
    )
    update.add_argument("--config", help=config_help)
    versions = commands.add_parser("list", help="the stored catalog versions, and which one is in force")
    versions.add_argument("--config", help=config_help)


def run(
    args: argparse.Namespace,
    database: DatabaseConfig,
    pricing: PricingConfig,
    *,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str],
    fetch: Fetch | None = None,
) -> int:
    table = None
    if args.prices_command == "update":
        try:
            data = (fetch or read_source)(args.source)
            table = parse_table(data, source=args.source, date=args.date)
        except (OSError, httpx.HTTPError) as exc:
            err.write(f"cannot read {args.source}: {exc}\n")
            return 1
        except TableError as exc:
            err.write(f"price table {args.source} not stored: {exc}\n")
            return 1
    url = resolve_database_url(database.url, environ)
    try:
        if database.auto_migrate:
            run_migrations(url)
        if table is None:
            return asyncio.run(_list(url, pricing, out))
        return asyncio.run(_update(url, table, args, pricing, out, err))
    except (SQLAlchemyError, OSError) as exc:
        shown = make_url(url).render_as_string(hide_password=True)
        err.write(f"cannot use the database {shown}: {_first_line(exc)}\n")
        return 1


def read_source(source: str) -> bytes:
    """A file's bytes, or a URL's body (the one time Tollgate fetches prices, and only when told)."""
    if not source.startswith(("http://", "https://")):
        return Path(source).read_bytes()
    with httpx.stream("GET", source, timeout=60.0, follow_redirects=True) as response:
        response.raise_for_status()
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > MAX_TABLE_BYTES:
                raise OSError(f"more than {MAX_TABLE_BYTES // 2**20} MB: not a price table")
        return bytes(body)


async def _update(
    url: str, table: PriceTable, args: argparse.Namespace, pricing: PricingConfig, out: TextIO, err: TextIO
) -> int:
    engine = create_engine(url)
    try:
        try:
            current = await catalogs.catalog_for(engine, pricing.catalog)
        except catalogs.CatalogNotFound:  # a pin not stored yet: compare with the shipped table
            current = PriceCatalog.load()
        if len(table.models) < len(current) // 2 and not args.force:
            err.write(
                f"price table {args.source} not stored: {len(table.models):,} models against "
                f"{len(current):,} in {current.version} (a truncated download?); --force stores it\n"
            )
            return 1
        version, stored = await catalogs.store(engine, table, source=args.source)
    finally:
        await engine.dispose()
    verb = "stored" if stored else "already stored, same prices:"
    out.write(
        f"{verb} {version} from {args.source}: {len(table.models):,} models "
        f"({table.priced():,} priced){_dropped(table)}\n"
        f"against {current.version}: {_changes(current, table)}\n"
    )
    if pricing.catalog == catalogs.LATEST:
        every = pricing.catalog_check_seconds
        when = f"within {every:g} s" if every else "at their next start"
        out.write(
            f"replicas price the next request with it {when}; earlier ledger rows keep their cost "
            "until `tollgate reprice`\n"
        )
    else:
        out.write(f"pricing.catalog pins {pricing.catalog}: set it to {version} or latest to use it\n")
    return 0


def _dropped(table: PriceTable) -> str:
    if not table.dropped_fields:
        return ""
    return f"; {table.dropped_fields:,} fields Tollgate does not read were dropped"


def _changes(current: PriceCatalog, table: PriceTable) -> str:
    before, after = current.entries, table.models
    added = sum(1 for key in after if key not in before)
    removed = sum(1 for key in before if key not in after)
    changed = sum(1 for key, entry in after.items() if key in before and before[key] != entry)
    return f"{added:,} models added, {removed:,} removed, {changed:,} changed"


async def _list(url: str, pricing: PricingConfig, out: TextIO) -> int:
    engine = create_engine(url)
    try:
        shipped = PriceCatalog.load()
        stored = await catalogs.versions(engine)
        try:
            wanted = await catalogs.wanted_version(engine, pricing.catalog, shipped=shipped.version)
        except catalogs.CatalogNotFound as exc:
            wanted, problem = "", str(exc)
        else:
            problem = ""
    finally:
        await engine.dispose()
    rows = [
        (row.version, f"{row.created_at:%Y-%m-%d %H:%M}", f"{row.models:,}", row.source) for row in stored
    ]
    rows.append((shipped.version, "shipped", f"{len(shipped):,}", "this release's pricing/data"))
    in_force = wanted or shipped.version
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        mark = "*" if row[0] == in_force and not problem else " "
        out.write(f"{mark} {row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]}\n")
    out.write(f"pricing.catalog: {pricing.catalog}" + (f" ({problem})\n" if problem else "\n"))
    return 0


def catalog_in_force(
    database: DatabaseConfig, pricing: PricingConfig, *, environ: Mapping[str, str], err: TextIO
) -> PriceCatalog:
    """What a gateway on this config would price with now; the shipped table when the database
    holds nothing newer, or cannot be read (said on `err`). Never creates a database."""
    url = resolve_database_url(database.url, environ)
    if not pricing.use_catalog or _missing_sqlite_file(url):
        return PriceCatalog.load()

    async def read() -> PriceCatalog:
        engine = create_engine(url)
        try:
            return await catalogs.catalog_for(engine, pricing.catalog)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(read())
    except (catalogs.CatalogNotFound, SQLAlchemyError, OSError) as exc:
        err.write(
            f"note: the database's price catalogs are out of reach ({_first_line(exc)}): shipped table\n"
        )
        return PriceCatalog.load()


def _missing_sqlite_file(url: str) -> bool:
    parsed = make_url(url)
    database = parsed.database or ""
    return (
        parsed.get_backend_name() == "sqlite"
        and database not in ("", ":memory:")
        and not Path(database).exists()
    )


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__

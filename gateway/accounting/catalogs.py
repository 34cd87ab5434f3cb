"""Price catalog versions stored in the database, so one `tollgate prices update` reprices every
replica without an upgrade, and which version a replica should price with.

A version is stored once (its id is derived from its prices, so storing the same table twice is a
no-op) as Tollgate's table JSON, zlib-compressed: about 90 kB a version (1.7 MB of JSON). The
package's own table is never stored; `shipped` names it, and `latest` falls back to it while the
database holds none.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Column, DateTime, Integer, LargeBinary, String, Table, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.schema import metadata
from pricing.catalog import PriceCatalog
from pricing.table import PriceTable, TableError, parse_table

LATEST = "latest"
SHIPPED = "shipped"

price_catalogs = Table(
    "price_catalogs",
    metadata,
    Column("version", String(128), primary_key=True),  # what ledger rows' `price_version` names
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("source", String(1024), nullable=False),  # the file or URL it was read from
    Column("models", Integer, nullable=False),
    Column("body", LargeBinary, nullable=False),  # zlib(Tollgate's table JSON)
)


class CatalogNotFound(LookupError):
    """A pinned version the database does not hold."""


@dataclass(frozen=True, slots=True)
class StoredCatalog:
    version: str
    created_at: datetime
    source: str
    models: int


async def store(engine: AsyncEngine, table: PriceTable, *, source: str) -> tuple[str, bool]:
    """Store `table` as a new version: (its version, True); or, when a version with the same prices
    is stored already (whatever its date), (that version, False)."""
    row = {
        "version": table.version,
        "created_at": datetime.now(UTC),
        "source": source[:1024],
        "models": len(table.models),
        "body": zlib.compress(table.to_json(), 6),
    }
    same_prices = price_catalogs.c.version.endswith(f"+sha256:{table.digest[:8]}", autoescape=True)
    try:
        async with engine.begin() as conn:
            if existing := await conn.scalar(select(price_catalogs.c.version).where(same_prices).limit(1)):
                return str(existing), False
            await conn.execute(price_catalogs.insert().values(**row))
    except IntegrityError:  # another process stored the same prices a moment earlier
        return table.version, False
    return table.version, True


async def versions(engine: AsyncEngine) -> list[StoredCatalog]:
    """Every stored version, newest first."""
    columns = [price_catalogs.c[name] for name in ("version", "created_at", "source", "models")]
    async with engine.connect() as conn:
        result = await conn.execute(select(*columns).order_by(*_NEWEST_FIRST))
        return [StoredCatalog(*row) for row in result]


async def wanted_version(engine: AsyncEngine, pin: str, *, shipped: str) -> str | None:
    """The version `pricing.catalog: <pin>` means now; None for the shipped table (whose version
    is `shipped`). One indexed read: cheap enough for every replica to ask every few seconds."""
    if pin in (SHIPPED, shipped):
        return None
    async with engine.connect() as conn:
        if pin == LATEST:
            return await conn.scalar(select(price_catalogs.c.version).order_by(*_NEWEST_FIRST).limit(1))
        found = await conn.scalar(select(price_catalogs.c.version).where(price_catalogs.c.version == pin))
    if found is None:
        raise CatalogNotFound(f"pricing.catalog pins {pin!r}, which the database does not hold")
    return str(found)


async def load(engine: AsyncEngine, version: str) -> PriceTable:
    async with engine.connect() as conn:
        body = await conn.scalar(select(price_catalogs.c.body).where(price_catalogs.c.version == version))
    if body is None:
        raise CatalogNotFound(f"no price catalog {version!r} in the database")
    try:
        # ~50 ms of CPU for LiteLLM's whole table: off the event loop, which keeps serving meanwhile.
        return await asyncio.to_thread(_parse, body, version)
    except (zlib.error, TableError) as exc:
        raise CatalogNotFound(f"price catalog {version!r} in the database is unreadable: {exc}") from exc


def _parse(body: bytes, version: str) -> PriceTable:
    return parse_table(zlib.decompress(body), source=f"database {version}")


async def catalog_for(engine: AsyncEngine, pin: str, *, shipped: PriceCatalog | None = None) -> PriceCatalog:
    """The catalog `pin` means now: a stored version, or the shipped table."""
    shipped = shipped or PriceCatalog.load()
    version = await wanted_version(engine, pin, shipped=shipped.version)
    return shipped if version is None else PriceCatalog.from_table(await load(engine, version))


_NEWEST_FIRST = (price_catalogs.c.created_at.desc(), price_catalogs.c.version.desc())

__all__ = [
    "LATEST",
    "SHIPPED",
    "CatalogNotFound",
    "StoredCatalog",
    "catalog_for",
    "load",
    "price_catalogs",
    "store",
    "versions",
    "wanted_version",
]

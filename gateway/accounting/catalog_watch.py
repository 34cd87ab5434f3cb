"""Keeps a replica on the price catalog its config asks for: the database is read at start-up and
every `pricing.catalog_check_seconds`, and a new version is swapped in for the next request (requests
in flight finish on the prices they started with, and their rows name that version)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.catalogs import CatalogNotFound, load, wanted_version
from gateway.config.schema import PricingConfig
from pricing.catalog import PriceCatalog

log = logging.getLogger("tollgate.pricing")


class CatalogWatcher:
    """`check()` once, then again on every tick; `swap` installs a catalog, `current` names the one
    in force. A version that cannot be had (a pin the database lacks, an unreachable database) keeps
    the catalog in force and says why once, as a bad config reload does."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        shipped: PriceCatalog,
        settings: Callable[[], PricingConfig],
        current: Callable[[], str],
        swap: Callable[[PriceCatalog], None],
    ) -> None:
        self._engine = engine
        self._shipped = shipped
        self._settings = settings
        self._current = current
        self._swap = swap
        self._task: asyncio.Task[None] | None = None
        self.last_error: str | None = None

    async def start(self) -> None:
        await self.check()
        if self._settings().catalog_check_seconds > 0:
            self._task = asyncio.create_task(self._watch(), name="tollgate-catalog-watcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def check(self) -> bool:
        """Swap in the version the config means now; True when one was swapped in."""
        settings = self._settings()
        if not settings.use_catalog:
            return False
        try:
            wanted = await wanted_version(self._engine, settings.catalog, shipped=self._shipped.version)
            version = self._shipped.version if wanted is None else wanted
            if version == self._current():
                self._clear()
                return False
            catalog = (
                self._shipped if wanted is None else PriceCatalog.from_table(await load(self._engine, wanted))
            )
        except (CatalogNotFound, SQLAlchemyError, OSError) as exc:
            self._fail(str(exc) if isinstance(exc, CatalogNotFound) else f"cannot read the database: {exc}")
            return False
        previous = self._current()
        self._swap(catalog)
        self._clear()
        log.info("price catalog %s in force (was %s)", catalog.version, previous)
        return True

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._settings().catalog_check_seconds or 30.0)
            await self.check()

    def _fail(self, problem: str) -> None:
        if problem != self.last_error:
            log.error("price catalog not changed, %s keeps pricing: %s", self._current(), problem)
        self.last_error = problem

    def _clear(self) -> None:
        if self.last_error is not None:
            log.info("price catalog: %s is in force as configured", self._current())
        self.last_error = None

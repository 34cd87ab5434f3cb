"""What a running gateway holds: config, model registry, adapters, HTTP pool, database and ledger.

Created in the app's lifespan and reached through `app.state.runtime`; never a module global.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.writer import LedgerWriter
from gateway.config import Config
from gateway.database import create_engine
from gateway.models import ModelRegistry
from gateway.upstreams import build_adapters, create_http_client
from providers.adapter import Adapter


@dataclass(slots=True)
class Runtime:
    config: Config
    registry: ModelRegistry
    adapters: dict[str, Adapter]
    http: httpx.AsyncClient
    engine: AsyncEngine
    ledger: LedgerWriter

    @classmethod
    def start(cls, config: Config, *, database_url: str) -> Runtime:
        http = create_http_client()
        engine = create_engine(database_url)
        ledger = LedgerWriter(
            engine,
            batch_size=config.ledger.batch_size,
            flush_interval=config.ledger.flush_interval_ms / 1000,
        )
        ledger.start()
        return cls(
            config=config,
            registry=ModelRegistry(config),
            adapters=build_adapters(config, http),
            http=http,
            engine=engine,
            ledger=ledger,
        )

    async def stop(self) -> None:
        await self.ledger.stop()
        for adapter in self.adapters.values():
            await adapter.aclose()
        await self.http.aclose()
        await self.engine.dispose()

"""Runs the real gateway (uvicorn, real sockets) in a background thread for tests, and reads its ledger."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from sqlalchemy import select

from gateway.accounting.schema import requests
from gateway.app import create_app
from gateway.cli.sandbox_launcher import free_port
from gateway.config.schema import Config
from gateway.runtime import Runtime
from gateway.state.memory import MemoryStateStore

T = TypeVar("T")


class GatewayServer:
    def __init__(
        self, config: Config, *, environ: Mapping[str, str] | None = None, config_path: Path | None = None
    ) -> None:
        self.app = create_app(config, environ=environ or {}, config_path=config_path)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on", loop="asyncio"
            )
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._server.serve())

    def __enter__(self) -> GatewayServer:
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                return self
            if not self._thread.is_alive():
                break
            threading.Event().wait(0.01)
        raise RuntimeError("gateway did not start")

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15)
        self._loop.close()

    @property
    def runtime(self) -> Runtime:
        runtime: Runtime = self.app.state.runtime
        return runtime

    def reset_state(self) -> None:
        """Forget breaker, budget and idempotency state (the in-memory store only)."""
        store = self.runtime.store
        assert isinstance(store, MemoryStateStore), "reset_state is for the in-memory store"
        self.call(store.aclose())

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 15.0) -> T:
        """Run a coroutine on the server's own loop (the engine and ledger live there)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def ledger_rows(self) -> list[dict[str, Any]]:
        """Every ledger row, oldest first, after waiting for the writer to catch up."""

        async def fetch() -> list[dict[str, Any]]:
            await self.runtime.ledger.flush()
            async with self.runtime.engine.connect() as conn:
                result = await conn.execute(select(requests).order_by(requests.c.created_at))
                return [dict(row._mapping) for row in result]

        return self.call(fetch())

    def ledger_row(self, request_id: str) -> dict[str, Any]:
        rows = [r for r in self.ledger_rows() if request_id in (r["id"], r["client_request_id"])]
        assert len(rows) == 1, f"expected exactly one ledger row for {request_id}, found {len(rows)}"
        return rows[0]

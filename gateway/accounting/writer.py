"""The ledger writer: rows are queued on the request path and inserted in batches by one task.

A failed insert keeps its batch and tries again with backoff, so a database blip delays rows
instead of losing them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.record import RequestRecord
from gateway.accounting.schema import requests

log = logging.getLogger("tollgate.ledger")

_MAX_BACKOFF_SECONDS = 5.0


class LedgerWriter:
    def __init__(self, engine: AsyncEngine, *, batch_size: int = 500, flush_interval: float = 0.05) -> None:
        self._engine = engine
        self._batch_size = batch_size
        self._interval = flush_interval
        self._queue: asyncio.Queue[RequestRecord] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.written = 0

    def record(self, record: RequestRecord) -> None:
        """Never blocks and never raises: the request path must not wait on the database."""
        self._queue.put_nowait(record)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="tollgate-ledger-writer")

    async def flush(self) -> None:
        """Wait until every row recorded so far is in the database."""
        await self._queue.join()

    async def stop(self, *, grace: float = 10.0) -> None:
        if self._task is None:
            return
        try:
            await asyncio.wait_for(self.flush(), grace)
        except TimeoutError:
            log.error("ledger: %d rows not written at shutdown", self._queue.qsize())
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            if self._queue.qsize() < self._batch_size - 1:
                await asyncio.sleep(self._interval)
            while len(batch) < self._batch_size and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            await self._write(batch)
            for _ in batch:
                self._queue.task_done()

    async def _write(self, batch: list[RequestRecord]) -> None:
        rows = [record.to_row() for record in batch]
        backoff = 0.1
        while True:
            try:
                async with self._engine.begin() as conn:
                    await conn.execute(requests.insert(), rows)
            except (SQLAlchemyError, OSError) as exc:
                log.warning(
                    "ledger: insert of %d rows failed (%s); retrying in %.1fs",
                    len(rows),
                    exc,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_SECONDS)
            else:
                self.written += len(rows)
                return

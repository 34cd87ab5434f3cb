"""The ledger writer: each row is appended to the spool's journal on the request path (so it
outlives the process the moment `record` returns, before the answer's last byte leaves), queued, and
written in batches by one task, which then acknowledges it in the journal.

When the database cannot take a batch, its rows are left to the journal (the segment is replayed)
and the writer stops trying until a probe finds the database again; then the spool is replayed, the
same path a restart after a crash takes. The queue is bounded: past `max_queue` rows, a row is left
to the journal alone rather than held in memory too. With `durability="power"` the journal is also
fsynced in batches, and `record` hands back what to await before answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway.accounting.database import ping
from gateway.accounting.record import RequestRecord
from gateway.accounting.retention import apply_retention, ensure_partitions
from gateway.accounting.rows import insert_rows
from gateway.accounting.spool import Segment, Spool

log = logging.getLogger("tollgate.ledger")

# The database is away (refused, reset, timed out): spool and wait for it. Any other error is
# about the rows themselves, and waiting would not help: those rows are set aside, never lost.
_DB_ERRORS = (OperationalError, InterfaceError, DisconnectionError, PoolTimeout, OSError, TimeoutError)
_WRITE_TIMEOUT = 15.0
_REPLAY_BATCH = 1000
_MAINTENANCE_SECONDS = 3600.0


class LedgerWriter:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        spool: Spool,
        batch_size: int = 500,
        flush_interval: float = 0.05,
        max_queue: int = 100_000,
        probe_interval: float = 2.0,
        retention_days: int | None = None,
        durability: Literal["process", "power"] = "process",
    ) -> None:
        self._engine = engine
        self._spool = spool
        self._batch_size = batch_size
        self._interval = flush_interval
        self._max_queue = max_queue
        self._probe_interval = probe_interval
        self._retention_days = retention_days
        self._queue: asyncio.Queue[tuple[dict[str, Any], Segment | None]] = asyncio.Queue()
        self._power = durability == "power"
        self._unsynced: list[tuple[Segment, asyncio.Future[None]]] = []
        self._wake_sync = asyncio.Event()
        self._journal_failed = False
        self._tasks: list[asyncio.Task[None]] = []
        self._db_down = False
        self._replay_lock = asyncio.Lock()
        self._conn: AsyncConnection | None = None
        self._discarding: set[asyncio.Task[None]] = set()
        self.written = 0
        self.spooled = 0

    @property
    def spool_dir(self) -> Path:
        return self._spool.directory

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    @property
    def database_down(self) -> bool:
        return self._db_down

    def record(self, record: RequestRecord) -> Awaitable[None] | None:
        """Journal the row and queue it; never blocks on the database, never raises. Under power
        durability, returns what to await before the answer leaves (the batched fsync)."""
        row = record.to_row()
        segment = self._journal(row)
        if segment is not None and self._queue.qsize() >= self._max_queue:
            # Overload: the writer is behind by max_queue rows. The journal keeps this one.
            self._spool.settled(segment, 1, in_database=False)
            self.spooled += 1
        else:
            self._queue.put_nowait((row, segment))
        return self._synced(segment) if self._power and segment is not None else None

    def _journal(self, row: dict[str, Any]) -> Segment | None:
        try:
            segment = self._spool.write(row)
        except OSError as exc:  # disk full or gone: the row waits in memory, as it did before
            if not self._journal_failed:
                log.error("ledger: the spool refused a row (%s); rows wait in memory only", exc)
            self._journal_failed = True
            return None
        self._journal_failed = False
        return segment

    def _synced(self, segment: Segment) -> Awaitable[None]:
        waiter = asyncio.get_running_loop().create_future()
        self._unsynced.append((segment, waiter))
        self._wake_sync.set()
        return waiter

    async def prepare(self) -> None:
        """Before serving: today's partitions exist, so no row lands in the default partition.
        A database that is down now is not fatal: rows will spool until it is back."""
        try:
            await asyncio.wait_for(ensure_partitions(self._engine), 10.0)
        except Exception as exc:  # serving matters more; rows land in the default partition meanwhile
            log.warning("ledger: could not prepare partitions (%s: %s); continuing", type(exc).__name__, exc)

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._run(), name="tollgate-ledger-writer"),
                asyncio.create_task(self._maintain(), name="tollgate-ledger-maintenance"),
            ]
            if self._power:
                self._tasks.append(asyncio.create_task(self._sync(), name="tollgate-ledger-fsync"))
            self._spool.claim_orphans()  # a crash's rows: replayed by the first maintenance round

    async def flush(self) -> None:
        """Wait until every row recorded so far is in the database or the spool."""
        await self._queue.join()

    async def settle(self, *, within: float = 30.0) -> None:
        """Wait until every row is in the database: queue drained and spool replayed."""
        deadline = time.monotonic() + within
        await asyncio.wait_for(self.flush(), within)
        while self._spool.has_rows() or self._db_down:
            if time.monotonic() > deadline:
                raise TimeoutError("ledger spool not replayed in time")
            await self._recover()
            await asyncio.sleep(0.05)

    async def stop(self, *, grace: float = 10.0) -> None:
        if not self._tasks:
            return
        try:
            await asyncio.wait_for(self.flush(), grace)
        except TimeoutError:
            log.error("ledger: %d rows still queued at shutdown; the spool keeps them", self._queue.qsize())
            leftovers = [self._queue.get_nowait() for _ in range(self._queue.qsize())]
            await self._settle(leftovers, in_database=False)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for _, waiter in self._unsynced:
            if not waiter.done():
                waiter.set_result(None)
        self._unsynced = []
        self._spool.close()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 5.0)

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            if self._queue.qsize() < self._batch_size - 1:
                await asyncio.sleep(self._interval)
            while len(batch) < self._batch_size and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._settle(batch, in_database=await self._write([row for row, _ in batch]))
            except Exception:  # even the spool failed (disk full?): say so loudly, keep serving
                log.exception("ledger: %d rows could not be written nor spooled", len(batch))
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _settle(self, batch: list[tuple[dict[str, Any], Segment | None]], *, in_database: bool) -> None:
        """Acknowledge a batch in the journal: in the database, or left there for the replay. Rows
        the journal never took (a disk that refused them) are spooled the old way if need be."""
        counts: dict[Segment, int] = {}
        unjournaled = []
        for row, segment in batch:
            if segment is None:
                unjournaled.append(row)
            else:
                counts[segment] = counts.get(segment, 0) + 1
        for segment, rows in counts.items():
            self._spool.settled(segment, rows, in_database=in_database)
        if not in_database:
            self.spooled += len(batch)
            if unjournaled:
                await asyncio.to_thread(self._spool.append, unjournaled)

    async def _write(self, rows: list[dict[str, Any]]) -> bool:
        """Into the database (True), or else left to the spool (False): never dropped here."""
        if not self._db_down:
            try:
                await asyncio.wait_for(self._insert(rows, first_write=True), _WRITE_TIMEOUT)
                return True
            except Exception as exc:
                if _transient(exc):
                    log.warning(
                        "ledger: database unavailable (%s); spooling rows locally", type(exc).__name__
                    )
                    self._db_down = True
                else:
                    log.exception("ledger: the database refused a batch; spooled for a row-by-row replay")
        return False

    async def _sync(self) -> None:
        """Power durability: fsync the journal for every row waiting on it, many rows to one fsync
        (those that arrive while one runs share the next)."""
        while True:
            await self._wake_sync.wait()
            self._wake_sync.clear()
            waiting, self._unsynced = self._unsynced, []
            try:
                for segment in dict.fromkeys(s for s, _ in waiting):
                    await asyncio.to_thread(self._fsync, segment)
            except OSError as exc:  # the row is still in the page cache and the queue: answer
                log.error("ledger: fsync of the spool failed (%s)", exc)
            for _, waiter in waiting:
                if not waiter.done():
                    waiter.set_result(None)

    def _fsync(self, segment: Segment) -> None:
        if segment.synced == 0:  # a new file: its directory entry must reach the disk too
            fd = os.open(self._spool.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        segment.synced = segment.written
        segment.fsync()

    async def _insert(self, rows: list[dict[str, Any]], *, first_write: bool = False) -> None:
        if first_write:
            try:
                await self._insert_fresh(rows)
                return
            except IntegrityError:
                log.warning("ledger: a fresh batch held a row already written; inserting it row-aware")
        async with self._engine.begin() as conn:
            self.written += await insert_rows(conn, rows)

    async def _insert_fresh(self, rows: list[dict[str, Any]]) -> None:
        """Fresh batches (only ever one at a time, from `_run`) go through one connection the writer
        keeps: checking one out of the pool for each batch, with its pre-ping and its reset on
        return, cost 0.1 ms (SQLite) to 0.3 ms (PostgreSQL) of event-loop time per batch, which
        the request in flight waits behind. Any failure drops that connection; the next batch
        takes a new one."""
        conn = self._conn
        if conn is None:
            conn = self._conn = await self._engine.connect()
        try:
            async with conn.begin():
                self.written += await insert_rows(conn, [dict(r) for r in rows], first_write=True)
        except BaseException:
            self._conn = None
            self._discard(conn)
            raise

    def _discard(self, conn: AsyncConnection) -> None:
        """Invalidate a connection after a failure, in the background: a dead server must not
        hold up the writer (or a cancellation) while it is closed."""

        async def discard() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.invalidate(), 5.0)

        task = asyncio.get_running_loop().create_task(discard())
        self._discarding.add(task)
        task.add_done_callback(self._discarding.discard)

    async def _maintain(self) -> None:
        """Replays the spool after an outage (or a crash), probes the database while it is away,
        and keeps partitions and retention current."""
        next_maintenance = 0.0
        while True:
            try:
                await self._recover()
                if not self._db_down and time.monotonic() >= next_maintenance:
                    await ensure_partitions(self._engine)
                    if self._retention_days is not None:
                        await apply_retention(self._engine, retention_days=self._retention_days)
                    next_maintenance = time.monotonic() + _MAINTENANCE_SECONDS
            except _DB_ERRORS as exc:
                log.warning("ledger: maintenance failed (%s)", type(exc).__name__)
            except Exception:  # the loop must outlive any one failure
                log.exception("ledger: maintenance failed")
            await asyncio.sleep(self._probe_interval)

    async def _recover(self) -> None:
        if self._db_down:
            try:
                await asyncio.wait_for(ping(self._engine), 5.0)
            except Exception:  # still away, whatever form the refusal takes
                return
            log.info("ledger: database is back; replaying the spool")
            self._db_down = False
        if self._spool.has_rows():
            await self._replay()

    async def _replay(self) -> None:
        async with self._replay_lock:
            for path in self._spool.pending():
                rows = list(self._spool.read(path))
                for start in range(0, len(rows), _REPLAY_BATCH):
                    try:
                        await self._replay_batch(rows[start : start + _REPLAY_BATCH])
                    except Exception as exc:
                        log.warning("ledger: replay interrupted (%s); will retry", type(exc).__name__)
                        self._db_down = True
                        return
                self._spool.done(path)
                log.info("ledger: replayed %d spooled rows from %s", len(rows), path.name)

    async def _replay_batch(self, rows: list[dict[str, Any]]) -> None:
        """Insert a spooled batch; if the database refuses it while reachable, find the rows at
        fault one by one and set only those aside, so one bad row never holds up the rest."""
        try:
            await asyncio.wait_for(self._insert(rows), _WRITE_TIMEOUT)
            return
        except Exception as exc:
            if _transient(exc):
                raise
            log.warning("ledger: a spooled batch was refused (%s); retrying row by row", type(exc).__name__)
        refused = []
        for row in rows:
            try:
                await asyncio.wait_for(self._insert([row]), _WRITE_TIMEOUT)
            except Exception as exc:
                if _transient(exc):
                    raise
                refused.append(row)
        if refused:
            log.error("ledger: %d rows refused by the database; kept in a .rejected spool file", len(refused))
            await asyncio.to_thread(self._spool.reject, refused)


# PostgreSQL's own word that the server, not the rows, is the problem: connection exceptions (08),
# insufficient resources (53), shutting down or starting up (57P01-57P03: a restart), system errors
# (58), and serialization failures and deadlocks (40001, 40P01). During a restart asyncpg reports
# these as plain DBAPIErrors; taken for the rows' fault, a replay set good rows aside as rejected.
_TRANSIENT_SQLSTATES = ("08", "53", "57P01", "57P02", "57P03", "58", "40001", "40P01")


def _transient(exc: BaseException) -> bool:
    """The database is away or the connection broke: waiting and retrying will help."""
    if isinstance(exc, _DB_ERRORS):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    state = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    if isinstance(state, str) and state.startswith(_TRANSIENT_SQLSTATES):
        return True
    return bool(exc.connection_invalidated or _connection_broke(exc))


def _connection_broke(exc: DBAPIError) -> bool:
    # asyncpg reports a connection dropped mid-query as a bare DBAPIError; its cause says so.
    cause = exc.orig.__cause__ if exc.orig is not None else None
    return isinstance(cause, ConnectionError | OSError) or "connection was closed" in str(exc.orig)

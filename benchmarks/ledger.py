"""Ledger throughput: rows/s the writer puts into PostgreSQL (and SQLite), and what accounting costs
on the request path. Run with `python -m benchmarks.ledger`; `make bench` runs it after the main table.

The request-path figure is the work a request does itself (build its row, price it, hand it to the
queue); the writer's figure is CPU per row spent later by the batch task on the same event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.ledgers import (
    DEFAULT_POSTGRES_ADMIN_URL,
    Ledger,
    postgres_ledger,
    postgres_reachable,
    sqlite_ledger,
)
from gateway.accounting.database import create_engine, run_migrations
from gateway.accounting.record import RequestRecord
from gateway.accounting.spool import Spool
from gateway.accounting.writer import LedgerWriter
from pricing.price import Price
from usage import Usage

PRICE = Price.per_mtok(input="3", output="15", cached_input="0.30")
USAGE = Usage(prompt_tokens=1800, completion_tokens=220, cached_tokens=1024, raw={"prompt_tokens": 1800})


def make_record(i: int) -> RequestRecord:
    record = RequestRecord.begin(id=uuid.uuid4().hex, client_request_id=None)
    record.requested_model = record.model = "bench-model"
    record.provider, record.upstream_model, record.tier = "up", "bench-model", "managed"
    record.tags = ("bench",) if i % 4 == 0 else ()
    record.status = 200
    record.attempts = 1
    record.set_usage(USAGE, PRICE, baseline=PRICE, version="bench")
    record.finish()
    return record


def request_path_cost(n: int, *, durability: str = "process") -> tuple[float, float]:
    """Microseconds per request (p50, p99) to build, price and hand one row to a real writer: what
    the answer waits for (the journal's append included; under power durability, its fsync too)."""

    async def measure() -> list[int]:
        with tempfile.TemporaryDirectory() as spool:
            kwargs = {"durability": durability} if durability != "process" else {}
            writer = LedgerWriter(None, spool=Spool(Path(spool)), max_queue=n + 1, **kwargs)  # type: ignore[arg-type]
            if durability != "process":
                writer._tasks.append(asyncio.create_task(writer._sync()))
            samples = []
            for i in range(n):
                started = time.perf_counter_ns()
                synced = writer.record(make_record(i))
                if synced is not None:
                    await synced
                samples.append(time.perf_counter_ns() - started)
            for task in writer._tasks:
                task.cancel()
            # An older writer (a before/after run against main) has no journal to close.
            getattr(writer._spool, "close", lambda: None)()
            return samples

    samples = sorted(asyncio.run(measure()))
    return samples[len(samples) // 2] / 1000, samples[int(len(samples) * 0.99)] / 1000


async def writer_throughput(ledger: Ledger, rows: int) -> tuple[float, float]:
    """Rows/s from `record()` of the first row to every row committed; CPU µs per row in the writer."""
    await asyncio.to_thread(run_migrations, ledger.url)
    engine = create_engine(ledger.url)
    with tempfile.TemporaryDirectory() as spool:
        writer = LedgerWriter(engine, spool=Spool(Path(spool)), batch_size=500, flush_interval=0.05)
        await writer.prepare()
        writer.start()
        records = [make_record(i) for i in range(rows)]
        cpu_before = time.process_time()
        started = time.perf_counter()
        for record in records:
            writer.record(record)
        await writer.flush()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
        await writer.stop()
    await engine.dispose()
    counted = await ledger.count_rows()
    assert counted == rows, f"{counted} rows in the ledger, {rows} recorded"
    return rows / elapsed, cpu / rows * 1e6


def request_path_lines() -> list[tuple[str, str]]:
    p50, p99 = request_path_cost(20_000)
    lines = [("accounting on the request path, p50 / p99 (µs)", f"{p50:.1f} / {p99:.1f}")]
    if "durability" in inspect.signature(LedgerWriter).parameters:
        p50, p99 = request_path_cost(2_000, durability="power")
        lines.append(("... with ledger.durability: power, p50 / p99 (µs)", f"{p50:.1f} / {p99:.1f}"))
    return lines


async def run(rows: int, *, postgres: bool) -> list[tuple[str, str]]:
    lines = await asyncio.to_thread(request_path_lines)
    with tempfile.TemporaryDirectory() as work:
        targets = [sqlite_ledger(Path(work))]
        if postgres and (why := await postgres_reachable(DEFAULT_POSTGRES_ADMIN_URL)) is None:
            targets.append(await postgres_ledger(DEFAULT_POSTGRES_ADMIN_URL))
        elif postgres:
            lines.append(("PostgreSQL", f"skipped: {why}"))
        for ledger in targets:
            try:
                rate, cpu_per_row = await writer_throughput(ledger, rows)
                lines.append((f"writer throughput [{ledger.label}] (rows/s)", f"{rate:,.0f}"))
                lines.append((f"writer CPU per row [{ledger.label}] (µs)", f"{cpu_per_row:.1f}"))
            finally:
                if ledger.kind == "postgresql":
                    await ledger.drop()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    lines = asyncio.run(run(args.rows, postgres=not args.no_postgres))
    width = max(len(name) for name, _ in lines)
    print(f"\nledger ({args.rows:,} rows; one writer task, batches of 500)")
    for name, value in lines:
        print(f"{name.ljust(width)} | {value}")


if __name__ == "__main__":
    main()

"""The ledger writer into a daily-partitioned `requests` table against the same table unpartitioned,
on this machine's PostgreSQL, with rows the size a production gateway writes (a usage object, tags,
a route reason, keys and a user; one in fifty an error with its message).

Run with `python -m benchmarks.partitions` (not part of `make bench`). Each writer is its own
process with its own `LedgerWriter` and engine, as each gateway replica has; a round records
`--rows` rows per writer as fast as `record()` takes them and waits until all are committed.
Plain and partitioned rounds alternate (`--repeat` times) so a busy neighbour hurts both alike;
the medians are reported, with their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import orjson

from benchmarks.ledgers import DEFAULT_POSTGRES_ADMIN_URL, Ledger, postgres_ledger, postgres_reachable
from gateway.accounting.database import create_engine, run_migrations
from gateway.accounting.export import FORMATS, export_ledger
from gateway.accounting.record import RequestRecord
from gateway.accounting.spool import Spool
from gateway.accounting.writer import LedgerWriter
from pricing.price import Price
from usage import Usage

PRICE = Price.per_mtok(input="2.50", output="10", cached_input="1.25")
TEAMS = ("search", "support", "growth", "platform", "research", "billing")
MODELS = ("gpt-4o", "gpt-4o-mini", "claude-sonnet-4", "llama-3.1-70b")


def realistic_record(i: int) -> RequestRecord:
    """A row as a routed chat completion leaves it: about 1 KB on disk with its indexes' share."""
    record = RequestRecord.begin(id=uuid.uuid4().hex, client_request_id=f"req_{uuid.uuid4().hex[:24]}")
    model = MODELS[i % len(MODELS)]
    record.team, record.key_id = TEAMS[i % len(TEAMS)], f"tk_{i % 40:04d}{'a' * 12}"
    record.user = f"user-{i % 977}@example.com"
    record.tags = ("prod", f"feature-{i % 9}")
    record.requested_model, record.model, record.upstream_model = "auto", model, f"{model}-2024-08-06"
    record.provider, record.tier = ("openai" if "gpt" in model else "anthropic"), "managed"
    record.route_reason, record.route_score = "auto: classifier picked tier standard (score 0.62)", 0.62
    record.attempts, record.deployments_tried = 1, f"openai/{model}"
    record.cache_status = "miss"
    record.flags = ["pii:email"] if i % 7 == 0 else []
    prompt, cached, completion = 1200 + i % 800, 512 if i % 3 == 0 else 0, 180 + i % 300
    raw = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached, raw=raw)
    record.set_usage(usage, PRICE, baseline=PRICE, version="litellm-2026-12-01")
    if i % 50 == 0:
        record.status, record.error_type = 429, "rate_limit_exceeded"
        record.error_message = (
            "Rate limit reached for gpt-4o in organization org-xyz on tokens per min (TPM)."
        )
    else:
        record.status = 200
    record.ttft_ms, record.overhead_ms = 210.0 + i % 90, 1.4
    record.finish()
    return record


async def _one_writer(url: str, rows: int, start_at: float) -> tuple[float, float]:
    """Record `rows` rows into one writer; (seconds from first record to all committed, CPU s)."""
    engine = create_engine(url)
    records = [realistic_record(i) for i in range(rows)]
    with tempfile.TemporaryDirectory() as spool:
        writer = LedgerWriter(engine, spool=Spool(Path(spool)), batch_size=500, flush_interval=0.05)
        await writer.prepare()
        writer.start()
        await asyncio.sleep(max(0.0, start_at - time.time()))  # every writer starts together
        cpu, started = time.process_time(), time.perf_counter()
        for record in records:
            writer.record(record)
        await writer.flush()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        await writer.stop()
        assert writer.spooled == 0, f"{writer.spooled} rows spooled: the database refused or was away"
    await engine.dispose()
    return elapsed, cpu


def _writer_process(url: str, rows: int, start_at: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    out.put(asyncio.run(_one_writer(url, rows, start_at)))


def run_round(url: str, *, writers: int, rows: int) -> tuple[float, float, float]:
    """(rows/s per writer, rows/s for the database, writer CPU µs per row), medians over writers."""
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    start_at = time.time() + 4.0  # time for the processes to import and build their rows
    procs = [ctx.Process(target=_writer_process, args=(url, rows, start_at, out)) for _ in range(writers)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join()
    per_writer = statistics.median(rows / elapsed for elapsed, _ in results)
    total = rows * writers / max(elapsed for elapsed, _ in results)
    cpu = statistics.median(cpu / rows * 1e6 for _, cpu in results)
    return per_writer, total, cpu


async def make_ledger(*, partitioned: bool) -> Ledger:
    ledger = await postgres_ledger(DEFAULT_POSTGRES_ADMIN_URL)
    await asyncio.to_thread(run_migrations, ledger.url)
    if not partitioned:
        # The same columns, primary key and indexes, in one plain table.
        conn = await asyncpg.connect(ledger.postgres_dsn, timeout=10)
        try:
            await conn.execute("ALTER TABLE requests RENAME TO requests_partitioned")
            await conn.execute("CREATE TABLE requests (LIKE requests_partitioned INCLUDING ALL)")
            await conn.execute("DROP TABLE requests_partitioned")
        finally:
            await conn.close()
    return ledger


async def describe(ledger: Ledger) -> dict[str, object]:
    """Rows, on-disk bytes per row (table and indexes), and where the rows went."""
    conn = await asyncpg.connect(ledger.postgres_dsn, timeout=10)
    try:
        rows = await conn.fetchval("SELECT count(*) FROM requests")
        tuple_bytes = await conn.fetchval("SELECT avg(pg_column_size(r.*)) FROM requests r")
        tables = await conn.fetch(
            "SELECT tableoid::regclass::text AS t, count(*) AS n FROM requests GROUP BY 1"
        )
        indexes = await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE tablename = 'requests'")
        disk = await conn.fetchval(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
            "WHERE c.relkind = 'r' AND (c.relname = 'requests' OR c.relname LIKE 'requests_p%' "
            "OR c.relname = 'requests_default')"
        )
    finally:
        await conn.close()
    return {
        "rows": rows,
        "tuple_bytes": float(tuple_bytes),
        "disk_bytes_per_row": int(disk) / rows,
        "tables": {r["t"]: r["n"] for r in tables},
        "indexes": indexes,
    }


async def export_rates(ledger: Ledger) -> dict[str, tuple[float, float]]:
    """`tollgate ledger export` of the whole ledger: rows/s and file bytes per row, per format."""
    engine = create_engine(ledger.url)
    rates = {}
    try:
        with tempfile.TemporaryDirectory() as work:
            for fmt in FORMATS:
                out = Path(work) / f"ledger.{fmt}"
                started = time.perf_counter()
                rows = await export_ledger(
                    engine, datetime(2000, 1, 1, tzinfo=UTC), datetime.now(UTC), fmt=fmt, out=out
                )
                rates[fmt] = (rows / (time.perf_counter() - started), out.stat().st_size / rows)
    finally:
        await engine.dispose()
    return rates


async def bench(writers: int, rows: int, repeat: int) -> dict[str, object]:
    if (why := await postgres_reachable(DEFAULT_POSTGRES_ADMIN_URL)) is not None:
        raise SystemExit(f"PostgreSQL is not reachable: {why}")
    sample = realistic_record(1).to_row()
    results: dict[str, list[tuple[float, float, float]]] = {"plain": [], "partitioned": []}
    shapes: dict[str, dict[str, object]] = {}
    exports: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        for mode in ("plain", "partitioned"):
            ledger = await make_ledger(partitioned=mode == "partitioned")
            try:
                results[mode].append(
                    await asyncio.to_thread(run_round, ledger.url, writers=writers, rows=rows)
                )
                shapes[mode] = await describe(ledger)
                assert shapes[mode]["rows"] == rows * writers, shapes[mode]
                if mode == "partitioned":
                    exports = await export_rates(ledger)
            finally:
                await ledger.drop()
    medians = {
        mode: tuple(statistics.median(r[k] for r in runs) for k in range(3)) for mode, runs in results.items()
    }
    return {
        "writers": writers,
        "rows_per_writer": rows,
        "repeat": repeat,
        "row_json_bytes": len(orjson.dumps(sample)),
        "shapes": shapes,
        "runs": results,
        "median": medians,
        "export_rows_per_s_and_bytes_per_row": exports,
        "ratio_per_writer": medians["partitioned"][0] / medians["plain"][0],
        "ratio_total": medians["partitioned"][1] / medians["plain"][1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writers", type=int, default=1, help="writer processes (gateway replicas)")
    parser.add_argument("--rows", type=int, default=50_000, help="rows per writer per round")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args()
    report = asyncio.run(bench(args.writers, args.rows, args.repeat))
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
        return
    print(
        f"\nledger writer, plain vs daily-partitioned requests ({args.writers} writer process(es) x "
        f"{args.rows:,} rows, batches of 500, median of {args.repeat})"
    )
    for mode in ("plain", "partitioned"):
        per_writer, total, cpu = report["median"][mode]  # type: ignore[index]
        shape = report["shapes"][mode]  # type: ignore[index]
        print(
            f"{mode:>11} | {per_writer:8,.0f} rows/s per writer | {total:8,.0f} rows/s in all | "
            f"{cpu:5.1f} µs CPU/row in the writer | {shape['tuple_bytes']:.0f} B/row tuple, "
            f"{shape['disk_bytes_per_row']:.0f} B/row with indexes | {shape['indexes']} indexes"
        )
    for fmt, (rate, size) in report["export_rows_per_s_and_bytes_per_row"].items():  # type: ignore[attr-defined]
        print(f"ledger export --format {fmt}: {rate:,.0f} rows/s, {size:.0f} B/row in the file")
    ratios = f"{report['ratio_per_writer']:.3f} per writer, {report['ratio_total']:.3f} in all"
    print(f"partitioned / plain: {ratios}")


if __name__ == "__main__":
    main()

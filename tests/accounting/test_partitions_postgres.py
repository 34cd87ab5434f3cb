"""The ledger's daily partitions on the real PostgreSQL: where rows land, a day whose rows reached the
default partition first, a server not on UTC, retention by dropping days, and a replayed spool row."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.database import create_engine, run_migrations
from gateway.accounting.partitions import ensure_partitions, partition_name
from gateway.accounting.record import RequestRecord
from gateway.accounting.retention import apply_retention
from gateway.accounting.rows import insert_rows
from gateway.accounting.schema import requests, spend_daily
from gateway.accounting.spool import Spool
from gateway.accounting.writer import LedgerWriter
from tests.services import scratch_postgres_database

pytestmark = pytest.mark.postgres
T = TypeVar("T")
DAY = date(2026, 3, 10)


@pytest.fixture
def pg_url() -> Iterator[str]:
    with scratch_postgres_database() as url:
        run_migrations(url)
        yield url


def with_engine(url: str, body: Callable[[AsyncEngine], Awaitable[T]]) -> T:
    async def scenario() -> T:
        engine = create_engine(url)
        try:
            return await body(engine)
        finally:
            await engine.dispose()

    return asyncio.run(scenario())


def make_row(created_at: datetime, *, cost: int = 1000) -> dict[str, Any]:
    record = RequestRecord.begin(id=uuid.uuid4().hex, client_request_id=None)
    record.created_at = created_at
    record.requested_model = record.model = "gpt-4o-mini"
    record.team = "search"
    record.status = 200
    record.cost_nano = record.input_cost_nano = cost
    record.finish()
    return record.to_row()


async def where_rows_are(engine: AsyncEngine) -> dict[str, str]:
    """Request id -> the partition (table) that holds the row."""
    async with engine.connect() as conn:
        found = await conn.execute(text("SELECT id, tableoid::regclass::text FROM requests"))
        return {row_id: table for row_id, table in found.all()}


async def counts(engine: AsyncEngine) -> tuple[int, int, int]:
    async with engine.connect() as conn:
        rows = (await conn.execute(select(func.count()).select_from(requests))).scalar_one()
        rolled = (await conn.execute(select(func.coalesce(func.sum(spend_daily.c.requests), 0)))).scalar_one()
        cost = (await conn.execute(select(func.coalesce(func.sum(spend_daily.c.cost_nano), 0)))).scalar_one()
    return int(rows), int(rolled), int(cost)


def test_rows_land_in_their_days_partition_and_a_day_not_made_yet_in_the_default(pg_url: str) -> None:
    rows = [
        make_row(datetime(2026, 3, 10, 0, 0, tzinfo=UTC)),  # the first instant of the day
        make_row(datetime(2026, 3, 10, 23, 59, 59, 999_999, tzinfo=UTC)),
        make_row(datetime(2026, 3, 11, 12, tzinfo=UTC)),
        make_row(datetime(2026, 3, 30, 12, tzinfo=UTC)),  # beyond the days made ahead
    ]

    async def scenario(engine: AsyncEngine) -> tuple[list[str], dict[str, str]]:
        made = await ensure_partitions(engine, today=DAY)
        async with engine.begin() as conn:
            await insert_rows(conn, [dict(r) for r in rows], first_write=True)
        return made, await where_rows_are(engine)

    made, placed = with_engine(pg_url, scenario)
    assert made == [partition_name(DAY + timedelta(days=n)) for n in range(-1, 4)]
    assert [placed[r["id"]] for r in rows] == [
        "requests_p20260310",
        "requests_p20260310",
        "requests_p20260311",
        "requests_default",
    ]


def test_a_day_whose_rows_reached_the_default_partition_first_is_still_made(pg_url: str) -> None:
    # The writer could not make partitions at start-up (database away), so today's rows went to the
    # default partition; PostgreSQL refuses CREATE ... PARTITION OF for a range the default holds.
    early = [make_row(datetime(2026, 3, 10, hour, tzinfo=UTC)) for hour in (1, 2, 3)]
    other_day = make_row(datetime(2026, 3, 20, 9, tzinfo=UTC))
    later = make_row(datetime(2026, 3, 10, 18, tzinfo=UTC))

    async def scenario(engine: AsyncEngine) -> tuple[dict[str, str], tuple[int, int, int], int]:
        async with engine.begin() as conn:
            await insert_rows(conn, [dict(r) for r in [*early, other_day]], first_write=True)
        await ensure_partitions(engine, today=DAY)
        async with engine.begin() as conn:
            await insert_rows(conn, [dict(later)], first_write=True)
            # The moved day has its primary key: a replay of a moved row is skipped, not doubled.
            replayed = await insert_rows(conn, [dict(early[0])])
        return await where_rows_are(engine), await counts(engine), replayed

    placed, (rows, rolled, cost), replayed = with_engine(pg_url, scenario)
    assert {placed[r["id"]] for r in [*early, later]} == {"requests_p20260310"}
    assert placed[other_day["id"]] == "requests_default"
    assert replayed == 0
    assert (rows, rolled, cost) == (5, 5, 5000)


def test_days_are_cut_at_utc_midnight_whatever_the_servers_time_zone(pg_url: str) -> None:
    early_hours = make_row(datetime(2026, 3, 10, 3, 0, tzinfo=UTC))  # 20:00 the day before in Los Angeles

    async def scenario(engine: AsyncEngine) -> dict[str, str]:
        async with engine.begin() as conn:
            database = (await conn.execute(text("SELECT current_database()"))).scalar_one()
            await conn.execute(text(f"ALTER DATABASE \"{database}\" SET timezone = 'America/Los_Angeles'"))
        await engine.dispose()  # new connections take the database's time zone
        await ensure_partitions(engine, today=DAY)
        async with engine.begin() as conn:
            assert (await conn.execute(text("SHOW timezone"))).scalar_one() == "America/Los_Angeles"
            await insert_rows(conn, [dict(early_hours)], first_write=True)
        return await where_rows_are(engine)

    assert with_engine(pg_url, scenario)[early_hours["id"]] == "requests_p20260310"


def test_retention_drops_whole_days_and_keeps_the_rollups(pg_url: str) -> None:
    now = datetime(2026, 6, 20, 15, tzinfo=UTC)
    old_days = [datetime(2026, 3, d, 12, tzinfo=UTC) for d in (10, 11, 12)]
    kept = make_row(now)
    straggler = make_row(datetime(2026, 1, 5, tzinfo=UTC))  # no partition of its own: the default one

    async def scenario(engine: AsyncEngine) -> tuple[int, list[str], dict[str, str], tuple[int, int, int]]:
        await ensure_partitions(engine, today=DAY)  # 9 March to 13 March
        await ensure_partitions(engine, today=now.date())
        async with engine.begin() as conn:
            await insert_rows(conn, [make_row(at) for at in old_days] + [kept, straggler], first_write=True)
        removed = await apply_retention(engine, retention_days=90, now=now)  # cutoff 22 March
        async with engine.connect() as conn:
            names = await conn.execute(
                text("SELECT tablename FROM pg_tables WHERE tablename LIKE 'requests_%'")
            )
            tables = sorted(names.scalars())
        return removed, tables, await where_rows_are(engine), await counts(engine)

    removed, tables, placed, (rows, rolled, cost) = with_engine(pg_url, scenario)
    assert removed == 5  # the partitions of 9 to 13 March; the straggler is deleted, not counted
    assert not any(t.startswith("requests_p202603") for t in tables)
    assert "requests_p20260620" in tables and "requests_default" in tables
    assert placed == {kept["id"]: "requests_p20260620"}
    assert (rows, rolled, cost) == (1, 5, 5000)


def test_a_row_both_written_and_spooled_is_in_the_ledger_once(pg_url: str, tmp_path: Path) -> None:
    # A batch whose commit reached the server although the writer saw a timeout is spooled too; the
    # replay goes through the spool's JSON (microseconds and offset included) and must collide.
    record = RequestRecord.begin(id=uuid.uuid4().hex, client_request_id=None)
    record.requested_model = record.model = "gpt-4o-mini"
    record.status, record.cost_nano, record.input_cost_nano = 200, 700, 700
    record.created_at = datetime.now(UTC).replace(microsecond=123_457)  # the precision at stake
    record.finish()

    async def scenario(engine: AsyncEngine) -> tuple[dict[str, str], tuple[int, int, int]]:
        spool = Spool(tmp_path / "spool")
        writer = LedgerWriter(engine, spool=spool, flush_interval=0.01, probe_interval=0.05)
        await writer.prepare()
        writer.start()
        writer.record(record)
        await writer.flush()
        spool.append([record.to_row()])
        await writer.settle(within=10)
        await writer.stop()
        assert not spool.has_rows()
        return await where_rows_are(engine), await counts(engine)

    placed, (rows, rolled, cost) = with_engine(pg_url, scenario)
    assert placed == {record.id: partition_name(record.created_at.astimezone(UTC).date())}
    assert (rows, rolled, cost) == (1, 1, 700)


def test_an_unpartitioned_requests_table_keeps_working_with_deletes(pg_url: str) -> None:
    # A ledger whose requests table was rebuilt plain (the benchmark's baseline, or by hand).
    now = datetime(2026, 6, 20, 15, tzinfo=UTC)

    async def scenario(engine: AsyncEngine) -> tuple[list[str], int, tuple[int, int, int]]:
        async with engine.begin() as conn:
            await conn.execute(text("ALTER TABLE requests RENAME TO requests_partitioned"))
            await conn.execute(text("CREATE TABLE requests (LIKE requests_partitioned INCLUDING ALL)"))
        made = await ensure_partitions(engine, today=now.date())
        async with engine.begin() as conn:
            await insert_rows(conn, [make_row(now), make_row(now - timedelta(days=100))], first_write=True)
        removed = await apply_retention(engine, retention_days=90, now=now)
        return made, removed, await counts(engine)

    made, removed, (rows, rolled, _) = with_engine(pg_url, scenario)
    assert (made, removed, rows, rolled) == ([], 1, 1, 2)


def test_two_writers_adding_to_the_same_rollups_do_not_deadlock(pg_url: str) -> None:
    # Two replicas' batches add to the same spend_daily rows. Taken in each batch's own order, A
    # holding "alpha" and B holding "beta" while waiting for "alpha" deadlocked as soon as A wanted
    # "beta": PostgreSQL aborted one, and that replica spooled as if the database were away.
    now = datetime.now(UTC)

    def row(team: str) -> dict[str, Any]:
        made = make_row(now)
        made["team"] = team
        return made

    async def scenario(engine: AsyncEngine) -> tuple[int, tuple[int, int, int]]:
        await ensure_partitions(engine)
        other = create_engine(pg_url)
        try:
            async with engine.connect() as a, other.connect() as b:
                await a.begin()
                await insert_rows(a, [row("alpha")], first_write=True)

                async def replica_b() -> int:
                    async with b.begin():
                        return await insert_rows(b, [row("beta"), row("alpha")], first_write=True)

                waiting = asyncio.create_task(replica_b())
                await asyncio.sleep(0.5)  # B is now waiting for A's "alpha"
                assert not waiting.done()
                await insert_rows(a, [row("beta")], first_write=True)
                await a.commit()
                written_by_b = await asyncio.wait_for(waiting, 10)
        finally:
            await other.dispose()
        return written_by_b, await counts(engine)

    written_by_b, (rows, rolled, _) = with_engine(pg_url, scenario)
    assert (written_by_b, rows, rolled) == (2, 4, 4)


def test_a_long_report_makes_partition_upkeep_give_way_not_queue_the_writer(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # DDL on `requests` needs a lock a reader's transaction holds off; waiting for it would queue
    # every insert behind the DDL. Upkeep gives up after its lock timeout and succeeds later.
    later = DAY + timedelta(days=30)

    async def scenario(engine: AsyncEngine) -> tuple[list[str], list[str], list[str], list[str]]:
        await ensure_partitions(engine, today=DAY)
        reader = create_engine(pg_url)
        try:
            async with reader.connect() as report:
                await report.begin()
                await report.execute(text("SELECT count(*) FROM requests"))  # a report, still open
                # A TimeoutError here means it waited for the report instead of giving way.
                made_meanwhile = await asyncio.wait_for(ensure_partitions(engine, today=later), 30)
                dropped_meanwhile = await asyncio.wait_for(
                    apply_retention(engine, retention_days=1, now=datetime(2026, 3, 20, tzinfo=UTC)), 30
                )
                await report.rollback()
        finally:
            await reader.dispose()
        made = await ensure_partitions(engine, today=later)
        async with engine.connect() as conn:
            names = await conn.execute(
                text("SELECT tablename FROM pg_tables WHERE tablename LIKE 'requests_p%'")
            )
            tables = sorted(names.scalars())
        return made_meanwhile, [str(dropped_meanwhile)], made, tables

    made_meanwhile, dropped_meanwhile, made, tables = with_engine(pg_url, scenario)
    assert (made_meanwhile, dropped_meanwhile) == ([], ["0"])
    assert "partition upkeep gave way" in caplog.text and "retention: gave way" in caplog.text
    assert partition_name(later) in made and partition_name(later) in tables
    assert partition_name(DAY) in tables  # retention had given way too

"""`tollgate ledger export`: the raw rows of a time range into the CSV or Parquet file a warehouse
loads, read in batches, on SQLite and the real PostgreSQL."""

from __future__ import annotations

import asyncio
import csv
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from gateway.accounting.database import create_engine, run_migrations
from gateway.accounting.export import COLUMNS, ledger_batches
from gateway.accounting.partitions import ensure_partitions
from gateway.accounting.record import RequestRecord
from gateway.accounting.rows import insert_rows
from gateway.cli.main import main

START = datetime(2026, 3, 10, 8, tzinfo=UTC)


def make_row(created_at: datetime, n: int) -> dict[str, Any]:
    record = RequestRecord.begin(id=uuid.uuid4().hex, client_request_id=None)
    record.created_at = created_at
    record.requested_model = record.model = "gpt-4o-mini"
    record.team, record.tags = "search", ("prod",)
    record.status = 200 if n % 2 else 429
    record.error_message = None if n % 2 else 'quota, "per minute"\nreached'  # CSV quoting at stake
    record.prompt_tokens, record.cost_nano, record.input_cost_nano = 100 + n, 10**12 + n, 10**12 + n
    record.finish()
    return record.to_row()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A migrated ledger holding rows an hour apart from START, some before and after the range."""
    rows = [make_row(START + timedelta(hours=h), h) for h in range(-2, 9)]

    def fill(url: str) -> None:
        run_migrations(url)

        async def insert() -> None:
            engine = create_engine(url)
            try:
                await ensure_partitions(engine, today=START.date())
                async with engine.begin() as conn:
                    await insert_rows(conn, [dict(r) for r in rows], first_write=True)
            finally:
                await engine.dispose()

        asyncio.run(insert())
        monkeypatch.setenv("TOLLGATE_DATABASE_URL", url)

    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
        fill(url)
        yield url, rows
        return
    from tests.services import scratch_postgres_database

    with scratch_postgres_database() as url:
        fill(url)
        yield url, rows


def in_range(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What --since START --until START+7h selects: seven rows, oldest first."""
    return [r for r in rows if START <= r["created_at"] < START + timedelta(hours=7)]


def test_csv_holds_every_column_of_exactly_the_rows_in_the_range(
    ledger: tuple[str, list[dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, rows = ledger
    out = tmp_path / "march.csv"
    since, until = START.isoformat(), (START + timedelta(hours=7)).isoformat()
    assert (
        main(["ledger", "export", "--since", since, "--until", until, "--format", "csv", "--out", str(out)])
        == 0
    )
    assert capsys.readouterr().out.startswith(
        "exported 7 rows created 2026-03-10 08:00 to 2026-03-10 15:00 UTC"
    )
    with out.open(newline="") as handle:
        read = list(csv.DictReader(handle))
    expected = in_range(rows)
    assert [r["id"] for r in read] == [r["id"] for r in expected]
    assert list(read[0]) == list(COLUMNS)
    first = read[0]  # hour 0: a 429 with a message holding a quote, a comma and a newline
    assert (first["status"], first["error_message"]) == ("429", 'quota, "per minute"\nreached')
    assert first["created_at"] == "2026-03-10T08:00:00+00:00"  # with its offset, on SQLite too
    assert (first["stream"], first["client_request_id"], first["tags"]) == ("false", "", '["prod"]')
    assert [int(r["cost_nano"]) for r in read] == [10**12 + n for n in range(7)]
    assert not (tmp_path / "march.csv.partial").exists()


def test_parquet_keeps_the_ledgers_types(
    ledger: tuple[str, list[dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, rows = ledger
    out = tmp_path / "march.parquet"
    since, until = START.isoformat(), (START + timedelta(hours=7)).isoformat()
    assert (
        main(
            ["ledger", "export", "--since", since, "--until", until, "--format", "parquet", "--out", str(out)]
        )
        == 0
    )
    table = pq.read_table(out)
    assert table.column_names == list(COLUMNS)
    assert str(table.schema.field("created_at").type) == "timestamp[us, tz=UTC]"
    assert str(table.schema.field("cost_nano").type) == "int64"
    read = table.to_pylist()
    assert [r["id"] for r in read] == [r["id"] for r in in_range(rows)]
    assert read[0]["created_at"] == START and read[0]["error_message"] == 'quota, "per minute"\nreached'
    assert read[3]["cost_nano"] == 10**12 + 3 and read[3]["error_message"] is None
    assert read[3]["stream"] is False


def test_rows_are_read_in_batches_not_all_at_once(ledger: tuple[str, list[dict[str, Any]]]) -> None:
    url, _ = ledger

    async def sizes() -> list[int]:
        engine = create_engine(url)
        try:
            return [
                len(batch)
                async for batch in ledger_batches(engine, START, START + timedelta(hours=7), batch_rows=3)
            ]
        finally:
            await engine.dispose()

    assert asyncio.run(sizes()) == [3, 3, 1]


def test_parquet_without_pyarrow_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    run_migrations(url)  # a real ledger: the missing extra is what is refused
    monkeypatch.setenv("TOLLGATE_DATABASE_URL", url)
    out = tmp_path / "x.parquet"
    assert main(["ledger", "export", "--since", "1d", "--format", "parquet", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: --format parquet needs pyarrow, which is not installed: pip install 'tollgate[export]'"
    ]
    assert not out.exists()


def test_a_since_that_is_not_a_time_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    run_migrations(url)
    monkeypatch.setenv("TOLLGATE_DATABASE_URL", url)
    assert main(["ledger", "export", "--since", "yesterday", "--out", str(tmp_path / "x.csv")]) == 1
    assert (
        capsys.readouterr().err.strip() == "error: 'yesterday' is not a date, a timestamp or a span like 7d"
    )

"""Ledger upkeep a finance or ops team runs: repricing from stored usage, spend from the command
line, and retention that drops old rows without touching the rollups."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from sqlalchemy import func, select, text

from gateway.accounting.database import create_engine, run_migrations
from gateway.accounting.retention import apply_retention, ensure_partitions, partition_name
from gateway.accounting.rows import insert_rows
from gateway.accounting.schema import requests, spend_daily
from gateway.cli.main import main
from sandbox.server import SandboxServer
from tests.conftest import PRICE, gateway_config
from tests.execution.test_retries import HELLO
from tests.harness import GatewayServer


@pytest.fixture
def fresh_sqlite(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    run_migrations(url)
    return url


def write_config(path: Path, database_url: str, price: dict[str, str]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "database": {"url": database_url},
                "providers": {"openai": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"}},
                "models": {"gpt-4o-mini": {"provider": "openai", "price": price}},
            }
        )
    )
    return path


def test_reprice_recomputes_rows_and_rollups_and_reports_the_difference(
    fresh_sqlite: str,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = gateway_config(fresh_sqlite, openai_upstream.base_url, vllm_upstream.base_url)
    with GatewayServer(config) as server:
        with openai.OpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0) as sdk:
            for _ in range(3):
                sdk.chat.completions.create(model="gpt-4o-mini", messages=HELLO)
        before = server.ledger_rows()
    tokens_in = sum(r["prompt_tokens"] for r in before)
    tokens_out = sum(r["completion_tokens"] for r in before)
    # A price fix: $3/$15 was wrong, the contract says $1/$5 per MTok.
    fixed = write_config(
        tmp_path / "fixed.yaml", fresh_sqlite, {"input_per_mtok": "1", "output_per_mtok": "5"}
    )
    assert main(["reprice", "--since", "1d", "--config", str(fixed), "--dry-run"]) == 0
    assert "would change 3" in capsys.readouterr().out
    assert main(["reprice", "--since", "1d", "--config", str(fixed)]) == 0
    out = capsys.readouterr().out
    assert "repriced 3 rows" in out and "changed 3" in out

    async def read() -> tuple[list[dict[str, Any]], int]:
        engine = create_engine(fresh_sqlite)
        try:
            async with engine.connect() as conn:
                rows = [dict(r._mapping) for r in await conn.execute(select(requests))]
                rollup = (await conn.execute(select(func.sum(spend_daily.c.cost_nano)))).scalar_one()
                return rows, int(rollup)
        finally:
            await engine.dispose()

    rows, rollup = asyncio.run(read())
    for row in rows:
        assert (
            row["cost_nano"]
            == (row["prompt_tokens"] * 10**9 + row["completion_tokens"] * 5 * 10**9 + 500_000) // 10**6
        )
        assert row["input_cost_nano"] + row["output_cost_nano"] == row["cost_nano"]
    assert rollup == sum(r["cost_nano"] for r in rows)
    old_total = sum(r["cost_nano"] for r in before)
    assert old_total == sum(
        (p * 3 * 10**9 + c * 15 * 10**9 + 500_000) // 10**6
        for p, c in ((r["prompt_tokens"], r["completion_tokens"]) for r in before)
    )
    assert tokens_in and tokens_out


def test_spend_cli_prints_a_table_and_csv(
    fresh_sqlite: str,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = gateway_config(fresh_sqlite, openai_upstream.base_url, vllm_upstream.base_url)
    with GatewayServer(config) as server:
        with openai.OpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0) as sdk:
            sdk.chat.completions.create(model="gpt-4o-mini", messages=HELLO)
            sdk.chat.completions.create(model="llama", messages=HELLO)
        rows = server.ledger_rows()
    path = write_config(tmp_path / "c.yaml", fresh_sqlite, PRICE)
    assert main(["spend", "--by", "model", "--since", "7d", "--config", str(path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == [
        "model",
        "requests",
        "errors",
        "tokens",
        "in",
        "tokens",
        "out",
        "cost",
        "$",
        "baseline",
        "$",
        "saved",
        "$",
    ]
    assert any(line.split()[0] == "llama" for line in table[2:])
    assert table[-1].split()[0] == "TOTAL" and table[-1].split()[1] == str(len(rows))
    assert main(["spend", "--by", "provider", "--format", "csv", "--config", str(path)]) == 0
    assert capsys.readouterr().out.startswith("provider,requests,errors,")
    assert main(["spend", "--by", "colour", "--config", str(path)]) == 1


def old_row(created_at: datetime) -> dict[str, Any]:
    from gateway.accounting.record import RequestRecord

    record = RequestRecord.begin(id=uuid.uuid4().hex, client_request_id=None)
    record.created_at = created_at
    record.requested_model = record.model = "gpt-4o-mini"
    record.status = 200
    record.cost_nano = record.input_cost_nano = 1000
    record.finish()
    return record.to_row()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest, fresh_sqlite: str) -> Iterator[str]:
    if request.param == "sqlite":
        yield fresh_sqlite
        return
    from tests.services import scratch_postgres_database

    with scratch_postgres_database() as url:
        run_migrations(url)
        yield url


def test_retention_drops_old_rows_and_keeps_rollups(ledger_url: str) -> None:
    now = datetime.now(UTC)
    old_day = now - timedelta(days=100)

    async def scenario() -> tuple[int, int, int, list[str]]:
        engine = create_engine(ledger_url)
        try:
            await ensure_partitions(engine)
            await ensure_partitions(engine, today=old_day.date())  # an old partition, to be dropped whole
            async with engine.begin() as conn:
                await insert_rows(conn, [old_row(old_day), old_row(now - timedelta(days=200)), old_row(now)])
            await apply_retention(engine, retention_days=90)
            async with engine.connect() as conn:
                left = (await conn.execute(select(func.count()).select_from(requests))).scalar_one()
                rollup = (await conn.execute(select(func.sum(spend_daily.c.requests)))).scalar_one()
                cost = (await conn.execute(select(func.sum(spend_daily.c.cost_nano)))).scalar_one()
                partitions: list[str] = []
                if engine.dialect.name == "postgresql":
                    partitions = list(
                        (
                            await conn.execute(
                                text("SELECT tablename FROM pg_tables WHERE tablename LIKE 'requests_p%'")
                            )
                        ).scalars()
                    )
                return int(left), int(rollup), int(cost), partitions
        finally:
            await engine.dispose()

    left, rollup, cost, partitions = asyncio.run(scenario())
    assert left == 1
    assert (rollup, cost) == (3, 3000)  # the money stays explained after the raw rows go
    assert partition_name(old_day.date()) not in partitions
    if partitions:
        assert partition_name(now.date()) in partitions

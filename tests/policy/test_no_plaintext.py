"""The database never holds a plaintext key: every text value of every table is searched for it,
and the `virtual_keys` table matches the migrations on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import MetaData, Table, inspect, select
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

import gateway.accounting.keys_schema  # noqa: F401  (registers virtual_keys on the shared metadata)
from gateway.accounting.database import run_migrations
from gateway.policy.key_store import KeyStore
from gateway.policy.keys import hash_key
from tests.migrations.test_schema import schema_drift


def every_value(conn: Connection) -> list[str]:
    values: list[str] = []
    for name in inspect(conn).get_table_names():
        table = Table(name, MetaData(), autoload_with=conn)
        for row in conn.execute(select(table)):
            values.extend(str(v) for v in row if v is not None)
    return values


async def test_no_table_holds_a_plaintext_key(engine: AsyncEngine, team: str) -> None:
    store = KeyStore(engine)
    created = [await store.create(team, f"key {n}", allowed_models=["gpt-4o-mini"]) for n in range(5)]
    await store.revoke(created[0][1].id)
    async with engine.connect() as conn:
        dump = "\n".join(await conn.run_sync(every_value))
    for plaintext, record in created:
        assert hash_key(plaintext) in dump and record.prefix in dump  # the dump does see the rows
        assert plaintext not in dump
        assert plaintext.split("_", 1)[1] not in dump  # nor the secret part alone


def test_the_keys_table_matches_the_migrations(database_url: str) -> None:
    run_migrations(database_url)  # a second run (the fixture ran the first) changes nothing
    diff, tables = schema_drift(database_url)
    assert diff == []
    assert "virtual_keys" in tables

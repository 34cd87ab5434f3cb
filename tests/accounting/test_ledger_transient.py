"""Which database errors mean "wait and replay" rather than "these rows are bad": during a PostgreSQL
restart asyncpg reports the server shutting down or starting up as plain DBAPIErrors, and a replay
that took them for the rows' fault set good rows aside for good."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.accounting.spool import Spool
from gateway.accounting.writer import LedgerWriter, _transient


class _ServerSaid(Exception):
    def __init__(self, sqlstate: str | None) -> None:
        super().__init__(f"server error {sqlstate}")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("sqlstate", "transient"),
    [
        ("57P01", True),  # admin_shutdown: a fast restart ended the session
        ("57P03", True),  # cannot_connect_now: starting up
        ("08006", True),  # connection_failure
        ("53300", True),  # too_many_connections
        ("40P01", True),  # deadlock_detected
        ("23505", False),  # unique_violation: about the rows
        ("22021", False),  # character_not_in_repertoire: about the rows
        (None, False),
    ],
)
def test_the_servers_own_code_says_whether_to_wait(sqlstate: str | None, transient: bool) -> None:
    assert _transient(DBAPIError("INSERT", {}, _ServerSaid(sqlstate))) is transient


async def test_a_replay_refused_by_a_restarting_server_keeps_its_rows(tmp_path: Path) -> None:
    writer = LedgerWriter(cast(AsyncEngine, None), spool=Spool(tmp_path))

    async def restarting(rows: list[dict[str, Any]], *, first_write: bool = False) -> None:
        raise DBAPIError("INSERT", {}, _ServerSaid("57P03"))

    writer._insert = restarting  # type: ignore[method-assign]
    with pytest.raises(DBAPIError):
        await writer._replay_batch([{"id": "a"}, {"id": "b"}])
    rejected = [name for name in os.listdir(tmp_path) if name.endswith(".rejected")]
    assert not rejected, "rows set aside while the server was restarting"

"""Every command that opens the ledger, pointed at the wrong place: one line saying what is wrong and
what to run, exit 1, no traceback, and no empty SQLite file left behind."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import Tollgate, one_line_error

LEDGER_COMMANDS = [
    ["spend"],
    ["spend", "--by", "model", "--since", "7d"],
    ["reprice", "--since", "30d"],
    ["keys", "list"],
    ["keys", "create", "--team", "search", "--name", "ci"],
    ["keys", "revoke", "key_123"],
    ["keys", "delete", "--all"],
]
FIX = "point --config or TOLLGATE_DATABASE_URL at your gateway's database"


@pytest.mark.parametrize("argv", LEDGER_COMMANDS, ids=" ".join)
def test_no_database_in_this_directory_is_named_and_not_created(
    tollgate: Tollgate, tmp_path: Path, argv: list[str]
) -> None:
    line = one_line_error(tollgate(*argv))
    assert line == (
        f"error: no database at ./tollgate.db (in {tmp_path}): run tollgate in the directory your gateway "
        f"runs in, {FIX}, or create a new one with `tollgate migrate`"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_missing_database_named_by_the_environment_is_not_created(
    tollgate: Tollgate, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'gateway.db'}"
    line = one_line_error(tollgate("spend", TOLLGATE_DATABASE_URL=url))
    assert line.startswith(f"error: no database at {tmp_path / 'gateway.db'}: run tollgate in the directory")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["spend"], ["reprice"]], ids=" ".join)
def test_an_unmigrated_database_says_run_migrate(tollgate: Tollgate, tmp_path: Path, argv: list[str]) -> None:
    sqlite3.connect(tmp_path / "tollgate.db").close()  # someone else's, or an empty one left behind
    line = one_line_error(tollgate(*argv))
    assert line == (
        f"error: ./tollgate.db (in {tmp_path}) has no Tollgate ledger (not migrated): "
        f"run `tollgate migrate`, or {FIX}"
    )


def test_keys_without_auto_migrate_refuse_an_unmigrated_database(tollgate: Tollgate, tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "ledger.db").close()
    config = tmp_path / "tollgate.yaml"
    config.write_text(
        f"database: {{url: 'sqlite:///{tmp_path / 'ledger.db'}', auto_migrate: false}}\nproviders: {{}}\nmodels: {{}}\n"
    )
    line = one_line_error(tollgate("keys", "list", "--config", str(config)))
    assert line.endswith("has no Tollgate ledger (not migrated): run `tollgate migrate`, or " + FIX)


def test_a_database_from_a_newer_tollgate_says_upgrade(tollgate: Tollgate, tmp_path: Path) -> None:
    assert tollgate("migrate").returncode == 0
    with sqlite3.connect(tmp_path / "tollgate.db") as db:
        db.execute("UPDATE alembic_version SET version_num = '0999'")
    line = one_line_error(tollgate("spend"))
    assert line.startswith(f"error: ./tollgate.db (in {tmp_path}) has ledger schema 0999, newer than")
    assert line.endswith("upgrade Tollgate to the gateway's version")
    assert one_line_error(tollgate("migrate")).endswith(
        "Can't locate revision identified by '0999'; upgrade Tollgate"
    )


def test_a_file_that_is_not_a_database(tollgate: Tollgate, tmp_path: Path) -> None:
    (tmp_path / "tollgate.db").write_text("notes, not a database\n")
    line = one_line_error(tollgate("spend"))
    assert (
        line
        == f"error: cannot open the database ./tollgate.db (in {tmp_path}): file is not a database; {FIX}"
    )


def test_an_unreachable_postgresql(tollgate: Tollgate) -> None:
    url = "postgresql://tollgate:secret@127.0.0.1:1/ledger"  # nothing listens on port 1
    line = one_line_error(tollgate("spend", TOLLGATE_DATABASE_URL=url))
    assert line.startswith(
        "error: cannot open the database postgresql+asyncpg://tollgate:***@127.0.0.1:1/ledger: "
    )
    assert "secret" not in line and line.endswith(FIX)
    line = one_line_error(tollgate("migrate", TOLLGATE_DATABASE_URL=url))
    assert line.startswith("error: cannot migrate postgresql+asyncpg://tollgate:***@127.0.0.1:1/ledger: ")


def test_serve_does_not_start_on_an_unreachable_database(tollgate: Tollgate, tmp_path: Path) -> None:
    config = tmp_path / "tollgate.yaml"
    config.write_text("database: {url: 'postgresql://u@127.0.0.1:1/x'}\nproviders: {}\nmodels: {}\n")
    result = tollgate("serve", "--config", str(config), "--port", "0")
    assert "Traceback" not in result.stderr and result.returncode == 1
    assert "not starting: cannot migrate postgresql+asyncpg://u@127.0.0.1:1/x: " in result.stderr


def test_migrate_creates_the_database_but_not_its_directory(tollgate: Tollgate, tmp_path: Path) -> None:
    line = one_line_error(tollgate("migrate", TOLLGATE_DATABASE_URL="sqlite:///data/ledger.db"))
    assert line == f"error: cannot create data/ledger.db (in {tmp_path}): there is no directory data"
    assert list(tmp_path.iterdir()) == []
    created = tollgate("migrate")
    assert created.returncode == 0 and (tmp_path / "tollgate.db").exists()
    listed = tollgate("keys", "list")  # the fix the messages name works
    assert (listed.returncode, listed.stdout) == (0, "no keys\n")
    spent = tollgate("spend")
    assert spent.returncode == 0 and spent.stdout.startswith("requests  errors"), spent.stderr


def test_a_malformed_url_is_named_without_its_password(tollgate: Tollgate) -> None:
    url = "postgresql://tollgate:secret@127.0.0.1:port/ledger"
    for argv in (["spend"], ["migrate"], ["keys", "list"]):
        line = one_line_error(tollgate(*argv, TOLLGATE_DATABASE_URL=url))
        assert line.startswith("error: the database URL does not parse (")
        assert line.endswith("): fix database.url or TOLLGATE_DATABASE_URL") and "secret" not in line

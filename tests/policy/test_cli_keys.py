"""`tollgate keys create|list|revoke` against a temporary SQLite database, migrated on first use."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import orjson
import pytest

import gateway.cli.keys as cli_keys
from gateway.accounting.database import DATABASE_URL_ENV, create_engine
from gateway.config.loader import build_config
from gateway.config.schema import Config
from gateway.policy.key_store import KeyRecord, KeyStore


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    (tmp_path / "keys.db").touch()  # a database that does not exist is refused, not created
    url = f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}"  # not migrated yet: the CLI does it
    return build_config({"database": {"url": url}, "providers": {}, "models": {}}, source="test", environ={})


def tollgate(config: Config, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="tollgate")
    cli_keys.add_commands(parser.add_subparsers(dest="command", required=True))
    code = cli_keys.run(parser.parse_args(argv), load=lambda _path: config)
    out, err = capsys.readouterr()
    return code, out, err


def lookup(config: Config, plaintext: str) -> KeyRecord | None:
    async def run() -> KeyRecord | None:
        engine = create_engine(config.database.url)
        try:
            return await KeyStore(engine).lookup(plaintext)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_create_list_revoke_round_trip(config: Config, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = tollgate(
        config, capsys, "keys", "create", "--team", "search", "--name", "indexer",
        "--models", "gpt-4o-mini, llama", "--budget-daily-usd", "2.50", "--budget-monthly-usd", "40",
        "--rpm", "120", "--tpm", "50000", "--expires-in-days", "7", "--format", "json",
    )  # fmt: skip
    assert code == 0
    created = orjson.loads(out)
    plaintext, key_id = created["key"], created["id"]
    assert created["allowed_models"] == ["gpt-4o-mini", "llama"]
    assert (created["budget_daily_nano"], created["budget_monthly_nano"]) == (2_500_000_000, 40_000_000_000)
    record = lookup(config, plaintext)
    assert record is not None and record.id == key_id and record.rpm == 120 and record.tpm == 50_000

    code, out, err = tollgate(config, capsys, "keys", "create", "--team", "search", "--name", "second")
    assert code == 0 and "only time" in err
    second = out.splitlines()[1]
    assert lookup(config, second) is not None

    code, out, _ = tollgate(config, capsys, "keys", "list", "--team", "search")
    assert code == 0 and key_id in out and "indexer" in out and "2.5" in out
    assert plaintext not in out and second not in out
    code, out, _ = tollgate(config, capsys, "keys", "list", "--format", "json")
    assert [k["name"] for k in orjson.loads(out)["data"]] == ["indexer", "second"]
    assert plaintext not in out

    code, out, _ = tollgate(config, capsys, "keys", "revoke", key_id)
    assert code == 0 and key_id in out
    assert lookup(config, plaintext) is None
    assert lookup(config, second) is not None
    code, out, _ = tollgate(config, capsys, "keys", "list", "--team", "search")
    assert "revoked" in out.splitlines()[2]

    code, _, err = tollgate(config, capsys, "keys", "revoke", "key_unknown")
    assert code == 1 and "no key" in err


def test_an_empty_list_says_so(config: Config, capsys: pytest.CaptureFixture[str]) -> None:
    assert tollgate(config, capsys, "keys", "list") == (0, "no keys\n", "")


@pytest.mark.parametrize(
    "flags",
    [["--budget-daily-usd", "-1"], ["--budget-daily-usd", "NaN"], ["--rpm", "0"], ["--models", " , "]],
)
def test_bad_arguments_are_refused_before_touching_the_database(
    config: Config, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        tollgate(config, capsys, "keys", "create", "--team", "t", "--name", "n", *flags)
    assert exited.value.code == 2

"""Open mode's end is said out loud and can be undone: the start-up log names the mode and why,
`tollgate keys create` says what it just switched on, and `tollgate keys delete --all` is the way back."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

import gateway.cli.keys as cli_keys
from gateway.accounting.database import DATABASE_URL_ENV, run_migrations
from gateway.config.schema import Config
from sandbox.server import SandboxServer
from tests.conftest import gateway_config
from tests.harness import GatewayServer

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}


@pytest.fixture
def open_config(
    tmp_path: Path,
    openai_upstream: SandboxServer,
    vllm_upstream: SandboxServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Config:
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    url = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    run_migrations(url)
    return gateway_config(url, openai_upstream.base_url, vllm_upstream.base_url)


def keys_cli(config: Config, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="tollgate")
    cli_keys.add_commands(parser.add_subparsers(dest="command", required=True))
    code = cli_keys.run(parser.parse_args(argv), load=lambda _path: config)
    out, err = capsys.readouterr()
    return code, out, err


def start_up_sentence(caplog: pytest.LogCaptureFixture) -> str:
    said = [r.getMessage() for r in caplog.records if r.name == "tollgate" and "KEY" in r.getMessage()]
    said += [r.getMessage() for r in caplog.records if r.name == "tollgate" and "OPEN MODE" in r.getMessage()]
    assert len(said) == 1, said
    return said[0]


def test_open_mode_ends_loudly_and_comes_back_on_request(
    open_config: Config, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tollgate")
    with GatewayServer(open_config) as server:
        assert httpx.post(server.base_url + "/v1/chat/completions", json=BODY).status_code == 200
    assert start_up_sentence(caplog).startswith("OPEN MODE: ")

    code, _, err = keys_cli(open_config, capsys, "keys", "create", "--team", "t", "--name", "first")
    assert code == 0 and "Open mode is now off" in err and "tollgate keys delete --all" in err
    code, _, err = keys_cli(open_config, capsys, "keys", "create", "--team", "t", "--name", "second")
    assert code == 0 and "Open mode" not in err  # only the key that switched it says so

    caplog.clear()
    with GatewayServer(open_config) as server:
        refused = httpx.post(server.base_url + "/v1/chat/completions", json=BODY)
        assert refused.status_code == 401
    # A restart no longer claims open mode while it answers 401: it says why keys are needed.
    sentence = start_up_sentence(caplog)
    assert sentence.startswith("KEYS REQUIRED: virtual keys exist") and "keys delete --all" in sentence

    code, out, err = keys_cli(open_config, capsys, "keys", "delete", "--all")
    assert (code, out.strip()) == (0, "deleted 2 keys") and "open mode" in err
    caplog.clear()
    with GatewayServer(open_config) as server:
        assert httpx.post(server.base_url + "/v1/chat/completions", json=BODY).status_code == 200
    assert start_up_sentence(caplog).startswith("OPEN MODE: ")


def test_a_configured_admin_key_says_so(open_config: Config, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tollgate")
    keyed = open_config.model_copy(
        update={"auth": open_config.auth.model_copy(update={"admin_key": SecretStr("x")})}
    )
    with GatewayServer(keyed) as server:
        assert httpx.post(server.base_url + "/v1/chat/completions", json=BODY).status_code == 401
    assert start_up_sentence(caplog) == (
        "KEYS REQUIRED: the config sets an admin key, so every request needs a key"
    )

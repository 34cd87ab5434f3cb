"""Logs as a collector reads them: `tollgate serve --log-format json --access-log` prints one JSON
object per line, uvicorn's lines included, and a request's access line names its request id, team,
model and status, never its prompt or its key."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.accounting.record import RequestRecord
from gateway.cli.sandbox_launcher import free_port
from gateway.observability.access import access_fields
from gateway.observability.logs import JsonFormatter, TextFormatter, log_format
from sandbox.server import SandboxServer
from tests.conftest import PRICE

PROMPT = "Describe the lighthouse keeper's logbook, canary-prompt-4417"
ADMIN_KEY = "adm-log-test-key-0001"
_SCRUBBED = ("TOLLGATE_DATABASE_URL", "TOLLGATE_CONFIG", "TOLLGATE_REDIS_URL", "TOLLGATE_LOG_FORMAT")


def test_the_format_comes_from_the_flag_then_the_environment() -> None:
    assert log_format(None, {}) == "text"
    assert log_format(None, {"TOLLGATE_LOG_FORMAT": "JSON"}) == "json"
    assert log_format("text", {"TOLLGATE_LOG_FORMAT": "json"}) == "text"
    with pytest.raises(ValueError, match="TOLLGATE_LOG_FORMAT='xml'"):
        log_format(None, {"TOLLGATE_LOG_FORMAT": "xml"})


def test_a_json_line_is_one_object_with_the_fields_on_top() -> None:
    record = logging.LogRecord("tollgate.access", logging.INFO, __file__, 1, "a %s line", ("quoted\n",), None)
    record.fields = {"request_id": "req-1", "status": 200}
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["level"] == "info" and parsed["logger"] == "tollgate.access"
    assert parsed["message"] == "a quoted\n line" and parsed["request_id"] == "req-1"
    assert parsed["timestamp"].endswith("+00:00")
    text = TextFormatter().format(record)
    assert text.endswith("request_id=req-1 status=200")


def test_the_access_fields_leave_out_what_a_client_wrote() -> None:
    record = RequestRecord.begin(id="req-9", client_request_id="client-chosen id")
    record.user, record.requested_model, record.team = "alice@example.com", "smart", "search"
    record.fail(status=502, error_type="upstream_error", message=f"upstream said: {PROMPT}")
    record.finish()
    fields = access_fields(record, trace_id=None)
    assert fields["request_id"] == "req-9" and fields["team"] == "search" and fields["status"] == 502
    assert not {"alice@example.com", "client-chosen id"} & {str(v) for v in fields.values()}
    assert PROMPT not in json.dumps(fields)


def _config(tmp: Path, upstream: str) -> Path:
    raw: dict[str, Any] = {
        "database": {"url": f"sqlite+aiosqlite:///{tmp / 'ledger.db'}", "auto_migrate": True},
        "ledger": {"spool_dir": str(tmp / "spool"), "flush_interval_ms": 5},
        "auth": {"admin_key": ADMIN_KEY},
        "teams": {"search": {}},
        "providers": {"up": {"type": "openai", "base_url": upstream + "/v1", "api_key": "sk-upstream-log"}},
        "models": {"gpt-4o-mini": {"provider": "up", "price": PRICE}},
    }
    path = tmp / "tollgate.yaml"
    path.write_text(json.dumps(raw))
    return path


def test_a_served_request_logs_one_json_access_line(tmp_path: Path, openai_upstream: SandboxServer) -> None:
    config = _config(tmp_path, openai_upstream.base_url)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    log = tmp_path / "serve.log"
    argv = [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(config), "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*argv, "--log-format", "json", "--access-log"], cwd=tmp_path, env=env, stdout=out, stderr=out
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_until(lambda: "Application startup complete" in log.read_text(), process, log)
            made = httpx.post(
                base + "/admin/keys",
                json={"team": "search", "name": "app"},
                headers={"authorization": f"Bearer {ADMIN_KEY}"},
                timeout=20,
            )
            assert made.status_code == 201, made.text
            key = made.json()["key"]
            answer = httpx.post(
                base + "/v1/chat/completions",
                json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": PROMPT}]},
                headers={"authorization": f"Bearer {key}"},
                timeout=20,
            )
            assert answer.status_code == 200, answer.text
            request_id = answer.headers["x-request-id"]
            _wait_until(lambda: request_id in log.read_text(), process, log)
        finally:
            process.terminate()
            process.wait(timeout=30)
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line parses
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # uvicorn's lines follow the format
    (access,) = [
        line for line in lines if line["logger"] == "tollgate.access" and line["request_id"] == request_id
    ]
    assert access["team"] == "search" and access["model"] == "gpt-4o-mini" and access["status"] == 200
    assert access["level"] == "info" and access["latency_ms"] > 0 and access["input_tokens"] > 0
    for secret in (PROMPT, "canary-prompt-4417", key, key.split("_", 1)[1], ADMIN_KEY, "sk-upstream-log"):
        assert secret not in text
    print(json.dumps(access))


def _wait_until(condition: Any, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail("tollgate serve did not get there:\n" + log.read_text())
        time.sleep(0.05)

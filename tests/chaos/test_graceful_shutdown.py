"""A rolling deploy: `tollgate serve` gets SIGTERM with streams mid-generation and a client still
sending. The streams in flight finish whole, new connections are refused (not half-answered), the
process exits 0, and every request a client got an answer for has exactly one ledger row in
PostgreSQL, none left behind in the spool."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine

from gateway.accounting.schema import requests
from gateway.cli.sandbox_launcher import free_port
from sandbox.server import SandboxServer
from tests.chaos.conftest import ChaosSettings
from tests.chaos.scenario import Answer, Tally, WellBehaved, answers_200, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

STREAMS = 16


@pytest.fixture(scope="module")
def paced_vllm() -> Iterator[SandboxServer]:
    """A vLLM emulator that decodes at 50 tokens/s, so streams are mid-generation at SIGTERM."""
    with SandboxServer(dialect="vllm", profile="managed") as server:
        yield server


def ledger(url: str) -> list[dict[str, Any]]:
    async def fetch() -> list[dict[str, Any]]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                columns = (requests.c.id, requests.c.status, requests.c.usage_estimated)
                return [dict(row._mapping) for row in await conn.execute(select(*columns))]
        finally:
            await engine.dispose()

    return asyncio.run(fetch())


async def whole_stream(base_url: str, i: int, generating: asyncio.Queue[int]) -> tuple[Answer, bool]:
    """One stream read to its end, saying on `generating` when its answer has begun; whether it
    ended with [DONE]."""
    body = {
        "model": "llama",
        "stream": True,
        "max_tokens": 60,
        "messages": [{"role": "user", "content": f"tale {i}"}],
    }
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        async with http.stream("POST", "/v1/chat/completions", json=body) as response:
            generating.put_nowait(i)
            lines = [line async for line in response.aiter_lines() if line]
    done = lines[-1:] == ["data: [DONE]"]
    return Answer(response.status_code, response.headers.get("x-request-id"), True), done


def test_sigterm_under_load_drains_streams_and_loses_no_row(
    chaos_settings: ChaosSettings, paced_vllm: SandboxServer, postgres_url: str, tmp_path: Path
) -> None:
    tally = Tally("SIGTERM under load (rolling deploy)")
    settings = chaos_settings(vllm_url=paced_vllm.base_url)
    path = tmp_path / "tollgate.yaml"
    path.write_text(yaml.safe_dump(settings))
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    serve = [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(path), "--host", "127.0.0.1"]
    log = tmp_path / "serve.log"
    with log.open("wb") as output:
        process = subprocess.Popen([*serve, "--port", str(port)], stdout=output, stderr=subprocess.STDOUT)
    try:
        started = wait_until(
            lambda: process.poll() is not None or answers_200(base_url + "/readyz"), within=30
        )
        assert started and process.poll() is None, "the gateway did not start"

        async def streams_cut_by_sigterm() -> tuple[list[tuple[Answer, bool]], float]:
            generating: asyncio.Queue[int] = asyncio.Queue()
            pending = asyncio.gather(*(whole_stream(base_url, i, generating) for i in range(STREAMS)))
            async with asyncio.timeout(30):  # a stream that fails before its head fails the test
                for _ in range(STREAMS):
                    await generating.get()
            signalled = time.monotonic()
            process.send_signal(signal.SIGTERM)  # every stream has begun and none can have ended
            return list(await pending), signalled

        with WellBehaved(base_url) as probe:
            time.sleep(0.3)
            finished, signalled = asyncio.run(streams_cut_by_sigterm())
            code = process.wait(timeout=20)
            stopped = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            process.kill()
    stream_answers = [a for a, _ in finished]
    tally.answers, tally.probe, tally.unanswered = stream_answers, probe.answers, len(probe.failures)
    rows = ledger(postgres_url)
    tally.count(rows)
    spooled = [p.name for p in Path(settings["ledger"]["spool_dir"]).glob("*") if p.stat().st_size]
    tally.note = (
        f"{STREAMS} streams mid-generation at SIGTERM all finished; exit {code} after {stopped:.1f} s"
    )
    tally.note += f"; {tally.unanswered} refused after it (no answer, no row)"
    tally.report()
    assert code == 0, log.read_text()
    assert all(a.status == 200 for a in stream_answers) and all(done for _, done in finished)
    answered = {a.request_id for a in tally.every if a.request_id}
    assert tally.lost == 0 and tally.duplicates == 0 and len(rows) == len(answered), tally.line()
    by_id = {r["id"]: r for r in rows}
    assert all(
        by_id[a.request_id]["status"] == 200 and not by_id[a.request_id]["usage_estimated"]
        for a in stream_answers
    )
    assert not spooled, f"rows left in the spool: {spooled}"
    # After SIGTERM a request either is answered or gets no answer at all: a refused connection,
    # or a keep-alive connection the server closed as the request was sent (RFC 9112 9.6: the
    # client may retry it). Neither left a row (rows == answered, above).
    assert all(
        f.startswith(("ConnectError", "RemoteProtocolError: Server disconnected")) for f in probe.failures
    ), probe.failures

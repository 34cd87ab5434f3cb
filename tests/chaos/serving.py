"""The gateway as operators run it, for the scenarios that kill it: `tollgate serve` in its own
process (so SIGKILL really ends the process, page cache and all), and the ledger read straight from
PostgreSQL, not through a gateway."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine

from gateway.accounting.schema import requests
from gateway.cli.sandbox_launcher import free_port
from tests.chaos.scenario import answers_200, wait_until


class ServeProcess:
    """One `tollgate serve` on a config file; started and stopped as often as a scenario needs,
    on the same port and spool directory (a restart after a crash is the same replica again)."""

    def __init__(self, settings: dict[str, Any], directory: Path, *, name: str = "gateway") -> None:
        self.config = directory / f"{name}.yaml"
        self.config.write_text(yaml.safe_dump(settings))
        self.log = directory / f"{name}.log"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, *, ready: bool = True, within: float = 40.0) -> ServeProcess:
        command = [sys.executable, "-m", "gateway.cli.main", "serve", "--config", str(self.config)]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        with self.log.open("ab") as output:
            self._process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        process = self._process
        up = self.base_url + ("/readyz" if ready else "/healthz")
        if not wait_until(lambda: process.poll() is not None or answers_200(up), within=within):
            self.kill()
            pytest.fail(f"the gateway did not start in {within} s:\n{self.log.read_text()[-3000:]}")
        if process.poll() is not None:
            pytest.fail(f"the gateway exited {process.returncode}:\n{self.log.read_text()[-3000:]}")
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, nothing is flushed (the OOM killer, `docker kill`)."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=10)
        self._process = None

    def stop(self) -> int:
        """SIGTERM, as a rolling deploy stops it; returns the exit code."""
        process, self._process = self._process, None
        if process is None:
            return 0
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait(timeout=10)

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def ledger_ids(url: str) -> list[str]:
    """Every request id in the ledger, one entry per row (a duplicate shows up twice)."""

    async def fetch() -> list[str]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                return [row[0] for row in await conn.execute(select(requests.c.id))]
        finally:
            await engine.dispose()

    return asyncio.run(fetch())

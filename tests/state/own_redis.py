"""A redis-server of the test's own on a free port, to stop, continue, kill and restart at will
(the shared one on 6379 serves other test runs and must never be touched)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from gateway.cli.sandbox_launcher import free_port


class OwnRedis:
    def __init__(self, directory: Path, *, persist: bool = False) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._directory = directory
        self._persist = persist
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> OwnRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed")
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self._persist else []
        self._process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                str(self._directory),
            ]
            + (persistence or ["--appendonly", "no"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2, socket_timeout=0.5)
        for _ in range(100):
            try:
                client.ping()
                return self
            except (redis.ConnectionError, redis.TimeoutError):
                time.sleep(0.05)
        pytest.fail(f"redis-server on port {self.port} did not start")

    def pause(self) -> None:
        """SIGSTOP: connections are accepted by the kernel, nothing answers (a hung Redis)."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.send_signal(signal.SIGCONT)
        self._process.kill()
        self._process.wait(timeout=10)
        self._process = None

    def restart(self) -> None:
        """Killed and started again on the same port: empty unless it persists."""
        self.stop()
        self.start()

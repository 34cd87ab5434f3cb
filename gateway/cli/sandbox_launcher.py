"""Starts sandbox emulators as child processes for the embedded default.

A subprocess, not an import: the gateway must never load `sandbox` on its request path.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from types import TracebackType


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class SandboxFleet:
    """One emulator process per dialect; a context manager that stops them all on exit."""

    def __init__(self, dialects: list[str], *, profile: str | None = None, args: Sequence[str] = ()) -> None:
        self._dialects = dialects
        self._profile = profile
        self._args = list(args)  # more `python -m sandbox` options, for every emulator
        self._processes: list[subprocess.Popen[bytes]] = []
        self.urls: dict[str, str] = {}

    def __enter__(self) -> SandboxFleet:
        ports = {}
        for dialect in self._dialects:
            port = free_port()
            command = [sys.executable, "-m", "sandbox", "--port", str(port), "--dialect", dialect]
            if self._profile:
                command += ["--profile", self._profile]
            command += self._args
            self._processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
            ports[dialect] = port
        try:
            for dialect, port in ports.items():
                _wait_for_port(port, timeout=20.0)
                self.urls[dialect] = f"http://127.0.0.1:{port}"
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        for process in self._processes:
            process.terminate()
        for process in self._processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
        self._processes.clear()


def _wait_for_port(port: int, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"sandbox emulator did not start on port {port}") from None
            time.sleep(0.02)
